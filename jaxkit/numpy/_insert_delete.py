"""``jnp.insert`` and ``jnp.delete``, with JAX's algorithms so that their jaxprs read as JAX's.

``insert`` works for traced indices too: the positions of the inserted values come from a
scatter-add of their ranks onto the sorted indices, the kept entries are the ``size=``
``where`` of the complement. ``delete`` of a static integer is two slices joined; of unique
(possibly traced) indices, a gather of the kept positions; of other indices or a mask, static
boolean indexing.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.runtime.array import Array
from jaxkit.numpy._creation import arange, array, asarray, full, ones, zeros_like
from jaxkit.numpy._elementwise import clip
from jaxkit.numpy._promotion import (
    broadcast_shapes,
    canonicalize_axis,
    check_arraylike,
    ensure_arraylike,
)
from jaxkit.numpy._shape import concatenate, moveaxis, ravel
from jaxkit.numpy._sorting import argsort, sort, where
from jaxkit.typing import ArrayLike


def delete(arr: ArrayLike, obj: Any, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Array:
    """``jnp.delete``: ``arr`` without the entries ``obj`` (an index, a slice, indices or a
    mask) along ``axis``; traced indices need ``assume_unique_indices=True``."""
    a = ensure_arraylike("delete", arr)
    if axis is None:
        a = a.ravel()
        axis = 0
    axis = canonicalize_axis(axis, a.ndim)
    # A static integer: the slices before and after it.
    try:
        obj = operator.index(obj)
        obj = canonicalize_axis(obj, a.shape[axis])
    except TypeError:
        pass
    else:
        idx = tuple(slice(None) for _ in range(axis))
        return concatenate([a[idx + (slice(0, obj),)], a[idx + (slice(obj + 1, None),)]],
                           axis=axis)
    # A static slice: its (unique) indices.
    if isinstance(obj, slice):
        obj = arange(a.shape[axis])[obj]
        assume_unique_indices = True
    check_arraylike("delete", a, obj)
    m = getattr(obj, "__jax_array__", None)
    if m is not None:
        obj = m()
    if dtypes.issubdtype(dtypes.dtype(obj), np.integer) and assume_unique_indices:
        # Unique indices, possibly traced: the i-th kept position is i plus the number of
        # deleted indices at or below it (counted against the sorted, shifted indices).
        obj_array = asarray(obj).ravel()
        obj_array = clip(where(obj_array < 0, obj_array + a.shape[axis], obj_array), 0,
                         a.shape[axis])
        obj_array = sort(obj_array)
        obj_array -= arange(len(obj_array), dtype=obj_array.dtype)
        i = arange(a.shape[axis] - obj_array.size, dtype=obj_array.dtype)
        i += (i[None, :] >= obj_array[:, None]).sum(0, dtype=i.dtype)
        return a[(slice(None),) * axis + (i,)]
    # Other indices (duplicates allowed) or a mask: static.
    obj_array = np.asarray(core.concrete_or_error(obj, "'obj' array argument of jnp.delete()"))
    if dtypes.issubdtype(obj_array.dtype, np.integer):
        mask = np.ones(a.shape[axis], dtype=bool)
        mask[obj_array] = False
    elif obj_array.dtype == bool:
        if obj_array.shape != (a.shape[axis],):
            raise ValueError("np.delete(arr, obj): for boolean indices, obj must be "
                             "one-dimensional with length matching specified axis.")
        mask = ~obj_array
    else:
        raise ValueError(f"np.delete(arr, obj): got obj.dtype={obj_array.dtype}; must be integer "
                         "or bool.")
    return a[tuple(slice(None) for _ in range(axis)) + (mask,)]


def insert(arr: ArrayLike, obj: Any, values: ArrayLike, axis: int | None = None) -> Array:
    """``jnp.insert``: ``values`` inserted before the indices ``obj`` (static or traced)
    along ``axis``."""
    a, _, values_arr = ensure_arraylike("insert", arr, 0 if isinstance(obj, slice) else obj,
                                        values)
    if axis is None:
        a = ravel(a)
        axis = 0
    axis = core.concrete_or_error(axis, "axis argument of jnp.insert()")
    axis = canonicalize_axis(axis, a.ndim)
    indices = arange(*obj.indices(a.shape[axis])) if isinstance(obj, slice) else asarray(obj)
    if indices.ndim > 1:
        raise ValueError("jnp.insert(): obj must be a slice, a one-dimensional array, or a "
                         f"scalar; got {obj}")
    if not np.issubdtype(indices.dtype, np.integer):
        if indices.size == 0 and not isinstance(obj, (Array, core.Tracer)):
            indices = indices.astype(int)
        else:
            raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}")
    values_arr = array(values_arr, ndmin=a.ndim, dtype=a.dtype, copy=False)
    if indices.size == 1:
        index = ravel(indices)[0]
        if indices.ndim == 0:
            values_arr = moveaxis(values_arr, 0, axis)
        indices = full(values_arr.shape[axis], index)
    n_input = a.shape[axis]
    n_insert = broadcast_shapes(indices.shape, (values_arr.shape[axis],))[0]
    out_shape = list(a.shape)
    out_shape[axis] += n_insert
    out = zeros_like(a, shape=tuple(out_shape))
    indices = where(indices < 0, indices + n_input, indices)
    indices = clip(indices, 0, n_input)
    # Each value lands at its index plus its rank among the inserted values; the input fills
    # the remaining positions in order.
    values_ind = indices.at[argsort(indices)].add(arange(n_insert, dtype=indices.dtype))
    arr_mask = ones(n_input + n_insert, dtype=bool).at[values_ind].set(False)
    arr_ind = where(arr_mask, size=n_input)[0]
    out = out.at[(slice(None),) * axis + (values_ind,)].set(values_arr)
    return out.at[(slice(None),) * axis + (arr_ind,)].set(a)
