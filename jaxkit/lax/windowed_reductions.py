"""Windowed reductions: ``lax.reduce_window`` and its primitives ``reduce_window_sum_p``,
``reduce_window_max_p``, ``reduce_window_min_p`` and the general ``reduce_window_p`` (a
traced computation over pytrees of operands), as in ``jax.lax``, with the select-and-scatter
primitives that differentiate the max and min. Pooling layers (Flax's ``avg_pool``/
``max_pool``) are built on them.

The reductions lower to one ``stablehlo.reduce_window``. The sum is linear: its transpose
spreads each output's cotangent back over its window, which is itself a windowed sum of the
cotangent dilated by the strides. The max and min differentiate as JAX's do:
``select_and_gather_add_p`` takes, in each window, the tangent where the operand is selected
(its maximum for ``ge_p``, minimum for ``le_p``; a two-operand reduce_window), and transposes
into ``select_and_scatter_add_p``, which adds each cotangent back at that position (the
general ``select_and_scatter_p``, ``stablehlo.select_and_scatter``). XLA's select_and_scatter
has no window dilation, so for dilated windows (where JAX refuses the VJP) the transpose is
written with one strided slice per window offset.
"""
from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import elementwise as ew
from jaxkit.lax.elementwise_bits import bitwise_not, bitwise_or
from jaxkit.lax.convolution import padtype_to_pads
from jaxkit.lax.reductions import _get_max_identity, _get_min_identity, _reduction_jaxpr
from jaxkit.lax.slicing import pad, slice
from jaxkit.lax.standard import _all_weak, standard_primitive

__all__ = ["reduce_window", "reduce_window_max_p", "reduce_window_min_p", "reduce_window_p",
           "reduce_window_shape_tuple", "reduce_window_sum_p", "select_and_gather_add_p",
           "select_and_scatter_add_p", "select_and_scatter_p"]


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
                  window_dilation, prim_name="reduce_window"):
    ndim = len(shape)
    for name, value in (("window_dimensions", window_dimensions),
                        ("window_strides", window_strides), ("padding", padding),
                        ("base_dilation", base_dilation),
                        ("window_dilation", window_dilation)):
        if len(value) != ndim:
            raise TypeError(f"{prim_name}: {name} must have one entry per operand "
                            f"dimension ({ndim}), got {tuple(value)}.")
    for name, value in (("window_dimensions", window_dimensions),
                        ("window_strides", window_strides), ("base_dilation", base_dilation),
                        ("window_dilation", window_dilation)):
        if any(v < 1 for v in value):
            raise TypeError(f"{prim_name}: {name} must be positive, got {tuple(value)}.")


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
_UNIT_WINDOW = dict(window_dimensions=1, window_strides=1, padding=(0, 0), base_dilation=1,
                    window_dilation=1)


def _widen(params, at: int) -> dict:
    """``params`` with a new dimension at ``at`` that every window covers alone; parameters
    that are not about windows (``select_prim``) pass through."""
    return {k: tuple(v[:at]) + (_UNIT_WINDOW[k],) + tuple(v[at:]) if k in _UNIT_WINDOW else v
            for k, v in params.items()}


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


def _chooser_jvp(select_prim):
    """The tangent of a windowed max (min): in each window, the tangent at the operand's
    selected position, as JAX's ``select_and_gather_add``."""
    def rule(t, x, **params):
        return select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)
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
ad.defjvp(reduce_window_max_p, _chooser_jvp(ew.ge_p))
reduce_window_min_p = _monoid_primitive("reduce_window_min", hlo.MinOp, _get_min_identity,
                                        _is_ordered)
ad.defjvp(reduce_window_min_p, _chooser_jvp(ew.le_p))


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


# ---- select-and-scatter: the derivatives of max/min pooling, as JAX writes them ------------
def _check_select_prim(name: str, select_prim) -> None:
    if select_prim is not ew.ge_p and select_prim is not ew.le_p:
        raise TypeError(f"{name}: select_prim must be lax.ge_p (select the maximum) or "
                        f"lax.le_p (select the minimum), got {select_prim!r}.")


def _check_windows(name: str, shape, window_dimensions, window_strides, padding) -> None:
    ones = (1,) * len(shape)
    _check_params(shape, window_dimensions, window_strides, padding, ones, ones, name)


