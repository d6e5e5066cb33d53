"""Order statistics: ``quantile``, ``percentile``, ``median`` and their NaN-ignoring forms.

JAX's algorithm: the data is sorted along the reduced axis; the two neighbouring order
statistics of each quantile are gathered and combined by ``method`` ('linear', 'lower',
'higher', 'midpoint', 'nearest'), or the weighted ``'inverted_cdf'`` picks one.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from jaxkit import dtypes, lax
from jaxkit.lax.sharding_axes import auto_axes_out
from jaxkit.lax.sharding_rules import resolve_out_sharding
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import (
    canonicalize_axis,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy._reductions import any as _any
from jaxkit.numpy._reductions import cumsum
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._take import take_along_axis
from jaxkit.numpy._ufuncs import where3
from jaxkit.typing import Array, ArrayLike

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _const(x: Any, value: Any) -> np.ndarray:
    """``value`` as a NumPy scalar array of ``x``'s dtype (a literal when staged)."""
    return np.array(value, dtypes.dtype(x))


def _isnan(x: Array) -> Array:
    return lax.ne(x, x)


def _quantile(a: Array, q: Array, axis: int | tuple[int, ...] | None, method: str,
              keepdims: bool, squash_nans: bool, weights: Array | None = None) -> Array:
    """JAX's algorithm: sort along the reduced axis (the reduced axes of a tuple merged last),
    then read the two order statistics about ``q * (n - 1)`` and combine them by ``method``
    (``'inverted_cdf'``: the first whose cumulative weight reaches ``q`` of the total)."""
    if method not in _METHODS:
        raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', "
                         "'nearest' or 'inverted_cdf'")
    if weights is not None:
        if dtypes.issubdtype(weights.dtype, np.complexfloating):
            raise ValueError("Weights cannot be complex types.")
        if method != "inverted_cdf":
            raise NotImplementedError(f"{method} doesn't support weights. Only method "
                                      "'inverted_cdf' supports weights.")
        a, weights = promote_dtypes_inexact(a, weights)
        if weights.shape != a.shape:
            if axis is None:
                raise ValueError("Weights shape must match 'a' shape when axis is None.")
            ax_tuple = _axis_tuple(axis, a.ndim)
            if weights.shape != tuple(a.shape[ax] for ax in ax_tuple):
                raise ValueError(f"Weights shape {weights.shape} must match reduction axes "
                                 f"{tuple(a.shape[ax] for ax in ax_tuple)}")
            weights = lax.broadcast_in_dim(weights, a.shape, broadcast_dimensions=ax_tuple)
    else:
        a, = promote_dtypes_inexact(a)
    keepdim: list[int] = []
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        raise ValueError("quantile does not support complex input, as the operation is poorly "
                         "defined.")
    if axis is None:
        if keepdims:
            keepdim = [1] * a.ndim
        a = a.ravel()
        if weights is not None:
            weights = weights.ravel()
        axis = 0
    elif isinstance(axis, tuple):
        keepdim = list(a.shape)
        nd = a.ndim
        axis = tuple(canonicalize_axis(ax, nd) for ax in axis)
        if len(set(axis)) != len(axis):
            raise ValueError("repeated axis")
        for ax in axis:
            keepdim[ax] = 1
        # The kept axes first (by swaps), the reduced ones merged into one last axis.
        keep = set(range(nd)) - set(axis)
        dimensions = list(range(nd))
        for i, k in enumerate(sorted(keep)):
            dimensions[i], dimensions[k] = dimensions[k], dimensions[i]
        kept_shape = tuple(x for i, x in enumerate(a.shape) if i not in axis)
        merged = math.prod(x for i, x in enumerate(a.shape) if i in axis)
        a = lax.reshape(a, kept_shape + (merged,), dimensions)
        if weights is not None:
            weights = lax.reshape(weights, kept_shape + (merged,), dimensions)
        axis = canonicalize_axis(-1, a.ndim)
    else:
        axis = canonicalize_axis(axis, a.ndim)
    q_shape, q_ndim = q.shape, q.ndim
    if q_ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {q.shape}")
    a_shape = a.shape
    q_orig = q
    if squash_nans:
        a = where3(_isnan(a), np.nan, a)  # positive NaNs, so that they sort to the end
        if weights is not None:
            a, weights = lax.sort_key_val(a, weights, dimension=axis)
        else:
            a = lax.sort(a, dimension=axis)
        counts = _sum(lax.bitwise_not(_isnan(a)), axis=axis, dtype=q.dtype, keepdims=keepdims)
        shape_after_reduction = counts.shape
        q = lax.expand_dims(q, tuple(range(q_ndim, len(shape_after_reduction) + q_ndim)))
        counts = lax.expand_dims(counts, tuple(range(q_ndim)))
        q = lax.mul(q, lax.sub(counts, _const(q, 1)))
        low, high = lax.floor(q), lax.ceil(q)
        high_weight = lax.sub(q, low)
        low_weight = lax.sub(_const(high_weight, 1), high_weight)
        low = lax.max(_const(low, 0), lax.min(low, counts - 1))
        high = lax.max(_const(high, 0), lax.min(high, counts - 1))
        low = lax.convert_element_type(low, int)
        high = lax.convert_element_type(high, int)
        out_shape = q_shape + shape_after_reduction
        index = [lax.broadcasted_iota(int, out_shape, dim + q_ndim)
                 for dim in range(len(shape_after_reduction))]
        if keepdims:
            index[axis] = low
        else:
            index.insert(axis, low)
        low_value = a[tuple(index)]
        index[axis] = high
        high_value = a[tuple(index)]
    else:
        a = where3(_any(_isnan(a), axis=axis, keepdims=True), np.nan, a)
        if weights is not None:
            a, weights = lax.sort_key_val(a, weights, dimension=axis)
        else:
            a = lax.sort(a, dimension=axis)
        n = lax.convert_element_type(a_shape[axis], dtypes.dtype(q))
        q = lax.mul(q, n - 1)
        low, high = lax.floor(q), lax.ceil(q)
        high_weight = lax.sub(q, low)
        low_weight = lax.sub(_const(high_weight, 1), high_weight)
        low = lax.clamp(_const(low, 0), low, n - 1)
        high = lax.clamp(_const(high, 0), high, n - 1)
        low = lax.convert_element_type(low, int)
        high = lax.convert_element_type(high, int)
        slice_sizes = list(a_shape)
        slice_sizes[axis] = 1
        end = len(a_shape) + q_ndim if keepdims else len(a_shape) + q_ndim - 1
        dnums = lax.GatherDimensionNumbers(
            offset_dims=tuple(range(q_ndim, end)),
            collapsed_slice_dims=() if keepdims else (axis,), start_index_map=(axis,))
        low_value = lax.gather(a, low[..., None], dimension_numbers=dnums,
                               slice_sizes=slice_sizes)
        high_value = lax.gather(a, high[..., None], dimension_numbers=dnums,
                                slice_sizes=slice_sizes)
        if q_ndim == 1:
            low_weight = lax.broadcast_in_dim(low_weight, low_value.shape,
                                              broadcast_dimensions=(0,))
            high_weight = lax.broadcast_in_dim(high_weight, high_value.shape,
                                               broadcast_dimensions=(0,))
    if method == "linear":
        result = lax.add(lax.mul(low_value.astype(q.dtype), low_weight),
                         lax.mul(high_value.astype(q.dtype), high_weight))
    elif method == "lower":
        result = low_value
    elif method == "higher":
        result = high_value
    elif method == "nearest":
        result = lax.select(lax.le(high_weight, _const(high_weight, 0.5)), low_value, high_value)
    elif method == "midpoint":
        result = lax.mul(lax.add(low_value, high_value), _const(low_value, 0.5))
    else:
        result = _inverted_cdf(a, weights, q_orig, axis, keepdims, squash_nans, a_shape)
    if keepdims and keepdim:
        if q_ndim > 0:
            keepdim = [np.shape(q)[0], *keepdim]
        result = result.reshape(keepdim)
    return lax.convert_element_type(result, a.dtype)


