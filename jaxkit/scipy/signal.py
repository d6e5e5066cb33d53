"""``jaxkit.scipy.signal``: convolution, correlation and detrending (``jax.scipy.signal``), and
the spectral estimators ``stft``/``istft``/``welch``/``csd`` (in ``_signal_spectral.py``).

Direct convolutions run as one ``lax.conv_general_dilated`` (the kernel flipped, padded for
the ``mode``); ``fftconvolve`` multiplies spectra from ``jnp.fft`` (O(n log n)).
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy import fft as jfft
from jaxkit.numpy._promotion import canonicalize_axis, convert, ensure_arraylike
from jaxkit.runtime.array import Array
from jaxkit.typing import ArrayLike

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "detrend", "fftconvolve"]

_MODES = ("full", "same", "valid")


def _promote(name: str, in1: ArrayLike, in2: ArrayLike) -> tuple[Array, Array]:
    in1 = ensure_arraylike(name, in1)
    in2 = ensure_arraylike(name, in2)
    dt = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(dtypes.result_type(in1, in2)))
    return convert(in1, dt), convert(in2, dt)


def _check_mode(mode: str, name: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be one of {_MODES}, got {mode!r}")


def _convolve_nd(in1: Array, in2: Array, mode: str, precision, name: str,
                 centre_high: bool = False) -> Array:
    """``centre_high``: for even kernels, 'same' keeps the later of the two centred windows
    (SciPy's ``correlate2d``; ``convolve``/``correlate`` keep the earlier)."""
    _check_mode(mode, name)
    if in1.ndim != in2.ndim:
        raise ValueError(f"{name}: in1 and in2 should have the same dimensionality; got "
                         f"{in1.ndim} and {in2.ndim}")
    if in1.ndim == 0:
        raise ValueError(f"{name}: inputs must be at least 1-dimensional")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"{name}: inputs cannot be empty")
    if mode == "valid":
        no_swap = all(a >= b for a, b in zip(in1.shape, in2.shape))
        swap = all(a <= b for a, b in zip(in1.shape, in2.shape))
        if not (no_swap or swap):
            raise ValueError("For 'valid' mode, one must be at least as large as the other "
                             "in every dimension")
        if swap and not no_swap:
            in1, in2 = in2, in1
    nd = in1.ndim
    kernel = lax.rev(in2, tuple(range(nd)))
    pads = []
    for k in in2.shape:
        if mode == "full":
            pads.append((k - 1, k - 1))
        elif mode == "same":
            start = k // 2 if centre_high else (k - 1) // 2
            pads.append((k - 1 - start, start))
        else:
            pads.append((0, 0))
    out = lax.conv_general_dilated(lax.expand_dims(in1, (0, 1)), lax.expand_dims(kernel, (0, 1)),
                                   (1,) * nd, pads, precision=precision)
    return lax.reshape(out, out.shape[2:])


def convolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
             precision=None) -> Array:
    """``jax.scipy.signal.convolve``: the N-D convolution of ``in1`` and ``in2``."""
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"convolve: got unknown method={method!r}")
    in1, in2 = _promote("convolve", in1, in2)
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    return _convolve_nd(in1, in2, mode, precision, "convolve")


def correlate(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
              precision=None) -> Array:
    """``jax.scipy.signal.correlate``: ``convolve`` with ``in2`` flipped and conjugated."""
    in1, in2 = _promote("correlate", in1, in2)
    flipped = lax.rev(lax.conj(in2) if dtypes.issubdtype(in2.dtype, np.complexfloating)
                      else in2, tuple(range(in2.ndim)))
    return convolve(in1, flipped, mode, method, precision)


def _check_2d(name: str, in1: Array, in2: Array, boundary: str, fillvalue: float) -> None:
    if in1.ndim != 2 or in2.ndim != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs.")
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")


def convolve2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
               fillvalue: float = 0, precision=None) -> Array:
    """``jax.scipy.signal.convolve2d``: 2-D convolution (zero fill at the boundary)."""
    in1, in2 = _promote("convolve2d", in1, in2)
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd(in1, in2, mode, precision, "convolve2d")


def correlate2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
                fillvalue: float = 0, precision=None) -> Array:
    """``jax.scipy.signal.correlate2d``: 2-D cross-correlation (zero fill at the boundary)."""
    in1, in2 = _promote("correlate2d", in1, in2)
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    flipped = lax.rev(lax.conj(in2) if dtypes.issubdtype(in2.dtype, np.complexfloating)
                      else in2, (0, 1))
    return _convolve_nd(in1, flipped, mode, precision, "correlate2d", centre_high=True)