def _check_source(name: str, source, operand, window_dimensions, window_strides, padding):
    expected = reduce_window_shape_tuple(operand.shape, window_dimensions, window_strides,
                                         padding)
    if source.shape != expected:
        raise TypeError(f"{name}: source must have the shape of the windowed operand, "
                        f"{expected} for operand shape {operand.shape}, window_dimensions "
                        f"{tuple(window_dimensions)}, window_strides {tuple(window_strides)} "
                        f"and padding {tuple(padding)}; got {source.shape}.")
    if source.dtype != operand.dtype:
        raise TypeError(f"{name}: source and operand must have the same dtype, got "
                        f"{source.dtype.name} and {operand.dtype.name}.")


def _selection_identity(select_prim: core.Primitive, dtype: np.dtype) -> Any:
    """The value a window selects only when nothing else is there: the identity of the max
    (``ge_p``) or of the min (``le_p``). Padding holds it."""
    identity = _get_max_identity if select_prim is ew.ge_p else _get_min_identity
    return np.asarray(identity(dtype), dtype)[()]


def _batch_at_front(prim: core.Primitive):
    """Batch dimension first, covered by windows of one."""
    def rule(axis_data, args, dims, **params):
        size = batching.batch_size(args, dims)
        args = [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
        return prim.bind(*args, **_widen(params, 0)), 0
    return rule


# ---- select_and_scatter: the general form, with traced select and scatter computations ------
def _scalar_jaxpr(name: str, fn: Callable, aval: core.ShapedArray,
                  out_dtype: np.dtype) -> tuple[core.Jaxpr, tuple]:
    """``fn`` of two scalars of ``aval``, traced; it must return one scalar of ``out_dtype``."""
    jaxpr, consts = pe.trace_to_jaxpr(lambda x, y: [fn(x, y)], [aval, aval])
    if any(isinstance(c, core.Tracer) for c in consts):
        raise NotImplementedError(f"select_and_scatter: the {name} computation can't close over "
                                  "traced values.")
    outs = [a.strip_weak_type() for a in jaxpr.out_avals]
    if outs != [core.ShapedArray((), out_dtype)]:
        raise TypeError(f"select_and_scatter: the {name} computation must return one "
                        f"{np.dtype(out_dtype).name}[] scalar, got "
                        f"{[a.str_short() for a in outs]}.")
    return jaxpr, tuple(consts)


def _select_and_scatter(operand: Any, select: Callable, window_dimensions: Sequence[int],
                        window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                        source: Any, init_value: Any, scatter: Callable) -> Any:
    """Start from an operand-shaped array of ``init_value``; for each window of ``operand``,
    pick one position (``select(current, candidate)`` true keeps the current pick, window
    elements in row-major order) and combine that window's ``source`` element into it with
    ``scatter``. Private, as in JAX. Lowers to ``stablehlo.select_and_scatter``."""
    aval = core.get_aval(init_value).strip_weak_type()
    if aval.shape != ():  # before tracing the computations at it, which would blame them
        raise TypeError(f"select_and_scatter: init_value must be a scalar of the operand's "
                        f"dtype, got {aval.str_short()}.")
    select_jaxpr, select_consts = _scalar_jaxpr("select", select, aval, np.dtype(np.bool_))
    scatter_jaxpr, scatter_consts = _scalar_jaxpr("scatter", scatter, aval, aval.dtype)
    return select_and_scatter_p.bind(
        operand, source, init_value, select_jaxpr=select_jaxpr, select_consts=select_consts,
        scatter_jaxpr=scatter_jaxpr, scatter_consts=scatter_consts,
        window_dimensions=tuple(int(w) for w in window_dimensions),
        window_strides=tuple(int(s) for s in window_strides), padding=_as_pairs(padding))


def _select_and_scatter_shape_rule(operand, source, init_value, *, select_jaxpr, select_consts,
                                   scatter_jaxpr, scatter_consts, window_dimensions,
                                   window_strides, padding):
    name = "select_and_scatter"
    _check_windows(name, operand.shape, window_dimensions, window_strides, padding)
    _check_source(name, source, operand, window_dimensions, window_strides, padding)
    if init_value.shape != () or init_value.dtype != operand.dtype:
        raise TypeError(f"{name}: init_value must be a scalar of the operand's dtype "
                        f"{operand.dtype.name}, got {init_value.str_short()}.")
    return operand.shape


def _select_and_scatter_lowering(ctx, operand, source, init_value, *, select_jaxpr,
                                 select_consts, scatter_jaxpr, scatter_consts,
                                 window_dimensions, window_strides, padding):
    aval = ctx.avals_in[0]
    pads = np.asarray(padding, np.int64).reshape(aval.ndim, 2)
    op = hlo.SelectAndScatterOp(
        mlir.aval_to_ir_type(ctx.avals_out[0]), operand, source, init_value,
        window_dimensions=mlir.i64_attr(window_dimensions),
        window_strides=mlir.i64_attr(window_strides),
        padding=ir.DenseIntElementsAttr.get(pads, shape=[aval.ndim, 2]))
    scalar = mlir.aval_to_ir_type(core.ShapedArray((), aval.dtype))
    for region, jaxpr, consts in ((op.select, select_jaxpr, select_consts),
                                  (op.scatter, scatter_jaxpr, scatter_consts)):
        block = region.blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            hlo.ReturnOp(mlir.closed_subcomp(ctx.module_context, core.ClosedJaxpr(jaxpr, consts),
                                             *block.arguments))
    return op.result


select_and_scatter_p = standard_primitive(_select_and_scatter_shape_rule,
                                          lambda operand, *_, **__: operand.dtype,
                                          "select_and_scatter", _all_weak)
# No JVP and no batching rule, as in JAX: only its add form is differentiated and batched.
mlir.register_lowering(select_and_scatter_p, _select_and_scatter_lowering)


# ---- select_and_scatter_add: source added at each window's max (ge_p) or min (le_p) ---------
def _select_and_scatter_add_shape_rule(source, operand, *, select_prim, window_dimensions,
                                       window_strides, padding):
    name = "select_and_scatter_add"
    _check_select_prim(name, select_prim)
    _check_windows(name, operand.shape, window_dimensions, window_strides, padding)
    _check_source(name, source, operand, window_dimensions, window_strides, padding)
    return operand.shape


def _select_and_scatter_add_by_general(source, operand, *, select_prim, window_dimensions,
                                       window_strides, padding):
    """The general select_and_scatter over the operand padded explicitly with the selection
    identity, the padding then cut off: JAX does so on CPU and GPU, where XLA's own padding
    in select_and_scatter has crashed, and it keeps the results identical to JAX's there."""
    dtype = core.get_aval(operand).dtype
    zero = np.zeros((), dtype)[()]
    padded = pad(operand, _selection_identity(select_prim, dtype),
                 [(lo, hi, 0) for lo, hi in padding])
    scatter = bitwise_or if dtype == np.bool_ else ew.add
    out = _select_and_scatter(padded, select_prim.bind, window_dimensions, window_strides,
                              ((0, 0),) * len(padding), source, zero, scatter)
    return pad(out, zero, [(-lo, -hi, 0) for lo, hi in padding])


def _select_and_scatter_add_transpose(ct, source, operand, *, select_prim, window_dimensions,
                                      window_strides, padding):
    if ad.is_undefined_primal(operand):
        raise NotImplementedError("select_and_scatter_add is linear in its source only; it "
                                  "cannot be transposed with respect to the operand.")
    if type(ct) is ad.Zero:
        return [ad.Zero(source.aval), None]
    ones = (1,) * len(window_dimensions)
    return [select_and_gather_add_p.bind(
        ct, operand, select_prim=select_prim, window_dimensions=window_dimensions,
        window_strides=window_strides, padding=padding, base_dilation=ones,
        window_dilation=ones), None]


def _select_window_primitive(name: str, shape_rule, transpose_rule, lowering
                             ) -> core.Primitive:
    """``prim(values, operand, ...)``: linear in ``values``, while ``operand`` only decides
    which window position each value is taken from or sent to (a zero derivative)."""
    prim = standard_primitive(shape_rule, lambda values, operand, **_: operand.dtype, name,
                              _all_weak)
    ad.defjvp(prim, lambda g, values, operand, **p: prim.bind(g, operand, **p), None)
    ad.deftranspose(prim, transpose_rule)
    batching.defrule(prim, _batch_at_front(prim))
    mlir.register_lowering(prim, mlir.lower_fun(lowering))
    return prim


select_and_scatter_add_p = _select_window_primitive(
    "select_and_scatter_add", _select_and_scatter_add_shape_rule,
    _select_and_scatter_add_transpose, _select_and_scatter_add_by_general)


# ---- select_and_gather_add: each window's tangent at its operand's max (ge_p) or min (le_p) -
def _select_and_gather_add_shape_rule(tangents, operand, *, select_prim, window_dimensions,
                                      window_strides, padding, base_dilation, window_dilation):
    name = "select_and_gather_add"
    _check_select_prim(name, select_prim)
    if tangents.shape != operand.shape or tangents.dtype != operand.dtype:
        raise TypeError(f"{name}: tangents and operand must have the same shape and dtype, "
                        f"got {tangents.str_short()} and {operand.str_short()}.")
    _check_params(operand.shape, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation, name)
    return reduce_window_shape_tuple(operand.shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)


def _select_and_gather_add_by_reduce_window(tangents, operand, *, select_prim, **window):
    """A two-operand reduce_window over (operand, tangents) pairs keeping the selected pair
    (JAX's portable lowering; its GPU one packs each pair into one wider integer)."""
    dtype = core.get_aval(operand).dtype

    def keep_selected(a, b):
        which = select_prim.bind(a[0], b[0])
        return ew.select(which, a[0], b[0]), ew.select(which, a[1], b[1])

    inits = (_selection_identity(select_prim, dtype), np.zeros((), dtype)[()])
    return reduce_window((operand, tangents), inits, keep_selected, **window)[1]


def _scatter_to_selected(ct, operand, *, select_prim, window_dimensions, window_strides,
                         padding, base_dilation, window_dilation):
    """``ct`` added back at each window's selected position when windows are dilated, which
    XLA's select_and_scatter cannot express (JAX refuses this VJP): per window offset, one
    strided slice of the padded, dilated operand; the pick follows select_and_scatter (a
    later element replaces the pick when ``select(pick, element)`` is false); and each
    offset's share of ``ct`` is put back where its slice read, by the slice's transpose (a
    pad)."""
    out_shape = core.get_aval(ct).shape
    ct_dtype = core.get_aval(ct).dtype
    views = _windows(operand, _selection_identity(select_prim, core.get_aval(operand).dtype),
                     window_dimensions, window_strides, padding, base_dilation, window_dilation,
                     out_shape)
    pick, chosen = views[0], np.zeros(out_shape, np.int32)
    for k, view in enumerate(views[1:], 1):
        move = bitwise_not(select_prim.bind(pick, view))
        pick = ew.select(move, view, pick)
        chosen = ew.select(move, np.full(out_shape, k, np.int32), chosen)
    padded_shape = [(0 if d == 0 else (d - 1) * b + 1) + lo + hi for d, b, (lo, hi) in
                    zip(core.get_aval(operand).shape, base_dilation, padding)]
    zero, zeros = np.zeros((), ct_dtype)[()], np.zeros(out_shape, ct_dtype)
    total = None
    offsets = itertools.product(*(range(w) for w in window_dimensions))
    for k, offset in enumerate(offsets):
        share = ew.select(ew.eq(chosen, np.full(out_shape, k, np.int32)), ct, zeros)
        config = []
        for o, wd, n, s, size in zip(offset, window_dilation, out_shape, window_strides,
                                     padded_shape):
            extent = (n - 1) * s + 1 if n else 0
            config.append((o * wd, size - o * wd - extent, s - 1))
        spread = pad(share, zero, config)
        total = spread if total is None else ew.add(total, spread)
    out = pad(total, zero, [(-lo, -hi, 0) for lo, hi in padding])
    if any(b != 1 for b in base_dilation):
        out = slice(out, (0,) * len(out_shape), core.get_aval(out).shape, base_dilation)
    return out


def _select_and_gather_add_transpose(ct, tangents, operand, *, select_prim, window_dimensions,
                                     window_strides, padding, base_dilation, window_dilation):
    if ad.is_undefined_primal(operand):
        raise NotImplementedError("select_and_gather_add is linear in its tangents only; it "
                                  "cannot be transposed with respect to the operand.")
    if type(ct) is ad.Zero:
        return [ad.Zero(tangents.aval), None]
    if any(d != 1 for d in window_dilation):
        return [_scatter_to_selected(
            ct, operand, select_prim=select_prim, window_dimensions=window_dimensions,
            window_strides=window_strides, padding=padding, base_dilation=base_dilation,
            window_dilation=window_dilation), None]
    dilated = any(b != 1 for b in base_dilation)
    if dilated:  # the holes of the dilated operand are never selected over a real element
        dtype = core.get_aval(operand).dtype
        operand = pad(operand, _selection_identity(select_prim, dtype),
                      [(0, 0, b - 1) for b in base_dilation])
    out = select_and_scatter_add_p.bind(ct, operand, select_prim=select_prim,
                                        window_dimensions=window_dimensions,
                                        window_strides=window_strides, padding=padding)
    if dilated:
        out = slice(out, (0,) * len(base_dilation), core.get_aval(out).shape, base_dilation)
    return [out, None]


select_and_gather_add_p = _select_window_primitive(
    "select_and_gather_add", _select_and_gather_add_shape_rule,
    _select_and_gather_add_transpose, _select_and_gather_add_by_reduce_window)
