"""Reductions over axes: sum, product, max, min, logical and/or/xor, argmax/argmin, and the
general (multi-operand) ``reduce`` with a Python combiner.

Each single-operand reduction lowers to a ``stablehlo.reduce`` whose body is one binary op;
``reduce`` traces its combiner to a jaxpr that becomes the body. ``reduce_sum`` itself lives in
``structural.py`` (the elementwise rules need it) and is re-exported here.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.interpreters import dispatch
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import elementwise as ew
from jaxkit.lax.elementwise_bits import bitwise_and, bitwise_or
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.standard import (as_tuple_of_indices, as_tuple_of_ints, canonicalize_axis,
                                 standard_primitive)
from jaxkit.lax.structural import (
    _reduce_batch_rule,
    _reduce_shape_rule,
    broadcast_in_dim,
    broadcasted_iota,
    concatenate,
    convert_element_type,
    full,
    reduce_lowering,
    reduce_sum,
    reduce_sum_p,
    reshape,
    split,
    squeeze,
)
from jaxkit.typing import Array, ArrayLike, DTypeLike

__all__ = ["reduce_sum", "reduce_sum_p"]  # extended below


def _canonical_axes(operand, axes, name: str) -> tuple[int, ...]:
    # As in JAX, lax reductions take nonnegative axes (jnp canonicalizes negative ones).
    return as_tuple_of_indices(axes, f"{name} axes")


def _get_max_identity(dtype) -> np.ndarray:
    if dtypes.issubdtype(dtype, np.inexact):
        return np.array(-np.inf if dtypes.supports_inf(dtype) else dtypes.finfo(dtype).min,
                        dtype)
    if dtypes.issubdtype(dtype, np.integer):
        return np.array(dtypes.iinfo(dtype).min, dtype)
    return np.array(False, np.bool_)


def _get_min_identity(dtype) -> np.ndarray:
    if dtypes.issubdtype(dtype, np.inexact):
        return np.array(np.inf if dtypes.supports_inf(dtype) else dtypes.finfo(dtype).max,
                        dtype)
    if dtypes.issubdtype(dtype, np.integer):
        return np.array(dtypes.iinfo(dtype).max, dtype)
    return np.array(True, np.bool_)


def _number_dtype_rule(name):
    def rule(operand, **params):
        if not dtypes.issubdtype(operand.dtype, np.number):
            raise TypeError(f"{name} does not accept dtype {operand.dtype.name}. Accepted dtypes "
                            "are subtypes of number.")
        return operand.dtype
    return rule


def _input_dtype_rule(operand, **params):
    return operand.dtype


def _reduction_primitive(name, dtype_rule, op, identity, weak=True) -> core.Primitive:
    prim = standard_primitive(_reduce_shape_rule, dtype_rule, name,
                              (lambda x, **_: x.weak_type) if weak else None)
    batching.defrule(prim, _reduce_batch_rule(prim))
    shr.defsharding(prim, shr.reduce_rule)
    mlir.register_lowering(prim, reduce_lowering(op, identity))
    return prim


# ---- reduce_max / reduce_min ---------------------------------------------------------------
def reduce_max(operand: ArrayLike, axes: Sequence[int]) -> Array:
    """Maximum over ``axes`` (NaN-propagating). Lowers to ``stablehlo.reduce`` with a maximum
    body."""
    return reduce_max_p.bind(operand, axes=_canonical_axes(operand, axes, "reduce_max"))


def reduce_min(operand: ArrayLike, axes: Sequence[int]) -> Array:
    """Minimum over ``axes`` (NaN-propagating). Lowers to ``stablehlo.reduce`` with a minimum
    body."""
    return reduce_min_p.bind(operand, axes=_canonical_axes(operand, axes, "reduce_min"))


def _reduce_chooser_jvp(g, ans, operand, *, axes):
    """JAX's rule: every location equal to the result shares its tangent equally."""
    # The result reshaped with unit reduced axes is compared with the operand (an ``eq``
    # that broadcasts them), as JAX's rule does.
    shape = [1 if i in axes else d for i, d in enumerate(np.shape(operand))]
    location = convert_element_type(ew.eq(operand, reshape(ans, shape)),
                                    core.get_aval(g).dtype)
    counts = _reduce_sum_axes(location, axes)
    return ew.div(_reduce_sum_axes(ew.mul(g, location), axes), counts)


