"""Spectral analysis of ``jax.scipy.signal``: ``stft`` and its inverse ``istft``, and the
Welch estimates ``welch`` (power spectral density) and ``csd`` (cross spectral density).

All of them cut the signal into overlapping windowed segments (one gather of an
``(nseg, nperseg)`` index grid, not a Python loop over segments), transform each with one
batched FFT, and scale as SciPy does. ``istft`` overlap-adds the inverse transforms with one
scatter-add. Shapes, frequencies, times and scalings follow SciPy's ``_spectral_helper``.
"""
from __future__ import annotations

import warnings

import numpy as np

from jaxkit import numpy as jnp
from jaxkit.scipy._windows import get_window
from jaxkit.scipy.signal import detrend as _detrend
from jaxkit.typing import Array, ArrayLike


def _window(window, nperseg: int | None, input_length: int) -> tuple[np.ndarray, int]:
    """The window as an array, and the segment length (SciPy's ``_triage_segments``)."""
    if isinstance(window, (str, tuple)):
        if nperseg is None:  # JAX's default (SciPy's is 256): the whole signal
            nperseg = input_length
        if nperseg > input_length:
            warnings.warn(f"nperseg={nperseg} is greater than input_length={input_length}, "
                          f"using nperseg={input_length}", stacklevel=4)
            nperseg = input_length
        return get_window(window, nperseg), nperseg
    win = np.asarray(window)
    if win.ndim != 1:
        raise ValueError("window must be 1-D")
    if input_length < win.shape[0]:
        raise ValueError("window is longer than input signal")
    if nperseg is None:
        nperseg = win.shape[0]
    elif nperseg != win.shape[0]:
        raise ValueError("value specified for nperseg is different from length of window")
    return win, nperseg


def _positive(name: str, value) -> int:
    value = int(value)
    if value < 1:
        raise ValueError(f"{name} must be a positive integer")
    return value


def _fft_length_and_step(nperseg: int, nfft, noverlap, default_nfft: int) -> tuple[int, int]:
    """The FFT length (``default_nfft`` if None) and the hop between segments (``noverlap``
    defaults to half a segment), checked as SciPy checks them."""
    if nfft is None:
        nfft = default_nfft
    elif nfft < nperseg:
        raise ValueError("nfft must be greater than or equal to nperseg.")
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    return int(nfft), nperseg - noverlap


def _extend(x: Array, n: int, boundary: str) -> Array:
    """``x`` extended by ``n`` points at both ends of its last axis (SciPy's ``*_ext``)."""
    if boundary == "zeros":
        return jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)])
    if boundary == "constant":
        return jnp.concatenate([jnp.repeat(x[..., :1], n, -1), x,
                                jnp.repeat(x[..., -1:], n, -1)], -1)
    left, right = jnp.flip(x[..., 1:n + 1], -1), jnp.flip(x[..., -n - 1:-1], -1)
    if boundary == "even":
        return jnp.concatenate([left, x, right], -1)
    # odd: reflect through the end points
    return jnp.concatenate([2 * x[..., :1] - left, x, 2 * x[..., -1:] - right], -1)


_BOUNDARIES = ("even", "odd", "constant", "zeros", None)


