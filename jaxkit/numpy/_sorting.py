"""Sorting and searching: ``sort``, ``argsort`` (stable), ``lexsort``, ``partition``,
``argpartition``, ``searchsorted``, ``digitize``, ``nonzero``/``flatnonzero``/``argwhere``,
``where`` (one and three arguments), ``extract``, ``compress``, ``bincount``.

Functions whose output size depends on the data (``nonzero``, one-argument ``where``,
``argwhere``, ``extract`` ...) need a static ``size=`` under ``jit``, as in JAX.
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.avals import ShardingTypeError
from jaxkit.lax.sharding_rules import resolve_out_sharding
from jaxkit.lax.sorting import sort_le_comparator, sort_lt_comparator
from jaxkit.numpy._jitted import jitted
from jaxkit.runtime.array import Array
from jaxkit.transforms.vmap import vmap
from jaxkit.numpy._creation import _user_dtype, arange, array, asarray, zeros
from jaxkit.numpy._elementwise import clip
from jaxkit.numpy._index_update import scatter_update
from jaxkit.numpy._indexing import getitem
from jaxkit.numpy._promotion import (
    canonicalize_axis,
    check_arraylike,
    ensure_arraylike,
    promote_dtypes,
)
from jaxkit.numpy._reductions import any as _any
from jaxkit.numpy._reductions import cumsum
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._shape import (atleast_1d, expand_dims, moveaxis, ravel, transpose,
                                 vstack)
from jaxkit.numpy._ufuncs import floor_divide, remainder, where3
from jaxkit.typing import ArrayLike, DTypeLike


def _int_dtype() -> np.dtype:
    return dtypes.default_int_dtype()


@jitted(static_argnames=("axis", "kind", "order", "stable", "descending"), inline=False)
def sort(a: ArrayLike, axis: int | None = -1, *, kind: Any = None, order: None = None,
         stable: bool = True, descending: bool = False) -> Array:
    """``jnp.sort``: sorted copy of ``a`` along ``axis`` (NaNs last)."""
    arr = ensure_arraylike("sort", a)
    if order is not None:
        raise ValueError("'order' argument to sort is not supported.")
    if axis is None:
        arr = ravel(arr)
        axis = 0
    dimension = canonicalize_axis(axis, arr.ndim)
    result = lax.sort(arr, dimension=dimension, is_stable=stable)
    return lax.rev(result, (dimension,)) if descending else result


@jitted(static_argnames=("axis", "kind", "order", "stable", "descending", "dtype"),
        inline=False)
def argsort(a: ArrayLike, axis: int | None = -1, *, kind: None = None, order: None = None,
            stable: bool = True, descending: bool = False,
            dtype: DTypeLike | None = None) -> Array:
    """``jnp.argsort``: the indices that sort ``a`` along ``axis`` (stable by default), of
    ``dtype`` if given (any integer or floating dtype, as JAX's), else the default int."""
    arr = ensure_arraylike("argsort", a)
    if kind is not None:
        raise TypeError("'kind' argument to argsort is not supported. Use stable=True or "
                        "stable=False to specify sort stability.")
    if order is not None:
        raise TypeError("'order' argument to argsort is not supported.")
    if axis is None:
        arr = ravel(arr)
        axis = 0
    dimension = canonicalize_axis(axis, arr.ndim)
    # JAX sizes the default by the axis length: int64 beyond int32's range, else the default.
    default = np.dtype(np.int64) if arr.shape[dimension] > np.iinfo(np.int32).max \
        else _int_dtype()
    idx_dtype = default if dtype is None else _user_dtype(dtype, "argsort")
    iota = lax.broadcasted_iota(idx_dtype, arr.shape, dimension,
                                out_sharding=core.get_aval(arr)._sharding)
    # A stable descending sort: reverse, sort ascending, reverse back (ties keep their order).
    if descending and stable:
        arr = lax.rev(arr, (dimension,))
        iota = lax.rev(iota, (dimension,))
    _, indices = lax.sort_key_val(arr, iota, dimension=dimension, is_stable=stable)
    return lax.rev(indices, (dimension,)) if descending else indices


@jitted(inline=False)
def sort_complex(a: ArrayLike) -> Array:
    """``jnp.sort_complex``: sort by real part, then imaginary part, as complex."""
    a = ensure_arraylike("sort_complex", a)
    a = lax.sort(a)
    return lax.convert_element_type(a, dtypes.to_complex_dtype(a.dtype))


@jitted(static_argnames=("axis",), inline=False, pytree_args=True)
def lexsort(keys: Sequence[ArrayLike], axis: int = -1) -> Array:
    """``jnp.lexsort``: indices sorting by the last key, then the one before, ..."""
    # An array of keys is iterated over its rows, as JAX's.
    key_tuple = tuple(keys)
    check_arraylike("lexsort", *key_tuple)
    key_arrays = tuple(asarray(k) for k in key_tuple)
    if len(key_arrays) == 0:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if len({np.shape(key) for key in key_arrays}) > 1:
        raise ValueError("all keys need to be the same shape")
    if np.ndim(key_arrays[0]) == 0:
        return lax.full((), 0, dtypes.default_int_dtype())
    axis = canonicalize_axis(axis, np.ndim(key_arrays[0]))
    # The default int (int64 with x64) unless the axis is too long for int32.
    idx_dtype = np.dtype(np.int64) if key_arrays[0].shape[axis] > np.iinfo(np.int32).max \
        else dtypes.default_int_dtype()
    iota = lax.broadcasted_iota(idx_dtype, np.shape(key_arrays[0]), axis)
    return lax.sort((*key_arrays[::-1], iota), dimension=axis,
                    num_keys=len(key_arrays))[-1]


@jitted(static_argnames=("kth", "axis"), inline=False)
def partition(a: ArrayLike, kth: int, axis: int = -1) -> Array:
    """``jnp.partition``: the ``kth`` smallest element at position ``kth``, smaller ones
    (ascending) before it, larger ones (descending, as JAX's ``top_k``) after it."""
    arr = ensure_arraylike("partition", a)
    if dtypes.issubdtype(arr.dtype, np.complexfloating):
        raise NotImplementedError("jnp.partition for complex dtype is not implemented.")
    axis = canonicalize_axis(axis, arr.ndim)
    kth = canonicalize_axis(kth, arr.shape[axis])
    arr = arr.swapaxes(axis, -1)
    # JAX's two top_k: the kth + 1 smallest (largest of the negation) and the rest.
    if dtypes.issubdtype(arr.dtype, np.unsignedinteger):
        # Shifted by one so that 0 negates to a value below every other (unsigned wrap).
        bottom = -lax.top_k(-(arr + 1), kth + 1)[0] - 1
    else:
        bottom = -lax.top_k(-arr, kth + 1)[0]
    top = lax.top_k(arr, arr.shape[-1] - kth - 1)[0]
    out = lax.concatenate([bottom, top], arr.ndim - 1)
    return out.swapaxes(-1, axis)


@jitted(static_argnames=("kth", "axis"), inline=False)
def argpartition(a: ArrayLike, kth: int, axis: int = -1) -> Array:
    """``jnp.argpartition``: indices that partition ``a`` (the ``kth + 1`` smallest first, in
    ascending order, then the others in index order, as JAX)."""
    arr = ensure_arraylike("partition", a)
    if dtypes.issubdtype(arr.dtype, np.complexfloating):
        raise NotImplementedError("jnp.argpartition for complex dtype is not implemented.")
    axis = canonicalize_axis(axis, arr.ndim)
    kth = canonicalize_axis(kth, arr.shape[axis])
    arr = arr.swapaxes(axis, -1)
    if dtypes.issubdtype(arr.dtype, np.unsignedinteger):
        bottom_ind = lax.top_k(-(arr + 1), kth + 1)[1]
    else:
        bottom_ind = lax.top_k(-arr, kth + 1)[1]
    # The other indices, in index order even with ties: top_k of a proxy that is 0 at the
    # bottom indices and 1 elsewhere.
    def set_to_zero(p, i):
        return p.at[i].set(0)
    for _ in range(arr.ndim - 1):
        set_to_zero = vmap(set_to_zero)
    proxy = set_to_zero(lax.full(arr.shape, 1.0), bottom_ind)
    top_ind = lax.top_k(proxy, arr.shape[-1] - kth - 1)[1]
    out = lax.concatenate([bottom_ind, top_ind], arr.ndim - 1)
    return out.swapaxes(-1, axis)


# --------------------------------------------------------------------------------------------
# searchsorted / digitize
# --------------------------------------------------------------------------------------------

@jitted(static_argnames=("side", "method"), inline=False)
def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike | None = None,
                 *, method: str = "scan") -> Array:
    """``jnp.searchsorted``: where to insert ``v`` into the sorted 1-D ``a`` to keep it sorted.
    ``method`` picks JAX's algorithm: ``'scan'`` (a binary search in a ``scan``),
    ``'scan_unrolled'``, ``'sort'`` (ranks in a co-sort) or ``'compare_all'``."""
    if sorter is None:
        a, v = ensure_arraylike("searchsorted", a, v)
    else:
        a, v, sorter = ensure_arraylike("searchsorted", a, v, sorter)
    if a.ndim != 1:
        raise ValueError("a should be 1-dimensional")
    a, v = promote_dtypes(a, v)
    if sorter is not None:
        a = getitem(a, sorter)
    if side not in ("left", "right"):
        raise ValueError(f"invalid argument side={side!r}, expected 'left' or 'right'")
    impls = {"scan": functools.partial(_searchsorted_scan_impl, unrolled=False),
             "scan_unrolled": functools.partial(_searchsorted_scan_impl, unrolled=True),
             "compare_all": _searchsorted_compare_all_impl,
             "sort": _searchsorted_sort_impl}
    if method not in impls:
        raise ValueError(f"invalid argument {method=}, expected one of {sorted(impls)}")
    # int32 whatever the x64 setting, as JAX (int64 only for arrays too long for int32).
    dtype = np.dtype(np.int64 if a.shape[0] > np.iinfo(np.int32).max else np.int32)
    return impls[method](a, v, side=side, dtype=dtypes.canonicalize_dtype(dtype))


