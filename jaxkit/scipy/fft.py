"""``jaxkit.scipy.fft``: discrete cosine transforms (``jax.scipy.fft``), type 2 as JAX has.

Each 1-D DCT is one complex FFT of length ``n`` (Makhoul's reordering: even samples forward,
odd samples reversed, then a quarter-sample phase twist), so it costs O(n log n).
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy import fft as jfft
from jaxkit.numpy._creation import asarray
from jaxkit.numpy._promotion import canonicalize_axis, convert, ensure_arraylike
from jaxkit.runtime.array import Array
from jaxkit.typing import ArrayLike

__all__ = ["dct", "dctn", "idct", "idctn"]


def _check(type: int, norm: str | None, name: str) -> None:
    if type != 2:
        raise NotImplementedError(f"jaxkit.scipy.fft.{name}: only type=2 is supported "
                                  f"(as in JAX), got type={type}")
    if norm is not None and norm != "ortho":
        raise ValueError(f"jaxkit.scipy.fft.{name}: norm must be None or 'ortho', got {norm!r}")


def _float(x: ArrayLike, name: str) -> Array:
    x = ensure_arraylike(name, x)
    dt = dtypes.canonicalize_dtype(dtypes.to_inexact_dtype(x.dtype))
    return convert(x, dt)


def _moved(x: Array, axis: int) -> Array:
    perm = [i for i in range(x.ndim) if i != axis] + [axis]
    return lax.transpose(x, perm)


def _restored(x: Array, axis: int) -> Array:
    perm = list(range(x.ndim - 1))
    perm.insert(axis, x.ndim - 1)
    return lax.transpose(x, perm)


def _bcast(v: np.ndarray, x: Array) -> Array:
    return lax.broadcast_in_dim(asarray(v), x.shape, (x.ndim - 1,))


def _dct_last(x: Array, norm: str | None) -> Array:
    n = x.shape[-1]
    v = lax.concatenate([x[..., ::2], lax.rev(x[..., 1::2], (x.ndim - 1,))], x.ndim - 1)
    V = jfft.fft(v, axis=-1)
    k = np.arange(n)
    twist = np.exp(-1j * np.pi * k / (2 * n)).astype(V.dtype)
    y = lax.mul(lax.real(lax.mul(V, _bcast(twist, V))), np.asarray(2, x.dtype)[()])
    if norm == "ortho":
        s = np.full(n, np.sqrt(1 / (2 * n)))
        s[0] = np.sqrt(1 / (4 * n))
        y = lax.mul(y, _bcast(s.astype(x.dtype), y))
    return y


def _idct_last(y: Array, norm: str | None) -> Array:
    n = y.shape[-1]
    if norm == "ortho":
        s = np.full(n, np.sqrt(2 * n))
        s[0] = np.sqrt(4 * n)
        y = lax.mul(y, _bcast(s.astype(y.dtype), y))
    # V_k = (y_k - i y_{n-k}) e^{i pi k / 2n} / 2, with y_n = 0.
    zero = lax.full(y.shape[:-1] + (1,), 0, y.dtype)
    mirrored = lax.concatenate([zero, lax.rev(y[..., 1:], (y.ndim - 1,))], y.ndim - 1)
    V = lax.complex(y, lax.neg(mirrored))
    k = np.arange(n)
    twist = (np.exp(1j * np.pi * k / (2 * n)) / 2).astype(V.dtype)
    v = lax.real(jfft.ifft(lax.mul(V, _bcast(twist, V)), axis=-1))
    half = (n + 1) // 2
    even, odd = v[..., :half], lax.rev(v[..., half:], (v.ndim - 1,))
    # Interleave: x[2j] = even[j], x[2j+1] = odd[j].
    if n % 2:
        odd = lax.concatenate([odd, lax.full(odd.shape[:-1] + (1,), 0, odd.dtype)],
                              odd.ndim - 1)
    both = lax.concatenate([lax.expand_dims(even, (even.ndim,)),
                            lax.expand_dims(odd, (odd.ndim,))], even.ndim)
    out = lax.reshape(both, y.shape[:-1] + (2 * half,))
    return out[..., :n]


def _apply(x: Array, n: int | None, axis: int, fn, norm: str | None, name: str) -> Array:
    axis = canonicalize_axis(axis, x.ndim)
    if n is not None:
        n = operator.index(core.concrete_or_error(n, f"The n argument of {name}"))
        x = jfft._resize(x, n, axis)
    return _restored(fn(_moved(x, axis), norm), axis)


def dct(x: ArrayLike, type: int = 2, n: int | None = None, axis: int = -1,
        norm: str | None = None) -> Array:
    """``jax.scipy.fft.dct``: the type-II discrete cosine transform along ``axis``."""
    _check(type, norm, "dct")
    return _apply(_float(x, "dct"), n, axis, _dct_last, norm, "dct")


def idct(x: ArrayLike, type: int = 2, n: int | None = None, axis: int = -1,
         norm: str | None = None) -> Array:
    """``jax.scipy.fft.idct``: the inverse of the type-II DCT along ``axis``."""
    _check(type, norm, "idct")
    return _apply(_float(x, "idct"), n, axis, _idct_last, norm, "idct")


def _nd(x: ArrayLike, s, axes, norm, fn, name: str) -> Array:
    x = _float(x, name)
    if axes is None:
        axes = range(x.ndim) if s is None else range(x.ndim - len(s), x.ndim)
    axes = [canonicalize_axis(a, x.ndim) for a in axes]
    if s is None:
        s = [None] * len(axes)
    elif len(s) != len(axes):
        raise ValueError(f"Shape and axes have different lengths: {s} and {axes}")
    for n, ax in zip(s, axes):
        x = _apply(x, n, ax, fn, norm, name)
    return x


def dctn(x: ArrayLike, type: int = 2, s: Sequence[int] | None = None,
         axes: Sequence[int] | None = None, norm: str | None = None) -> Array:
    """``jax.scipy.fft.dctn``: the type-II DCT over several axes."""
    _check(type, norm, "dctn")
    return _nd(x, s, axes, norm, _dct_last, "dctn")


def idctn(x: ArrayLike, type: int = 2, s: Sequence[int] | None = None,
          axes: Sequence[int] | None = None, norm: str | None = None) -> Array:
    """``jax.scipy.fft.idctn``: the inverse type-II DCT over several axes."""
    _check(type, norm, "idctn")
    return _nd(x, s, axes, norm, _idct_last, "idctn")
