"""Set operations: ``unique`` (and ``unique_all``/``_counts``/``_inverse``/``_values``),
``union1d``, ``intersect1d``, ``setdiff1d``, ``setxor1d``, ``isin``, ``in1d``.

The number of unique values depends on the data, so under ``jit`` these need ``size=`` (the
output is then truncated or padded with ``fill_value``), as in JAX.
"""
from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy._creation import asarray, full, full_like, zeros
from jaxkit.numpy._indexing import getitem, scatter_update
from jaxkit.numpy._promotion import (
    canonicalize_axis,
    check_arraylike,
    convert,
    ensure_arraylike,
    promote_dtypes,
)
from jaxkit.numpy._reductions import any as _any
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._shape import concatenate, moveaxis, ravel, reshape
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._sorting import argsort, lexsort, nonzero, searchsorted, sort
from jaxkit.numpy._ufuncs import where3
from jaxkit.typing import Array, ArrayLike

_UNIQUE_SIZE_HINT = (
    "When jit-compiling jnp.unique or related functions, the size argument must be specified "
    "statically (as an integer) so that the output has a static shape.")


def _int_dtype() -> np.dtype:
    return dtypes.default_int_dtype()


def _neq(x: Array, y: Array, equal_nan: bool) -> Array:
    if dtypes.issubdtype(x.dtype, np.inexact) and equal_nan:
        both_nan = lax.bitwise_and(lax.ne(x, x), lax.ne(y, y))
        return lax.bitwise_and(lax.ne(x, y), lax.bitwise_not(both_nan))
    return lax.ne(x, y)


def _unique_sorted_mask(ar: Array, axis: int, equal_nan: bool) -> tuple[Array, Array, Array]:
    aux = moveaxis(ar, axis, 0)
    size, *rest = aux.shape
    inner = math.prod(rest)
    if inner == 0:
        size = 1
        perm = zeros(1, dtype=_int_dtype())
    else:
        flat = lax.reshape(aux, (size, inner))
        perm = lexsort([getitem(flat, (slice(None), j)) for j in range(inner - 1, -1, -1)])
    aux = getitem(aux, perm)
    if aux.size:
        diff = _neq(lax.slice_in_dim(aux, 1, size, axis=0),
                    lax.slice_in_dim(aux, 0, size - 1, axis=0), equal_nan)
        if diff.ndim > 1:
            diff = _any(diff, axis=tuple(range(1, diff.ndim)))
        mask = lax.concatenate([lax.full((1,), True, np.bool_), diff], 0)
    else:
        mask = zeros(size, dtype=bool)
    return aux, mask, perm


