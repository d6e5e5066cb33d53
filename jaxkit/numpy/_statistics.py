"""Statistics: ``cov``, ``corrcoef`` and the histograms (``histogram``,
``histogram_bin_edges``, ``histogram2d``, ``histogramdd``)."""
from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy._jitted import jitted
from jaxkit.runtime.array import Array
from jaxkit.numpy._creation import asarray, full, linspace, ones_like, zeros
from jaxkit.numpy._indexing import getitem
from jaxkit.numpy._index_tricks import ix_
from jaxkit.numpy._contractions import diag, dot
from jaxkit.numpy._differences import diff
from jaxkit.numpy._elementwise import clip, iscomplexobj
from jaxkit.numpy._promotion import (
    check_arraylike,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy._reductions import average, ptp
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._shape import atleast_2d, concatenate, expand_dims, reshape, transpose
from jaxkit.numpy._sorting import bincount, searchsorted
from jaxkit.numpy._take import ravel_multi_index
from jaxkit.numpy._ufuncs import (
    absolute,
    conj,
    divide,
    imag,
    multiply,
    real,
    sqrt,
    subtract,
    true_divide,
    where3,
)
from jaxkit.typing import ArrayLike, DTypeLike


def _check_inexact_dtype(name: str, dtype: DTypeLike | None) -> None:
    if dtype is not None and not dtypes.issubdtype(dtype, np.inexact):
        raise ValueError(f"{name}: dtype must be a subclass of float or complex; got {dtype=}")


@jitted(static_argnames=("rowvar", "bias", "ddof", "dtype"), inline=False)
def cov(m: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, bias: bool = False,
        ddof: int | None = None, fweights: ArrayLike | None = None,
        aweights: ArrayLike | None = None, dtype: DTypeLike | None = None) -> Array:
    """``jnp.cov``: the covariance matrix of the variables in the rows (or columns) of ``m``,
    computed in ``dtype`` (float or complex) if given. As JAX's, negative weights count as
    their absolute values, and no observations give NaNs."""
    if y is not None:
        m, y = promote_dtypes_inexact(*ensure_arraylike("cov", m, y))
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    else:
        m, = promote_dtypes_inexact(ensure_arraylike("cov", m))
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    _check_inexact_dtype("cov", dtype)
    X = atleast_2d(m)
    if not rowvar and m.ndim != 1:
        X = lax.transpose(X, (1, 0))
    if X.shape[0] == 0:
        return lax.full((0, 0), 0, X.dtype)
    if y is not None:
        y2 = atleast_2d(y)
        if not rowvar and y2.shape[0] != 1:
            y2 = lax.transpose(y2, (1, 0))
        X = concatenate((X, y2), axis=0)
    if X.shape[1] == 0:
        return full(() if X.shape[0] == 1 else (X.shape[0],) * 2, np.nan, dtype=X.dtype)
    if ddof is None:
        ddof = 1 if not bias else 0
    w = None
    if fweights is not None:
        fw = ensure_arraylike("cov", fweights)
        if fw.ndim > 1:
            raise RuntimeError("cannot handle multidimensional fweights")
        if fw.shape[0] != X.shape[1]:
            raise RuntimeError("incompatible numbers of samples and fweights")
        if not dtypes.issubdtype(fw.dtype, np.integer):
            raise TypeError("fweights must be integer.")
        w = absolute(fw)
    if aweights is not None:
        aw = ensure_arraylike("cov", aweights)
        if aw.ndim > 1:
            raise RuntimeError("cannot handle multidimensional aweights")
        if aw.shape[0] != X.shape[1]:
            raise RuntimeError("incompatible numbers of samples and aweights")
        aweights = aw = absolute(aw)
        w = aw if w is None else multiply(w, aw)
    if dtype is not None:
        out_dtype = dtypes.canonicalize_dtype(dtype)
        X = lax.convert_element_type(X, out_dtype)
        w = None if w is None else lax.convert_element_type(w, out_dtype)
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = getitem(w_sum, 0)
    if w is None:
        f: Any = X.shape[1] - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = subtract(w_sum, ddof)
    else:
        f = subtract(w_sum, true_divide(multiply(ddof, _sum(multiply(w, aweights))), w_sum))
    X = subtract(X, expand_dims(avg, 1))
    X_T = lax.transpose(X if w is None else multiply(X, expand_dims(asarray(w), 0)), (1, 0))
    out = true_divide(dot(X, conj(X_T)), f)
    return reshape(out, tuple(d for d in out.shape if d != 1))


@jitted(static_argnames=("rowvar", "dtype"), inline=False)
def corrcoef(x: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True,
             dtype: DTypeLike | None = None) -> Array:
    """``jnp.corrcoef``: Pearson correlation coefficients, computed in ``dtype`` (float or
    complex) if given."""
    check_arraylike("corrcoef", x)
    _check_inexact_dtype("corrcoef", dtype)
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return divide(c, c)
    d = diag(c)
    stddev = lax.convert_element_type(sqrt(real(d)), c.dtype)
    c = true_divide(true_divide(c, expand_dims(stddev, 1)), expand_dims(stddev, 0))
    real_part = clip(real(c), -1, 1)
    if iscomplexobj(c):
        return lax.complex(real_part, clip(imag(c), -1, 1))
    return real_part


def histogram_bin_edges(a: ArrayLike, bins: Any = 10, range: Sequence[Any] | None = None,
                        weights: ArrayLike | None = None) -> Array:
    """``jnp.histogram_bin_edges``: the bin edges ``histogram`` would use."""
    del weights  # only string bins would use them, and those are not supported (as JAX)
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` not implemented.")
    check_arraylike("histogram_bin_edges", a, bins)
    arr = asarray(a)
    dtype = dtypes.to_inexact_dtype(arr.dtype)
    if np.ndim(bins) == 1:
        return asarray(bins, dtype=dtype)
    bins_int = operator.index(core.concrete_or_error(
        bins, "bins argument of histogram_bin_edges"))
    if range is None:
        range = [arr.min(), arr.max()]
    range = asarray(range, dtype=dtype)
    if np.shape(range) != (2,):
        raise ValueError(f"`range` must be either None or a sequence of scalars, got {range}")
    # An empty range widens to one unit around its value, as NumPy's.
    lo = where3(ptp(range) == 0, range[0] - 0.5, range[0])
    hi = where3(ptp(range) == 0, range[1] + 0.5, range[1])
    return linspace(lo, hi, bins_int + 1, dtype=dtype)


def histogram(a: ArrayLike, bins: Any = 10, range: Sequence[Any] | None = None,
              weights: ArrayLike | None = None, density: bool | None = None
              ) -> tuple[Array, Array]:
    """``jnp.histogram``: counts (or summed weights) per bin, and the bin edges."""
    if weights is None:
        a, _ = ensure_arraylike("histogram", a, bins)
        a, = promote_dtypes_inexact(a)
        weights = ones_like(a)
    else:
        a, _, weights = ensure_arraylike("histogram", a, bins, weights)
        if np.shape(a) != np.shape(weights):
            raise ValueError("weights should have the same shape as a.")
        a, weights = promote_dtypes_inexact(a, weights)
    bin_edges = histogram_bin_edges(a, bins, range, weights)
    bin_idx = searchsorted(bin_edges, a, side="right")
    # The last edge belongs to the last bin (closed on the right).
    bin_idx = where3(a == bin_edges[-1], len(bin_edges) - 1, bin_idx)
    counts = zeros(len(bin_edges), weights.dtype).at[bin_idx].add(weights)[1:]
    if density:
        counts = counts / diff(bin_edges) / counts.sum()
    return counts, bin_edges


def histogramdd(sample: ArrayLike, bins: Any = 10, range: Sequence[Any] | None = None,
                weights: ArrayLike | None = None, density: bool | None = None
                ) -> tuple[Array, list[Array]]:
    """``jnp.histogramdd``: a multidimensional histogram of the rows of ``sample`` (N, D)."""
    if weights is None:
        sample = ensure_arraylike("histogramdd", sample)
        sample, = promote_dtypes_inexact(sample)
    else:
        sample, weights = ensure_arraylike("histogramdd", sample, weights)
        if np.shape(weights) != np.shape(sample)[:1]:
            raise ValueError("should have one weight for each sample.")
        sample, weights = promote_dtypes_inexact(sample, weights)
    if sample.ndim != 2:
        raise ValueError(f"sample must be a 2-D array of shape (N, D); got {sample.shape}")
    n, d = sample.shape
    if range is not None and (len(range) != d or
                              any(r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"For sample.shape={(n, d)}, range must be a sequence of {d} pairs "
                         f"or Nones; got {range=}")
    try:
        bins_per_dimension = list(bins)
    except TypeError:
        bins_per_dimension = d * [bins]  # one bin count for every dimension
    else:
        if len(bins_per_dimension) != d:
            raise ValueError("should be a bin for each dimension.")
    bin_idx_by_dim, bin_edges_by_dim = [], []
    for i in builtins.range(d):
        range_i = None if range is None else range[i]
        bin_edges = histogram_bin_edges(sample[:, i], bins_per_dimension[i], range_i, weights)
        bin_idx = searchsorted(bin_edges, sample[:, i], side="right")
        bin_idx = where3(sample[:, i] == bin_edges[-1], bin_idx - 1, bin_idx)
        bin_idx_by_dim.append(bin_idx)
        bin_edges_by_dim.append(bin_edges)
    # Each dimension has an outlier bin at either end, dropped after counting.
    nbins = tuple(len(bin_edges) + 1 for bin_edges in bin_edges_by_dim)
    dedges = [diff(bin_edges) for bin_edges in bin_edges_by_dim]
    xy = ravel_multi_index(tuple(bin_idx_by_dim), nbins, mode="clip")
    hist = bincount(xy, weights, length=int(np.prod(nbins)))
    hist = reshape(hist, nbins)
    hist = hist[d * (slice(1, -1),)]
    if density:
        hist = hist.astype(sample.dtype)
        hist /= hist.sum()
        for norm in ix_(*dedges):
            hist /= norm
    return hist, bin_edges_by_dim


def histogram2d(x: ArrayLike, y: ArrayLike, bins: Any = 10, range: Any = None,
                weights: ArrayLike | None = None, density: bool | None = None
                ) -> tuple[Array, Array, Array]:
    """``jnp.histogram2d``: ``histogramdd`` of the points ``(x, y)``."""
    x, y = ensure_arraylike("histogram2d", x, y)
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n != 1 and n != 2:  # one array of edges, for both dimensions
        x_edges = y_edges = asarray(bins)
        bins = [x_edges, y_edges]
    sample = transpose(asarray([x, y]))
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]


# --------------------------------------------------------------------------------------------
# Window functions and i0
# --------------------------------------------------------------------------------------------