def _axis_tuple(axis: int | tuple[int, ...], ndim: int) -> tuple[int, ...]:
    axes = tuple(canonicalize_axis(ax, ndim) for ax in (axis if isinstance(axis, tuple)
                                                         else (axis,)))
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis: {axis}")
    return axes


def _inverted_cdf(a: Array, weights: Array | None, q: Array, axis: int, keepdims: bool,
                  squash_nans: bool, a_shape: tuple[int, ...]) -> Array:
    """The ``'inverted_cdf'`` quantile of the sorted ``a``: the first value whose cumulative
    (clean) weight reaches ``q`` of the total; NaN where a weight is negative or NaN, and
    where the data has a NaN (all NaNs, with ``squash_nans``)."""
    q_ndim = q.ndim
    if weights is None:
        weights = lax.full_like(a, 1.0)
    zeros = lax.full_like(weights, 0)
    bad_weights = lax.bitwise_or(lax.lt(weights, zeros), _isnan(weights))
    nan_data = _isnan(a)
    clean_weights = lax.select(lax.bitwise_or(bad_weights, nan_data), zeros, weights)
    cum_weights = cumsum(clean_weights, axis=axis)
    total_weight = lax.index_in_dim(cum_weights, -1, axis=axis, keepdims=keepdims)
    tw_f = lax.expand_dims(total_weight, tuple(range(q_ndim)))
    q_f = lax.reshape(q, q.shape + (1,) * total_weight.ndim)
    target_w = lax.mul(q_f, tw_f)
    target_w_aligned = target_w if keepdims else lax.expand_dims(target_w, (axis + q_ndim,))
    cw_f = lax.expand_dims(cum_weights, tuple(range(q_ndim)))
    is_less = lax.lt(cw_f, target_w_aligned)
    idx = _sum(lax.convert_element_type(is_less, dtypes.default_int_dtype()),
               axis=axis + q_ndim, keepdims=keepdims)
    if squash_nans:
        valid_counts = _sum(lax.bitwise_not(nan_data), axis=axis, dtype=q.dtype,
                            keepdims=keepdims)
    else:
        valid_counts = lax.full_like(total_weight, a_shape[axis], dtype=q.dtype)
    limit = lax.sub(valid_counts, _const(valid_counts, 1))
    max_idx = lax.convert_element_type(limit, dtypes.default_int_dtype())
    max_idx_f = lax.expand_dims(max_idx, tuple(range(q_ndim)))
    max_idx_f = lax.convert_element_type(max_idx_f, idx.dtype)
    idx = lax.max(_const(idx, 0), lax.min(idx, max_idx_f))
    idx_take = lax.squeeze(idx, (q_ndim + axis,)) if keepdims else idx
    if q_ndim == 0:
        result = take_along_axis(a, lax.expand_dims(idx_take, (axis,)), axis=axis)
        result = lax.squeeze(result, (axis,))
    else:
        perm = [*range(q_ndim, q_ndim + axis), *range(q_ndim),
                *range(q_ndim + axis, idx_take.ndim)]
        result = take_along_axis(a, lax.transpose(idx_take, perm), axis=axis)
        result = lax.transpose(result, [perm.index(i) for i in range(len(perm))])
    if keepdims:
        result = lax.expand_dims(result, (q_ndim + axis,))
    all_nan_data = lax.eq(valid_counts, lax.full_like(valid_counts, 0))
    any_bad_weight = _any(bad_weights, axis=axis, keepdims=keepdims)
    if squash_nans:
        force_nan = lax.bitwise_or(any_bad_weight, all_nan_data)
    else:
        force_nan = lax.bitwise_or(any_bad_weight,
                                   _any(nan_data, axis=axis, keepdims=keepdims))
    force_nan_f = lax.expand_dims(force_nan, tuple(range(q_ndim)))
    return where3(force_nan_f, lax.full_like(result, np.nan), result)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims", "method"), inline=False)