@jitted(static_argnames=("side", "dtype", "unrolled"), inline=False)
def _searchsorted_scan_impl(sorted_arr: Array, query: Array, side: str, dtype: np.dtype,
                            unrolled: bool) -> Array:
    """A binary search of each query, written for a scalar query and vmapped over the
    query's axes one at a time (as JAX's, so each axis stages one nested ``jit``)."""
    n, = sorted_arr.shape
    if n == 0:
        return lax.full(query.shape, 0, dtype)
    if query.ndim > 0:
        return vmap(functools.partial(_searchsorted_scan_impl, side=side, dtype=dtype,
                                      unrolled=unrolled),
                    in_axes=(None, 0))(sorted_arr, query)
    go_left_op = sort_le_comparator if side == "left" else sort_lt_comparator
    # Unsigned bounds, so that ``low + (high - low) // 2`` cannot overflow.
    unsigned = np.uint64 if np.dtype(dtype).itemsize == 8 else np.uint32

    def step(state, _):
        low, high = state
        mid = low + (high - low) // 2
        go_left = go_left_op(query, getitem(sorted_arr, mid))
        return (lax.select(go_left, low, mid), lax.select(go_left, mid, high)), ()

    levels = int(np.ceil(np.log2(n + 1)))
    (_, high), _ = lax.scan(step, (unsigned(0), unsigned(n)), (), length=levels,
                            unroll=levels if unrolled else 1)
    return high.astype(dtype)


