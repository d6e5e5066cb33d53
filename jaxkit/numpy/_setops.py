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
from jaxkit.numpy._creation import arange, asarray, full, full_like, ones, zeros
from jaxkit.numpy._differences import diff
from jaxkit.numpy._promotion import (
    canonicalize_axis,
    convert,
    ensure_arraylike,
    promote_dtypes,
)
from jaxkit.numpy._reductions import any as _any
from jaxkit.numpy._reductions import cumsum
from jaxkit.numpy._shape import append, concatenate, moveaxis, ravel, reshape
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._sorting import lexsort, nonzero, searchsorted, sort
from jaxkit.numpy._ufuncs import isnan, where3
from jaxkit.typing import Array, ArrayLike

_UNIQUE_SIZE_HINT = (
    "To make jnp.unique() compatible with JIT and other transforms, you can specify a concrete "
    "value for the size argument, which will determine the output size.")


def _int_dtype() -> np.dtype:
    return dtypes.default_int_dtype()


@jitted(static_argnames=("axis", "equal_nan"), inline=False)
def _unique_sorted_mask(ar: Array, axis: int, equal_nan: bool) -> tuple[Array, Array, Array]:
    """The slices of ``ar`` along ``axis`` sorted (lexicographically), the mask of those that
    differ from their predecessor, and the sorting permutation: a plain jit, as JAX's."""
    aux = moveaxis(ar, axis, 0)
    if dtypes.issubdtype(aux.dtype, np.complexfloating):
        # One NaN for every complex NaN, so that NaNs sort and compare alike (as NumPy's).
        aux = where3(isnan(aux), lax.full_like(aux, np.nan, shape=()), aux)
    size, *rest = aux.shape
    inner = math.prod(rest)
    if inner == 0:
        size = 1
        perm = zeros(1, dtype=int)
    else:
        perm = lexsort(aux.reshape(size, inner).T[::-1])
    aux = aux[perm]
    if aux.size:
        if dtypes.issubdtype(aux.dtype, np.inexact) and equal_nan:
            def neq(x, y):  # NaNs count as equal to each other (NumPy's equal_nan)
                return lax.bitwise_and(lax.ne(x, y),
                                       lax.bitwise_not(lax.bitwise_and(isnan(x), isnan(y))))
        else:
            neq = lax.ne
        mask = ones(size, dtype=bool)
        mask = mask.at[1:].set(_any(neq(aux[1:], aux[:-1]), tuple(range(1, aux.ndim))))
    else:
        mask = zeros(size, dtype=bool)
    return aux, mask, perm


def _unique(ar: Array, axis: int, return_index: bool = False, return_inverse: bool = False,
            return_counts: bool = False, equal_nan: bool = True, size: int | None = None,
            fill_value: Any = None, return_true_size: bool = False) -> Any:
    axis = canonicalize_axis(axis, ar.ndim)
    if ar.shape[axis] == 0 and size and fill_value is None:
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")
    aux, mask, perm = _unique_sorted_mask(ar, axis, equal_nan)
    if size is None:
        core.concrete_or_error(mask, "The error arose in jnp.unique(). " + _UNIQUE_SIZE_HINT)
        ind = asarray(np.nonzero(np.asarray(mask))[0].astype(_int_dtype()))
    else:
        ind = nonzero(mask, size=size)[0]
    result = aux[ind] if aux.size else aux
    if size is not None and fill_value is not None:
        fill_value = convert(fill_value, result.dtype)
        if result.shape[0]:
            valid = lax.expand_dims(arange(size) < mask.sum(), tuple(range(1, result.ndim)))
            result = where3(valid, result, fill_value)
        else:
            result = full_like(result, fill_value, shape=(size, *result.shape[1:]))
    result = moveaxis(result, 0, axis)
    ret: tuple = (result,)
    if return_index:
        ret += (perm[ind] if aux.size else perm,)
    if return_inverse:
        if aux.size:
            imask = cumsum(mask) - 1
            inv = zeros(mask.shape, dtype=int).at[perm].set(imask)
        else:
            inv = zeros(ar.shape[axis], dtype=int)
        ret += (inv,)
    if return_counts:
        if aux.size:
            if size is None:
                idx = append(asarray(np.nonzero(np.asarray(mask))[0].astype(_int_dtype())),
                             mask.size)
            else:
                idx = nonzero(mask, size=size + 1)[0]
                idx = idx.at[1:].set(where3(idx[1:], idx[1:], mask.size))
            ret += (diff(idx),)
        elif ar.shape[axis]:
            ret += (full((1,), ar.shape[axis], dtype=int),)
        else:
            ret += (zeros(0, dtype=int),)
    if return_true_size:
        # The number of unique values, for the set operations built on this one.
        ret += (mask.sum(),)
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


