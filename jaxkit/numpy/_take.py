"""``take``, ``take_along_axis``, ``put_along_axis``, ``unravel_index`` and
``ravel_multi_index``: gathers and scatters along one axis or at flat
indices, built on the indexing machinery of ``_indexing``."""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy._creation import _user_dtype
# The module, not its names: _elementwise imports this module (through _shape) while loading.
from jaxkit.numpy import _elementwise
from jaxkit.numpy._index_update import scatter_update
from jaxkit.numpy._indexing import _normalize
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import (
    asarray,
    broadcast_to_shape,
    canonicalize_axis,
    convert,
    ensure_arraylike,
)
from jaxkit.numpy._ufuncs import add as _add
from jaxkit.numpy._ufuncs import divmod as _divmod
from jaxkit.numpy._ufuncs import multiply as _mul
from jaxkit.numpy._ufuncs import remainder, where3
from jaxkit.typing import ArrayLike, DTypeLike

# --------------------------------------------------------------------------------------------

def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, out: None = None,
         mode: str | None = None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """``jnp.take``: elements of ``a`` at ``indices`` along ``axis`` (the flattened array by
    default). Out-of-bounds indices give ``fill_value`` (NaN for floats) unless ``mode`` is
    'clip' or 'wrap'."""
    return _take(a, indices, None if axis is None else operator.index(axis), out, mode,
                 unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                 fill_value=fill_value)


# A plain jit, as JAX's: traced, ``take`` stages one ``jit[name=_take]`` equation.
@jitted(static_argnames=("axis", "mode", "unique_indices", "indices_are_sorted", "fill_value"),
        inline=False)
def _take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, out: None = None,
          mode: str | None = None, unique_indices: bool = False,
          indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    a, indices = ensure_arraylike("take", a, indices)
    if axis is None:
        a = lax.reshape(a, (a.size,))
        axis_idx = 0
    else:
        axis_idx = canonicalize_axis(axis, a.ndim)
    size = a.shape[axis_idx]
    if mode is None or mode == "fill":
        gather_mode = lax.GatherScatterMode.FILL_OR_DROP
        # gather takes no negative indices: they count from the end, as in NumPy. Unsigned
        # indices go through the same (always false) test, so programs read as JAX's.
        indices = where3(indices < 0, indices + size, indices)
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.take is not supported.")
    elif mode == "wrap":
        indices = remainder(indices, np.asarray(size, indices.dtype)[()])
        gather_mode = lax.GatherScatterMode.PROMISE_IN_BOUNDS
    elif mode == "clip":
        gather_mode = lax.GatherScatterMode.CLIP
    else:
        raise ValueError(f"Invalid mode '{mode}' for np.take")
    slice_sizes = list(a.shape)
    if size == 0:
        if indices.size != 0:
            raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
        return a
    index_dims = indices.ndim
    if indices.size == 0:
        out_shape = slice_sizes[:axis_idx] + list(indices.shape) + slice_sizes[axis_idx + 1:]
        return lax.full_like(a, 0, shape=tuple(out_shape))
    slice_sizes[axis_idx] = 1
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(list(range(axis_idx)) +
                          list(range(axis_idx + index_dims, a.ndim + index_dims - 1))),
        collapsed_slice_dims=(axis_idx,), start_index_map=(axis_idx,))
    return lax.gather(a, lax.expand_dims(indices, (index_dims,)), dnums, tuple(slice_sizes),
                      mode=gather_mode, unique_indices=unique_indices,
                      indices_are_sorted=indices_are_sorted, fill_value=fill_value)


