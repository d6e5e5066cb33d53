"""``jaxkit.numpy.fft``: discrete Fourier transforms (``jax.numpy.fft``).

Every transform is ``lax.fft`` (``stablehlo.fft``, O(n log n)) along one axis at a time,
with NumPy's ``n`` (crop or zero-pad) and ``norm`` conventions applied around it.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.numpy._creation import asarray
from jaxkit.numpy._promotion import canonicalize_axis, convert, ensure_arraylike
from jaxkit.numpy._shape import roll
from jaxkit.typing import ArrayLike

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]

_NORMS = (None, "backward", "ortho", "forward")


def _check_norm(norm: str | None) -> None:
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         '"forward".')


def _scale(n: int, norm: str | None, inverse: bool) -> float:
    if norm == "ortho":
        return 1.0 / np.sqrt(n)
    if (norm in (None, "backward")) == inverse:
        return 1.0 / n
    return 1.0


def _complex_dtype(x: Any) -> np.dtype:
    return dtypes.canonicalize_dtype(dtypes.to_complex_dtype(dtypes.dtype(x)))


def _real_dtype(x: Any) -> np.dtype:
    dt = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(dtypes.dtype(x)))
    return np.dtype(np.finfo(dt).dtype) if dtypes.issubdtype(dt, np.complexfloating) else dt


def _resize(x: Array, n: int, axis: int) -> Array:
    """Crop or zero-pad ``x`` to length ``n`` along ``axis`` (as NumPy's ``n`` argument)."""
    size = x.shape[axis]
    if n < size:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    if n > size:
        config = [(0, 0, 0)] * x.ndim
        config[axis] = (0, n - size, 0)
        return lax.pad(x, np.zeros((), x.dtype)[()], config)
    return x


def _fft_along(x: Array, axis: int, fft_type: str, n: int) -> Array:
    """``lax.fft`` of length ``n`` along ``axis`` (moved last for the transform and back)."""
    last = x.ndim - 1
    if axis != last:
        x = lax.transpose(x, [i for i in range(x.ndim) if i != axis] + [axis])
    out = lax.fft(x, fft_type, (n,))
    if axis != last:
        perm = list(range(x.ndim - 1))
        perm.insert(axis, last)
        out = lax.transpose(out, perm)
    return out


def _scaled(x: Array, n: int, norm: str | None, inverse: bool) -> Array:
    """Apply ``norm``'s scaling on top of XLA's convention (1/n on the inverse)."""
    s = _scale(n, norm, inverse) * (n if inverse else 1)
    if s == 1.0:
        return x
    return lax.mul(x, np.asarray(s, x.dtype)[()])


def _axis_n(a: Array, n: int | None, axis: int, name: str) -> tuple[int, int]:
    axis = canonicalize_axis(axis, a.ndim)
    n = a.shape[axis] if n is None else operator.index(core.concrete_or_error(
        n, f"The n argument of jnp.fft.{name}"))
    if n < 1:
        raise ValueError(f"jnp.fft.{name}: n={n} must be at least 1")
    return n, axis


def _c2c(a: ArrayLike, n: int | None, axis: int, norm: str | None, inverse: bool,
         name: str) -> Array:
    _check_norm(norm)
    a = ensure_arraylike(name, a)
    n, axis = _axis_n(a, n, axis, name)
    x = _resize(convert(a, _complex_dtype(a)), n, axis)
    return _scaled(_fft_along(x, axis, "ifft" if inverse else "fft", n), n, norm, inverse)


def fft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """``jnp.fft.fft``: the 1-D discrete Fourier transform."""
    return _c2c(a, n, axis, norm, False, "fft")


def ifft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """``jnp.fft.ifft``: the inverse of ``fft``."""
    return _c2c(a, n, axis, norm, True, "ifft")


def rfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """``jnp.fft.rfft``: the DFT of real input, non-negative frequencies only."""
    _check_norm(norm)
    a = ensure_arraylike("rfft", a)
    if dtypes.issubdtype(a.dtype, np.complexfloating):
        raise TypeError("jax.numpy.fft.rfft does not support complex input; use fft instead.")
    n, axis = _axis_n(a, n, axis, "rfft")
    x = _resize(convert(a, _real_dtype(a)), n, axis)
    return _scaled(_fft_along(x, axis, "rfft", n), n, norm, False)


def irfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """``jnp.fft.irfft``: the inverse of ``rfft`` (real output of length ``n``)."""
    _check_norm(norm)
    a = ensure_arraylike("irfft", a)
    axis = canonicalize_axis(axis, a.ndim)
    n = 2 * (a.shape[axis] - 1) if n is None else operator.index(core.concrete_or_error(
        n, "The n argument of jnp.fft.irfft"))
    if n < 1:
        raise ValueError(f"Invalid number of data points ({n}) specified")
    x = _resize(convert(a, _complex_dtype(a)), n // 2 + 1, axis)
    return _scaled(_fft_along(x, axis, "irfft", n), n, norm, True)


def _swap_norm(norm: str | None) -> str:
    return {None: "forward", "backward": "forward", "forward": "backward",
            "ortho": "ortho"}[norm]


def hfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """``jnp.fft.hfft``: the FFT of a signal with Hermitian symmetry (real spectrum)."""
    _check_norm(norm)
    a = ensure_arraylike("hfft", a)
    return irfft(lax.conj(convert(a, _complex_dtype(a))), n, axis, _swap_norm(norm))


def ihfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """``jnp.fft.ihfft``: the inverse of ``hfft``."""
    _check_norm(norm)
    return lax.conj(rfft(a, n, axis, _swap_norm(norm)))


def _axes_and_sizes(a: Array, s: Sequence[int] | None, axes: Sequence[int] | None,
                    name: str) -> tuple[list[int | None], list[int]]:
    if axes is None:
        axes = list(range(a.ndim)) if s is None else list(range(a.ndim - len(s), a.ndim))
    axes = [canonicalize_axis(ax, a.ndim) for ax in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"jax.numpy.fft.{name} does not support repeated axes. Got axes "
                         f"{axes}.")
    if s is None:
        return [None] * len(axes), axes
    if len(s) != len(axes):
        raise ValueError(f"Shape and axes have different lengths: {s} and {axes}")
    return list(s), axes


def fftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Array:
    """``jnp.fft.fftn``: the N-D discrete Fourier transform."""
    a = ensure_arraylike("fftn", a)
    sizes, axes = _axes_and_sizes(a, s, axes, "fftn")
    out = a
    for n, ax in zip(sizes, axes):
        out = fft(out, n, ax, norm)
    return out if axes else convert(out, _complex_dtype(out))


def ifftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Array:
    """``jnp.fft.ifftn``: the inverse of ``fftn``."""
    a = ensure_arraylike("ifftn", a)
    sizes, axes = _axes_and_sizes(a, s, axes, "ifftn")
    out = a
    for n, ax in zip(sizes, axes):
        out = ifft(out, n, ax, norm)
    return out if axes else convert(out, _complex_dtype(out))


def rfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Array:
    """``jnp.fft.rfftn``: ``rfft`` over the last axis, then ``fft`` over the others."""
    a = ensure_arraylike("rfftn", a)
    sizes, axes = _axes_and_sizes(a, s, axes, "rfftn")
    out = rfft(a, sizes[-1], axes[-1], norm)
    for n, ax in zip(sizes[:-1], axes[:-1]):
        out = fft(out, n, ax, norm)
    return out


def irfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Array:
    """``jnp.fft.irfftn``: the inverse of ``rfftn``."""
    a = ensure_arraylike("irfftn", a)
    sizes, axes = _axes_and_sizes(a, s, axes, "irfftn")
    out = a
    for n, ax in zip(sizes[:-1], axes[:-1]):
        out = ifft(out, n, ax, norm)
    return irfft(out, sizes[-1], axes[-1], norm)


def fft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None) -> Array:
    """``jnp.fft.fft2``: ``fftn`` over two axes."""
    return fftn(a, s, axes, norm)


def ifft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Array:
    """``jnp.fft.ifft2``: ``ifftn`` over two axes."""
    return ifftn(a, s, axes, norm)


def rfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Array:
    """``jnp.fft.rfft2``: ``rfftn`` over two axes."""
    return rfftn(a, s, axes, norm)


def irfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Array:
    """``jnp.fft.irfft2``: ``irfftn`` over two axes."""
    return irfftn(a, s, axes, norm)


def fftfreq(n: int, d: ArrayLike = 1.0, *, dtype: Any = None, device: Any = None) -> Array:
    """``jnp.fft.fftfreq``: the sample frequencies of ``fft`` (cycles per unit of ``d``)."""
    n = operator.index(core.concrete_or_error(n, "The n argument of jnp.fft.fftfreq"))
    dt = dtypes.check_and_canonicalize_user_dtype(dtype, "arange") if dtype is not None else \
        dtypes.default_float_dtype()  # JAX's first warning (it warns again in astype, array)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    out = asarray(k.astype(dt))
    return lax.div(out, convert(lax.mul(convert(d, dt), np.asarray(n, dt)[()]), dt)
                   if isinstance(d, (Array, core.Tracer)) else np.asarray(n * d, dt)[()])


def rfftfreq(n: int, d: ArrayLike = 1.0, *, dtype: Any = None, device: Any = None) -> Array:
    """``jnp.fft.rfftfreq``: the sample frequencies of ``rfft``."""
    n = operator.index(core.concrete_or_error(n, "The n argument of jnp.fft.rfftfreq"))
    dt = dtypes.check_and_canonicalize_user_dtype(dtype, "arange") if dtype is not None else \
        dtypes.default_float_dtype()  # JAX's first warning (it warns again in astype, array)
    out = asarray(np.arange(0, n // 2 + 1).astype(dt))
    return lax.div(out, convert(lax.mul(convert(d, dt), np.asarray(n, dt)[()]), dt)
                   if isinstance(d, (Array, core.Tracer)) else np.asarray(n * d, dt)[()])


def _shift(x: ArrayLike, axes: int | Sequence[int] | None, sign: int, name: str) -> Array:
    x = ensure_arraylike(name, x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    shifts = [sign * (x.shape[ax] // 2) for ax in axes]
    return roll(x, tuple(shifts), tuple(axes))


def fftshift(x: ArrayLike, axes: int | Sequence[int] | None = None) -> Array:
    """``jnp.fft.fftshift``: move the zero frequency to the centre."""
    return _shift(x, axes, 1, "fftshift")


def ifftshift(x: ArrayLike, axes: int | Sequence[int] | None = None) -> Array:
    """``jnp.fft.ifftshift``: the inverse of ``fftshift``."""
    return _shift(x, axes, -1, "ifftshift")