def _concat_unique(arr1: Array, arr2: Array) -> tuple[Array, Array]:
    """The unique values of ``arr1`` then those of ``arr2`` (each sorted) at the front of an
    array of their total size, and how many there are."""
    arr1, arr2 = ravel(arr1), ravel(arr2)
    arr1, num_unique1 = _unique(arr1, axis=0, size=arr1.size, return_true_size=True)
    arr2, num_unique2 = _unique(arr2, axis=0, size=arr2.size, return_true_size=True)
    arr = zeros(arr1.size + arr2.size, dtype=dtypes.result_type(arr1, arr2))
    arr = lax.dynamic_update_slice(arr, arr1, (0,))
    arr = lax.dynamic_update_slice(arr, arr2, (num_unique1,))
    return arr, num_unique1 + num_unique2


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
              size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """``jnp.setdiff1d``: the sorted unique values of ``ar1`` that are not in ``ar2``."""
    arr1, arr2 = ensure_arraylike("setdiff1d", ar1, ar2)
    arr1, arr2 = arr1.ravel(), arr2.ravel()
    if size is None:
        core.concrete_or_error(arr1, "The error arose in setdiff1d()")
    else:
        size = operator.index(core.concrete_or_error(size, "The error arose in setdiff1d()"))
    fill = full_like(arr1, 0 if fill_value is None else fill_value, shape=())
    if arr1.size == 0:
        return full_like(arr1, fill, shape=size or 0)
    if not assume_unique:
        arr1 = unique(arr1, size=size and arr1.size)
    mask = _in1d(arr1, arr2, invert=True, assume_unique=assume_unique)
    if size is None:
        return arr1[np.asarray(mask)]
    if not assume_unique:
        # Entries past the true unique count are unique()'s padding (copies of the first
        # value): exclude them.
        n_unique = arr1.size + 1 - (arr1 == arr1[0]).sum()
        mask = where3(arange(arr1.size) < n_unique, mask, False)
    return where3(arange(size) < mask.sum(), arr1[nonzero(mask, size=size)[0]], fill)


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None,
            fill_value: ArrayLike | None = None) -> Array:
    """``jnp.union1d``: the sorted unique values of both arrays."""
    arr1, arr2 = ensure_arraylike("union1d", ar1, ar2)
    if size is None:
        core.concrete_or_error(arr1, "The error arose in union1d()")
        core.concrete_or_error(arr2, "The error arose in union1d()")
    else:
        size = operator.index(core.concrete_or_error(size, "The error arose in union1d()"))
    return unique(concatenate((arr1, arr2), axis=None), size=size, fill_value=fill_value)


