"""``stack``, ``unstack`` and ``tile``: the structural primitives ``jax.lax`` added beside
``concatenate``/``split``.

Each is linear, so its JVP applies it to the tangents, and the three transpose into one
another: ``stack`` into ``unstack``, ``unstack`` into ``stack``, ``tile`` into a sum over the
repetitions. They lower to a reshape (or slices) around ``stablehlo.concatenate`` and
``stablehlo.broadcast_in_dim``, as JAX does.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxkit import core
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax.standard import (_all_weak, _first_weak, as_tuple_of_ints, canonicalize_axis,
                                 standard_primitive)
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.structural import reduce_sum, reshape
from jaxkit.typing import Array, ArrayLike

__all__ = ["stack", "stack_p", "unstack", "unstack_p", "tile", "tile_p"]


# ---- stack ---------------------------------------------------------------------------------
def stack(operands: Sequence[ArrayLike], axis: int = 0) -> Array:
    """Join arrays of one shape along a new ``axis``. Lowers to a reshape of each operand
    and ``stablehlo.concatenate``."""
    operands = list(operands)
    if not operands:
        raise ValueError("lax.stack requires a non-empty sequence of arrays")
    axis = canonicalize_axis(axis, np.ndim(operands[0]) + 1)
    return stack_p.bind(*operands, axis=axis)


def _stack_shape_rule(*operands, axis):
    shapes = [o.shape for o in operands]
    if len({len(s) for s in shapes}) != 1:
        raise ValueError("Cannot stack arrays with different numbers of dimensions: got "
                         f"{', '.join(map(str, shapes))}.")
    if any(s != shapes[0] for s in shapes[1:]):
        raise ValueError("Cannot stack arrays with different shapes: got "
                         f"{', '.join(map(str, shapes))}.")
    return shapes[0][:axis] + (len(operands),) + shapes[0][axis:]


def _stack_dtype_rule(*operands, axis):
    if any(o.dtype != operands[0].dtype for o in operands[1:]):
        raise TypeError("lax.stack requires arguments to have the same dtypes, got "
                        f"{', '.join(o.dtype.name for o in operands)}.")
    return operands[0].dtype


def _stack_transpose(ct, *operands, axis):
    if type(ct) is ad.Zero:
        return [ad.Zero(o.aval) if ad.is_undefined_primal(o) else None for o in operands]
    pieces = unstack_p.bind(ct, axis=axis)
    return [p if ad.is_undefined_primal(o) else None for p, o in zip(pieces, operands)]


def _stack_batch(axis_data, args, dims, *, axis):
    size = batching.batch_size(args, dims)
    return stack_p.bind(*[batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)],
                        axis=axis + 1), 0


def _stack_lowering(ctx, *xs, axis):
    out = ctx.avals_out[0]
    piece = ir.RankedTensorType.get(out.shape[:axis] + (1,) + out.shape[axis + 1:],
                                    mlir.dtype_to_ir_type(out.dtype))
    return hlo.ConcatenateOp([hlo.reshape(piece, x) for x in xs], axis).result


stack_p = standard_primitive(_stack_shape_rule, _stack_dtype_rule, "stack", _all_weak)
ad.deflinear2(stack_p, _stack_transpose)
batching.defrule(stack_p, _stack_batch)
mlir.register_lowering(stack_p, _stack_lowering)
shr.defsharding(stack_p, shr.stack_rule)
shr.defur(stack_p, shr.sharding_ur.same_sets_rule)


# ---- unstack -------------------------------------------------------------------------------
def unstack(x: ArrayLike, axis: int = 0) -> tuple[Array, ...]:
    """Split ``x`` along ``axis`` into its ``x.shape[axis]`` slices, dropping that axis.
    Lowers to one ``stablehlo.slice`` and reshape per slice."""
    axis = canonicalize_axis(axis, np.ndim(x))
    return tuple(unstack_p.bind(x, axis=axis))


def _unstack_abstract_eval(x, *, axis):
    piece = x.update(shape=x.shape[:axis] + x.shape[axis + 1:])
    return [piece] * x.shape[axis]


def _unstack_transpose(cts, x, *, axis):
    if all(type(ct) is ad.Zero for ct in cts):
        return [ad.Zero(x.aval)]
    if not cts:  # an empty axis: nothing flowed out, so nothing flows back
        return [ad.Zero(x.aval)]
    return [stack_p.bind(*[ad.instantiate_zeros(ct) for ct in cts], axis=axis)]


def _unstack_batch(axis_data, args, dims, *, axis):
    (x,), (d,) = args, dims
    inner = axis + 1 if axis >= d else axis  # the unstacked axis, counted in the batched x
    out_dim = d if d < inner else d - 1
    return list(unstack_p.bind(x, axis=inner)), [out_dim] * x.shape[inner]


def _unstack_lowering(ctx, x, *, axis):
    (aval,) = ctx.avals_in
    ndim = aval.ndim
    outs = []
    for i, out in enumerate(ctx.avals_out):
        start = [0] * ndim
        limit = list(aval.shape)
        start[axis], limit[axis] = i, i + 1
        piece = hlo.SliceOp(x, mlir.i64_attr(start), mlir.i64_attr(limit),
                            mlir.i64_attr([1] * ndim)).result
        outs.append(hlo.reshape(mlir.aval_to_ir_type(out), piece))
    return outs


unstack_p = core.Primitive("unstack")
unstack_p.multiple_results = True
unstack_p.def_impl(lambda x, **params: dispatch.apply_primitive(unstack_p, x, **params))
unstack_p.def_abstract_eval(_unstack_abstract_eval)
ad.deflinear2(unstack_p, _unstack_transpose)
batching.defrule(unstack_p, _unstack_batch)
mlir.register_lowering(unstack_p, _unstack_lowering)
shr.defsharding(unstack_p, shr.unstack_rule)
shr.defur(unstack_p, shr.sharding_ur.keep_each_rule(lambda x, *, axis: x.shape[axis]))


# ---- tile ----------------------------------------------------------------------------------
def tile(operand: ArrayLike, reps: Sequence[int]) -> Array:
    """Repeat ``operand`` ``reps[i]`` times along each dimension ``i`` (one rep per
    dimension). Lowers to a reshape, ``stablehlo.broadcast_in_dim`` and a reshape."""
    reps = as_tuple_of_ints(reps, "tile reps")
    if len(reps) != np.ndim(operand):
        raise TypeError("reps length must be equal to the ndim of x, got "
                        f"len(reps)={len(reps)} and x.ndim={np.ndim(operand)}.")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile reps must be nonnegative, got reps={reps}.")
    return tile_p.bind(operand, reps=reps)


def _tile_shape_rule(operand, *, reps):
    return tuple(r * d for r, d in zip(reps, operand.shape))


def _interleaved(reps, shape) -> tuple[int, ...]:
    """(r0, d0, r1, d1, ...): the tiled array with each repetition an axis of its own."""
    return tuple(n for pair in zip(reps, shape) for n in pair)


def _tile_transpose(ct, operand, *, reps):
    shape = operand.aval.shape
    summed = reduce_sum(reshape(ct, _interleaved(reps, shape)), tuple(range(0, 2 * len(reps), 2)))
    return [summed]


def _tile_batch(axis_data, args, dims, *, reps):
    # The batch axis stays where it is, with one repetition (JAX's rule: no transpose).
    (x,), (d,) = args, dims
    return tile_p.bind(x, reps=reps[:d] + (1,) + reps[d:]), d


def _tile_lowering(ctx, x, *, reps):
    (aval,), (out,) = ctx.avals_in, ctx.avals_out
    etype = mlir.dtype_to_ir_type(aval.dtype)
    # (1, d0, 1, d1, ...) broadcast to (r0, d0, r1, d1, ...), then merged pairwise.
    ones = ir.RankedTensorType.get(_interleaved((1,) * aval.ndim, aval.shape), etype)
    wide = aval.update(shape=_interleaved(reps, aval.shape))
    spread = mlir.broadcast_in_dim(hlo.reshape(ones, x), wide, range(2 * aval.ndim))
    return hlo.reshape(mlir.aval_to_ir_type(out), spread)


tile_p = standard_primitive(_tile_shape_rule, lambda x, **_: x.dtype, "tile", _first_weak)
ad.deflinear2(tile_p, _tile_transpose)
batching.defrule(tile_p, _tile_batch)
mlir.register_lowering(tile_p, _tile_lowering)