@jitted(static_argnames=("side", "dtype"), inline=False)
def _searchsorted_sort_impl(sorted_arr: Array, query: Array, side: str,
                            dtype: np.dtype) -> Array:
    """Each query's rank among the sorted array and the queries together, less its rank
    among the queries alone (a stable co-sort puts ties on the ``side`` asked for)."""
    working = np.int32 if sorted_arr.size + query.size <= np.iinfo(np.int32).max else np.int64

    def rank(x):
        idx = lax.iota(working, len(x))
        return lax.full_like(idx, 0).at[lax.sort_key_val(x, idx)[1]].set(idx)

    if side == "left":
        index = rank(lax.concatenate([query.ravel(), sorted_arr], 0))[:query.size]
    else:
        index = rank(lax.concatenate([sorted_arr, query.ravel()], 0))[sorted_arr.size:]
    return lax.reshape(lax.sub(index, rank(query.ravel())), np.shape(query)).astype(dtype)


@jitted(static_argnames=("side", "dtype"), inline=False)
def _searchsorted_compare_all_impl(sorted_arr: Array, query: Array, side: str,
                                   dtype: np.dtype) -> Array:
    """The number of elements of the sorted array before each query: every pair compared."""
    op = sort_lt_comparator if side == "left" else sort_le_comparator
    return vmap(op, in_axes=(0, None))(sorted_arr, query).sum(dtype=dtype, axis=0)