def _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
              axis, mode, boundary=None, padded=False):
    """SciPy's ``_spectral_helper``: ``(freqs, times, result)``, the frequency axis of
    ``result`` where ``axis`` was and the segment (time) axis last."""
    same = y is None
    x = jnp.asarray(x)
    y = x if same else jnp.asarray(y)
    if boundary not in _BOUNDARIES:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"{list(_BOUNDARIES)}")
    if scaling not in ("density", "spectrum"):
        raise ValueError(f"Unknown scaling: {scaling!r}")
    real_dtype = jnp.result_type(x.dtype, y.dtype, np.float32)
    if jnp.issubdtype(real_dtype, jnp.complexfloating):
        real_dtype = jnp.finfo(real_dtype).dtype
    out_dtype = jnp.result_type(real_dtype, np.complex64)
    if not same and x.ndim != y.ndim:
        raise ValueError(f"two-arguments must have the same rank ({x.ndim} vs {y.ndim}).")
    x = jnp.moveaxis(x.astype(jnp.result_type(x.dtype, real_dtype)), axis, -1)
    if not same:
        y = jnp.moveaxis(y.astype(jnp.result_type(y.dtype, real_dtype)), axis, -1)
        if x.shape[-1] != y.shape[-1]:  # the shorter one is padded with zeros
            longer = max(x.shape[-1], y.shape[-1])
            x, y = (jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, longer - v.shape[-1])])
                    for v in (x, y))
        outer = jnp.broadcast_shapes(x.shape[:-1], y.shape[:-1])
        x = jnp.broadcast_to(x, outer + x.shape[-1:])
        y = jnp.broadcast_to(y, outer + y.shape[-1:])
    if nperseg is not None:
        nperseg = _positive("nperseg", nperseg)
    win, nperseg = _window(window, nperseg, x.shape[-1])
    nfft, step = _fft_length_and_step(nperseg, nfft, noverlap, default_nfft=nperseg)
    signals = [x] if same else [x, y]
    if boundary is not None:
        signals = [_extend(s, nperseg // 2, boundary) for s in signals]
    if padded:  # zeros so that the last segment is whole
        extra = (-(signals[0].shape[-1] - nperseg) % step) % nperseg
        signals = [jnp.pad(s, [(0, 0)] * (s.ndim - 1) + [(0, extra)]) for s in signals]
    length = signals[0].shape[-1]

    if scaling == "density":
        scale = 1.0 / (fs * np.sum(win * win))
    else:
        scale = 1.0 / np.sum(win) ** 2
    if mode == "stft":
        scale = jnp.sqrt(scale)
    complex_input = any(jnp.issubdtype(s.dtype, jnp.complexfloating) for s in signals)
    onesided = return_onesided and not complex_input  # SciPy warns and goes two-sided

    nseg = (length - nperseg) // step + 1
    grid = np.arange(nseg)[:, None] * step + np.arange(nperseg)[None, :]
    win_arr = jnp.asarray(win.astype(real_dtype))

    def transform(s):
        segments = s[..., grid]  # (..., nseg, nperseg)
        if detrend is not False and detrend is not None:
            segments = (detrend(segments) if callable(detrend)
                        else _detrend(segments, axis=-1, type=detrend))
        segments = segments * win_arr
        return (jnp.fft.rfft(segments, n=nfft) if onesided
                else jnp.fft.fft(segments, n=nfft))

    result = transform(signals[0])
    if not same:
        result = jnp.conj(result) * transform(signals[1])
    elif mode == "psd":
        result = jnp.conj(result) * result
    result = result * scale
    if onesided and mode == "psd":  # the negative frequencies' power, but not 0 or Nyquist
        doubled = np.ones(result.shape[-1])
        doubled[1:] = 2
        if nfft % 2 == 0:
            doubled[-1] = 1
        result = result * jnp.asarray(doubled.astype(real_dtype))
    freqs = (jnp.fft.rfftfreq(nfft) if onesided else jnp.fft.fftfreq(nfft)) * fs
    times = jnp.arange(nperseg / 2, length - nperseg / 2 + 1, step) / fs
    if boundary is not None:
        times = times - (nperseg / 2) / fs
    result = result.astype(out_dtype)
    if same and mode != "stft":
        result = result.real
    # segments were the second-last axis and frequencies the last: frequencies go where the
    # signal's axis was (counted with the new segment axis), segments stay last
    result = jnp.swapaxes(result, -1, -2)
    freq_axis = axis - 1 if axis < 0 else axis
    return freqs, times, jnp.moveaxis(result, -2, freq_axis)


def stft(x: ArrayLike, fs: ArrayLike = 1.0, window: str = "hann", nperseg: int = 256,
         noverlap: int | None = None, nfft: int | None = None, detrend: bool = False,
         return_onesided: bool = True, boundary: str | None = "zeros", padded: bool = True,
         axis: int = -1) -> tuple[Array, Array, Array]:
    """Short-time Fourier transform: ``(f, t, Zxx)``, Zxx of shape ``(..., len(f), len(t))``."""
    return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     "spectrum", axis, "stft", boundary, padded)


def csd(x: ArrayLike, y: ArrayLike | None, fs: ArrayLike = 1.0, window: str = "hann",
        nperseg: int | None = None, noverlap: int | None = None, nfft: int | None = None,
        detrend: str = "constant", return_onesided: bool = True, scaling: str = "density",
        axis: int = -1, average: str = "mean") -> tuple[Array, Array]:
    """Cross spectral density by Welch's method (``y=None``: ``x`` with itself)."""
    if average not in ("mean", "median"):
        raise ValueError(f'average must be "median" or "mean", got {average}')
    freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend,
                              return_onesided, scaling, axis, "psd")
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                bias = _median_bias(pxy.shape[-1])
                if jnp.issubdtype(pxy.dtype, jnp.complexfloating):
                    pxy = (jnp.median(pxy.real, axis=-1)
                           + 1j * jnp.median(pxy.imag, axis=-1)).astype(pxy.dtype)
                else:
                    pxy = jnp.median(pxy, axis=-1)
                pxy = pxy / np.asarray(bias, jnp.finfo(pxy.dtype).dtype)
            else:
                pxy = pxy.mean(axis=-1)
        else:
            pxy = pxy.reshape(pxy.shape[:-1])
    return freqs, pxy