def _reduce_sum_axes(x, axes):
    return reduce_sum_p.bind(x, axes=tuple(axes))


# Complex operands order lexicographically (real, then imaginary), as in JAX; the identity
# is then (-inf + 0j) / (inf + 0j).
reduce_max_p = _reduction_primitive("reduce_max", _input_dtype_rule,
                                    ew.minmax_hlo(hlo.MaxOp, "GT"), _get_max_identity)
ad.defjvp2(reduce_max_p, _reduce_chooser_jvp)
reduce_min_p = _reduction_primitive("reduce_min", _input_dtype_rule,
                                    ew.minmax_hlo(hlo.MinOp, "LT"), _get_min_identity)
ad.defjvp2(reduce_min_p, _reduce_chooser_jvp)


# ---- reduce_prod ---------------------------------------------------------------------------
def reduce_prod(operand: ArrayLike, axes: Sequence[int]) -> Array:
    """Product over ``axes``. Lowers to ``stablehlo.reduce`` with a multiply body."""
    return reduce_prod_p.bind(operand, axes=_canonical_axes(operand, axes, "reduce_prod"))


def _reduce_prod_jvp(primals, tangents, *, axes):
    """JAX's rule: the reduced axes are flattened to the front, then halved repeatedly,
    multiplying the halves and carrying the product rule along (exact with zeros, unlike a
    rule that divides by the operand)."""
    (x,), (t,) = primals, tangents
    out = reduce_prod_p.bind(x, axes=axes)
    if type(t) is ad.Zero:
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    shape = np.shape(x)
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    rest = tuple(shape[i] for i in kept)
    x = reshape(x, (n,) + rest, axes + kept)
    t = reshape(t, (n,) + rest, axes + kept)
    one = np.ones((), core.get_aval(x).dtype)[()]
    while n > 1:
        n1 = (n + 1) // 2
        x1, x2 = split(x, (n1, n - n1), 0)
        t1, t2 = split(t, (n1, n - n1), 0)
        if n1 != n - n1:  # odd: pad the second half with a one (and a zero tangent)
            x2 = concatenate([x2, full((1,) + rest, one)], 0)
            t2 = concatenate([t2, full((1,) + rest, np.zeros((), one.dtype)[()])], 0)
        x, t = ew.mul(x1, x2), ew.add(ew.mul(t1, x2), ew.mul(x1, t2))
        n = n1
    if n == 0:
        return out, full(rest, np.zeros((), one.dtype)[()])
    return out, squeeze(t, (0,))


reduce_prod_p = _reduction_primitive("reduce_prod", _number_dtype_rule("reduce_prod"),
                                     hlo.MulOp, lambda dt: 1)
ad.defjvp_rule(reduce_prod_p, _reduce_prod_jvp)


# ---- reduce_and / reduce_or / reduce_xor ---------------------------------------------------
def reduce_and(operand: ArrayLike, axes: Sequence[int]) -> Array:
    """Bitwise/logical AND over ``axes``. Lowers to ``stablehlo.reduce`` with an and body."""
    return reduce_and_p.bind(operand, axes=_canonical_axes(operand, axes, "reduce_and"))


def reduce_or(operand: ArrayLike, axes: Sequence[int]) -> Array:
    """Bitwise/logical OR over ``axes``. Lowers to ``stablehlo.reduce`` with an or body."""
    return reduce_or_p.bind(operand, axes=_canonical_axes(operand, axes, "reduce_or"))