@jitted(static_argnames=("axis", "mode", "fill_value", "wrap_negative_indices"), inline=False)
def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None = -1,
                    mode: Any = None, fill_value: Any = None, *,
                    wrap_negative_indices: bool | None = None) -> Any:
    """``jnp.take_along_axis``: ``arr`` gathered along ``axis`` at ``indices`` (same rank,
    other axes broadcast). Negative indices count from the end if ``wrap_negative_indices``
    (by default: unless ``mode='promise_in_bounds'``, JAX's legacy default)."""
    a, indices = ensure_arraylike("take_along_axis", arr, indices)
    if not dtypes.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"take_along_axis indices must be of integer type, got "
                        f"{indices.dtype}")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError(f"take_along_axis indices must be 1D if axis=None, got shape "
                             f"{indices.shape}")
        a = lax.reshape(a, (a.size,))
        axis = 0
    rank = a.ndim
    if rank != indices.ndim:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{indices.ndim} vs. {a.ndim}")
    axis_int = canonicalize_axis(axis, rank)
    idx_shape = indices.shape
    arr_shape = tuple(1 if i == axis_int else d for i, d in enumerate(a.shape))
    out_shape = tuple(np.broadcast_shapes(idx_shape, arr_shape))
    axis_size = a.shape[axis_int]
    if axis_size == 0:
        return lax.full(out_shape, 0, a.dtype)
    if wrap_negative_indices is None:
        wrap_negative_indices = mode != "promise_in_bounds"
    if wrap_negative_indices:
        # As JAX: indices that may be wrapped are widened to an index type that holds
        # ``index + axis_size``; others keep their dtype.
        wide = np.int64 if axis_size > np.iinfo(np.int32).max else np.int32
        indices = _normalize(lax.convert_element_type(indices, wide), axis_size)
    index_dims = [i for i, d in enumerate(idx_shape) if i == axis_int or d != 1]
    gather_index_shape = tuple(np.array(out_shape)[index_dims]) + (1,)
    gather_indices = lax.reshape(broadcast_to_shape(
        indices, tuple(out_shape[i] if i in index_dims else 1 for i in range(rank))),
        gather_index_shape)
    slice_sizes, offset_dims, start_index_map, collapsed = [], [], [], []
    operand_batching, indices_batching, to_squeeze = [], [], []
    new_i = j = 0
    for i in range(rank):
        if i == axis_int:
            slice_sizes.append(1)
            start_index_map.append(new_i)
            collapsed.append(new_i)
            new_i += 1
            j += 1
        elif idx_shape[i] == 1:
            offset_dims.append(i)
            slice_sizes.append(arr_shape[i])
            new_i += 1
        elif arr_shape[i] == 1:
            to_squeeze.append(i)
            j += 1
        else:
            slice_sizes.append(1)
            operand_batching.append(new_i)
            indices_batching.append(j)
            new_i += 1
            j += 1
    if to_squeeze:
        a = lax.squeeze(a, to_squeeze)
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(offset_dims), collapsed_slice_dims=tuple(collapsed),
        start_index_map=tuple(start_index_map), operand_batching_dims=tuple(operand_batching),
        start_indices_batching_dims=tuple(indices_batching))
    return lax.gather(a, gather_indices, dnums, tuple(slice_sizes),
                      mode="fill" if mode is None else mode, fill_value=fill_value)


def _along_axis_index(shape: tuple[int, ...], indices: Any, axis: int) -> tuple:
    n = len(shape)
    out = []
    for i, d in enumerate(shape):
        if i == axis:
            out.append(indices)
        else:
            s = [1] * n
            s[i] = d
            out.append(asarray(np.arange(d, dtype=np.int32).reshape(s)))
    return tuple(out)


@jitted(static_argnames=("axis", "inplace", "mode"), inline=False)
def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None,
                   inplace: bool = True, *, mode: str | None = None) -> Any:
    """``jnp.put_along_axis`` (``inplace=False`` required): the updated copy of ``arr``."""
    if inplace:
        raise ValueError("jax.numpy.put_along_axis cannot modify arrays in-place, because JAX "
                         "arrays are immutable. Pass inplace=False to instead return an "
                         "updated array.")
    arr, indices, values = ensure_arraylike("put_along_axis", arr, indices, values)
    original_shape = arr.shape
    if axis is None:
        arr = lax.reshape(arr, (arr.size,))
        axis = 0
    if arr.ndim != indices.ndim:
        raise ValueError(f"put_along_axis arguments 'arr' and 'indices' must have same ndim. "
                         f"Got arr.ndim={arr.ndim} and indices.ndim={indices.ndim}.")
    values = broadcast_to_shape(values, indices.shape)
    idx = _along_axis_index(arr.shape, indices, canonicalize_axis(axis, arr.ndim))
    result = scatter_update(arr, idx, values, lax.scatter, False, False, mode)
    return lax.reshape(result, original_shape)