def welch(x: ArrayLike, fs: ArrayLike = 1.0, window: str = "hann", nperseg: int | None = None,
          noverlap: int | None = None, nfft: int | None = None, detrend: str = "constant",
          return_onesided: bool = True, scaling: str = "density", axis: int = -1,
          average: str = "mean") -> tuple[Array, Array]:
    """Power spectral density by Welch's method: the mean (or median) of the periodograms of
    overlapping windowed segments."""
    freqs, pxx = csd(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     scaling, axis, average)
    return freqs, pxx.real


def _median_bias(n: int) -> float:
    """How much the median of n periodograms (chi-square with 2 degrees of freedom)
    under-estimates their mean: the factor SciPy's ``_median_bias`` divides by."""
    even = 2 * np.arange(1, (n - 1) // 2 + 1)
    return 1 + np.sum(1.0 / (even + 1) - 1.0 / even)


def istft(Zxx: ArrayLike, fs: ArrayLike = 1.0, window: str = "hann",
          nperseg: int | None = None, noverlap: int | None = None, nfft: int | None = None,
          input_onesided: bool = True, boundary: bool = True, time_axis: int = -1,
          freq_axis: int = -2) -> tuple[Array, Array]:
    """Inverse short-time Fourier transform: ``(t, x)``, by weighted overlap-add."""
    zxx = jnp.asarray(Zxx)
    if zxx.ndim < 2:
        raise ValueError("Input stft must be at least 2d!")
    freq_axis, time_axis = freq_axis % zxx.ndim, time_axis % zxx.ndim
    if freq_axis == time_axis:
        raise ValueError("Must specify differing time and frequency axes!")
    zxx = zxx.astype(jnp.result_type(zxx.dtype, np.complex64))
    nseg = zxx.shape[time_axis]
    n_default = 2 * (zxx.shape[freq_axis] - 1) if input_onesided else zxx.shape[freq_axis]
    nperseg = n_default if nperseg is None else _positive("nperseg", nperseg)
    # an odd segment length leaves one more frequency than 2 * (n - 1) implies: no padding
    nfft, step = _fft_length_and_step(
        nperseg, nfft, noverlap,
        default_nfft=nperseg if input_onesided and nperseg == n_default + 1 else n_default)
    # (..., freq, time): the other axes in order, then frequency and time
    outer = [i for i in range(zxx.ndim) if i not in (freq_axis, time_axis)]
    zxx = jnp.transpose(zxx, outer + [freq_axis, time_axis])
    if isinstance(window, (str, tuple)):
        win = get_window(window, nperseg)
    else:
        win = np.asarray(window)
        if win.ndim != 1:
            raise ValueError("window must be 1-D")
        if win.shape[0] != nperseg:
            raise ValueError(f"window must have length of {nperseg}")
    inverse = jnp.fft.irfft if input_onesided else jnp.fft.ifft
    pieces = inverse(zxx, axis=-2, n=nfft)[..., :nperseg, :]  # (..., nperseg, nseg)
    real_dtype = jnp.finfo(zxx.dtype).dtype
    win_arr = jnp.asarray(win.astype(real_dtype))
    pieces = jnp.swapaxes(pieces * np.sum(win), -1, -2) * win_arr  # (..., nseg, nperseg)
    length = nperseg + (nseg - 1) * step
    grid = (np.arange(nseg)[:, None] * step + np.arange(nperseg)[None, :]).ravel()
    x = jnp.zeros(pieces.shape[:-2] + (length,), pieces.dtype)
    x = x.at[..., grid].add(pieces.reshape(pieces.shape[:-2] + (-1,)))
    norm = np.zeros(length)
    np.add.at(norm, grid, np.tile(win ** 2, nseg))
    if boundary:
        half = nperseg // 2
        x, norm = x[..., half:length - half], norm[half:length - half]
    x = x / jnp.asarray(np.where(norm > 1e-10, norm, 1.0).astype(real_dtype))
    if input_onesided:
        x = x.real
    if x.ndim > 1 and time_axis != zxx.ndim - 1:
        x = jnp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    # SciPy counts the times along the first axis of the result (for a 1-D signal, its
    # length); JAX does the same, and so do we
    times = jnp.arange(x.shape[0]) / fs
    return times, x