def _unique(ar: Array, axis: int, return_index: bool = False, return_inverse: bool = False,
            return_counts: bool = False, equal_nan: bool = True, size: int | None = None,
            fill_value: Any = None) -> Any:
    if ar.shape[axis] == 0 and size and fill_value is None:
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    aux, mask, perm = _unique_sorted_mask(ar, axis, equal_nan)
    if size is None:
        core.concrete_or_error(mask, "The error arose in jnp.unique(). " + _UNIQUE_SIZE_HINT)
        ind = asarray(np.nonzero(np.asarray(mask))[0].astype(_int_dtype()))
    else:
        ind = nonzero(mask, size=size)[0]
    result = getitem(aux, ind) if aux.size else aux
    if fill_value is not None:
        fill_value = convert(fill_value, result.dtype)
    if size is not None and fill_value is not None:
        if result.shape[0]:
            n_unique = _sum(mask, dtype=_int_dtype())
            valid = lax.lt(lax.iota(_int_dtype(), size), n_unique)
            valid = lax.broadcast_in_dim(valid, result.shape, (0,))
            result = where3(valid, result, fill_value)
        else:
            result = full_like(result, fill_value, shape=(size, *result.shape[1:]))
    result = moveaxis(result, 0, axis)
    ret: tuple = (result,)
    if return_index:
        ret += (getitem(perm, ind) if aux.size else perm,)
    if return_inverse:
        if aux.size:
            imask = lax.sub(lax.cumsum(lax.convert_element_type(mask, _int_dtype()), axis=0),
                            np.asarray(1, _int_dtype())[()])
            n = mask.shape[0] if ar.ndim == 1 else ar.shape[axis]
            inv = scatter_update(zeros(n, dtype=_int_dtype()), perm, imask, lax.scatter,
                                 False, True)
        else:
            inv = zeros(ar.shape[axis], dtype=_int_dtype())
        ret += (inv,)
    if return_counts:
        if aux.size:
            if size is None:
                idx = concatenate([ind, asarray(np.asarray([mask.size], _int_dtype()))])
            else:
                idx = nonzero(mask, size=size + 1)[0]
                tail = lax.slice(idx, (1,), (size + 1,))
                tail = where3(lax.ne(tail, np.asarray(0, tail.dtype)[()]), tail,
                              np.asarray(mask.size, tail.dtype)[()])
                idx = lax.concatenate([lax.slice(idx, (0,), (1,)), tail], 0)
            ret += (lax.sub(lax.slice(idx, (1,), (idx.shape[0],)),
                            lax.slice(idx, (0,), (idx.shape[0] - 1,))),)
        elif ar.shape[axis]:
            ret += (asarray(np.asarray([ar.shape[axis]], _int_dtype())),)
        else:
            ret += (zeros(0, dtype=_int_dtype()),)
    return ret[0] if len(ret) == 1 else ret


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value: ArrayLike | None = None,
           sorted: bool = True) -> Any:
    """``jnp.unique``: the sorted unique values (optionally with first indices, inverse and
    counts); ``size`` is required under ``jit``."""
    arr = ensure_arraylike("unique", ar)
    if size is None:
        core.concrete_or_error(arr, "The error arose for the first argument of jnp.unique(). " +
                               _UNIQUE_SIZE_HINT)
    else:
        size = operator.index(core.concrete_or_error(
            size, "The error arose for the size argument of jnp.unique(). " +
            _UNIQUE_SIZE_HINT))
    arr_shape = arr.shape
    if axis is None:
        axis_int = 0
        arr = ravel(arr)
    else:
        axis_int = canonicalize_axis(axis, arr.ndim)
    result = _unique(arr, axis_int, return_index, return_inverse, return_counts,
                     equal_nan=equal_nan, size=size, fill_value=fill_value)
    if return_inverse and axis is None:
        idx = 2 if return_index else 1
        result = (*result[:idx], reshape(result[idx], arr_shape), *result[idx + 1:])
    return result


class _UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class _UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class _UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


def unique_all(x: ArrayLike, /, *, size: int | None = None,
               fill_value: ArrayLike | None = None) -> _UniqueAllResult:
    """``jnp.unique_all``: values, first indices, inverse indices and counts."""
    values, indices, inverse, counts = unique(x, return_index=True, return_inverse=True,
                                              return_counts=True, equal_nan=False, size=size,
                                              fill_value=fill_value)
    return _UniqueAllResult(values, indices, inverse, counts)


def unique_counts(x: ArrayLike, /, *, size: int | None = None,
                  fill_value: ArrayLike | None = None) -> _UniqueCountsResult:
    """``jnp.unique_counts``: values and counts."""
    values, counts = unique(x, return_counts=True, equal_nan=False, size=size,
                            fill_value=fill_value)
    return _UniqueCountsResult(values, counts)


def unique_inverse(x: ArrayLike, /, *, size: int | None = None,
                   fill_value: ArrayLike | None = None) -> _UniqueInverseResult:
    """``jnp.unique_inverse``: values and inverse indices."""
    values, inverse = unique(x, return_inverse=True, equal_nan=False, size=size,
                             fill_value=fill_value)
    return _UniqueInverseResult(values, inverse)