def unravel_index(indices: ArrayLike, shape: Any) -> tuple[Any, ...]:
    """``jnp.unravel_index``: flat indices as a tuple of coordinate arrays; out-of-bounds
    indices are clipped (JAX's behaviour, NumPy raises)."""
    indices_arr = ensure_arraylike("unravel_index", indices)
    try:
        shape = list(shape)
    except TypeError:
        shape = [shape]
    if any(np.ndim(s) != 0 for s in shape):
        raise ValueError("unravel_index: shape should be a scalar or 1D sequence.")
    out: list[Any] = [0] * len(shape)
    for i, s in reversed(list(enumerate(shape))):
        indices_arr, out[i] = _divmod(indices_arr, s)
    dt = indices_arr.dtype
    oob_pos = lax.gt(indices_arr, np.asarray(0, dt)[()])
    if dtypes.issubdtype(dt, np.unsignedinteger):
        return tuple(where3(oob_pos, s - 1, i) for s, i in zip(shape, out))
    oob_neg = lax.lt(indices_arr, np.asarray(-1, dt)[()])
    return tuple(where3(oob_pos, s - 1, where3(oob_neg, 0, i)) for s, i in zip(shape, out))


def ravel_multi_index(multi_index: Sequence[ArrayLike], dims: Sequence[int], mode: str = "raise",
                      order: str = "C", *, dtype: DTypeLike | None = None) -> Any:
    """``jnp.ravel_multi_index``: coordinate arrays to flat indices into an array of shape
    ``dims``, of integer ``dtype`` (by default the indices' promoted with int). ``mode``
    'raise' needs concrete indices; 'wrap', 'clip' and 'ignore' do not."""
    if len(multi_index) != len(dims):
        raise ValueError(f"len(multi_index)={len(multi_index)} != len(dims)={len(dims)}")
    dims = tuple(operator.index(core.concrete_or_error(
        d, "in `dims` argument of ravel_multi_index().")) for d in dims)
    arrs = [ensure_arraylike("ravel_multi_index", i) for i in multi_index]
    dtype = dtypes.result_type(int, *arrs) if dtype is None else \
        _user_dtype(dtype, "ravel_multi_index")
    if not dtypes.issubdtype(dtype, np.integer):
        raise ValueError(f"{dtype=} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dtype).max:
        raise ValueError(f"jnp.ravel_multi_index: {dtype=} not large enough to hold flattened "
                         f"index for {dims=}. Use the dtype argument to pass a suitable dtype "
                         "(e.g. dtype=np.min_scalar_type(prod(dims))).")
    for a in arrs:
        if not dtypes.issubdtype(a.dtype, np.integer):
            raise TypeError("only int indices permitted")
    if mode == "raise":
        for a, d in zip(arrs, dims):
            v = np.asarray(core.concrete_or_error(
                a, "The error occurred because ravel_multi_index was jit-compiled with "
                   "mode='raise'. Use mode='wrap' or mode='clip' instead."))
            if np.any((v < 0) | (v >= d)):
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        arrs = [_elementwise.clip(a, 0, d - 1) for a, d in zip(arrs, dims)]  # as JAX's
    elif mode == "wrap":
        arrs = [remainder(a, d) for a, d in zip(arrs, dims)]
    elif mode != "ignore":
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or "
                         "'ignore'.")
    if order == "F":
        strides = np.cumprod((1,) + dims[:-1])
    elif order == "C":
        strides = np.cumprod((1,) + dims[1:][::-1])[::-1]
    else:
        raise ValueError(f"invalid order={order!r}. Expected 'C' or 'F'")
    result: Any = np.asarray(0, dtype)[()]
    for a, s in zip(arrs, strides):
        result = _add(result, _mul(convert(a, dtype), int(s)))
    return asarray(result)