def reduce_xor(operand: ArrayLike, axes: Sequence[int]) -> Array:
    """Bitwise/logical XOR over ``axes``. Lowers to ``stablehlo.reduce`` with a xor body."""
    return reduce_xor_p.bind(operand, axes=_canonical_axes(operand, axes, "reduce_xor"))


def _logical_dtype_rule(operand, **params):
    if operand.dtype != np.bool_ and not dtypes.issubdtype(operand.dtype, np.integer):
        raise TypeError(f"logical reduction requires operand dtype bool or int, got "
                        f"{operand.dtype}.")
    return operand.dtype


reduce_and_p = _reduction_primitive("reduce_and", _logical_dtype_rule, hlo.AndOp,
                                    lambda dt: np.array(-1).astype(dt), weak=False)
reduce_or_p = _reduction_primitive("reduce_or", _logical_dtype_rule, hlo.OrOp,
                                   lambda dt: 0, weak=False)
reduce_xor_p = _reduction_primitive("reduce_xor", _logical_dtype_rule, hlo.XorOp,
                                    lambda dt: 0, weak=False)
for _p in (reduce_and_p, reduce_or_p, reduce_xor_p):
    ad.defjvp_zero(_p)


# ---- reduce (general, multi-operand) -------------------------------------------------------
def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any],
           dimensions: Sequence[int], out_sharding: Any = None) -> Any:
    """Reduce pytrees of operands over ``dimensions`` with ``computation(acc, x)``, starting
    from scalar ``init_values`` (which must be its identity; it must be associative). Lowers
    to one ``stablehlo.reduce`` with the traced ``computation`` as body. ``out_sharding``
    lays out a sum (as in JAX, another reduction recognised as a monoid refuses it and a
    general one ignores it)."""
    flat_operands, operand_tree = tree_util.tree_flatten(operands)
    flat_inits, init_tree = tree_util.tree_flatten(init_values)
    if operand_tree != init_tree:
        raise ValueError("Operands must have the same tree structure as init_values: "
                         f"{operand_tree} vs. {init_tree}")
    if len(flat_operands) != len(flat_inits):
        raise ValueError("Must have same total number of operands as init_values: "
                         f" {len(flat_operands)} vs. {len(flat_inits)}")
    dimensions = tuple(canonicalize_axis(d, np.ndim(flat_operands[0]))
                       for d in as_tuple_of_ints(dimensions, "reduce dimensions"))
    monoid = _get_monoid_reducer(computation, flat_inits)
    if monoid is not None:
        weak = all(dtypes.is_weakly_typed(x) for x in flat_operands + flat_inits)
        if out_sharding is not None and monoid is not reduce_sum:
            raise NotImplementedError(
                f"lax.reduce with out_sharding is implemented only for sums (as in JAX); "
                f"this computation is {monoid.__name__}")
        out = monoid(flat_operands[0], dimensions,
                     **({} if out_sharding is None else {"out_sharding": out_sharding}))
        return convert_element_type(out, core.get_aval(out).dtype, weak)
    init_avals = tuple(core.get_aval(x).strip_weak_type() for x in flat_inits)
    closed, out_tree = _reduction_jaxpr(computation, init_avals, init_tree)
    outs = reduce_p.bind(*flat_operands, *flat_inits, computation=computation, jaxpr=closed,
                         dimensions=dimensions)
    return tree_util.tree_unflatten(out_tree, outs)


