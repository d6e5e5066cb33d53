"""Windowed reductions: ``lax.reduce_window`` and its primitives ``reduce_window_sum_p``,
``reduce_window_max_p``, ``reduce_window_min_p`` and the general ``reduce_window_p`` (a
traced computation over pytrees of operands), as in ``jax.lax``. Pooling layers (Flax's
``avg_pool``/``max_pool``) are built on them.

All lower to one ``stablehlo.reduce_window``. The sum is linear: its transpose spreads each
output's cotangent back over its window, which is itself a windowed sum of the cotangent
dilated by the strides. The max and min differentiate as JAX's do (the tangent at the
window's first extremum), written with differentiable pads and strided slices, one per window
offset. The windows are small (pooling), so no select-and-scatter primitive is needed, and
the same rule transposes for reverse mode.
"""
from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, tree_util
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import elementwise as ew
from jaxkit.lax.convolution import padtype_to_pads
from jaxkit.lax.reductions import _get_max_identity, _get_min_identity, _reduction_jaxpr
from jaxkit.lax.slicing import pad, slice
from jaxkit.lax.standard import standard_primitive

__all__ = ["reduce_window", "reduce_window_max_p", "reduce_window_min_p", "reduce_window_p",
           "reduce_window_shape_tuple", "reduce_window_sum_p"]