def quantile(a: ArrayLike, q: ArrayLike, axis: int | tuple[int, ...] | None = None,
             out: None = None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """``jnp.quantile``: the ``q``-th quantiles (``q`` in [0, 1]) over ``axis``."""
    a, q = ensure_arraylike("quantile", a, q)
    if weights is not None:
        weights = ensure_arraylike("quantile", weights)
    if overwrite_input or out is not None:
        raise ValueError("jax.numpy.quantile does not support overwrite_input=True or "
                         "out != None")
    return _quantile(a, q, axis, method, keepdims, False, weights)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims", "method"), inline=False)
def nanquantile(a: ArrayLike, q: ArrayLike, axis: int | tuple[int, ...] | None = None,
                out: None = None, overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """``jnp.nanquantile``: ``quantile`` ignoring NaNs."""
    a, q = ensure_arraylike("nanquantile", a, q)
    if weights is not None:
        weights = ensure_arraylike("nanquantile", weights)
    if overwrite_input or out is not None:
        raise ValueError("jax.numpy.nanquantile does not support overwrite_input=True or "
                         "out != None")
    return _quantile(a, q, axis, method, keepdims, True, weights)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims", "method", "out_sharding"),
        inline=False)
def percentile(a: ArrayLike, q: ArrayLike, axis: int | tuple[int, ...] | None = None,
               out: None = None, overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False, *, weights: ArrayLike | None = None,
               out_sharding: Any = None) -> Array:
    """``jnp.percentile``: ``quantile(a, q / 100)``; with ``out_sharding`` (over Explicit
    mesh axes) run under ``auto_axes`` and laid out so, as JAX's."""
    a, q = ensure_arraylike("percentile", a, q)
    if weights is not None:
        weights = ensure_arraylike("percentile", weights)
    q, = promote_dtypes_inexact(q)

    def internal_quantile(x, y, w):
        return quantile(x, y, axis=axis, out=out, overwrite_input=overwrite_input,
                        method=method, keepdims=keepdims, weights=w)

    sharding = resolve_out_sharding("jnp.percentile", out_sharding)
    if sharding is not None:
        return auto_axes_out(internal_quantile, sharding)(a, q / 100, weights)
    return internal_quantile(a, q / 100, weights)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims", "method"), inline=False)
def nanpercentile(a: ArrayLike, q: ArrayLike, axis: int | tuple[int, ...] | None = None,
                  out: None = None, overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """``jnp.nanpercentile``: ``nanquantile(a, q / 100)``."""
    a, q = ensure_arraylike("nanpercentile", a, q)
    if weights is not None:
        weights = ensure_arraylike("nanpercentile", weights)
    q, = promote_dtypes_inexact(q)
    return nanquantile(a, q / 100, axis=axis, out=out, overwrite_input=overwrite_input,
                       method=method, weights=weights, keepdims=keepdims)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims"), inline=False)
def median(a: ArrayLike, axis: int | tuple[int, ...] | None = None, out: None = None,
           overwrite_input: bool = False, keepdims: bool = False) -> Array:
    """``jnp.median``: the median over ``axis``."""
    a = ensure_arraylike("median", a)
    return quantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input,
                    keepdims=keepdims, method="midpoint")


@jitted(static_argnames=("axis", "overwrite_input", "keepdims"), inline=False)
def nanmedian(a: ArrayLike, axis: int | tuple[int, ...] | None = None, out: None = None,
              overwrite_input: bool = False, keepdims: bool = False) -> Array:
    """``jnp.nanmedian``: the median over ``axis`` ignoring NaNs."""
    a = ensure_arraylike("nanmedian", a)
    return nanquantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input,
                       keepdims=keepdims, method="midpoint")