@jitted(static_argnames=("right", "method"), inline=False)
def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *,
             method: str | None = None) -> Array:
    """``jnp.digitize``: the index of the bin each ``x`` falls in."""
    x, bins_arr = ensure_arraylike("digitize", x, bins)
    right = core.concrete_or_error(right, "right argument of jnp.digitize()")
    if bins_arr.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    # int32 like searchsorted's indices, with or without x64 (as JAX).
    if bins_arr.shape[0] == 0:
        return lax.full(x.shape, 0, np.int32)
    side = "right" if not right else "left"
    kw = {} if method is None else {"method": method}
    increasing = lax.ge(getitem(bins_arr, -1), getitem(bins_arr, 0))
    up = searchsorted(bins_arr, x, side=side, **kw)
    down = lax.sub(np.asarray(bins_arr.shape[0], np.int32)[()],
                   searchsorted(lax.rev(bins_arr, (0,)), x, side=side, **kw))
    return where3(increasing, up, down)


# --------------------------------------------------------------------------------------------
# nonzero and friends
# --------------------------------------------------------------------------------------------

_SIZE_HINT = ("The size argument of jnp.nonzero must be statically specified to use "
              "jnp.nonzero within JAX transformations.")


def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0, *,
             length: int | None = None, out_sharding: Any = None) -> Array:
    """``jnp.bincount``: the number of occurrences (or summed weights) of each value of the
    non-negative integer array ``x``; ``length`` must be static under ``jit``.
    ``out_sharding`` may only be replicated (or unreduced over every mesh axis), as JAX's."""
    x = ensure_arraylike("bincount", x)
    if x.dtype == np.bool_:
        x = lax.convert_element_type(x, np.int32)
    if not dtypes.issubdtype(x.dtype, np.integer):
        raise TypeError(f"x argument to bincount must have an integer type; got {x.dtype}")
    if x.ndim != 1:
        raise ValueError("only 1-dimensional input supported.")
    minlength = operator.index(core.concrete_or_error(
        minlength, "The error occurred because of argument 'minlength' of jnp.bincount."))
    if length is None:
        core.concrete_or_error(x, "The error occurred because of argument 'x' of "
                                  "jnp.bincount. To avoid this error, pass a static `length` "
                                  "argument.")
        x_np = np.asarray(x)
        length = max(minlength, x_np.size and int(max(0, x_np.max())) + 1)
    else:
        length = operator.index(core.concrete_or_error(
            length, "The error occurred because of argument 'length' of jnp.bincount."))
    if weights is None:
        weights = np.asarray(1, _int_dtype())
    else:
        weights = ensure_arraylike("bincount", weights)
        if weights.shape != x.shape:
            raise ValueError("shape of weights must match shape of x.")
    sharding = resolve_out_sharding("jnp.bincount", out_sharding)
    if sharding is not None and not _replicated_or_unreduced(sharding):
        raise ShardingTypeError("out_sharding passed to `jnp.bincount` can only be fully "
                                "replicated or fully unreduced along all mesh axes")
    # JAX's ``zeros(length).at[clip(x, 0)].add(weights, mode='drop')``, in that order.
    out = zeros(length, dtypes.dtype(weights))
    return scatter_update(out, clip(x, 0), weights, lax.scatter_add, False, False, "drop",
                          out_sharding=sharding)


def _replicated_or_unreduced(s: Any) -> bool:
    split = any(axes for axes in s.spec._normalized(0))
    return not split and (not s.spec.unreduced or
                          set(s.spec.unreduced) == set(s.mesh.axis_names))


