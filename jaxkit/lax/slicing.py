"""Slicing and padding: static ``slice`` and ``pad``, traced-offset ``dynamic_slice`` and
``dynamic_update_slice``, and the one-axis conveniences (``slice_in_dim``, ``index_in_dim``,
``dynamic_slice_in_dim``, ...), as in ``jax.lax``.

``slice`` and ``pad`` are each other's transpose. Dynamic start indices are clamped so that
the slice stays in bounds (XLA semantics); negative ones count from the end (JAX's
``allow_negative_indices``). Under ``vmap`` with batched indices, ``dynamic_slice`` becomes a
``gather`` and ``dynamic_update_slice`` a ``scatter``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import dispatch
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax import elementwise as ew
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.nested_jit import nested_jit
from jaxkit.lax.standard import (_all_weak, _first_weak, as_tuple_of_indices, as_tuple_of_ints,
                                 standard_primitive)
from jaxkit.lax.gather_scatter import (GatherDimensionNumbers, GatherScatterMode,
                                       ScatterDimensionNumbers, _gather_batch, _scatter_batch,
                                       scatter_p)
from jaxkit.lax.structural import (
    broadcast_in_dim,
    concatenate,
    convert_element_type,
    expand_dims,
    full,
    full_like,
    reduce_sum,
    squeeze,
)
from jaxkit.typing import Array, ArrayLike


# ---- slice ---------------------------------------------------------------------------------
def slice(operand: ArrayLike, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> Array:
    """``operand[start:limit:stride]`` in every axis (static bounds). Lowers to
    ``stablehlo.slice``."""
    return slice_p.bind(operand, start_indices=as_tuple_of_indices(start_indices, "start_indices"),
                        limit_indices=as_tuple_of_indices(limit_indices, "limit_indices"),
                        strides=None if strides is None else as_tuple_of_indices(strides,
                                                                              "strides"))


def _slice_shape_rule(operand, *, start_indices, limit_indices, strides):
    if operand.ndim != len(start_indices):
        raise TypeError("slice start_indices must have length equal to the number of "
                        f"dimensions of the operand, got indices {start_indices} for operand "
                        f"shape {operand.shape}.")
    if len(start_indices) != len(limit_indices):
        raise TypeError("slice limit_indices must have the same length as start_indices, got "
                        f"start_indices {start_indices} and limit_indices {limit_indices}.")
    if not all(s >= li for s, li in zip(operand.shape, limit_indices)):
        raise TypeError("slice limit_indices must be less than or equal to operand shape, got "
                        f"limit_indices {limit_indices} for operand shape {operand.shape}.")
    if not all(si >= 0 for si in start_indices):
        raise TypeError("slice start_indices must be greater than or equal to zero, got "
                        f"start_indices of {start_indices}.")
    if not all(li >= si for li, si in zip(limit_indices, start_indices)):
        raise TypeError("slice limit_indices must be greater than or equal to start_indices, "
                        f"got start_indices {start_indices} and limit_indices {limit_indices}.")
    diff = tuple(li - si for si, li in zip(start_indices, limit_indices))
    if strides is None or tuple(strides) == (1,) * operand.ndim:
        return diff
    if len(strides) != operand.ndim:
        raise TypeError("slice strides must have length equal to the number of dimensions of "
                        f"the operand, got strides {strides} for operand shape "
                        f"{operand.shape}.")
    if not all(s > 0 for s in strides):
        raise TypeError(f"slice strides must be positive, got {strides}")
    return tuple(0 if d == 0 else (d - 1) // s + 1 for d, s in zip(diff, strides))


def _slice_transpose(ct, operand, *, start_indices, limit_indices, strides):
    shape = operand.aval.shape
    ct_shape = np.shape(ct)
    if strides is None or all(s == 1 for s in strides):
        pads = [(lo, d - hi, 0) for lo, hi, d in zip(start_indices, limit_indices, shape)]
    else:
        real_limits = [lo + (0 if n == 0 else 1 + (n - 1) * s)
                       for lo, n, s in zip(start_indices, ct_shape, strides)]
        pads = [(lo, d - hi, s - 1)
                for lo, hi, d, s in zip(start_indices, real_limits, shape, strides)]
    return [pad(ct, np.zeros((), core.get_aval(ct).dtype)[()], pads)]


def _slice_batch(axis_data, args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    starts = list(start_indices)
    starts.insert(d, 0)
    limits = list(limit_indices)
    limits.insert(d, x.shape[d])
    if strides is not None:
        strides = list(strides)
        strides.insert(d, 1)
    return slice(x, starts, limits, strides), d


def _slice_impl(x, *, start_indices, limit_indices, strides):
    # Eagerly, an unstrided slice runs as a dynamic_slice with constant starts: one compiled
    # program serves every slice of the same size (x[0], x[1], ... in a Python loop).
    if strides is not None and any(s != 1 for s in strides):
        return dispatch.apply_primitive(slice_p, x, start_indices=start_indices,
                                         limit_indices=limit_indices, strides=strides)
    _slice_shape_rule(core.get_aval(x), start_indices=start_indices,
                      limit_indices=limit_indices, strides=strides)
    sizes = tuple(li - si for si, li in zip(start_indices, limit_indices))
    return dispatch.apply_primitive(dynamic_slice_p, x, *map(np.int32, start_indices),
                                     slice_sizes=sizes)


def _slice_lowering(ctx, x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    return hlo.SliceOp(x, mlir.i64_attr(start_indices), mlir.i64_attr(limit_indices),
                       mlir.i64_attr(strides)).result


slice_p = standard_primitive(_slice_shape_rule, lambda x, **_: x.dtype, "slice", _first_weak)
slice_p.def_impl(_slice_impl)
shr.defsharding(slice_p, shr.slice_rule)
shr.defur(slice_p, shr.sharding_ur.keep_rule)
ad.deflinear2(slice_p, _slice_transpose)
batching.defrule(slice_p, _slice_batch)
mlir.register_lowering(slice_p, _slice_lowering)


# ---- pad -----------------------------------------------------------------------------------
def pad(operand: ArrayLike, padding_value: ArrayLike,
        padding_config: Sequence[tuple[int, int, int]]) -> Array:
    """Pad each axis with ``(low, high, interior)`` copies of the scalar ``padding_value``;
    negative low/high padding removes elements. Lowers to ``stablehlo.pad``."""
    # Integers are kept as given (JAX binds ``tuple(padding_config)``: jnp.pad's NumPy
    # integers print as ``np.int64(1)``); anything else must convert to ints.
    config = tuple(tuple(c) if all(type(v) is int or isinstance(v, np.integer) for v in c)
                   else as_tuple_of_ints(c, "padding_config") for c in padding_config)
    if any(len(c) != 3 for c in config):
        raise ValueError(f"padding_config must be a sequence of (low, high, interior) "
                         f"triples, got {padding_config}")
    return pad_p.bind(operand, padding_value, padding_config=config)


def _pad_shape_rule(operand, padding_value, *, padding_config):
    if padding_value.ndim != 0:
        raise ValueError(f"padding_value must be a scalar; got np.shape(padding_value)="
                         f"{padding_value.shape}")
    if len(padding_config) != operand.ndim:
        raise ValueError("length of padding_config must equal the number of axes of operand, "
                         f"got padding_config {padding_config} for operand shape "
                         f"{operand.shape}")
    if not all(i >= 0 for _, _, i in padding_config):
        raise ValueError("interior padding in padding_config must be nonnegative, got "
                         f"padding_config {padding_config}")
    result = tuple(lo + hi + (0 if d == 0 else 1 + (i + 1) * (d - 1))
                   for (lo, hi, i), d in zip(padding_config, operand.shape))
    if not all(d >= 0 for d in result):
        raise ValueError(f"Dimension size after padding is not at least 0, got result shape "
                         f"{result}, for padding_config {padding_config} and operand shape "
                         f"{operand.shape}")
    return result


def _pad_dtype_rule(operand, padding_value, *, padding_config):
    if operand.dtype != padding_value.dtype:
        raise TypeError("pad operand and padding_value must be same dtype: got "
                        f"{operand.dtype} and {padding_value.dtype}.")
    return operand.dtype


def _pad_transpose(ct, operand, padding_value, *, padding_config):
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None,
                ad.Zero(padding_value.aval) if ad.is_undefined_primal(padding_value) else None]
    ndim = len(padding_config)
    zero = np.zeros((), core.get_aval(ct).dtype)[()]
    # Undo the edge padding, then take every (interior + 1)-th element.
    unpadded = pad(ct, zero, [(-lo, -hi, 0) for lo, hi, _ in padding_config])
    t_operand = slice(unpadded, [0] * ndim, np.shape(unpadded),
                      [i + 1 for _, _, i in padding_config])
    t_padv = None
    if ad.is_undefined_primal(padding_value):
        axes = tuple(range(ndim))
        t_padv = ew.sub(reduce_sum(ct, axes), reduce_sum(t_operand, axes))
    return [t_operand if ad.is_undefined_primal(operand) else None, t_padv]


def _pad_batch(axis_data, args, dims, *, padding_config):
    (operand, padding_value), (operand_bdim, padding_value_bdim) = args, dims
    if operand_bdim is batching.not_mapped:
        operand_bdim = 0
        operand = batching.broadcast(operand, padding_value.shape[padding_value_bdim], 0)
    config = list(padding_config)
    config.insert(operand_bdim, (0, 0, 0))
    if padding_value_bdim is batching.not_mapped:
        return pad(operand, padding_value, config), operand_bdim
    # A batched padding value: pad with zeros, then select it where the padding went.
    x = pad(operand, np.zeros((), core.get_aval(operand).dtype)[()], config)
    mask = pad(full_like(operand, True, np.bool_), np.bool_(False), config)
    padv = broadcast_in_dim(padding_value, np.shape(x), (operand_bdim,))
    return ew.select_n(mask, padv, x), operand_bdim


def _pad_lowering(ctx, x, padding_value, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    return hlo.PadOp(x, padding_value, mlir.i64_attr(lo), mlir.i64_attr(hi),
                     mlir.i64_attr(interior)).result


pad_p = standard_primitive(_pad_shape_rule, _pad_dtype_rule, "pad", _all_weak)
shr.defsharding(pad_p, shr.pad_rule)
shr.defur(pad_p, shr.sharding_ur.keep_rule)
ad.deflinear2(pad_p, _pad_transpose)
batching.defrule(pad_p, _pad_batch)
mlir.register_lowering(pad_p, _pad_lowering)


# ---- dynamic_slice -------------------------------------------------------------------------
def _dynamic_slice_indices(operand, start_indices, allow_negative_indices) -> list:
    """Per-axis start indices, with negative ones counted from the end where allowed."""
    shape = np.shape(operand)
    if not isinstance(start_indices, (list, tuple)):
        if np.ndim(start_indices) != 1:
            raise ValueError(f"Slice indices must be a 1D sequence, got "
                             f"{np.shape(start_indices)}")
        start_indices = list(start_indices)
    if len(start_indices) != len(shape):
        raise ValueError("Length of slice indices must match number of operand dimensions "
                         f"({len(start_indices)} vs {shape})")
    if isinstance(allow_negative_indices, bool):
        allow_negative_indices = [allow_negative_indices] * len(shape)
    result = []
    for i, d, allow in zip(start_indices, shape, allow_negative_indices):
        dtype = dtypes.dtype(i, canonicalize=True)
        if isinstance(i, (int, np.integer)):
            if i < 0 and not allow:
                raise ValueError(f"Index {i} is out of bounds for dimension {d} if "
                                 "allow_negative_indices=False")
            result.append(np.array(i + d if i < 0 else i).astype(dtype)[()])
        elif dtypes.issubdtype(dtype, np.unsignedinteger) or not allow:
            result.append(i)
        else:
            # JAX adds the size with ``i + d``, which promotes a weakly typed index (a
            # Python int given to a jit) to ``d``'s strong type first.
            negative = ew.lt(i, np.zeros((), dtype)[()])
            shifted = convert_element_type(i, dtype) if dtypes.is_weakly_typed(i) else i
            result.append(ew.select_n(negative, i, ew.add(shifted, np.array(d, dtype)[()])))
    return result


def dynamic_slice(operand: ArrayLike, start_indices: Sequence[ArrayLike],
                  slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Array:
    """The slice of ``slice_sizes`` at traced ``start_indices``; starts are clamped so that
    the slice is in bounds. Lowers to ``stablehlo.dynamic_slice``."""
    starts = _dynamic_slice_indices(operand, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *starts,
                                slice_sizes=as_tuple_of_ints(slice_sizes, "slice_sizes"))


def _dynamic_slice_shape_rule(operand, *start_indices, slice_sizes):
    if operand.ndim != len(start_indices):
        raise TypeError("dynamic_slice start_indices must have length equal to the number of "
                        f"dimensions of the operand, got {len(start_indices)} indices for "
                        f"operand shape {operand.shape}.")
    if len(slice_sizes) != operand.ndim:
        raise TypeError("dynamic_slice slice_sizes must have the same length as the operand "
                        f"rank, got slice_sizes {slice_sizes} for operand shape "
                        f"{operand.shape}.")
    if not all(s <= d for s, d in zip(slice_sizes, operand.shape)):
        raise TypeError("slice slice_sizes must be less than or equal to operand shape, got "
                        f"slice_sizes {slice_sizes} for operand shape {operand.shape}.")
    if not all(s >= 0 for s in slice_sizes):
        raise TypeError("slice slice_sizes must be greater than or equal to zero, got "
                        f"slice_sizes of {slice_sizes}.")
    if any(i.ndim != 0 for i in start_indices):
        raise TypeError("start_indices arguments to dynamic_slice must be scalars, got "
                        f"indices {[i.str_short() for i in start_indices]}")
    return tuple(slice_sizes)


def _check_index_dtypes(name, start_indices):
    if any(i.dtype != start_indices[0].dtype or not dtypes.issubdtype(i.dtype, np.integer)
           for i in start_indices):
        raise TypeError(f"index arguments to {name} must be integers of the same type, got: "
                        f"{', '.join(i.dtype.name for i in start_indices)}")


def _dynamic_slice_dtype_rule(operand, *start_indices, slice_sizes):
    _check_index_dtypes("dynamic_slice", start_indices)
    return operand.dtype


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    out = dynamic_slice_p.bind(*primals, slice_sizes=slice_sizes)
    t = tangents[0]
    if type(t) is ad.Zero:
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    return out, dynamic_slice_p.bind(t, *primals[1:], slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct, operand, *start_indices, slice_sizes):
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval)] + [None] * len(start_indices)
    zeros = full(operand.aval.shape, 0, core.get_aval(ct).dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *start_indices)] + \
        [None] * len(start_indices)


def _batch_dynamic_slice_indices(indices, bdims):
    """Stack scalar start indices into index vectors (a batch of them if any is batched)."""
    if not indices:
        return np.zeros((0,), np.int32), batching.not_mapped
    size = next((x.shape[d] for x, d in zip(indices, bdims) if d is not batching.not_mapped),
                None)
    if size is None:
        return concatenate([broadcast_in_dim(i, (1,), ()) for i in indices], 0), \
            batching.not_mapped
    return concatenate([broadcast_in_dim(x, (size, 1), () if d is batching.not_mapped else (0,))
                        for x, d in zip(indices, bdims)], 1), 0


def _dynamic_slice_batch(axis_data, args, dims, *, slice_sizes):
    # A dynamic slice is a gather with one index vector: batch it as one.
    operand, *starts = args
    operand_bdim, *start_bdims = dims
    ndims = len(slice_sizes)
    axes = tuple(range(ndims))
    dnums = GatherDimensionNumbers(offset_dims=axes, collapsed_slice_dims=(),
                                   start_index_map=axes)
    index, index_bdim = _batch_dynamic_slice_indices(starts, start_bdims)
    return _gather_batch(axis_data, [operand, index], [operand_bdim, index_bdim],
                         dimension_numbers=dnums, slice_sizes=slice_sizes, unique_indices=True,
                         indices_are_sorted=True, mode=GatherScatterMode.CLIP, fill_value=None)


dynamic_slice_p = standard_primitive(_dynamic_slice_shape_rule, _dynamic_slice_dtype_rule,
                                     "dynamic_slice", _first_weak)
ad.defjvp_rule(dynamic_slice_p, _dynamic_slice_jvp)
shr.defsharding(dynamic_slice_p, shr.dynamic_slice_rule)
shr.defur(dynamic_slice_p, shr.sharding_ur.dynamic_slice_rule)
ad.deftranspose(dynamic_slice_p, _dynamic_slice_transpose)
batching.defrule(dynamic_slice_p, _dynamic_slice_batch)
mlir.register_lowering(dynamic_slice_p, lambda ctx, x, *starts, slice_sizes: hlo.DynamicSliceOp(
    x, list(starts), mlir.i64_attr(slice_sizes)).result)


# ---- dynamic_update_slice ------------------------------------------------------------------
def dynamic_update_slice(operand: ArrayLike, update: ArrayLike,
                         start_indices: Sequence[ArrayLike], *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Array:
    """``operand`` with ``update`` written at traced ``start_indices`` (clamped so that the
    update fits). Lowers to ``stablehlo.dynamic_update_slice``."""
    starts = _dynamic_slice_indices(operand, start_indices, allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *starts)


def _dynamic_update_slice_shape_rule(operand, update, *start_indices):
    if operand.ndim != update.ndim:
        raise TypeError("dynamic_update_slice update must have the same rank as operand, got "
                        f"update shape {update.shape} for operand shape {operand.shape}.")
    if operand.ndim != len(start_indices):
        raise TypeError("dynamic_update_slice start_indices must have length equal to the rank "
                        f"of operand, got {len(start_indices)} indices for operand shape "
                        f"{operand.shape}.")
    if not all(u <= d for u, d in zip(update.shape, operand.shape)):
        raise TypeError("dynamic_update_slice update shape must be smaller than operand shape, "
                        f"got update shape {update.shape} for operand shape {operand.shape}.")
    if any(i.ndim != 0 for i in start_indices):
        raise TypeError("start_indices arguments to dynamic_update_slice must be scalars, got "
                        f"indices {[i.str_short() for i in start_indices]}")
    return operand.shape


def _dynamic_update_slice_dtype_rule(operand, update, *start_indices):
    if operand.dtype != update.dtype:
        raise TypeError("lax.dynamic_update_slice requires arguments to have the same dtypes, "
                        f"got {operand.dtype}, {update.dtype}.")
    _check_index_dtypes("dynamic_update_slice", start_indices)
    return operand.dtype


def _dynamic_update_slice_jvp(primals, tangents):
    out = dynamic_update_slice_p.bind(*primals)
    g_operand, g_update = tangents[:2]
    if type(g_operand) is ad.Zero and type(g_update) is ad.Zero:
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    return out, dynamic_update_slice_p.bind(ad.instantiate_zeros(g_operand),
                                            ad.instantiate_zeros(g_update), *primals[2:])


def _dynamic_update_slice_transpose(ct, operand, update, *start_indices):
    none = [None] * len(start_indices)
    if type(ct) is ad.Zero:
        return [ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None,
                ad.Zero(update.aval) if ad.is_undefined_primal(update) else None] + none
    update_shape = update.aval.shape if ad.is_undefined_primal(update) else np.shape(update)
    operand_t = update_t = None
    if ad.is_undefined_primal(operand):
        zeros = full(update_shape, 0, core.get_aval(ct).dtype)
        operand_t = dynamic_update_slice_p.bind(ct, zeros, *start_indices)
    if ad.is_undefined_primal(update):
        update_t = dynamic_slice_p.bind(ct, *start_indices, slice_sizes=tuple(update_shape))
    return [operand_t, update_t] + none


def _dynamic_update_slice_batch(axis_data, args, dims):
    # A dynamic update slice is a scatter with one index vector: batch it as one.
    operand, update, *starts = args
    operand_bdim, update_bdim, *start_bdims = dims
    update_shape = np.shape(update)
    if update_bdim is not batching.not_mapped:
        update_shape = update_shape[:update_bdim] + update_shape[update_bdim + 1:]
    axes = tuple(range(len(update_shape)))
    dnums = ScatterDimensionNumbers(update_window_dims=axes, inserted_window_dims=(),
                                    scatter_dims_to_operand_dims=axes)
    index, index_bdim = _batch_dynamic_slice_indices(starts, start_bdims)
    return _scatter_batch(scatter_p, axis_data, [operand, index, update],
                          [operand_bdim, index_bdim, update_bdim], update_jaxpr=None,
                          update_consts=(), dimension_numbers=dnums,
                          indices_are_sorted=True, unique_indices=True,
                          mode=GatherScatterMode.CLIP)


dynamic_update_slice_p = standard_primitive(
    _dynamic_update_slice_shape_rule, _dynamic_update_slice_dtype_rule, "dynamic_update_slice",
    _all_weak)
ad.defjvp_rule(dynamic_update_slice_p, _dynamic_update_slice_jvp)
shr.defsharding(dynamic_update_slice_p, shr.dynamic_update_slice_rule)
shr.defur(dynamic_update_slice_p, shr.sharding_ur.dynamic_update_slice_rule)
ad.deftranspose(dynamic_update_slice_p, _dynamic_update_slice_transpose)
batching.defrule(dynamic_update_slice_p, _dynamic_update_slice_batch)
mlir.register_lowering(dynamic_update_slice_p, lambda ctx, x, update, *starts:
                       hlo.DynamicUpdateSliceOp(x, update, list(starts)).result)


# ---- one-axis conveniences -----------------------------------------------------------------
def slice_in_dim(operand: ArrayLike, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Array:
    """``operand[..., start:limit:stride]`` along ``axis`` (negative bounds count from the
    end)."""
    shape = np.shape(operand)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    n = shape[axis]
    start = 0 if start_index is None else int(start_index)
    limit = n if limit_index is None else int(limit_index)
    starts[axis] = start + n if start < 0 else start
    limits[axis] = limit + n if limit < 0 else limit
    strides[axis] = int(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand: ArrayLike, index: int, axis: int = 0, keepdims: bool = True
                 ) -> Array:
    """``operand[..., index]`` along ``axis`` (a static index)."""
    index, axis = int(index), int(axis)
    size = np.shape(operand)[axis]
    wrapped = index + size if index < 0 else index
    if not 0 <= wrapped < size:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}")
    result = slice_in_dim(operand, wrapped, wrapped + 1, 1, axis)
    return result if keepdims else squeeze(result, (axis,))


def _zero_index_like(index):
    return np.zeros((), dtypes.dtype(index, canonicalize=True))[()]


def dynamic_slice_in_dim(operand: ArrayLike, start_index: ArrayLike, slice_size: int,
                         axis: int = 0, *, allow_negative_indices: bool = True) -> Array:
    """``operand[..., start:start + slice_size]`` along ``axis`` with a traced start."""
    ndim = np.ndim(operand)
    axis = int(axis)
    starts = [_zero_index_like(start_index)] * ndim
    starts[axis] = start_index
    sizes = list(np.shape(operand))
    sizes[axis] = int(slice_size)
    allow = [False] * ndim
    allow[axis] = allow_negative_indices
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow)


@nested_jit(static_argnames=("axis", "keepdims", "allow_negative_indices"))
def dynamic_index_in_dim(operand: ArrayLike, index: ArrayLike, axis: int = 0,
                         keepdims: bool = True, *, allow_negative_indices: bool = True
                         ) -> Array:
    """``operand[..., index]`` along ``axis`` with a traced index (a ``jit``, as JAX's).
    Lowers to ``stablehlo.dynamic_slice``."""
    result = dynamic_slice_in_dim(operand, index, 1, axis,
                                  allow_negative_indices=allow_negative_indices)
    return result if keepdims else squeeze(result, (axis,))


def dynamic_update_slice_in_dim(operand: ArrayLike, update: ArrayLike, start_index: ArrayLike,
                                axis: int, *, allow_negative_indices: bool = True) -> Array:
    """Write ``update`` into ``operand`` at a traced offset along ``axis``."""
    ndim = np.ndim(operand)
    axis = int(axis)
    starts = [_zero_index_like(start_index)] * ndim
    starts[axis] = start_index
    allow = [False] * ndim
    allow[axis] = allow_negative_indices
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=allow)


@nested_jit(static_argnames=("axis", "allow_negative_indices"))
def dynamic_update_index_in_dim(operand: ArrayLike, update: ArrayLike, index: ArrayLike,
                                axis: int, *, allow_negative_indices: bool = True) -> Array:
    """Write ``update`` (with or without the size-1 ``axis``) at a traced index along
    ``axis`` (a ``jit``, as JAX's). Lowers to ``stablehlo.dynamic_update_slice``."""
    axis = int(axis)
    if np.ndim(update) != np.ndim(operand):
        if np.ndim(update) + 1 != np.ndim(operand):
            raise ValueError(f"dynamic_update_index_in_dim: update of shape {np.shape(update)} "
                             f"does not fit operand of shape {np.shape(operand)}")
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


__all__ = ["dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim", "dynamic_slice_p",
           "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
           "dynamic_update_slice_p", "index_in_dim", "pad", "pad_p", "slice", "slice_in_dim",
           "slice_p"]
