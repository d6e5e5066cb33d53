"""Gather and scatter: XLA's general indexing primitives, as in ``jax.lax``.

``gather`` reads slices of an operand at traced start indices; the ``scatter`` family
(``scatter`` and ``scatter_add``/``sub``/``mul``/``min``/``max``) writes, or combines, slices of
updates into it; ``scatter_apply`` applies a unary function at the indices instead. As in JAX,
every scatter primitive carries its scalar combiner as a jaxpr (``update_jaxpr``, with its
constants ``update_consts``; ``None`` for ``scatter``, whose updates replace), and one lowering
builds the body of ``stablehlo.scatter`` from it. The index vector is always the last axis of
the indices (``index_vector_dim`` is implicit, as in JAX). Batched indices are expressed with
StableHLO's ``operand_batching_dims``, which is also how the batching rules vectorise these
primitives.

One module because their rules refer to each other: gather is linear in its operand and
transposes to ``scatter_add``; ``scatter_add`` and ``scatter_sub`` are linear in operand and
updates and transpose to gather. ``scatter``, ``scatter_mul``, ``scatter_min`` and
``scatter_max`` have JAX's JVP rules (updates that lose a collision get no tangent; ties of
min/max share the tangent equally); ``scatter_apply`` is not differentiable, as in JAX.
Dimension numbers, modes and checks are in ``gather_scatter_dims.py``.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import elementwise as ew
from jaxkit.lax.elementwise_bits import bitwise_and
from jaxkit.lax import reductions
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.gather_scatter_dims import (GatherDimensionNumbers, GatherScatterMode,
                                            ScatterDimensionNumbers, _canonical_gather_dnums,
                                            _canonical_scatter_dnums, _index_dtype_rule,
                                            _is_sorted, _no_duplicate_dims,
                                            _sorted_dims_in_range, check_batching_dims)
from jaxkit.lax.standard import _first_weak, as_tuple_of_ints, standard_primitive
from jaxkit.lax.structural import (broadcast_in_dim, convert_element_type, full, full_like, iota,
                                   reshape)
from jaxkit.typing import Array, ArrayLike, Shape


# ---- gather --------------------------------------------------------------------------------
def gather(operand: ArrayLike, start_indices: ArrayLike,
           dimension_numbers: GatherDimensionNumbers, slice_sizes: Sequence[int], *,
           unique_indices: bool = False, indices_are_sorted: bool = False,
           mode: str | GatherScatterMode | None = None, fill_value=None) -> Array:
    """Gather slices of ``operand`` starting at ``start_indices`` (index vectors along the
    last axis). Lowers to ``stablehlo.gather``; ``mode='fill'`` masks out-of-bounds slices
    with ``fill_value`` (default NaN, the minimum signed or maximum unsigned integer, True)."""
    parsed_mode = (GatherScatterMode.PROMISE_IN_BOUNDS if mode is None
                   else GatherScatterMode.from_any(mode))
    if parsed_mode == GatherScatterMode.FILL_OR_DROP:
        if fill_value is None:
            dtype = dtypes.dtype(operand)
            if dtypes.issubdtype(dtype, np.inexact):
                fill_value = np.nan
            elif dtypes.issubdtype(dtype, np.signedinteger):
                fill_value = int(dtypes.iinfo(dtype).min)
            elif dtypes.issubdtype(dtype, np.unsignedinteger):
                fill_value = int(dtypes.iinfo(dtype).max)
            elif dtype == np.bool_:
                fill_value = True
            elif dtypes.issubdtype(dtype, dtypes.prng_key):  # keys: every word of their data
                fill_value = int(np.iinfo(np.uint32).max)
            else:
                raise ValueError(f"Unsupported dtype for gather fill_value {dtype}")
    else:
        fill_value = None
    return gather_p.bind(operand, start_indices,
                         dimension_numbers=_canonical_gather_dnums(dimension_numbers),
                         slice_sizes=as_tuple_of_ints(slice_sizes, "gather slice_sizes"),
                         unique_indices=bool(unique_indices),
                         indices_are_sorted=bool(indices_are_sorted), mode=parsed_mode,
                         fill_value=fill_value)


def _gather_shape_rule(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                       indices_are_sorted, mode, fill_value):
    """The checks of XLA's ShapeInference::InferGatherShape, with JAX's messages."""
    dn = dimension_numbers
    offset_dims, collapsed = dn.offset_dims, dn.collapsed_slice_dims
    operand_bdims, indices_bdims = dn.operand_batching_dims, dn.start_indices_batching_dims
    start_index_map = dn.start_index_map
    if indices.ndim < 1:
        raise TypeError("Gather indices must have rank at least 1 (the last axis holds the "
                        f"index vectors); got indices of shape {indices.shape}.")
    index_vector_dim = indices.ndim - 1
    _is_sorted(offset_dims, "gather", "offset_dims")
    _no_duplicate_dims(offset_dims, "gather", "offset_dims")
    output_rank = len(offset_dims) + indices.ndim - 1
    for i, d in enumerate(offset_dims):
        if d < 0 or d >= output_rank:
            raise TypeError(f"Offset dimension {i} in gather op is out of bounds; got {d}, but "
                            f"should have been in [0, {output_rank})")
    if len(start_index_map) != indices.shape[index_vector_dim]:
        raise TypeError(f"Gather op has {len(start_index_map)} elements in start_index_map and "
                        f"the bound of dimension index_vector_dim={index_vector_dim} of indices "
                        f"is {indices.shape[index_vector_dim]}. These two numbers must be "
                        "equal.")
    for i, d in enumerate(start_index_map):
        if d < 0 or d >= operand.ndim:
            raise TypeError(f"Invalid start_index_map; domain is [0, {operand.ndim}), got: "
                            f"{i}->{d}.")
    _no_duplicate_dims(start_index_map, "gather", "start_index_map")
    check_batching_dims("Gather", operand.shape, indices.shape, collapsed, "collapsed_slice_dims",
                        start_index_map, "start_index_map", operand_bdims, indices_bdims,
                        "start_indices_batching_dims")
    if operand.ndim != len(slice_sizes):
        raise TypeError(f"Gather op must have one slice size for every input dimension; got: "
                        f"len(slice_sizes)={len(slice_sizes)}, input_shape.rank={operand.ndim}")
    if len(slice_sizes) != len(offset_dims) + len(collapsed) + len(operand_bdims):
        raise TypeError("All components of the offset index in a gather op must either be a "
                        "offset dimension or explicitly collapsed/batching; got "
                        f"len(slice_sizes)={len(slice_sizes)}, output_slice_sizes="
                        f"{offset_dims}, collapsed_slice_dims={collapsed}, "
                        f"operand_batching_dims={operand_bdims}.")
    if math.prod(indices.shape):
        for i, (size, bound) in enumerate(zip(slice_sizes, operand.shape)):
            if not 0 <= size <= bound:
                raise TypeError(f"Slice size at index {i} in gather op is out of range, must "
                                f"be within [0, {bound} + 1), got {size}.")
    for i, d in enumerate(collapsed):
        if slice_sizes[d] != 1:
            raise TypeError(f"Gather op can only collapse slice dims with bound 1, but bound "
                            f"is {slice_sizes[d]} for index {d} at position {i}.")
    for i, d in enumerate(operand_bdims):
        if slice_sizes[d] > 1:
            raise TypeError(f"Gather op can only have operand batching dims with bound 0/1, "
                            f"but bound is {slice_sizes[d]} for index {d} at position {i}.")
    batch_shape = iter(indices.shape[:-1])
    window = iter(s for i, s in enumerate(slice_sizes)
                  if i not in collapsed and i not in operand_bdims)
    return tuple(next(window) if i in offset_dims else next(batch_shape)
                 for i in range(output_rank))


def _gather_dtype_rule(operand, indices, **params):
    _index_dtype_rule(indices)
    return operand.dtype


def _gather_jvp(g, operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                indices_are_sorted, mode, fill_value):
    return gather(g, indices, dimension_numbers, slice_sizes, unique_indices=unique_indices,
                  indices_are_sorted=indices_are_sorted, mode=mode, fill_value=0)


def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes,
                      unique_indices, indices_are_sorted, mode, fill_value):

    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval), None]
    zeros = full(operand.aval.shape, 0, core.get_aval(ct).dtype)
    dn = dimension_numbers
    scatter_dnums = ScatterDimensionNumbers(
        update_window_dims=dn.offset_dims, inserted_window_dims=dn.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dn.start_index_map,
        operand_batching_dims=dn.operand_batching_dims,
        scatter_indices_batching_dims=dn.start_indices_batching_dims)
    return [scatter_add(zeros, indices, ct, scatter_dnums, unique_indices=unique_indices,
                        indices_are_sorted=indices_are_sorted, mode=mode), None]


def _gather_batch(axis_data, args, dims, *, dimension_numbers, slice_sizes, unique_indices,
                  indices_are_sorted, mode, fill_value):
    (operand, indices), (operand_bdim, indices_bdim) = args, dims
    dn = dimension_numbers
    # Shifted axes are np.int64s where JAX's rule adds with NumPy (they print so).
    if indices_bdim is batching.not_mapped:
        # The batch axis of the operand becomes one more (full-size) offset axis.
        operand = batching.moveaxis(operand, operand_bdim, 0)
        dnums = GatherDimensionNumbers(
            offset_dims=(0,) + _np_shift(dn.offset_dims),
            collapsed_slice_dims=_np_shift(dn.collapsed_slice_dims),
            start_index_map=_np_shift(dn.start_index_map),
            operand_batching_dims=_np_shift(dn.operand_batching_dims),
            start_indices_batching_dims=dn.start_indices_batching_dims)
        return gather(operand, indices, dnums, (operand.shape[0],) + tuple(slice_sizes),
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                      mode=mode, fill_value=fill_value), 0
    if operand_bdim is batching.not_mapped:
        # One more batch axis of the indices: the output gets it in front.
        indices = batching.moveaxis(indices, indices_bdim, 0)
        dnums = dn._replace(offset_dims=tuple(1 + d for d in dn.offset_dims),
                            start_indices_batching_dims=_np_shift(dn.start_indices_batching_dims))
        # Batched lookups into one array may be neither sorted nor unique any more.
        return gather(operand, indices, dnums, slice_sizes, unique_indices=False,
                      indices_are_sorted=False, mode=mode, fill_value=fill_value), 0
    # Both batched: pair the two batch axes as StableHLO batching dimensions.
    operand = batching.moveaxis(operand, operand_bdim, 0)
    indices = batching.moveaxis(indices, indices_bdim, 0)
    dnums = GatherDimensionNumbers(
        offset_dims=_np_shift(dn.offset_dims),
        collapsed_slice_dims=_np_shift(dn.collapsed_slice_dims),
        start_index_map=_np_shift(dn.start_index_map),
        operand_batching_dims=(0,) + _np_shift(dn.operand_batching_dims),
        start_indices_batching_dims=(0,) + _np_shift(dn.start_indices_batching_dims))
    sizes = (0 if operand.shape[0] == 0 else 1,) + tuple(slice_sizes)
    return gather(operand, indices, dnums, sizes, unique_indices=unique_indices,
                  indices_are_sorted=indices_are_sorted, mode=mode,
                  fill_value=fill_value), 0


def _index_dtype_for(shape) -> np.dtype:
    """The smallest canonical signed integer type that can index every axis of ``shape``."""
    big = max(shape, default=0) > np.iinfo(np.int32).max
    return dtypes.canonicalize_dtype(np.int64 if big else np.int32)


def _gather_fill(operand, indices, *, dimension_numbers, slice_sizes, unique_indices,
                 indices_are_sorted, mode, fill_value):
    """A FILL_OR_DROP gather: an in-bounds gather whose out-of-bounds slices are masked."""
    dn = dimension_numbers
    index_dtype = _index_dtype_for(operand.shape)
    indices = convert_element_type(indices, index_dtype)
    num_batch_dims = indices.ndim - 1
    upper = np.array([operand.shape[d] - slice_sizes[d] for d in dn.start_index_map],
                     index_dtype)
    upper = broadcast_in_dim(upper, indices.shape, (num_batch_dims,))
    zero = np.zeros((), index_dtype)[()]
    mask = bitwise_and(ew.ge(indices, zero), ew.le(indices, upper))
    mask = reductions.reduce_and(mask, (num_batch_dims,))
    out = gather(operand, indices, dn, slice_sizes, indices_are_sorted=indices_are_sorted,
                 mode=GatherScatterMode.PROMISE_IN_BOUNDS)
    batch_dims_in_output = [i for i in range(out.ndim) if i not in dn.offset_dims]
    mask = broadcast_in_dim(mask, out.shape, batch_dims_in_output)
    return ew.select_n(mask, full_like(out, fill_value), out)


def _gather_lowering(ctx, operand, indices, *, dimension_numbers, slice_sizes,
                     unique_indices, indices_are_sorted, mode, fill_value):
    aval_out = ctx.avals_out[0]
    if mode == GatherScatterMode.FILL_OR_DROP:
        return mlir.lower_fun(_gather_fill)(
            ctx, operand, indices, dimension_numbers=dimension_numbers,
            slice_sizes=slice_sizes, unique_indices=unique_indices,
            indices_are_sorted=indices_are_sorted, mode=mode, fill_value=fill_value)
    if 0 in aval_out.shape:
        return mlir.full_like_aval(0, aval_out)
    # CLIP needs nothing more: XLA's gather clamps start indices into bounds.
    dn = dimension_numbers
    dnums = hlo.GatherDimensionNumbers.get(
        offset_dims=list(dn.offset_dims), collapsed_slice_dims=list(dn.collapsed_slice_dims),
        operand_batching_dims=list(dn.operand_batching_dims),
        start_indices_batching_dims=list(dn.start_indices_batching_dims),
        start_index_map=list(dn.start_index_map), index_vector_dim=ctx.avals_in[1].ndim - 1)
    return hlo.gather(operand, indices, dnums, mlir.i64_attr(slice_sizes),
                      indices_are_sorted=ir.BoolAttr.get(indices_are_sorted))


gather_p = standard_primitive(_gather_shape_rule, _gather_dtype_rule, "gather", _first_weak)
shr.defsharding(gather_p, shr.gather_rule)
ad.defjvp(gather_p, _gather_jvp, None)
ad.deftranspose(gather_p, _gather_transpose)
batching.defrule(gather_p, _gather_batch)
mlir.register_lowering(gather_p, _gather_lowering)


# ---- scatter family: shared rules ----------------------------------------------------------
def _scatter_shape_rule(operand, indices, updates, *, update_jaxpr, update_consts,
                        dimension_numbers, indices_are_sorted, unique_indices, mode):
    """The checks of XLA's ShapeInference::InferScatterShape, with JAX's messages."""
    dn = dimension_numbers
    window_dims, inserted = dn.update_window_dims, dn.inserted_window_dims
    operand_bdims, indices_bdims = dn.operand_batching_dims, dn.scatter_indices_batching_dims
    to_operand = dn.scatter_dims_to_operand_dims
    if indices.ndim < 1:
        raise TypeError("Scatter indices must have rank at least 1 (the last axis holds the "
                        f"index vectors); got indices of shape {indices.shape}.")
    index_vector_dim = indices.ndim - 1
    expected_rank = indices.ndim - 1 + len(window_dims)
    if updates.ndim != expected_rank:
        raise TypeError(f"Updates tensor must be of rank {expected_rank}; got {updates.ndim}.")
    _is_sorted(window_dims, "scatter", "update_window_dims")
    _no_duplicate_dims(window_dims, "scatter", "update_window_dims")
    _sorted_dims_in_range(window_dims, updates.ndim, "scatter", "update_window_dims")
    operand_batch_shape = check_batching_dims(
        "Scatter", operand.shape, indices.shape, inserted, "inserted_window_dims", to_operand,
        "scatter_dims_to_operand_dims", operand_bdims, indices_bdims,
        "scatter_indices_batching_dims")
    scatter_dims_in_updates = [i for i in range(updates.ndim) if i not in window_dims]
    updates_batch_shape = tuple(updates.shape[scatter_dims_in_updates[i]] for i in indices_bdims)
    if operand_batch_shape != updates_batch_shape:
        raise TypeError("Scatter op requires operand batching dimensions and updates batching "
                        f"dimensions to have the same shape, got {operand_batch_shape} and "
                        f"{updates_batch_shape}.")
    window_size = len(window_dims) + len(inserted) + len(operand_bdims)
    if operand.ndim != window_size:
        raise TypeError(f"Scatter op has window of size {window_size}; doesn't match operand "
                        f"of rank {operand.ndim}.")
    if len(to_operand) != indices.shape[index_vector_dim]:
        raise TypeError(f"Scatter op has {len(to_operand)} elements in "
                        "scatter_dims_to_operand_dims and the bound of dimension "
                        f"index_vector_dim={index_vector_dim} of indices is "
                        f"{indices.shape[index_vector_dim]}. These two numbers must be equal")
    for i, d in enumerate(to_operand):
        if d < 0 or d >= operand.ndim:
            raise TypeError(f"Invalid scatter_dims_to_operand_dims mapping; domain is "
                            f"[0, {operand.ndim}), got: {i}->{d}.")
    _no_duplicate_dims(to_operand, "scatter", "scatter_dims_to_operand_dims")
    max_window = [operand.shape[i] for i in range(operand.ndim)
                  if i not in inserted and i not in operand_bdims]
    for i, d in enumerate(window_dims):
        if max_window[i] < updates.shape[d]:
            raise TypeError("Bounds of the window dimensions of updates must not exceed the "
                            "bounds of the corresponding dimensions of operand. For dimension "
                            f"{d}, updates bound is {updates.shape[d]}, operand bound is "
                            f"{max_window[i]}.")
    for k, i in enumerate(scatter_dims_in_updates):
        if updates.shape[i] != indices.shape[k]:
            raise TypeError("Bounds of the scatter dimensions of updates must be the same as "
                            "the bounds of the corresponding dimensions of scatter indices. "
                            f"For scatter dimension {i}, updates bound is {updates.shape[i]}, "
                            f"indices bound is {indices.shape[k]}.")
    return operand.shape


def _scatter_dtype_rule(operand, indices, updates, **params):
    _index_dtype_rule(indices)
    if operand.dtype != updates.dtype:
        raise TypeError("lax.scatter requires arguments to have the same dtypes, got "
                        f"{operand.dtype}, {updates.dtype}.")
    return operand.dtype


def _inverse_gather(dn: ScatterDimensionNumbers, operand_shape, updates_shape):
    """The gather that reads back, at the same indices, the windows a scatter writes:
    its dimension numbers and slice sizes."""
    gather_dnums = GatherDimensionNumbers(
        offset_dims=tuple(dn.update_window_dims),
        collapsed_slice_dims=tuple(dn.inserted_window_dims),
        start_index_map=tuple(dn.scatter_dims_to_operand_dims),
        operand_batching_dims=tuple(dn.operand_batching_dims),
        start_indices_batching_dims=tuple(dn.scatter_indices_batching_dims))
    window = iter(dn.update_window_dims)
    slice_sizes = tuple(1 if i in dn.inserted_window_dims or i in dn.operand_batching_dims
                        else updates_shape[next(window)] for i in range(len(operand_shape)))
    return gather_dnums, slice_sizes


def _shape_of(x):
    return x.aval.shape if ad.is_undefined_primal(x) else np.shape(x)


def _zeros(x):
    return full_like(x, 0)


def _np_shift(dims) -> tuple:
    """``dims`` moved one axis on, as np.int64s: JAX's scatter batching rule adds with NumPy,
    so its jaxprs print them as ``np.int64(1)``."""
    return tuple(np.add(1, dims))


def _scatter_batch(prim, axis_data, args, dims, *, update_jaxpr, update_consts,
                   dimension_numbers, indices_are_sorted, unique_indices, mode):
    # The combiner is scalar, so it is the same for the batched scatter.
    (operand, indices, updates), (operand_bdim, indices_bdim, updates_bdim) = args, dims
    dn = dimension_numbers
    size = batching.batch_size(args, dims)
    operand = batching.bdim_at_front(operand, operand_bdim, size)
    updates = batching.bdim_at_front(updates, updates_bdim, size)
    if indices_bdim is batching.not_mapped:
        dnums = ScatterDimensionNumbers(
            update_window_dims=(0,) + _np_shift(dn.update_window_dims),
            inserted_window_dims=_np_shift(dn.inserted_window_dims),
            scatter_dims_to_operand_dims=_np_shift(dn.scatter_dims_to_operand_dims),
            operand_batching_dims=_np_shift(dn.operand_batching_dims),
            scatter_indices_batching_dims=tuple(dn.scatter_indices_batching_dims))
    else:
        indices = batching.bdim_at_front(indices, indices_bdim, size)
        dnums = ScatterDimensionNumbers(
            update_window_dims=_np_shift(dn.update_window_dims),
            inserted_window_dims=_np_shift(dn.inserted_window_dims),
            scatter_dims_to_operand_dims=_np_shift(dn.scatter_dims_to_operand_dims),
            operand_batching_dims=(0,) + _np_shift(dn.operand_batching_dims),
            scatter_indices_batching_dims=(0,) + _np_shift(dn.scatter_indices_batching_dims))
    return prim.bind(operand, indices, updates, update_jaxpr=update_jaxpr,
                     update_consts=update_consts, dimension_numbers=dnums,
                     indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                     mode=mode), 0


def _clamp_scatter_indices(ctx, operand_aval, indices, updates_aval, dn):
    """CLIP mode: clamp each index vector so that its whole window is in bounds."""
    window = iter(dn.update_window_dims)
    slice_sizes = [1 if i in dn.inserted_window_dims or i in dn.operand_batching_dims
                   else updates_aval.shape[next(window)] for i in range(operand_aval.ndim)]
    idx_aval = ctx.avals_in[1]
    limit = np.iinfo(idx_aval.dtype).max
    upper = np.array([min(operand_aval.shape[d] - slice_sizes[d], limit)
                      for d in dn.scatter_dims_to_operand_dims], idx_aval.dtype)
    upper = mlir.broadcast_in_dim(mlir.ir_constant(upper), idx_aval, [idx_aval.ndim - 1])
    zero = mlir.full_like_aval(0, idx_aval)
    return hlo.ClampOp(zero, indices, upper).result


def _scatter_lowering(ctx, operand, indices, updates, *, update_jaxpr, update_consts,
                      dimension_numbers, indices_are_sorted, unique_indices, mode):
    """One ``stablehlo.scatter`` whose body is ``update_jaxpr(current, update)`` lowered inline
    (``None``: the update replaces the current value)."""
    dn = dimension_numbers
    operand_aval, _, updates_aval = ctx.avals_in
    if mode == GatherScatterMode.CLIP:
        indices = _clamp_scatter_indices(ctx, operand_aval, indices, updates_aval, dn)
    # FILL_OR_DROP and PROMISE_IN_BOUNDS: XLA drops out-of-bounds windows itself.
    dnums = hlo.ScatterDimensionNumbers.get(
        update_window_dims=list(dn.update_window_dims),
        inserted_window_dims=list(dn.inserted_window_dims),
        input_batching_dims=list(dn.operand_batching_dims),
        scatter_indices_batching_dims=list(dn.scatter_indices_batching_dims),
        scattered_dims_to_operand_dims=list(dn.scatter_dims_to_operand_dims),
        index_vector_dim=ctx.avals_in[1].ndim - 1)
    op = hlo.ScatterOp([mlir.aval_to_ir_type(ctx.avals_out[0])], [operand], indices,
                       [updates], dnums,
                       indices_are_sorted=ir.BoolAttr.get(indices_are_sorted),
                       unique_indices=ir.BoolAttr.get(unique_indices))
    scalar = mlir.aval_to_ir_type(core.ShapedArray((), operand_aval.dtype))
    block = op.update_computation.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        current, update = block.arguments
        if update_jaxpr is None:
            hlo.ReturnOp([update])
        else:
            combiner = core.ClosedJaxpr(update_jaxpr, list(update_consts))
            hlo.ReturnOp(mlir.closed_subcomp(ctx.module_context, combiner, current, update))
    return op.results[0]


# primitive -> the scalar ``combine(current, update)`` its wrapper traces to ``update_jaxpr``
_combiners: dict[core.Primitive, Callable | None] = {}


def _scatter_primitive(name: str, combine: Callable | None) -> core.Primitive:
    prim = standard_primitive(_scatter_shape_rule, _scatter_dtype_rule, name, _first_weak)
    batching.defrule(prim, partial(_scatter_batch, prim))
    shr.defsharding(prim, shr.scatter_rule)
    mlir.register_lowering(prim, _scatter_lowering)
    _combiners[prim] = combine
    return prim


def _update_jaxpr(computation: Callable, dtype: np.dtype, unary: bool = False
                  ) -> tuple[core.Jaxpr, tuple]:
    """The ``update_jaxpr`` and ``update_consts`` of a scatter: ``computation(current,
    update)`` traced on scalars of ``dtype`` (``unary``: ``computation(current)``). Cached by
    function, so that equal scatters share one jaxpr object (and one eager program)."""
    try:
        hash(computation)
    except TypeError:
        return _trace_update_jaxpr(computation, dtype, unary)
    return _cached_update_jaxpr(computation, dtype, unary)


def _trace_update_jaxpr(computation: Callable, dtype: np.dtype, unary: bool
                        ) -> tuple[core.Jaxpr, tuple]:
    aval = core.ShapedArray((), dtype)
    name = getattr(computation, "__name__", type(computation).__name__)

    def combine(x, y):
        out = computation(x) if unary else computation(x, y)
        try:
            out_aval = core.get_aval(out)
        except TypeError:  # (ValueError, as JAX raises for it)
            raise ValueError(f"scatter_apply: func must return an array, got "
                             f"{type(out).__name__} from {name}: {out!r}") from None
        if out_aval.shape != () or out_aval.dtype != dtype:
            raise TypeError(f"scatter_apply: func must map a scalar of the operand's type "
                            f"{aval.str_short()} to the same type, but {name} returns "
                            f"{out_aval.str_short()}.")
        return [out]

    jaxpr, consts = pe.trace_to_jaxpr(combine, [aval, aval])
    if any(isinstance(c, core.Tracer) for c in consts):
        raise NotImplementedError(
            f"scatter_apply: func ({name}) closes over a traced value; a scatter's update "
            "computation can only close over constants. Compute the value with the "
            "operand instead (e.g. x.at[idx].multiply(y) rather than "
            "x.at[idx].apply(lambda v: v * y)).")
    return jaxpr, tuple(consts)


_cached_update_jaxpr = functools.lru_cache(maxsize=512)(_trace_update_jaxpr)


def _bind_scatter(prim, operand, indices, updates, dimension_numbers, indices_are_sorted,
                  unique_indices, mode, update=None):
    """Bind a scatter primitive with canonical params; ``update`` is ``(update_jaxpr,
    update_consts)`` when given (scatter_apply), else the primitive's own combiner's."""
    if update is None:
        combine = _combiners[prim]
        update = (None, ()) if combine is None else \
            _update_jaxpr(combine, core.get_aval(operand).dtype)
    update_jaxpr, update_consts = update
    return prim.bind(operand, indices, updates, update_jaxpr=update_jaxpr,
                     update_consts=update_consts,
                     dimension_numbers=_canonical_scatter_dnums(dimension_numbers),
                     indices_are_sorted=bool(indices_are_sorted),
                     unique_indices=bool(unique_indices),
                     mode=GatherScatterMode.from_any(mode))


# ---- scatter_add / scatter_sub -------------------------------------------------------------
def scatter_add(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    """Add ``updates`` into ``operand`` at ``scatter_indices`` (colliding updates all add).
    Lowers to ``stablehlo.scatter`` with an add body."""
    return _bind_scatter(scatter_add_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_sub(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    """Subtract ``updates`` from ``operand`` at ``scatter_indices``. Lowers to
    ``stablehlo.scatter`` with a subtract body."""
    return _bind_scatter(scatter_sub_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_addsub_jvp(prim, primals, tangents, **params):
    operand, indices, updates = primals
    g_operand, _, g_updates = tangents
    out = prim.bind(operand, indices, updates, **params)
    if type(g_operand) is ad.Zero and type(g_updates) is ad.Zero:
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    return out, prim.bind(ad.instantiate_zeros(g_operand), indices,
                          ad.instantiate_zeros(g_updates), **params)


def _scatter_addsub_transpose(prim, ct, operand, indices, updates, *, update_jaxpr,
                              update_consts, dimension_numbers, indices_are_sorted,
                              unique_indices, mode):
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None, None,
                ad.Zero(updates.aval) if ad.is_undefined_primal(updates) else None]
    operand_t = ct if ad.is_undefined_primal(operand) else None
    updates_t = None
    if ad.is_undefined_primal(updates):
        gather_dnums, slice_sizes = _inverse_gather(dimension_numbers, np.shape(ct),
                                                    updates.aval.shape)
        updates_t = gather(ct, indices, gather_dnums, slice_sizes, mode=mode, fill_value=0)
        if prim is scatter_sub_p:
            updates_t = ew.neg(updates_t)
    return [operand_t, None, updates_t]


scatter_add_p = _scatter_primitive("scatter-add", ew.add)
scatter_sub_p = _scatter_primitive("scatter-sub", ew.sub)
for _p in (scatter_add_p, scatter_sub_p):
    ad.defjvp_rule(_p, partial(_scatter_addsub_jvp, _p))
    ad.deftranspose(_p, partial(_scatter_addsub_transpose, _p))


# ---- scatter_mul ---------------------------------------------------------------------------
def scatter_mul(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    """Multiply ``operand`` by ``updates`` at ``scatter_indices``. Lowers to
    ``stablehlo.scatter`` with a multiply body."""
    return _bind_scatter(scatter_mul_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_mul_jvp_updates(g, x, i, y, *, update_jaxpr, update_consts, dimension_numbers,
                             indices_are_sorted, unique_indices, mode):
    if not unique_indices:
        raise NotImplementedError("scatter_mul gradients are only implemented if "
                                  "`unique_indices=True`")
    return ew.mul(x, scatter_add(_zeros(x), i, g, dimension_numbers,
                                 indices_are_sorted=indices_are_sorted,
                                 unique_indices=unique_indices, mode=mode))


def _scatter_mul_transpose(ct, operand, indices, updates, *, update_jaxpr, update_consts,
                           dimension_numbers, indices_are_sorted, unique_indices, mode):
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None, None,
                ad.Zero(updates.aval) if ad.is_undefined_primal(updates) else None]
    operand_t = updates_t = None
    if ad.is_undefined_primal(operand):
        operand_t = scatter_mul(ct, indices, updates, dimension_numbers,
                                indices_are_sorted=indices_are_sorted,
                                unique_indices=unique_indices, mode=mode)
    if ad.is_undefined_primal(updates):
        if not unique_indices:
            raise NotImplementedError("scatter_mul gradients are only implemented if "
                                      "`unique_indices=True`")
        gather_dnums, slice_sizes = _inverse_gather(dimension_numbers, np.shape(ct),
                                                    updates.aval.shape)
        updates_t = gather(ew.mul(ct, operand), indices, gather_dnums, slice_sizes,
                           mode=mode, fill_value=0)
    return [operand_t, None, updates_t]


scatter_mul_p = _scatter_primitive("scatter-mul", ew.mul)
ad.defjvp(scatter_mul_p, lambda g, x, i, y, **params: scatter_mul_p.bind(g, i, y, **params),
          None, _scatter_mul_jvp_updates)
ad.deftranspose(scatter_mul_p, _scatter_mul_transpose)


# ---- scatter_min / scatter_max -------------------------------------------------------------
def scatter_min(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    """Minimum of ``operand`` and ``updates`` at ``scatter_indices``. Lowers to
    ``stablehlo.scatter`` with a minimum body."""
    return _bind_scatter(scatter_min_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_max(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    """Maximum of ``operand`` and ``updates`` at ``scatter_indices``. Lowers to
    ``stablehlo.scatter`` with a maximum body."""
    return _bind_scatter(scatter_max_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_extremal_jvp(prim, primals, tangents, *, update_jaxpr, update_consts,
                          dimension_numbers, indices_are_sorted, unique_indices, mode):
    """JAX's rule: the winners of each location (the operand value and/or colliding updates
    equal to the result) share its tangent equally."""
    operand, indices, updates = primals
    g_operand, _, g_updates = tangents
    dn = dimension_numbers
    out = prim.bind(operand, indices, updates, update_jaxpr=update_jaxpr,
                    update_consts=update_consts, dimension_numbers=dn,
                    indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                    mode=mode)
    if type(g_operand) is ad.Zero and type(g_updates) is ad.Zero:
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    g_operand = ad.instantiate_zeros(g_operand)
    g_updates = ad.instantiate_zeros(g_updates)
    gather_dnums, slice_sizes = _inverse_gather(dn, np.shape(operand), np.shape(updates))

    def gather_back(x):
        return gather(x, indices, gather_dnums, slice_sizes)

    def scatter_add_(x, u):
        return scatter_add(x, indices, u, dn)

    initial_vals = gather_back(operand)
    target_vals = gather_back(out)
    successful_updates = ew.eq(updates, target_vals)
    retained_values = ew.eq(initial_vals, target_vals)
    ones_u, zeros_u = full_like(updates, 1), _zeros(updates)
    num_updates = gather_back(scatter_add_(_zeros(operand),
                                           ew.select_n(successful_updates, zeros_u, ones_u)))
    num_refs = gather_back(scatter_add_(_zeros(operand), ones_u))
    one = np.ones((), dtypes.dtype(operand))[()]
    updates_normalizer = ew.select_n(retained_values, ew.div(one, num_updates),
                                     ew.div(one, ew.add(num_updates, one)))
    updates_coef = ew.select_n(successful_updates, zeros_u, updates_normalizer)
    operand_normalizer = ew.select_n(retained_values, _zeros(num_updates),
                                     ew.div(one, ew.add(num_updates, one)))
    operand_coef = ew.div(ew.sub(operand_normalizer, one), num_refs)
    target_tangents = gather_back(g_operand)
    tangent_updates = ew.add(ew.mul(target_tangents, operand_coef),
                             ew.mul(g_updates, updates_coef))
    return out, scatter_add(g_operand, indices, tangent_updates, dn,
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)


scatter_min_p = _scatter_primitive("scatter-min", ew.min)
scatter_max_p = _scatter_primitive("scatter-max", ew.max)
for _p in (scatter_min_p, scatter_max_p):
    ad.defjvp_rule(_p, partial(_scatter_extremal_jvp, _p))


# ---- scatter -------------------------------------------------------------------------------
def scatter(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
            dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | GatherScatterMode | None = None
            ) -> Array:
    """Write ``updates`` into ``operand`` at ``scatter_indices``; which of several colliding
    updates wins is unspecified. Lowers to ``stablehlo.scatter``."""
    return _bind_scatter(scatter_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _scatter_jvp(primals, tangents, *, update_jaxpr, update_consts, dimension_numbers,
                 indices_are_sorted, unique_indices, mode):
    if update_jaxpr is not None:
        raise NotImplementedError("scatter_apply JVP not implemented")
    operand, indices, updates = primals
    g_operand, _, g_updates = tangents
    dn = dimension_numbers
    params = {"update_jaxpr": None, "update_consts": (), "dimension_numbers": dn,
              "indices_are_sorted": indices_are_sorted, "unique_indices": unique_indices,
              "mode": mode}
    if type(g_operand) is ad.Zero and type(g_updates) is ad.Zero:
        out = scatter_p.bind(operand, indices, updates, **params)
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    g_operand = ad.instantiate_zeros(g_operand)
    g_updates = ad.instantiate_zeros(g_updates)
    if unique_indices:
        return (scatter_p.bind(operand, indices, updates, **params),
                scatter_p.bind(g_operand, indices, g_updates, **params))
    # Colliding updates: which one wins is unspecified, so find out. Scatter a distinct
    # positive id per update, gather the ids back, and keep only the winning updates (and the
    # operand entries nobody wrote to); then the result is a scatter_add of the kept values.
    ids_shape = list(np.shape(updates))
    for d in dn.update_window_dims:
        ids_shape[d] = 1
    num_ids = math.prod(ids_shape)
    id_dtype = dtypes.canonicalize_dtype(np.uint32 if num_ids < 2 ** 32 - 1 else np.uint64)
    update_ids = ew.add(reshape(iota(id_dtype, num_ids), ids_shape), np.ones((), id_dtype)[()])
    update_ids = broadcast_in_dim(update_ids, np.shape(updates), range(len(ids_shape)))
    scattered_ids = scatter(full(np.shape(operand), 0, id_dtype), indices, update_ids, dn,
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)
    gather_dnums, slice_sizes = _inverse_gather(dn, np.shape(operand), np.shape(updates))
    gathered_ids = gather(scattered_ids, indices, gather_dnums, slice_sizes)
    untouched = ew.eq(scattered_ids, np.zeros((), id_dtype)[()])
    winners = ew.eq(update_ids, gathered_ids)

    def keep(mask, x):
        return ew.select_n(mask, _zeros(x), x)

    add_params = {"indices_are_sorted": indices_are_sorted, "unique_indices": unique_indices,
                  "mode": mode}
    out = scatter_add(keep(untouched, operand), indices, keep(winners, updates), dn,
                      **add_params)
    tangent = scatter_add(keep(untouched, g_operand), indices, keep(winners, g_updates), dn,
                          **add_params)
    return out, tangent


def _scatter_transpose(ct, operand, indices, updates, *, update_jaxpr, update_consts,
                       dimension_numbers, indices_are_sorted, unique_indices, mode):
    if update_jaxpr is not None:  # not linear (JAX never gets here: its JVP fails first)
        raise NotImplementedError("scatter_apply transpose not implemented")
    if not unique_indices:
        raise NotImplementedError("scatter transpose is only implemented where "
                                  "unique_indices=True")
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None, None,
                ad.Zero(updates.aval) if ad.is_undefined_primal(updates) else None]
    updates_shape = _shape_of(updates)
    operand_t = updates_t = None
    if ad.is_undefined_primal(operand):
        # The overwritten entries get no cotangent.
        operand_t = scatter(ct, indices, full(updates_shape, 0, core.get_aval(ct).dtype),
                            dimension_numbers, indices_are_sorted=indices_are_sorted,
                            unique_indices=True, mode=mode)
    if ad.is_undefined_primal(updates):
        gather_dnums, slice_sizes = _inverse_gather(dimension_numbers, np.shape(ct),
                                                    updates_shape)
        updates_t = gather(ct, indices, gather_dnums, slice_sizes, mode=mode, fill_value=0)
    return [operand_t, None, updates_t]


scatter_p = _scatter_primitive("scatter", None)
ad.defjvp_rule(scatter_p, _scatter_jvp)
ad.deftranspose(scatter_p, _scatter_transpose)


# ---- scatter_apply: scatter_p with a unary update_jaxpr ------------------------------------
def scatter_apply(operand: ArrayLike, scatter_indices: ArrayLike, func: Callable[[Array], Array],
                  dimension_numbers: ScatterDimensionNumbers, *, update_shape: Shape = (),
                  indices_are_sorted: bool = False, unique_indices: bool = False,
                  mode: str | GatherScatterMode | None = None) -> Array:
    """Replace the values of ``operand`` at ``scatter_indices`` by ``func`` of them; an index
    that occurs ``n`` times gets ``func`` applied ``n`` times. ``func`` maps a scalar of the
    operand's type to one of the same type; ``update_shape`` is the shape the updates of an
    ordinary scatter with these indices would have. Lowers to ``stablehlo.scatter`` whose body
    is ``func`` (the updates are placeholder zeros). Not differentiable, as in JAX."""
    dtype = core.get_aval(operand).dtype
    update_shape = as_tuple_of_ints(update_shape, "scatter_apply update_shape")
    # A scalar placeholder is a NumPy constant, so that it stages as a literal (as JAX's does).
    placeholder = full(update_shape, 0, dtype) if update_shape else np.zeros((), dtype)[()]
    return _bind_scatter(scatter_p, operand, scatter_indices, placeholder, dimension_numbers,
                         indices_are_sorted, unique_indices, mode,
                         update=_update_jaxpr(func, dtype, unary=True))


__all__ = ["GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather",
           "gather_p", "scatter", "scatter_add", "scatter_add_p", "scatter_apply", "scatter_max",
           "scatter_max_p", "scatter_min", "scatter_min_p", "scatter_mul", "scatter_mul_p",
           "scatter_p", "scatter_sub", "scatter_sub_p"]