@jitted(static_argnames=("assume_unique", "size"), inline=False)
def _setxor1d_size(arr1: Array, arr2: Array, fill_value: ArrayLike | None, *,
                   assume_unique: bool, size: int) -> Array:
    # A plain jit, as JAX's: the values in exactly one array, padded to ``size``.
    if assume_unique:
        # JAX's body stages one concatenation it does not use; so does this one, for its
        # printed jaxpr to read as JAX's.
        concatenate([arr1, arr2])
        aux = sort(concatenate([arr1, arr2]))
        flag = concatenate((bool(aux.size), aux[1:] != aux[:-1], True), axis=None)
    else:
        arr, num_unique = _concat_unique(arr1, arr2)
        mask = arange(arr.size + 1) < num_unique + 1
        # Sort the padding past the unique values to the end, then the values.
        _, aux = lax.sort([~mask[1:], arr], is_stable=True, num_keys=2)
        flag = mask & concatenate((bool(aux.size), aux[1:] != aux[:-1], False),
                                  axis=None).at[num_unique].set(True)
    aux_mask = flag[1:] & flag[:-1]
    num_results = aux_mask.sum()
    if aux.size:
        indices = nonzero(aux_mask, size=size, fill_value=len(aux))[0]
        vals = aux.at[indices].get(mode="fill", fill_value=0)
    else:
        vals = zeros(size, aux.dtype)
    if fill_value is None:
        vals = where3(arange(len(vals)) < num_results, vals, vals.max())
        return where3(arange(len(vals)) < num_results, vals, vals.min())
    return where3(arange(len(vals)) < num_results, vals, fill_value)


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
             size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """``jnp.setxor1d``: the sorted values in exactly one of the arrays (with ``size``, the
    first ``size`` of them, padded with ``fill_value``: traceable)."""
    ar1, ar2 = ensure_arraylike("setxor1d", ar1, ar2)
    arr1, arr2 = promote_dtypes(ravel(ar1), ravel(ar2))
    if size is not None:
        return _setxor1d_size(arr1, arr2, fill_value=fill_value, assume_unique=assume_unique,
                              size=size)
    if not assume_unique:
        arr1, arr2 = unique(arr1), unique(arr2)
    aux = concatenate((arr1, arr2))
    if aux.size == 0:
        return aux
    aux = sort(aux)
    flag = concatenate((True, aux[1:] != aux[:-1], True), axis=None)
    keep = flag[1:] & flag[:-1]
    core.concrete_or_error(keep, "The error arose in setxor1d()")
    return aux[np.asarray(keep)]


@jitted(static_argnames=("return_indices",), inline=False)
def _intersect1d_sorted_mask(arr1: Array, arr2: Array, return_indices: bool
                             ) -> tuple[Array, Array, Array | None]:
    # A plain jit, as JAX's: both arrays sorted together (with the sorting permutation when
    # indices are asked for), and where neighbours are equal.
    arr = concatenate((arr1, arr2))
    if return_indices:
        iota = lax.broadcasted_iota(_index_dtype(arr.shape[0]), np.shape(arr), 0)
        aux, indices = lax.sort_key_val(arr, iota)
    else:
        aux, indices = sort(arr), None
    return aux, aux[1:] == aux[:-1], indices


def _index_dtype(n: int) -> np.dtype:
    """The signed index dtype for a dimension of size ``n``: int32 unless ``n`` needs more
    (as JAX's, whatever the 64-bit setting)."""
    return np.dtype(np.int64 if n > np.iinfo(np.int32).max else np.int32)


@jitted(static_argnames=("fill_value", "assume_unique", "size", "return_indices"),
        inline=False)