def _get_monoid_reducer(op, inits) -> Callable | None:
    """A dedicated reduction primitive for ``reduce(x, identity, add/mul/max/...)``."""
    if len(inits) != 1 or isinstance(inits[0], core.Tracer) or np.shape(inits[0]) != ():
        return None
    val, dtype = np.asarray(inits[0]), dtypes.dtype(inits[0])
    intlike = dtype == np.bool_ or dtypes.issubdtype(dtype, np.integer)
    table = [(getattr(ew, "add", None), 0, reduce_sum, True),
             (getattr(ew, "mul", None), 1, reduce_prod, True),
             (getattr(ew, "max", None), _get_max_identity(dtype), reduce_max, True),
             (getattr(ew, "min", None), _get_min_identity(dtype), reduce_min, True),
             (getattr(ew, "bitwise_or", None), 0, reduce_or, intlike),
             (getattr(ew, "bitwise_and", None), np.array(-1).astype(dtype), reduce_and, intlike),
             (getattr(ew, "bitwise_xor", None), 0, reduce_xor, intlike)]
    for fn, identity, reducer, ok in table:
        if fn is not None and op is fn and ok and np.equal(val, identity):
            return reducer
    return None


@functools.lru_cache(maxsize=512)
def _reduction_jaxpr(computation, init_avals, init_tree):
    avals_tree = tree_util.tree_unflatten(init_tree, init_avals)
    _, in_tree = tree_util.tree_flatten((avals_tree, avals_tree))
    out_trees = []

    def flat_computation(*flat_args):
        xs, ys = tree_util.tree_unflatten(in_tree, list(flat_args))
        out_flat, out_tree = tree_util.tree_flatten(computation(xs, ys))
        out_trees.append(out_tree)
        return out_flat

    jaxpr, consts = pe.trace_to_jaxpr(flat_computation, list(init_avals) * 2)
    if any(isinstance(c, core.Tracer) for c in consts):
        raise NotImplementedError("Reduction computations can't close over traced values; "
                                  "pass them as operands instead.")
    if [a.strip_weak_type() for a in jaxpr.out_avals] != list(init_avals):
        raise TypeError("reduce computation must return values of the types of init_values "
                        f"{[a.str_short() for a in init_avals]}, got "
                        f"{[a.str_short() for a in jaxpr.out_avals]}")
    return core.ClosedJaxpr(jaxpr, consts), out_trees[0]


def _reduce_abstract_eval(*avals, computation, jaxpr, dimensions):
    n = len(avals) // 2
    operands, inits = avals[:n], avals[n:]
    if any(a.shape != () for a in inits):
        raise ValueError(f"reduce found non-scalar initial value: {[a.shape for a in inits]}")
    if [o.dtype for o in operands] != [i.dtype for i in inits]:
        raise TypeError("reduce operand dtypes should match corresponding initial value dtypes, "
                        f"got operands={list(operands)} and initial_values={list(inits)}")
    if any(o.shape != operands[0].shape for o in operands):
        raise ValueError("reduce operands must have the same shape, got "
                         f"{[o.shape for o in operands]}")
    return [core.ShapedArray(_reduce_shape_rule(o, axes=dimensions), o.dtype,
                             o.weak_type and i.weak_type) for o, i in zip(operands, inits)]


def _reduce_batch(axis_data, args, dims, *, computation, jaxpr, dimensions):
    n = len(args) // 2
    if any(d is not batching.not_mapped for d in dims[n:]):
        raise NotImplementedError("batching rule for 'reduce' with batched init_values is not "
                                  "implemented")
    size = batching.batch_size(args, dims)
    operands = [batching.bdim_at_front(x, d, size) for x, d in zip(args[:n], dims[:n])]
    outs = reduce_p.bind(*operands, *args[n:], computation=computation, jaxpr=jaxpr,
                         dimensions=tuple(d + 1 for d in dimensions))
    return outs, [0] * n


