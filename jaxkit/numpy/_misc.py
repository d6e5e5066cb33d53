"""Statistics and helpers: ``cov``, ``corrcoef``, ``gradient``, ``histogram`` (and
``histogram_bin_edges``, ``histogram2d``, ``histogramdd``), window functions, ``i0``,
``packbits``/``unpackbits``, ``apply_over_axes``, and NumPy I/O wrappers (``save``, ``load``,
``frombuffer`` ...)."""
from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.numpy._creation import asarray, linspace, ones
from jaxkit.numpy._indexing import getitem, scatter_update
from jaxkit.numpy._contractions import diag, dot
from jaxkit.numpy._math_extra import clip, diff, iscomplexobj
from jaxkit.numpy._promotion import (
    broadcast_to_shape,
    check_arraylike,
    convert,
    ensure_arraylike,
    promote_dtypes_inexact,
)
from jaxkit.numpy._reductions import average, ptp
from jaxkit.numpy._reductions import sum as _sum
from jaxkit.numpy._shape import atleast_2d, concatenate, expand_dims, ravel, reshape, swapaxes
from jaxkit.numpy._sorting import searchsorted
from jaxkit.numpy._take import ravel_multi_index
from jaxkit.numpy._ufuncs import abs as _abs
from jaxkit.numpy._ufuncs import (
    conj,
    cos,
    divide,
    imag,
    left_shift,
    multiply,
    real,
    sqrt,
    subtract,
    true_divide,
    where3,
)
from jaxkit.typing import ArrayLike


def cov(m: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, bias: bool = False,
        ddof: int | None = None, fweights: ArrayLike | None = None,
        aweights: ArrayLike | None = None) -> Array:
    """``jnp.cov``: the covariance matrix of the variables in the rows (or columns) of ``m``."""
    if y is not None:
        m, y = promote_dtypes_inexact(*ensure_arraylike("cov", m, y))
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    else:
        m, = promote_dtypes_inexact(ensure_arraylike("cov", m))
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
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
        w = fw
    if aweights is not None:
        aw = ensure_arraylike("cov", aweights)
        if aw.ndim > 1:
            raise RuntimeError("cannot handle multidimensional aweights")
        if aw.shape[0] != X.shape[1]:
            raise RuntimeError("incompatible numbers of samples and aweights")
        w = aw if w is None else multiply(w, aw)
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


def corrcoef(x: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True) -> Array:
    """``jnp.corrcoef``: Pearson correlation coefficients."""
    check_arraylike("corrcoef", x)
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return divide(c, c)
    d = diag(c)
    stddev = lax.convert_element_type(sqrt(real(d)), c.dtype)
    c = true_divide(true_divide(c, expand_dims(stddev, 1)), expand_dims(stddev, 0))
    real_part = clip(real(c), -1, 1)
    if iscomplexobj(c):
        return lax.complex(real_part, clip(imag(c), -1, 1))
    return real_part


def gradient(f: ArrayLike, *varargs: ArrayLike, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None) -> Any:
    """``jnp.gradient``: second-order central differences inside, first-order at the edges."""
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    a, *spacing = promote_dtypes_inexact(*ensure_arraylike("gradient", f, *varargs)) \
        if varargs else promote_dtypes_inexact(ensure_arraylike("gradient", f))

    def along(a: Array, h: Any, ax: int) -> Array:
        n = a.shape[ax]
        def sl(lo: int, hi: int) -> Array:
            return lax.slice_in_dim(a, lo, hi, axis=ax)

        upper = subtract(sl(1, 2), sl(0, 1))
        lower = subtract(sl(n - 1, n), sl(n - 2, n - 1))
        if np.ndim(h) == 0:
            inner = true_divide(multiply(subtract(sl(2, n), sl(0, n - 2)), 0.5), h)
            return concatenate((true_divide(upper, h), inner, true_divide(lower, h)), axis=ax)
        if np.ndim(h) != 1:
            raise ValueError("Spacing arrays must be 1D arrays or scalars.")
        if h.shape[0] != n:
            raise ValueError("Spacing arrays must have the same length as the dimension along "
                             "which the gradient is calculated.")
        shape = [1] * a.ndim
        shape[ax] = n
        h = lax.reshape(h, tuple(shape))

        def hs(lo: int, hi: int) -> Array:
            return lax.slice_in_dim(h, lo, hi, axis=ax)

        upper = true_divide(upper, subtract(hs(1, 2), hs(0, 1)))
        lower = true_divide(lower, subtract(hs(n - 1, n), hs(n - 2, n - 1)))
        dx1 = subtract(hs(1, n - 1), hs(0, n - 2))
        dx2 = subtract(hs(2, n), hs(1, n - 1))
        ca = true_divide(lax.neg(dx2), multiply(dx1, lax.add(dx1, dx2)))
        cb = true_divide(subtract(dx2, dx1), multiply(dx1, dx2))
        cc = true_divide(dx1, multiply(dx2, lax.add(dx1, dx2)))
        inner = lax.add(lax.add(multiply(ca, sl(0, n - 2)), multiply(cb, sl(1, n - 1))),
                        multiply(cc, sl(2, n)))
        return concatenate((upper, inner, lower), axis=ax)

    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = tuple(ax % a.ndim for ax in ((axis,) if isinstance(axis, int) else axis))
    if not axes:
        return []
    if min(a.shape[ax] for ax in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "2 elements are required.")
    if len(spacing) == 0:
        dx: list = [1.0] * len(axes)
    elif len(spacing) == 1:
        dx = list(spacing) * len(axes)
    elif len(spacing) == len(axes):
        dx = list(spacing)
    else:
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
    grads = [along(a, h, ax) for ax, h in zip(axes, dx)]
    return grads[0] if len(axes) == 1 else grads


