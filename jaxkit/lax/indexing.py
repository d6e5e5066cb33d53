"""Gather and scatter: XLA's general indexing primitives, as in ``jax.lax``.

``gather`` reads slices of an operand at traced start indices; the ``scatter`` family writes
(or combines) slices into it. The index vector is always the last axis of the indices
(``index_vector_dim`` is implicit, as in JAX). Batched indices are expressed with StableHLO's
``operand_batching_dims``, which is also how the batching rules vectorise these primitives.

Autodiff: gather is linear in its operand and transposes to ``scatter_add``. The scatter
primitives are in ``scatter.py``; the dimension numbers, modes and checks here serve both.
"""
from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax import elementwise as ew
from jaxkit.lax import reductions
from jaxkit.lax.standard import _first_weak, as_tuple_of_ints, standard_primitive
from jaxkit.lax.structural import (
    broadcast_in_dim,
    convert_element_type,
    full,
    full_like,
)
from jaxkit.typing import Array, ArrayLike


class GatherDimensionNumbers(NamedTuple):
    """How the operand, the start indices and the output of a gather relate (XLA's gather).

    ``offset_dims``: output axes that index into a slice; ``collapsed_slice_dims``: operand
    axes of slice size 1 dropped from the output; ``start_index_map``: the operand axis each
    entry of the index vector starts; ``operand_batching_dims`` / ``start_indices_batching_dims``:
    paired batch axes of the operand and the indices.
    """

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the operand, the indices and the updates of a scatter relate (XLA's scatter); the
    mirror image of ``GatherDimensionNumbers``."""

    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    """What to do with out-of-bounds indices.

    ``CLIP``: clamp them so that the whole slice is in bounds. ``FILL_OR_DROP``: a gather
    returns ``fill_value`` for a slice that is partly out of bounds, a scatter drops it.
    ``PROMISE_IN_BOUNDS``: the caller promises they are in bounds (XLA clamps gathers and
    drops scatters; gradients are wrong otherwise).
    """

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(s: str | GatherScatterMode | None) -> GatherScatterMode:
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f'Unknown gather mode "{s}"')


def _canonical_gather_dnums(d: GatherDimensionNumbers) -> GatherDimensionNumbers:
    # Tuples of ints keep the parameters hashable, so that eager calls hit the compile cache.
    return GatherDimensionNumbers(*(as_tuple_of_ints(f, "gather dimension_numbers")
                                    for f in d))


def _canonical_scatter_dnums(d: ScatterDimensionNumbers) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(*(as_tuple_of_ints(f, "scatter dimension_numbers")
                                     for f in d))


def _is_sorted(dims, op_name, name):
    if any(dims[i] < dims[i - 1] for i in range(1, len(dims))):
        raise TypeError(f"{name} in {op_name} op must be sorted; got {dims}")


def _dims_in_range(dims, rank, op_name, name):
    for dim in dims:
        if dim < 0 or dim >= rank:
            raise TypeError(f"Invalid {name} set in {op_name} op; valid range is [0, {rank}); "
                            f"got: {dim}.")


def _sorted_dims_in_range(dims, rank, op_name, name):
    if len(dims) and (dims[0] < 0 or dims[-1] >= rank):
        bad = dims[0] if dims[0] < 0 else dims[-1]
        raise TypeError(f"Invalid {name} set in {op_name} op; valid range is [0, {rank}); "
                        f"got: {bad}.")


def _no_duplicate_dims(dims, op_name, name):
    if len(set(dims)) != len(dims):
        raise TypeError(f"{name} in {op_name} op must not repeat; got: {dims}.")


def _disjoint_dims(dims1, dims2, op_name, name1, name2):
    if not set(dims1).isdisjoint(dims2):
        raise TypeError(f"{name1} and {name2} in {op_name} op must be disjoint; got: {dims1} "
                        f"and {dims2}.")


def _index_dtype_rule(indices):
    if not dtypes.issubdtype(indices.dtype, np.integer):
        raise ValueError("indices must have an integer type")


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
    _is_sorted(collapsed, "gather", "collapsed_slice_dims")
    _sorted_dims_in_range(collapsed, operand.ndim, "gather", "collapsed_slice_dims")
    _no_duplicate_dims(collapsed, "gather", "collapsed_slice_dims")
    _no_duplicate_dims(operand_bdims, "gather", "operand_batching_dims")
    _is_sorted(operand_bdims, "gather", "operand_batching_dims")
    _sorted_dims_in_range(operand_bdims, operand.ndim, "gather", "operand_batching_dims")
    _disjoint_dims(collapsed, operand_bdims, "gather", "collapsed_slice_dims",
                   "operand_batching_dims")
    _disjoint_dims(start_index_map, operand_bdims, "gather", "start_index_map",
                   "operand_batching_dims")
    _no_duplicate_dims(indices_bdims, "gather", "start_indices_batching_dims")
    _dims_in_range(indices_bdims, indices.ndim, "gather", "start_indices_batching_dims")
    if index_vector_dim in indices_bdims:
        raise TypeError("Gather op cannot have the index vector dimension as a batching "
                        f"dimension; got {indices_bdims}.")
    if len(operand_bdims) != len(indices_bdims):
        raise TypeError("Gather op requires equal numbers of operand_batching_dims and "
                        f"start_indices_batching_dims, got {operand_bdims} and "
                        f"{indices_bdims}.")
    operand_batch_shape = tuple(operand.shape[i] for i in operand_bdims)
    indices_batch_shape = tuple(indices.shape[i] for i in indices_bdims)
    if operand_batch_shape != indices_batch_shape:
        raise TypeError("Gather op requires operand batching dimensions and indices batching "
                        f"dimensions to have the same shape, got {operand_batch_shape} and "
                        f"{indices_batch_shape}.")
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
    from jaxkit.lax.scatter import scatter_add  # scatter.py builds on this module

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


def _shift(dims, by: int = 1) -> tuple[int, ...]:
    return tuple(int(d) + by for d in dims)


def _gather_batch(axis_data, args, dims, *, dimension_numbers, slice_sizes, unique_indices,
                  indices_are_sorted, mode, fill_value):
    (operand, indices), (operand_bdim, indices_bdim) = args, dims
    dn = dimension_numbers
    if indices_bdim is batching.not_mapped:
        # The batch axis of the operand becomes one more (full-size) offset axis.
        operand = batching.moveaxis(operand, operand_bdim, 0)
        dnums = GatherDimensionNumbers(
            offset_dims=(0,) + _shift(dn.offset_dims),
            collapsed_slice_dims=_shift(dn.collapsed_slice_dims),
            start_index_map=_shift(dn.start_index_map),
            operand_batching_dims=_shift(dn.operand_batching_dims),
            start_indices_batching_dims=dn.start_indices_batching_dims)
        return gather(operand, indices, dnums, (operand.shape[0],) + tuple(slice_sizes),
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                      mode=mode, fill_value=fill_value), 0
    if operand_bdim is batching.not_mapped:
        # One more batch axis of the indices: the output gets it in front.
        indices = batching.moveaxis(indices, indices_bdim, 0)
        dnums = dn._replace(offset_dims=_shift(dn.offset_dims),
                            start_indices_batching_dims=_shift(dn.start_indices_batching_dims))
        # Batched lookups into one array may be neither sorted nor unique any more.
        return gather(operand, indices, dnums, slice_sizes, unique_indices=False,
                      indices_are_sorted=False, mode=mode, fill_value=fill_value), 0
    # Both batched: pair the two batch axes as StableHLO batching dimensions.
    operand = batching.moveaxis(operand, operand_bdim, 0)
    indices = batching.moveaxis(indices, indices_bdim, 0)
    dnums = GatherDimensionNumbers(
        offset_dims=_shift(dn.offset_dims),
        collapsed_slice_dims=_shift(dn.collapsed_slice_dims),
        start_index_map=_shift(dn.start_index_map),
        operand_batching_dims=(0,) + _shift(dn.operand_batching_dims),
        start_indices_batching_dims=(0,) + _shift(dn.start_indices_batching_dims))
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
    mask = ew.bitwise_and(ew.ge(indices, zero), ew.le(indices, upper))
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
ad.defjvp(gather_p, _gather_jvp, None)
ad.deftranspose(gather_p, _gather_transpose)
batching.defrule(gather_p, _gather_batch)
mlir.register_lowering(gather_p, _gather_lowering)