def _intersect1d_size(arr1: Array, arr2: Array, fill_value: ArrayLike | None,
                      assume_unique: bool, size: int, return_indices: bool) -> Any:
    # A plain jit, as JAX's. First the unique values of both arrays, sorted together with
    # the padding last (``mask`` marks the real ones); a value equal to its predecessor is in
    # both; the first ``size`` of those, padded; then, if asked, where they came from.
    if assume_unique:
        ind1, num_unique1 = arange(arr1.size), full((), arr1.size)
        ind2, num_unique2 = arange(arr2.size), full((), arr2.size)
        arr = concatenate([arr1, arr2])
        aux, aux_sort_indices = lax.sort([arr, arange(arr.size)], is_stable=True, num_keys=1)
        mask = ones(arr.size, dtype=bool)
    else:
        arr1, ind1, num_unique1 = _unique(arr1, 0, size=arr1.size, return_index=True,
                                          return_true_size=True, fill_value=0)
        arr2, ind2, num_unique2 = _unique(arr2, 0, size=arr2.size, return_index=True,
                                          return_true_size=True, fill_value=0)
        arr = zeros(arr1.size + arr2.size, dtype=dtypes.result_type(arr1, arr2))
        arr = lax.dynamic_update_slice(arr, arr1, (0,))
        arr = lax.dynamic_update_slice(arr, arr2, (num_unique1,))
        mask = arange(arr.size) < num_unique1 + num_unique2
        _, aux, aux_sort_indices = lax.sort([~mask, arr, arange(arr.size)], is_stable=True,
                                            num_keys=2)
    aux_mask = (aux[1:] == aux[:-1]) & mask[1:]
    num_results = aux_mask.sum()
    if aux.size:
        val_indices = nonzero(aux_mask, size=size, fill_value=aux.size)[0]
        vals = aux.at[val_indices].get(mode="fill", fill_value=0)
    else:
        val_indices = arange(0)
        vals = zeros(size, aux.dtype)
    if fill_value is None:
        vals = where3(arange(len(vals)) < num_results, vals, vals.max())
        vals = where3(arange(len(vals)) < num_results, vals, vals.min())
    else:
        vals = where3(arange(len(vals)) < num_results, vals, fill_value)
    if not return_indices:
        return vals
    arr1_indices = aux_sort_indices.at[val_indices].get(mode="fill", fill_value=arr1.size)
    arr1_indices = where3(arange(len(arr1_indices)) < num_results, arr1_indices, arr1.size)
    arr2_indices = aux_sort_indices.at[val_indices + 1].get(
        mode="fill", fill_value=arr2.size) - num_unique1
    arr2_indices = where3(arange(len(arr2_indices)) < num_results, arr2_indices, arr2.size)
    if not assume_unique:
        arr1_indices = ind1.at[arr1_indices].get(mode="fill", fill_value=ind1.size)
        arr2_indices = ind2.at[arr2_indices].get(mode="fill", fill_value=ind2.size)
    return vals, arr1_indices, arr2_indices


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False,
                return_indices: bool = False, *, size: int | None = None,
                fill_value: ArrayLike | None = None) -> Any:
    """``jnp.intersect1d``: the sorted unique values in both arrays (with ``return_indices``,
    also where they first occur in each; with ``size``, the first ``size`` of them, padded
    with ``fill_value``: traceable)."""
    ar1, ar2 = ensure_arraylike("intersect1d", ar1, ar2)
    arr1, arr2 = promote_dtypes(ar1, ar2)
    arr1, arr2 = ravel(arr1), ravel(arr2)
    if size is not None:
        return _intersect1d_size(arr1, arr2, return_indices=return_indices, size=size,
                                 fill_value=fill_value, assume_unique=assume_unique)
    ind1 = ind2 = arange(0)
    if not assume_unique:
        if return_indices:
            arr1, ind1 = unique(arr1, return_index=True)
            arr2, ind2 = unique(arr2, return_index=True)
        else:
            arr1, arr2 = unique(arr1), unique(arr2)
    aux, mask, aux_sort_indices = _intersect1d_sorted_mask(arr1, arr2, return_indices)
    core.concrete_or_error(mask, "The error arose in intersect1d()")
    mask = np.asarray(mask)
    int1d = aux[:-1][mask]
    if not return_indices:
        return int1d
    arr1_indices = aux_sort_indices[:-1][mask]
    arr2_indices = aux_sort_indices[1:][mask] - np.size(arr1)
    if not assume_unique:
        arr1_indices, arr2_indices = ind1[arr1_indices], ind2[arr2_indices]
    return int1d, arr1_indices, arr2_indices