def histogram_bin_edges(a: ArrayLike, bins: Any = 10, range: Sequence[Any] | None = None,
                        weights: ArrayLike | None = None) -> Array:
    """``jnp.histogram_bin_edges``: the bin edges ``histogram`` would use."""
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` not implemented.")
    arr = ensure_arraylike("histogram_bin_edges", a)
    dtype = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(arr.dtype))
    if np.ndim(bins) == 1:
        return asarray(bins, dtype=dtype)
    n = operator.index(core.concrete_or_error(bins, "bins argument of histogram_bin_edges"))
    if range is None:
        lo, hi = lax.reduce_min(arr, tuple(builtins.range(arr.ndim))), \
            lax.reduce_max(arr, tuple(builtins.range(arr.ndim)))
        rng = lax.concatenate([lax.reshape(convert(lo, dtype), (1,)),
                               lax.reshape(convert(hi, dtype), (1,))], 0)
    else:
        rng = asarray(range, dtype=dtype)
    if rng.shape != (2,):
        raise ValueError(f"`range` must be either None or a sequence of scalars, got {range}")
    empty = lax.eq(ptp(rng), np.asarray(0, dtype)[()])
    lo = where3(empty, subtract(getitem(rng, 0), 0.5), getitem(rng, 0))
    hi = where3(empty, lax.add(getitem(rng, 1), np.asarray(0.5, dtype)[()]), getitem(rng, 1))
    return linspace(lo, hi, n + 1, dtype=dtype)


def histogram(a: ArrayLike, bins: Any = 10, range: Sequence[Any] | None = None,
              weights: ArrayLike | None = None, density: bool | None = None
              ) -> tuple[Array, Array]:
    """``jnp.histogram``: counts (or summed weights) per bin, and the bin edges."""
    if weights is None:
        a, = promote_dtypes_inexact(ensure_arraylike("histogram", a))
        weights = lax.full_like(a, 1)
    else:
        a, weights = ensure_arraylike("histogram", a, weights)
        if a.shape != weights.shape:
            raise ValueError("weights should have the same shape as a.")
        a, weights = promote_dtypes_inexact(a, weights)
    edges = histogram_bin_edges(a, bins, range, weights)
    n = edges.shape[0]
    idx = searchsorted(edges, a, side="right")
    idx = where3(lax.eq(a, getitem(edges, -1)), n - 1, idx)
    counts = scatter_update(lax.full((n,), 0, weights.dtype), idx, weights, lax.scatter_add,
                            False, False, "drop")
    counts = lax.slice(counts, (1,), (n,))
    if density:
        counts = true_divide(true_divide(counts, diff(edges)), _sum(counts))
    return counts, edges


def histogramdd(sample: ArrayLike, bins: Any = 10, range: Sequence[Any] | None = None,
                weights: ArrayLike | None = None, density: bool | None = None
                ) -> tuple[Array, list[Array]]:
    """``jnp.histogramdd``: a multidimensional histogram of the rows of ``sample`` (N, D)."""
    sample = ensure_arraylike("histogramdd", sample)
    if sample.ndim != 2:
        raise ValueError(f"sample must be a 2-D array of shape (N, D); got {sample.shape}")
    n_dims = sample.shape[1]
    if range is not None and (len(range) != n_dims or
                              any(r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"For sample.shape={sample.shape}, range must be a sequence of "
                         f"{n_dims} pairs or Nones; got range={range}")
    bins_seq = [bins] * n_dims if isinstance(bins, int) else list(bins)
    if len(bins_seq) != n_dims:
        raise ValueError(f"should be a bin for each dimension, got {len(bins_seq)}")
    edges, idxs = [], []
    for i in builtins.range(n_dims):
        col = getitem(sample, (slice(None), i))
        e = histogram_bin_edges(col, bins_seq[i], None if range is None else range[i])
        k = searchsorted(e, col, side="right")
        k = where3(lax.eq(col, getitem(e, -1)), e.shape[0] - 1, k)
        edges.append(e)
        idxs.append(k)
    dims = tuple(e.shape[0] + 1 for e in edges)
    flat = ravel_multi_index(tuple(idxs), dims, mode="clip")
    w = lax.full(flat.shape, 1, dtypes.default_int_dtype()) if weights is None else \
        ensure_arraylike("histogramdd", weights)
    counts = scatter_update(lax.full((int(np.prod(dims)),), 0, w.dtype), flat, w,
                            lax.scatter_add, False, False, "drop")
    counts = lax.reshape(counts, dims)
    counts = lax.slice(counts, (1,) * n_dims, tuple(d - 1 for d in dims))
    if density:
        counts = true_divide(counts, _sum(counts))
        for i, e in enumerate(edges):
            shape = [1] * n_dims
            shape[i] = e.shape[0] - 1
            counts = true_divide(counts, lax.reshape(diff(e), tuple(shape)))
    return counts, edges


def histogram2d(x: ArrayLike, y: ArrayLike, bins: Any = 10, range: Any = None,
                weights: ArrayLike | None = None, density: bool | None = None
                ) -> tuple[Array, Array, Array]:
    """``jnp.histogram2d``: ``histogramdd`` of the points ``(x, y)``."""
    x, y = ensure_arraylike("histogram2d", x, y)
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n == 2:
        bins = list(bins)
    sample = lax.transpose(concatenate([lax.expand_dims(v, (0,)) for v in
                                        promote_dtypes_inexact(x, y)]), (1, 0))
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]


# --------------------------------------------------------------------------------------------
# Window functions and i0
# --------------------------------------------------------------------------------------------

def _window_n(M: int, name: str) -> tuple[int, Array]:
    M = operator.index(core.concrete_or_error(M, f"M argument of jnp.{name}"))
    return M, lax.iota(dtypes.default_float_dtype(), max(M, 0))


def bartlett(M: int) -> Array:
    """``jnp.bartlett``: the triangular window."""
    M, n = _window_n(M, "bartlett")
    if M <= 1:
        return ones(M, dtypes.default_float_dtype())
    return subtract(1, true_divide(_abs(subtract(lax.add(multiply(2, n), 1.0), M)), M - 1))


def blackman(M: int) -> Array:
    """``jnp.blackman``: the Blackman window."""
    M, n = _window_n(M, "blackman")
    if M <= 1:
        return ones(M, dtypes.default_float_dtype())
    return lax.add(subtract(0.42, multiply(0.5, cos(true_divide(multiply(2 * np.pi, n), M - 1)))),
                   multiply(0.08, cos(true_divide(multiply(4 * np.pi, n), M - 1))))


def hamming(M: int) -> Array:
    """``jnp.hamming``: the Hamming window."""
    M, n = _window_n(M, "hamming")
    if M <= 1:
        return ones(M, dtypes.default_float_dtype())
    return subtract(0.54, multiply(0.46, cos(true_divide(multiply(2 * np.pi, n), M - 1))))


def hanning(M: int) -> Array:
    """``jnp.hanning``: the Hann window."""
    M, n = _window_n(M, "hanning")
    if M <= 1:
        return ones(M, dtypes.default_float_dtype())
    return multiply(0.5, subtract(1, cos(true_divide(multiply(2 * np.pi, n), M - 1))))


def kaiser(M: int, beta: ArrayLike) -> Array:
    """``jnp.kaiser``: the Kaiser window."""
    M, n = _window_n(M, "kaiser")
    if M <= 1:
        return ones(M, dtypes.default_float_dtype())
    alpha = 0.5 * (M - 1)
    t = true_divide(subtract(n, alpha), alpha)
    return true_divide(i0(multiply(beta, sqrt(subtract(1, multiply(t, t))))), i0(beta))


def i0(x: ArrayLike) -> Array:
    """``jnp.i0``: the modified Bessel function of the first kind, order 0."""
    x = ensure_arraylike("i0", x)
    x, = promote_dtypes_inexact(x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("i0 does not support complex-valued inputs.")
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


# --------------------------------------------------------------------------------------------
# Bits, axes, I/O
# --------------------------------------------------------------------------------------------

def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big") -> Array:
    """``jnp.packbits``: booleans packed 8 to a uint8."""
    arr = ensure_arraylike("packbits", a)
    if not (dtypes.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise TypeError("Expected an input array of integer or boolean data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    arr = lax.convert_element_type(lax.ne(arr, np.asarray(0, arr.dtype)[()]), np.uint8)
    bits = np.arange(8, dtype=np.uint8)
    if bitorder == "big":
        bits = bits[::-1].copy()
    if axis is None:
        arr = ravel(arr)
        axis = 0
    arr = swapaxes(arr, axis, -1)
    rem = arr.shape[-1] % 8
    if rem:
        arr = lax.pad(arr, np.uint8(0), [(0, 0, 0)] * (arr.ndim - 1) + [(0, 8 - rem, 0)])
    arr = lax.reshape(arr, arr.shape[:-1] + (arr.shape[-1] // 8, 8))
    shifted = left_shift(arr, broadcast_to_shape(asarray(bits), arr.shape))
    packed = lax.convert_element_type(_sum(shifted, axis=-1), np.uint8)
    return swapaxes(packed, axis, -1)


def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None,
               bitorder: str = "big") -> Array:
    """``jnp.unpackbits``: each uint8 unpacked to 8 bits."""
    arr = ensure_arraylike("unpackbits", a)
    if arr.dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    bits = (np.uint8(1) << np.arange(8, dtype=np.uint8)).astype(np.uint8)
    if bitorder == "big":
        bits = bits[::-1].copy()
    if axis is None:
        arr = ravel(arr)
        axis = 0
    arr = swapaxes(arr, axis, -1)
    full_shape = arr.shape + (8,)
    expanded = broadcast_to_shape(lax.expand_dims(arr, (arr.ndim,)), full_shape)
    masked = lax.bitwise_and(expanded, broadcast_to_shape(asarray(bits), full_shape))
    unpacked = lax.convert_element_type(lax.gt(masked, np.uint8(0)), np.uint8)
    unpacked = lax.reshape(unpacked, unpacked.shape[:-2] + (unpacked.shape[-2] * 8,))
    if count is not None:
        size = unpacked.shape[-1]
        if count > size:
            unpacked = lax.pad(unpacked, np.uint8(0),
                               [(0, 0, 0)] * (unpacked.ndim - 1) + [(0, count - size, 0)])
        else:
            unpacked = lax.slice_in_dim(unpacked, 0, count, axis=unpacked.ndim - 1)
    return swapaxes(unpacked, axis, -1)


def apply_over_axes(func: Callable, a: ArrayLike, axes: Sequence[int]) -> Array:
    """``jnp.apply_over_axes``: ``func(a, axis)`` repeatedly, keeping the dimensions."""
    arr = ensure_arraylike("apply_over_axes", a)
    for axis in axes:
        b = func(arr, axis)
        if b.ndim == arr.ndim:
            arr = b
        elif b.ndim == arr.ndim - 1:
            arr = expand_dims(b, axis)
        else:
            raise ValueError("function is not returning an array of the correct shape")
    return arr


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """``jnp.load``: ``np.load``, arrays converted to jaxkit arrays."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == "V2":
            out = out.view(dtypes.bfloat16)
        try:
            out = asarray(out)
        except (TypeError, AssertionError):
            pass
    return out


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Array:
    """``jnp.frombuffer``: ``np.frombuffer`` as a jaxkit array."""
    return asarray(np.frombuffer(buffer=buffer, dtype=dtype, count=count, offset=offset))


def fromiter(iterable: Any, dtype: Any, count: int = -1) -> Array:
    """``jnp.fromiter``: ``np.fromiter`` as a jaxkit array."""
    return asarray(np.fromiter(iterable, dtype=dtype, count=count))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Array:
    """``jnp.fromstring``: ``np.fromstring`` (text mode) as a jaxkit array."""
    return asarray(np.fromstring(string=string, dtype=dtype, count=count, sep=sep))


def fromfile(*args: Any, **kwargs: Any) -> Array:
    """``jnp.fromfile`` is not supported (as in JAX): load with NumPy, then ``jnp.asarray``."""
    raise NotImplementedError("jnp.fromfile() is not implemented because it may be non-pure "
                              "and thus unsafe for use with JIT and other JAX transformations. "
                              "Consider using jnp.asarray(np.fromfile(...)) instead, although "
                              "care should be taken if np.fromfile is used within jax "
                              "transformations.")


save, savez, iterable = np.save, np.savez, np.iterable
array_repr, array_str = np.array_repr, np.array_str