def _centered(x: Array, shape: Sequence[int], axes: Sequence[int]) -> Array:
    for ax, n in zip(axes, shape):
        start = (x.shape[ax] - n) // 2
        x = lax.slice_in_dim(x, start, start + n, axis=ax)
    return x


def fftconvolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full",
                axes: Sequence[int] | None = None) -> Array:
    """``jax.scipy.signal.fftconvolve``: convolution through the FFT over ``axes``."""
    _check_mode(mode, "fftconvolve")
    in1, in2 = _promote("fftconvolve", in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    if in1.size == 0 or in2.size == 0:
        return lax.full((0,) * in1.ndim, 0, in1.dtype)
    axes = list(range(in1.ndim)) if axes is None else \
        sorted(canonicalize_axis(a, in1.ndim) for a in np.atleast_1d(axes))
    if any(in1.shape[a] != in2.shape[a] for a in range(in1.ndim) if a not in axes):
        raise ValueError(f"mapped axes must have same shape; got in1.shape={in1.shape} "
                         f"in2.shape={in2.shape} axes={tuple(axes)}")
    s1 = [in1.shape[a] for a in axes]
    s2 = [in2.shape[a] for a in axes]
    if mode == "valid" and not (all(a >= b for a, b in zip(s1, s2))
                                or all(a <= b for a, b in zip(s1, s2))):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in "
                         "every dimension")
    full = [a + b - 1 for a, b in zip(s1, s2)]
    if dtypes.issubdtype(in1.dtype, np.complexfloating):
        out = jfft.ifftn(jfft.fftn(in1, full, axes) * jfft.fftn(in2, full, axes), full, axes)
    else:
        out = jfft.irfftn(jfft.rfftn(in1, full, axes) * jfft.rfftn(in2, full, axes), full, axes)
    out = convert(out, in1.dtype)
    if mode == "full":
        return out
    if mode == "same":
        return _centered(out, s1, axes)
    return _centered(out, [abs(a - b) + 1 for a, b in zip(s1, s2)], axes)


def detrend(data: ArrayLike, axis: int = -1, type: str = "linear", bp: int | Sequence = 0,
            overwrite_data: None = None) -> Array:
    """``jax.scipy.signal.detrend``: remove the mean (``'constant'``) or a least-squares line
    fitted separately between consecutive breakpoints ``bp`` (``'linear'``)."""
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    data = ensure_arraylike("detrend", data)
    data = convert(data, dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(data.dtype)))
    axis = canonicalize_axis(axis, data.ndim)
    n = data.shape[axis]
    if type == "constant":
        mean = lax.div(lax.reduce_sum(data, (axis,)), np.asarray(n, data.dtype)[()])
        return lax.sub(data, lax.broadcast_in_dim(mean, data.shape,
                                                  tuple(i for i in range(data.ndim)
                                                        if i != axis)))
    bps = np.sort(np.unique(np.r_[0, np.asarray(core.concrete_or_error(
        bp, "The bp argument of detrend")).ravel().astype(int), n]))
    if np.any(bps > n):
        raise ValueError("Breakpoints must be less than length of data along given axis.")
    pieces = []
    others = tuple(i for i in range(data.ndim) if i != axis)
    for lo, hi in zip(bps[:-1], bps[1:]):
        lo, hi = operator.index(lo), operator.index(hi)
        seg = lax.slice_in_dim(data, lo, hi, axis=axis)
        m = hi - lo
        t = np.arange(m, dtype=np.float64)
        tc = (t - t.mean()).astype(data.dtype)
        denom = float(np.sum((t - t.mean()) ** 2)) or 1.0
        tb = lax.broadcast_in_dim(np.asarray(tc), seg.shape, (axis,))
        mean = lax.div(lax.reduce_sum(seg, (axis,)), np.asarray(m, data.dtype)[()])
        slope = lax.div(lax.reduce_sum(lax.mul(seg, tb), (axis,)),
                        np.asarray(denom, data.dtype)[()])
        fit = lax.add(lax.broadcast_in_dim(mean, seg.shape, others),
                      lax.mul(lax.broadcast_in_dim(slope, seg.shape, others), tb))
        pieces.append(lax.sub(seg, fit))
    return lax.concatenate(pieces, axis)


# the spectral estimators build on detrend above
from jaxkit.scipy._signal_spectral import csd, istft, stft, welch  # noqa: E402,F401