def _reduce_jvp(primals, tangents, *, computation, jaxpr, dimensions):
    """JAX's rule: the reduced axes are flattened to the front and halved repeatedly, the
    halves combined by the (vectorized) combiner under forward-mode AD."""
    n = len(primals) // 2
    xs, inits = list(primals[:n]), list(primals[n:])
    if any(type(t) is not ad.Zero for t in tangents[n:]):
        raise NotImplementedError("Gradient of general lax.reduce with non-zero tangents for "
                                  "initial values to reduction not implemented")
    if all(type(t) is ad.Zero for t in tangents[:n]):
        outs = reduce_p.bind(*primals, computation=computation, jaxpr=jaxpr,
                             dimensions=dimensions)
        return outs, [ad.Zero(core.get_aval(o).to_tangent_aval()) for o in outs]
    shape = np.shape(xs[0])
    kept = tuple(i for i in range(len(shape)) if i not in dimensions)
    count = int(np.prod([shape[d] for d in dimensions], dtype=np.int64))
    rest = tuple(shape[i] for i in kept)
    m = int(np.prod(rest, dtype=np.int64))
    flat = [reshape(x, (count, m), dimensions + kept) for x in xs]
    ts = [reshape(ad.instantiate_zeros(t), (count, m), dimensions + kept)
          for t in tangents[:n]]
    if count == 0:
        outs = [broadcast_in_dim(i, rest, ()) for i in inits]
        return outs, [ad.Zero(core.get_aval(o).to_tangent_aval()) for o in outs]
    while count > 1:
        half = (count + 1) // 2
        pairs = [split(x, (half, count - half), 0) for x in flat]
        t_pairs = [split(t, (half, count - half), 0) for t in ts]
        if half != count - half:  # odd: pad the second halves with the init values
            pairs = [(a, concatenate([b, broadcast_in_dim(i, (1, m), ())], 0))
                     for (a, b), i in zip(pairs, inits)]
            t_pairs = [(a, concatenate([b, full((1, m), np.zeros((), core.get_aval(b).dtype)
                                                [()])], 0)) for a, b in t_pairs]
        size = half * m
        batched, _ = batching.batch_jaxpr(jaxpr, size, [True] * (2 * n), True)
        args = [reshape(a, (size,)) for a, _ in pairs] + [reshape(b, (size,)) for _, b in pairs]
        t_args = [reshape(a, (size,)) for a, _ in t_pairs] + \
            [reshape(b, (size,)) for _, b in t_pairs]
        outs, t_outs, _ = ad.jvp_flat(
            lambda *a, c=batched: core.eval_jaxpr(c.jaxpr, c.consts, *a), args, t_args)
        flat = [reshape(o, (half, m)) for o in outs]
        ts = [reshape(ad.instantiate_zeros(t), (half, m)) for t in t_outs]
        count = half
    return [reshape(x, rest) for x in flat], [reshape(t, rest) for t in ts]


def _reduce_lowering(ctx, *values, computation, jaxpr, dimensions):
    n = len(values) // 2
    op = hlo.ReduceOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(values[:n]),
                      list(values[n:]), mlir.i64_attr(dimensions))
    scalar_types = [mlir.aval_to_ir_type(a.strip_weak_type()) for a in ctx.avals_in[n:]]
    block = op.regions[0].blocks.append(*(scalar_types + scalar_types))
    with ir.InsertionPoint(block):
        hlo.ReturnOp(mlir.closed_subcomp(ctx.module_context, jaxpr, *block.arguments))
    return list(op.results)


reduce_p = core.Primitive("reduce")
reduce_p.multiple_results = True
reduce_p.def_impl(lambda *args, **params: dispatch.apply_primitive(reduce_p, *args, **params))
reduce_p.def_abstract_eval(_reduce_abstract_eval)
ad.defjvp_rule(reduce_p, _reduce_jvp)
batching.defrule(reduce_p, _reduce_batch)
mlir.register_lowering(reduce_p, _reduce_lowering)


# ---- argmax / argmin -----------------------------------------------------------------------
def argmax(operand: ArrayLike, axis: int, index_dtype: DTypeLike) -> Array:
    """Index of the maximum along ``axis`` (the first one on ties; NaN counts as maximal).
    Lowers to a two-operand ``stablehlo.reduce``."""
    return argmax_p.bind(operand, axes=(int(axis),),
                         index_dtype=dtypes.check_and_canonicalize_user_dtype(
                             index_dtype, "argmax"))