def unique_values(x: ArrayLike, /, *, size: int | None = None,
                  fill_value: ArrayLike | None = None) -> Array:
    """``jnp.unique_values``: the sorted unique values."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


@jitted(static_argnames=("assume_unique", "invert", "method"), inline=False)
def _in1d(ar1: ArrayLike, ar2: ArrayLike, invert: bool, *, method: str = "auto",
          assume_unique: bool = False) -> Array:
    # A plain jit, as JAX's, with JAX's three methods: compare every pair ("auto",
    # "compare_all"), binary search in the sorted ``ar2``, or one sort of both arrays.
    ar1, ar2 = ensure_arraylike("in1d", ar1, ar2)
    arr1, arr2 = promote_dtypes(ar1, ar2)
    arr1, arr2 = arr1.ravel(), arr2.ravel()
    if arr1.size == 0 or arr2.size == 0:
        return full(arr1.shape, invert, dtype=bool)
    if method in ("auto", "compare_all"):
        if invert:
            return (arr1[:, None] != arr2[None, :]).all(-1)
        return (arr1[:, None] == arr2[None, :]).any(-1)
    if method == "binary_search":
        arr2 = lax.sort(arr2)
        ind = searchsorted(arr2, arr1)
        return arr1 != arr2[ind] if invert else arr1 == arr2[ind]
    if method == "sort":
        if assume_unique:
            ind_out: Any = slice(None)
        else:
            arr1, ind_out = unique(arr1, size=len(arr1), return_inverse=True,
                                   fill_value=arr2.max())
        aux, ind = lax.sort_key_val(concatenate([arr1, arr2]),
                                    lax.iota(dtypes.default_int_dtype(), arr1.size + arr2.size))
        if invert:
            hits = full(arr1.shape, True, dtype=bool).at[ind[:-1]].set(
                aux[1:] != aux[:-1], mode="drop")
        else:
            hits = full(arr1.shape, False, dtype=bool).at[ind[:-1]].set(
                aux[1:] == aux[:-1], mode="drop")
        return hits[ind_out]
    raise ValueError(f"{method=} is not implemented; options are 'compare_all', "
                     "'binary_search', 'sort', and 'auto'")


def in1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Array:
    """``jnp.in1d``: whether each element of ``ravel(ar1)`` is in ``ar2``."""
    return _in1d(ar1, ar2, invert=invert, method=method, assume_unique=assume_unique)


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False,
         invert: bool = False, *, method: str = "auto") -> Array:
    """``jnp.isin``: whether each element of ``element`` is in ``test_elements``."""
    element, test_elements = ensure_arraylike("isin", element, test_elements)
    result = _in1d(element, test_elements, invert=invert, method=method,
                   assume_unique=assume_unique)
    return result.reshape(np.shape(element))


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None,
            fill_value: ArrayLike | None = None) -> Array:
    """``jnp.union1d``: the sorted unique values of both arrays."""
    arr1, arr2 = ensure_arraylike("union1d", ar1, ar2)
    if size is None:
        core.concrete_or_error(arr1, "The error arose in union1d()")
        core.concrete_or_error(arr2, "The error arose in union1d()")
    return unique(concatenate((arr1, arr2), axis=None), size=size, fill_value=fill_value)


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
              size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """``jnp.setdiff1d``: the sorted unique values of ``ar1`` that are not in ``ar2``."""
    arr1, arr2 = ensure_arraylike("setdiff1d", ar1, ar2)
    if size is None:
        core.concrete_or_error(arr1, "The error arose in setdiff1d()")
    else:
        size = operator.index(core.concrete_or_error(size, "The error arose in setdiff1d()"))
    fill = convert(0 if fill_value is None else fill_value, arr1.dtype)
    if arr1.size == 0:
        return full_like(arr1, fill, shape=(size or 0,))
    if not assume_unique:
        arr1 = unique(arr1, size=size and arr1.size)
    mask = _in1d(arr1, arr2, invert=True)
    if size is None:
        return getitem(arr1, np.asarray(mask))
    if not assume_unique:
        # Entries past the true unique count are unique()'s padding: exclude them.
        first = getitem(arr1, 0)
        n_unique = lax.sub(np.asarray(arr1.size + 1, _int_dtype())[()],
                           _sum(lax.eq(arr1, first), dtype=_int_dtype()))
        mask = lax.bitwise_and(mask, lax.lt(lax.iota(_int_dtype(), arr1.size), n_unique))
    idx = nonzero(mask, size=size)[0]
    valid = lax.lt(lax.iota(_int_dtype(), size), _sum(mask, dtype=_int_dtype()))
    return where3(valid, getitem(arr1, idx), fill)


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
             size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """``jnp.setxor1d``: the sorted values in exactly one of the arrays."""
    check_arraylike("setxor1d", ar1, ar2)
    a1, a2 = ravel(ar1), ravel(ar2)
    if not assume_unique:
        a1, a2 = unique(a1), unique(a2)
    aux = concatenate((a1, a2))
    if aux.size == 0:
        return aux
    aux = sort(aux)
    n = aux.shape[0]
    neq = lax.ne(lax.slice(aux, (1,), (n,)), lax.slice(aux, (0,), (n - 1,)))
    true1 = lax.full((1,), True, np.bool_)
    flag = lax.concatenate([true1, neq, true1], 0)
    keep = lax.bitwise_and(lax.slice(flag, (1,), (n + 1,)), lax.slice(flag, (0,), (n,)))
    core.concrete_or_error(keep, "The error arose in setxor1d()")
    out = getitem(aux, np.asarray(keep))
    if size is not None:
        fill = convert(0 if fill_value is None else fill_value, out.dtype)
        if out.shape[0] >= size:
            return lax.slice(out, (0,), (size,))
        return concatenate([out, full((size - out.shape[0],), fill, out.dtype)])
    return out


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False,
                return_indices: bool = False, *, size: int | None = None,
                fill_value: ArrayLike | None = None) -> Any:
    """``jnp.intersect1d``: the sorted unique values in both arrays (with ``return_indices``,
    also where they first occur in each)."""
    arr1, arr2 = ensure_arraylike("intersect1d", ar1, ar2)
    if size is None:
        core.concrete_or_error(arr1, "The error arose in intersect1d()")
        core.concrete_or_error(arr2, "The error arose in intersect1d()")
    arr1, arr2 = ravel(arr1), ravel(arr2)
    if return_indices:
        arr1, ind1 = unique(arr1, return_index=True)
        arr2, ind2 = unique(arr2, return_index=True)
    elif not assume_unique:
        arr1, arr2 = unique(arr1), unique(arr2)
    arr1, arr2 = promote_dtypes(arr1, arr2)
    aux = concatenate((arr1, arr2))
    if return_indices:
        aux_sort = argsort(aux)
        aux = getitem(aux, aux_sort)
    else:
        aux = sort(aux)
    n = aux.shape[0]
    if n == 0:
        return (aux, zeros(0, _int_dtype()), zeros(0, _int_dtype())) if return_indices else aux
    mask = lax.eq(lax.slice(aux, (1,), (n,)), lax.slice(aux, (0,), (n - 1,)))
    core.concrete_or_error(mask, "The error arose in intersect1d()")
    sel = np.nonzero(np.asarray(mask))[0]
    int1d = getitem(aux, asarray(sel.astype(np.int32)))
    if size is not None:
        fill = convert(0 if fill_value is None else fill_value, int1d.dtype)
        int1d = lax.slice(int1d, (0,), (size,)) if int1d.shape[0] >= size else \
            concatenate([int1d, full((size - int1d.shape[0],), fill, int1d.dtype)])
    if return_indices:
        ar1_idx = getitem(aux_sort, asarray(sel.astype(np.int32)))
        ar2_idx = lax.sub(getitem(aux_sort, asarray((sel + 1).astype(np.int32))),
                          np.asarray(arr1.shape[0], _int_dtype())[()])
        return int1d, getitem(ind1, ar1_idx), getitem(ind2, ar2_idx)
    return int1d