# ---- shapes ---------------------------------------------------------------------------------
def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int],
                              padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of a windowed reduction (XLA's rule)."""
    ndim = len(operand_shape)
    base_dilation = base_dilation or (1,) * ndim
    window_dilation = window_dilation or (1,) * ndim
    out = []
    for d, w, s, (lo, hi), b, wd in zip(operand_shape, window_dimensions, window_strides,
                                        padding, base_dilation, window_dilation):
        padded = (0 if d == 0 else (d - 1) * b + 1) + lo + hi
        extent = 0 if w == 0 else (w - 1) * wd + 1
        out.append(max(0, (padded - extent) // s + 1) if padded >= extent else 0)
    return tuple(out)


def _check_params(shape, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation):
    ndim = len(shape)
    for name, value in (("window_dimensions", window_dimensions),
                        ("window_strides", window_strides), ("padding", padding),
                        ("base_dilation", base_dilation),
                        ("window_dilation", window_dilation)):
        if len(value) != ndim:
            raise TypeError(f"reduce_window: {name} must have one entry per operand "
                            f"dimension ({ndim}), got {tuple(value)}.")
    for name, value in (("window_dimensions", window_dimensions),
                        ("window_strides", window_strides), ("base_dilation", base_dilation),
                        ("window_dilation", window_dilation)):
        if any(v < 1 for v in value):
            raise TypeError(f"reduce_window: {name} must be positive, got {tuple(value)}.")


def _shape_rule(x, *, window_dimensions, window_strides, padding, base_dilation,
                window_dilation):
    _check_params(x.shape, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation)
    return reduce_window_shape_tuple(x.shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)


# ---- lowering -------------------------------------------------------------------------------
def _reduce_window_op(ctx, values, inits, out_avals, in_avals, params):
    ndim = len(params["window_dimensions"])
    pads = np.asarray(params["padding"], np.int64).reshape(ndim, 2)
    return hlo.ReduceWindowOp(
        [mlir.aval_to_ir_type(a) for a in out_avals], list(values), list(inits),
        mlir.i64_attr(params["window_dimensions"]),
        window_strides=mlir.i64_attr(params["window_strides"]),
        base_dilations=mlir.i64_attr(params["base_dilation"]),
        window_dilations=mlir.i64_attr(params["window_dilation"]),
        padding=ir.DenseIntElementsAttr.get(pads, shape=[ndim, 2]))


def _monoid_lowering(op_class, identity):
    def rule(ctx, x, **params):
        aval = ctx.avals_in[0]
        init = mlir.ir_constant(np.asarray(identity(aval.dtype), aval.dtype))
        op = _reduce_window_op(ctx, [x], [init], ctx.avals_out, ctx.avals_in, params)
        scalar = mlir.aval_to_ir_type(core.ShapedArray((), aval.dtype))
        block = op.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            hlo.ReturnOp([op_class(*block.arguments).result])
        return op.results[0]
    return rule


# ---- batching: the batch axis gets a window of one ------------------------------------------
def _widen(params, at: int):
    def ins(seq, value):
        seq = list(seq)
        seq.insert(at, value)
        return tuple(seq)
    return dict(window_dimensions=ins(params["window_dimensions"], 1),
                window_strides=ins(params["window_strides"], 1),
                padding=ins(params["padding"], (0, 0)),
                base_dilation=ins(params["base_dilation"], 1),
                window_dilation=ins(params["window_dilation"], 1))


def _monoid_batch(prim):
    def rule(axis_data, args, dims, **params):
        (x,), (d,) = args, dims
        return prim.bind(x, **_widen(params, d)), d
    return rule


# ---- differentiation ------------------------------------------------------------------------
def _sum_transpose(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    """x's cotangent: every output's cotangent added back to each input of its window. In the
    padded, base-dilated input, that is a windowed sum (stride 1, same window and dilation) of
    the cotangent dilated by the strides; then the padding is cut and the dilation undone."""
    shape = x.aval.shape
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval.to_tangent_aval())]
    config, extent = [], []
    for d, w, s, (lo, hi), b, wd, n_out in zip(
            shape, window_dimensions, window_strides, padding, base_dilation,
            window_dilation, core.get_aval(ct).shape):
        padded = (0 if d == 0 else (d - 1) * b + 1) + lo + hi
        ext = (w - 1) * wd + 1
        dilated = 0 if n_out == 0 else (n_out - 1) * s + 1
        config.append((ext - 1, padded - dilated, s - 1))
        extent.append(ext)
    spread = pad(ct, np.zeros((), core.get_aval(ct).dtype)[()], config)
    summed = reduce_window_sum_p.bind(
        spread, window_dimensions=window_dimensions, window_strides=(1,) * len(shape),
        padding=((0, 0),) * len(shape), base_dilation=(1,) * len(shape),
        window_dilation=window_dilation)
    unpadded = pad(summed, np.zeros((), core.get_aval(ct).dtype)[()],
                   [(-lo, -hi, 0) for lo, hi in padding])
    if any(b != 1 for b in base_dilation):
        unpadded = slice(unpadded, (0,) * len(shape), core.get_aval(unpadded).shape,
                         base_dilation)
    return [unpadded]


def _windows(x, fill, window_dimensions, window_strides, padding, base_dilation,
             window_dilation, out_shape):
    """One strided slice of the padded, dilated ``x`` per window offset: entry k of the list
    holds, for every output position, the k-th element of its window."""
    padded = pad(x, fill, [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base_dilation)])
    views = []
    for offset in itertools.product(*(range(w) for w in window_dimensions)):
        start = [k * wd for k, wd in zip(offset, window_dilation)]
        limit = [st + (n - 1) * s + 1 if n else st
                 for st, n, s in zip(start, out_shape, window_strides)]
        views.append(slice(padded, start, limit, window_strides))
    return views


def _chooser_jvp(prim, better, identity):
    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        if type(t) is ad.Zero:
            return out, ad.Zero(core.get_aval(out).to_tangent_aval())
        dtype = core.get_aval(x).dtype
        shape = core.get_aval(out).shape
        args = (params["window_dimensions"], params["window_strides"], params["padding"],
                params["base_dilation"], params["window_dilation"], shape)
        xs = _windows(x, np.asarray(identity(dtype), dtype)[()], *args)
        ts = _windows(t, np.zeros((), core.get_aval(t).dtype)[()], *args)
        best, t_out = xs[0], ts[0]
        for xv, tv in zip(xs[1:], ts[1:]):  # the first extremum wins ties, as in JAX
            take = better(xv, best)
            best, t_out = ew.select(take, xv, best), ew.select(take, tv, t_out)
        return out, t_out
    return rule


def _monoid_primitive(name, op_class, identity, dtype_ok):
    def dtype_rule(x, **_):
        if not dtype_ok(x.dtype):
            raise TypeError(f"{name} does not accept dtype {x.dtype.name}.")
        return x.dtype
    prim = standard_primitive(_shape_rule, dtype_rule, name, lambda x, **_: x.weak_type)
    batching.defrule(prim, _monoid_batch(prim))
    mlir.register_lowering(prim, _monoid_lowering(op_class, identity))
    return prim


def _is_number(dtype):
    return dtypes.issubdtype(dtype, np.number)


def _is_ordered(dtype):
    return not dtypes.issubdtype(dtype, np.complexfloating)


reduce_window_sum_p = _monoid_primitive("reduce_window_sum", hlo.AddOp, lambda dt: 0,
                                        _is_number)
ad.deflinear2(reduce_window_sum_p, _sum_transpose)
reduce_window_max_p = _monoid_primitive("reduce_window_max", hlo.MaxOp, _get_max_identity,
                                        _is_ordered)
ad.defjvp_rule(reduce_window_max_p, _chooser_jvp(reduce_window_max_p, ew.gt,
                                                 _get_max_identity))
reduce_window_min_p = _monoid_primitive("reduce_window_min", hlo.MinOp, _get_min_identity,
                                        _is_ordered)
ad.defjvp_rule(reduce_window_min_p, _chooser_jvp(reduce_window_min_p, ew.lt,
                                                 _get_min_identity))


# ---- the general reduce_window: a traced computation over several operands -----------------
def _general_abstract_eval(*avals, jaxpr, **params):
    n = len(avals) // 2
    operands, inits = avals[:n], avals[n:]
    if any(a.shape != () for a in inits):
        raise TypeError(f"reduce_window: init values must be scalars, got "
                        f"{[a.shape for a in inits]}.")
    if [o.dtype for o in operands] != [i.dtype for i in inits]:
        raise TypeError("reduce_window: operand dtypes must match the init values' dtypes, got "
                        f"{[o.dtype.name for o in operands]} and "
                        f"{[i.dtype.name for i in inits]}.")
    if any(o.shape != operands[0].shape for o in operands):
        raise TypeError(f"reduce_window: operands must have the same shape, got "
                        f"{[o.shape for o in operands]}.")
    shape = _shape_rule(operands[0], **params)
    return [core.ShapedArray(shape, o.dtype) for o in operands]


def _general_lowering(ctx, *values, jaxpr, **params):
    n = len(values) // 2
    op = _reduce_window_op(ctx, values[:n], values[n:], ctx.avals_out, ctx.avals_in, params)
    scalars = [mlir.aval_to_ir_type(a.strip_weak_type()) for a in ctx.avals_in[n:]]
    block = op.regions[0].blocks.append(*(scalars + scalars))
    with ir.InsertionPoint(block):
        hlo.ReturnOp(mlir.closed_subcomp(ctx.module_context, jaxpr, *block.arguments))
    return list(op.results)


def _general_batch(axis_data, args, dims, *, jaxpr, **params):
    n = len(args) // 2
    if any(d is not batching.not_mapped for d in dims[n:]):
        raise NotImplementedError("batching rule for 'reduce_window' with batched init "
                                  "values is not implemented")
    size = batching.batch_size(args, dims)
    operands = [batching.bdim_at_front(x, d, size) for x, d in zip(args[:n], dims[:n])]
    outs = reduce_window_p.bind(*operands, *args[n:], jaxpr=jaxpr, **_widen(params, 0))
    return outs, [0] * n


reduce_window_p = core.Primitive("reduce_window")
reduce_window_p.multiple_results = True
reduce_window_p.def_impl(lambda *args, **params: dispatch.apply_primitive(reduce_window_p, *args,
                                                                         **params))
reduce_window_p.def_abstract_eval(_general_abstract_eval)
# no JVP rule, as in JAX: differentiating a general computation raises the missing-rule error
batching.defrule(reduce_window_p, _general_batch)
mlir.register_lowering(reduce_window_p, _general_lowering)


# ---- the public function --------------------------------------------------------------------
_MONOIDS: list[tuple[Callable, Callable, core.Primitive]] = [
    (ew.add, lambda dt: 0, reduce_window_sum_p),
    (ew.max, _get_max_identity, reduce_window_max_p),
    (ew.min, _get_min_identity, reduce_window_min_p),
]


def _as_pairs(padding) -> tuple[tuple[int, int], ...]:
    try:
        return tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise TypeError(f"reduce_window: padding must be 'SAME', 'VALID' or a sequence of "
                        f"(low, high) integer pairs, got {padding!r}.") from None


def reduce_window(operand: Any, init_value: Any, computation: Callable,
                  window_dimensions: Sequence[int], window_strides: Sequence[int],
                  padding: str | Sequence[tuple[int, int]],
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """Reduce each window of ``operand`` (a pytree of same-shaped arrays) with
    ``computation``, starting from ``init_value``. ``padding`` is 'SAME', 'VALID' or
    ``(low, high)`` per dimension; ``base_dilation`` spreads the input, ``window_dilation``
    the window. ``lax.add``/``max``/``min`` with their identity use the differentiable
    primitives; any other computation the general ``reduce_window_p``."""
    flat_operands, tree = tree_util.tree_flatten(operand)
    flat_inits, init_tree = tree_util.tree_flatten(init_value)
    if tree != init_tree:
        raise ValueError("Operands must have the same tree structure as init_values: "
                         f"{tree} vs. {init_tree}")
    if not flat_operands:
        raise ValueError("reduce_window needs at least one operand.")
    shape = np.shape(flat_operands[0])
    ndim = len(shape)
    window_dimensions = tuple(int(w) for w in window_dimensions)
    window_strides = tuple(int(s) for s in window_strides)
    if isinstance(padding, str):
        if len(window_dimensions) != ndim or len(window_strides) != ndim:
            raise TypeError(f"reduce_window: window_dimensions and window_strides must have "
                            f"one entry per operand dimension ({ndim}).")
        dilated = tuple(0 if d == 0 else (d - 1) * b + 1
                        for d, b in zip(shape, base_dilation or (1,) * ndim))
        extent = tuple((w - 1) * wd + 1
                       for w, wd in zip(window_dimensions, window_dilation or (1,) * ndim))
        padding = padtype_to_pads(dilated, extent, window_strides, padding)
    params = dict(window_dimensions=window_dimensions, window_strides=window_strides,
                  padding=_as_pairs(padding),
                  base_dilation=tuple(int(b) for b in (base_dilation or (1,) * ndim)),
                  window_dilation=tuple(int(d) for d in (window_dilation or (1,) * ndim)))
    if len(flat_operands) == 1 and not isinstance(flat_inits[0], core.Tracer) \
            and np.shape(flat_inits[0]) == ():
        dtype = dtypes.dtype(flat_operands[0])
        for fn, identity, prim in _MONOIDS:
            if computation is fn and np.equal(np.asarray(flat_inits[0]), identity(dtype)):
                out = prim.bind(flat_operands[0], **params)
                return tree_util.tree_unflatten(tree, [out])
    init_avals = tuple(core.get_aval(x).strip_weak_type() for x in flat_inits)
    closed, out_tree = _reduction_jaxpr(computation, init_avals, init_tree)
    outs = reduce_window_p.bind(*flat_operands, *flat_inits, jaxpr=closed, **params)
    return tree_util.tree_unflatten(out_tree, outs)