def argmin(operand: ArrayLike, axis: int, index_dtype: DTypeLike) -> Array:
    """Index of the minimum along ``axis`` (the first one on ties; NaN counts as minimal).
    Lowers to a two-operand ``stablehlo.reduce``."""
    return argmin_p.bind(operand, axes=(int(axis),),
                         index_dtype=dtypes.check_and_canonicalize_user_dtype(
                             index_dtype, "argmin"))


def _argminmax_shape_rule(operand, *, axes, index_dtype):
    (axis,) = axes
    if not 0 <= axis < operand.ndim:
        raise ValueError(f"Invalid axis {axis} for operand shape {operand.shape}")
    if operand.shape[axis] < 1:
        raise ValueError("argmin and argmax require non-empty reduced dimension. "
                         f"operand.shape={operand.shape} axis={axis}")
    return operand.shape[:axis] + operand.shape[axis + 1:]


def _argminmax_dtype_rule(operand, *, axes, index_dtype):
    if not dtypes.issubdtype(index_dtype, np.integer):
        raise TypeError(f"index_dtype must be an integer type, but got "
                        f"{np.dtype(index_dtype).name}")
    return np.dtype(index_dtype)


class _ArgMinMaxReducer:
    """The combiner of argmin/argmax: keeps the smaller (larger) value, NaNs first, and the
    lower index on ties."""

    def __init__(self, value_comparator: Callable):
        self._value_comparator = value_comparator

    def __repr__(self):  # a stable name in printed jaxprs
        return f"_ArgMinMaxReducer({self._value_comparator.__name__})"

    def __call__(self, op_val_index, acc_val_index):
        op_val, op_index = op_val_index
        acc_val, acc_index = acc_val_index
        pick_op_val = bitwise_or(self._value_comparator(op_val, acc_val),
                                 ew.ne(op_val, op_val))
        pick_op_index = bitwise_or(pick_op_val,
                                   bitwise_and(ew.eq(op_val, acc_val), ew.lt(op_index, acc_index)))
        return (ew.select_n(pick_op_val, acc_val, op_val),
                ew.select_n(pick_op_index, acc_index, op_index))


_argmin_reducer: _ArgMinMaxReducer | None = None
_argmax_reducer: _ArgMinMaxReducer | None = None


def _compute_argminmax(which, operand, *, axes, index_dtype):
    global _argmin_reducer, _argmax_reducer
    # One reducer object per kind, so that the traced combiner is cached.
    if _argmin_reducer is None:
        _argmin_reducer, _argmax_reducer = _ArgMinMaxReducer(ew.lt), _ArgMinMaxReducer(ew.gt)
    reducer, identity = ((_argmin_reducer, _get_min_identity) if which == "min"
                         else (_argmax_reducer, _get_max_identity))
    dtype = core.get_aval(operand).dtype
    indices = broadcasted_iota(index_dtype, np.shape(operand), axes[0])
    _, out = reduce([operand, indices], [identity(dtype)[()], np.zeros((), index_dtype)[()]],
                    reducer, axes)
    return out


def _argminmax_primitive(which: str) -> core.Primitive:
    prim = standard_primitive(_argminmax_shape_rule, _argminmax_dtype_rule, f"arg{which}")
    batching.defrule(prim, _reduce_batch_rule(prim))
    shr.defsharding(prim, shr.reduce_rule)
    ad.defjvp_zero(prim)
    mlir.register_lowering(prim, mlir.lower_fun(
        lambda x, **params: _compute_argminmax(which, x, **params)))
    return prim


argmin_p = _argminmax_primitive("min")
argmax_p = _argminmax_primitive("max")

__all__ += ["argmax", "argmax_p", "argmin", "argmin_p", "reduce", "reduce_and", "reduce_and_p",
            "reduce_max", "reduce_max_p", "reduce_min", "reduce_min_p", "reduce_or",
            "reduce_or_p", "reduce_p", "reduce_prod", "reduce_prod_p", "reduce_xor",
            "reduce_xor_p"]
