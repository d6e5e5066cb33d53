"""Order statistics: ``quantile``, ``percentile``, ``median`` and their NaN-ignoring forms.

The data is sorted along the reduced axis (moved last); the two neighbouring order statistics
of each quantile are gathered with ``take_along_axis`` and combined by ``method`` ('linear',
'lower', 'higher', 'midpoint', 'nearest'), as JAX does.
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
    convert,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy._reductions import any as _any
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._shape import moveaxis
from jaxkit.numpy._take import take_along_axis
from jaxkit.numpy._ufuncs import true_divide, where3
from jaxkit.typing import Array, ArrayLike

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(a: Array, q: Array, axis: Any, method: str, keepdims: bool,
              squash_nans: bool) -> Array:
    if method not in _METHODS:
        raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', or "
                         "'nearest'")
    a, = promote_dtypes_inexact(a)
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        raise ValueError("quantile does not support complex input, as the operation is poorly "
                         "defined.")
    q = convert(q, a.dtype) if dtypes.issubdtype(q.dtype, np.integer) else q
    if q.ndim > 1:
        raise ValueError(f"q must be have rank <= 1, got shape {q.shape}")
    in_shape = a.shape
    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = tuple(canonicalize_axis(ax, a.ndim) for ax in
                     (axis if isinstance(axis, (tuple, list)) else (axis,)))
        if len(set(axes)) != len(axes):
            raise ValueError("repeated axis")
    keep = [i for i in range(a.ndim) if i not in axes]
    a = lax.transpose(a, (*keep, *axes))
    kept_shape = tuple(in_shape[i] for i in keep)
    n = math.prod(in_shape[i] for i in axes)
    a = lax.reshape(a, (*kept_shape, n))
    last = a.ndim - 1
    if squash_nans:
        a = lax.sort(a, dimension=last)  # NaNs sort last
        counts = _sum(lax.bitwise_not(lax.ne(a, a)), axis=last, dtype=q.dtype, keepdims=True)
    else:
        has_nan = _any(lax.ne(a, a), axis=last, keepdims=True)
        a = lax.sort(a, dimension=last)
        counts = lax.full(kept_shape + (1,), n, q.dtype)
    # q (shape Q) against the kept axes (shape K): positions of shape (*K, Q).
    q_flat = lax.reshape(q, (q.size,))
    qb = lax.broadcast_in_dim(q_flat, (*kept_shape, q.size), (len(kept_shape),))
    counts_b = lax.broadcast_in_dim(counts, (*kept_shape, q.size),
                                    tuple(range(len(kept_shape) + 1)))
    pos = lax.mul(qb, lax.sub(counts_b, np.asarray(1, q.dtype)[()]))
    low = lax.floor(pos)
    high = lax.ceil(pos)
    high_weight = lax.sub(pos, low)
    low_weight = lax.sub(np.asarray(1, q.dtype)[()], high_weight)
    upper = lax.max(lax.sub(counts_b, np.asarray(1, q.dtype)[()]), np.asarray(0, q.dtype)[()])
    low = lax.max(np.asarray(0, q.dtype)[()], lax.min(low, upper))
    high = lax.max(np.asarray(0, q.dtype)[()], lax.min(high, upper))
    low_i = lax.convert_element_type(low, np.int32)
    high_i = lax.convert_element_type(high, np.int32)
    low_value = take_along_axis(a, low_i, axis=last, mode="clip")
    high_value = take_along_axis(a, high_i, axis=last, mode="clip")
    if method == "linear":
        result = lax.add(lax.mul(convert(low_value, q.dtype), low_weight),
                         lax.mul(convert(high_value, q.dtype), high_weight))
    elif method == "lower":
        result = low_value
    elif method == "higher":
        result = high_value
    elif method == "nearest":
        result = lax.select(lax.le(high_weight, np.asarray(0.5, q.dtype)[()]), low_value,
                            high_value)
    else:
        result = lax.mul(lax.add(low_value, high_value), np.asarray(0.5, low_value.dtype)[()])
    if not squash_nans:
        result = where3(has_nan, np.asarray(np.nan, result.dtype)[()], result)
    # (*K, Q) -> (Q, *K), then the reduced axes back as size 1 if keepdims.
    result = moveaxis(result, -1, 0)
    if keepdims:
        full = [1 if i in axes else d for i, d in enumerate(in_shape)]
        result = lax.reshape(result, (q.size, *full))
    if q.ndim == 0:
        result = lax.reshape(result, result.shape[1:])
    return lax.convert_element_type(result, a.dtype)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims", "method"), inline=False)
def quantile(a: ArrayLike, q: ArrayLike, axis: int | tuple[int, ...] | None = None,
             out: None = None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """``jnp.quantile``: the ``q``-th quantiles (``q`` in [0, 1]) over ``axis``."""
    a, q = ensure_arraylike("quantile", a, q)
    if overwrite_input or out is not None:
        raise ValueError("jax.numpy.quantile does not support overwrite_input=True or "
                         "out != None")
    if weights is not None:
        raise NotImplementedError("jnp.quantile with weights is not supported by jaxkit.")
    return _quantile(a, q, axis, method, keepdims, False)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims", "method"), inline=False)
def nanquantile(a: ArrayLike, q: ArrayLike, axis: int | tuple[int, ...] | None = None,
                out: None = None, overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """``jnp.nanquantile``: ``quantile`` ignoring NaNs."""
    a, q = ensure_arraylike("nanquantile", a, q)
    if overwrite_input or out is not None:
        raise ValueError("jax.numpy.nanquantile does not support overwrite_input=True or "
                         "out != None")
    if weights is not None:
        raise NotImplementedError("jnp.nanquantile with weights is not supported by jaxkit.")
    return _quantile(a, q, axis, method, keepdims, True)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims", "method", "out_sharding"),
        inline=False)
def percentile(a: ArrayLike, q: ArrayLike, axis: int | tuple[int, ...] | None = None,
               out: None = None, overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False, *, weights: ArrayLike | None = None,
               out_sharding: Any = None) -> Array:
    """``jnp.percentile``: ``quantile(a, q / 100)``; with ``out_sharding`` (over Explicit
    mesh axes) run under ``auto_axes`` and laid out so, as JAX's."""
    a, q = ensure_arraylike("percentile", a, q)
    q, = promote_dtypes_inexact(q)

    def internal_quantile(x, y, w):
        return quantile(x, y, axis=axis, out=out, overwrite_input=overwrite_input,
                        method=method, keepdims=keepdims, weights=w)

    sharding = resolve_out_sharding("jnp.percentile", out_sharding)
    if sharding is not None:
        return auto_axes_out(internal_quantile, sharding)(a, true_divide(q, 100), weights)
    return internal_quantile(a, true_divide(q, 100), weights)


@jitted(static_argnames=("axis", "overwrite_input", "keepdims", "method"), inline=False)
def nanpercentile(a: ArrayLike, q: ArrayLike, axis: int | tuple[int, ...] | None = None,
                  out: None = None, overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """``jnp.nanpercentile``: ``nanquantile(a, q / 100)``."""
    a, q = ensure_arraylike("nanpercentile", a, q)
    q, = promote_dtypes_inexact(q)
    return nanquantile(a, true_divide(q, 100), axis=axis, out=out,
                       overwrite_input=overwrite_input, method=method, keepdims=keepdims,
                       weights=weights)


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