def nonzero(a: ArrayLike, *, size: int | None = None,
            fill_value: ArrayLike | tuple | None = None) -> tuple[Array, ...]:
    """``jnp.nonzero``: the indices of the nonzero elements, one array per axis; with
    ``size``, exactly ``size`` of them (padded with ``fill_value``, default 0)."""
    arr = ensure_arraylike("nonzero", a)
    if arr.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "jnp.atleast_1d(scalar).nonzero() instead.")
    mask = arr if arr.dtype == np.bool_ else (arr != 0)
    if size is None:
        core.concrete_or_error(mask, _SIZE_HINT)
        size = int(np.count_nonzero(np.asarray(mask)))
    size = operator.index(core.concrete_or_error(size, _SIZE_HINT))
    if arr.size == 0 or size == 0:
        return tuple(zeros(size, int) for _ in arr.shape)
    # JAX's algorithm, so jaxprs match: position j of the output holds the flat index of the
    # (j+1)-th true element, the number of running counts <= j (a bincount of the running
    # count of trues, cumulated); each axis' index is that flat index // stride % dim.
    flat_indices = cumsum(bincount(cumsum(mask), length=size))
    strides = (np.cumprod(arr.shape[::-1])[::-1] // arr.shape).astype(flat_indices.dtype)
    out = tuple(remainder(floor_divide(flat_indices, stride), dim)
                for stride, dim in zip(strides, arr.shape))
    if fill_value is not None:
        fill_tup = fill_value if isinstance(fill_value, tuple) else arr.ndim * (fill_value,)
        if any(np.shape(val) != () for val in fill_tup):
            raise ValueError(f"fill_value must be a scalar or a tuple of length {arr.ndim}; got "
                             f"{fill_value}")
        fill_mask = arange(size) >= _sum(mask)
        out = tuple(where3(fill_mask, fv, entry) for fv, entry in zip(fill_tup, out))
    return out


def flatnonzero(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None
                ) -> Array:
    """``jnp.flatnonzero``: indices of the nonzero elements of the flattened ``a``."""
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None
             ) -> Array:
    """``jnp.argwhere``: the indices of the nonzero elements as rows of a 2-D array."""
    a = ensure_arraylike("argwhere", a)
    result = transpose(vstack(nonzero(atleast_1d(a), size=size, fill_value=fill_value)))
    if a.ndim == 0:
        return result[:0].reshape(result.shape[0], 0)
    return result.reshape(result.shape[0], a.ndim)


def where(condition: ArrayLike, x: ArrayLike | None = None, y: ArrayLike | None = None, /, *,
          size: int | None = None, fill_value: Any = None) -> Any:
    """``jnp.where``: with three arguments, ``x`` where ``condition`` else ``y``; with one,
    ``nonzero(condition, size=size, fill_value=fill_value)``."""
    if x is None and y is None:
        return nonzero(ensure_arraylike("where", condition), size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("Either both or neither of the x and y arguments should be provided "
                         f"to jax.numpy.where, got {x} and {y}.")
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term where "
                         "function.")
    return where3(condition, x, y)


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None,
            fill_value: ArrayLike = 0) -> Array:
    """``jnp.extract``: the elements of ``ravel(arr)`` where ``ravel(condition)`` is true."""
    condition, arr = ensure_arraylike("extract", condition, arr)
    if condition.shape != arr.shape:
        raise ValueError(f"condition.shape={condition.shape} must match arr.shape={arr.shape}")
    return compress(ravel(condition), ravel(arr), size=size, fill_value=fill_value)


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *,
             size: int | None = None, fill_value: ArrayLike = 0, out: None = None) -> Array:
    """``jnp.compress``: the slices of ``a`` along ``axis`` where ``condition`` is true."""
    condition_arr, arr, fill_value = ensure_arraylike("compress", condition, a, fill_value)
    condition_arr = condition_arr.astype(bool)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    if condition_arr.ndim != 1:
        raise ValueError("condition must be a 1D array")
    if axis is None:
        axis = 0
        arr = ravel(arr)
    else:
        arr = moveaxis(arr, axis, 0)
    condition_arr, extra = condition_arr[:arr.shape[0]], condition_arr[arr.shape[0]:]
    arr = arr[:condition_arr.shape[0]]
    if size is None:
        if _any(extra):
            raise ValueError("condition contains entries that are out of bounds")
        result = arr[condition_arr]
    elif not 0 <= size <= arr.shape[0]:
        raise ValueError("size must be positive and not greater than the size of the array "
                         f"axis; got {size=} for a.shape[axis]={arr.shape[0]}")
    else:
        # As JAX's: fill the dropped slices, then move the kept ones (stably) to the front.
        mask = expand_dims(condition_arr, range(1, arr.ndim))
        arr = where3(mask, arr, array(fill_value, dtype=arr.dtype))
        result = arr[argsort(condition_arr, stable=True, descending=True)][:size]
    return moveaxis(result, 0, axis)
