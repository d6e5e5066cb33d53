"""``lax.fft``: fast Fourier transforms over the trailing axes, lowered to ``stablehlo.fft``.

One primitive, ``fft_p``, parameterised by ``fft_type`` (FFT, IFFT, RFFT, IRFFT) and
``fft_lengths`` (the logical lengths of the transformed trailing axes). It is linear: its
transposes are FFTs again (the DFT matrix is symmetric), with a zero-pad and real part for
RFFT and a conjugate-pair weighting for IRFFT, so gradients stay O(n log n).
"""
from __future__ import annotations

import enum
import math
from collections.abc import Sequence

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax import elementwise as ew
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax import slicing
from jaxkit.lax import structural as st
from jaxkit.lax.standard import standard_primitive
from jaxkit.typing import Array, ArrayLike

__all__ = ["FftType", "fft", "fft_p"]


class FftType(enum.IntEnum):
    """The kind of transform ``lax.fft`` computes (values as XLA numbers them)."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


_FFT_TYPE_NAMES = {"fft": FftType.FFT, "ifft": FftType.IFFT, "rfft": FftType.RFFT,
                   "irfft": FftType.IRFFT}


def _str_to_fft_type(s: str) -> FftType:
    try:
        return _FFT_TYPE_NAMES[s.lower()]
    except KeyError:
        raise ValueError(f"Unknown FFT type '{s}'") from None


def fft(x: ArrayLike, fft_type: FftType | str, fft_lengths: Sequence[int]) -> Array:
    """``lax.fft``: an FFT of ``x`` over its last ``len(fft_lengths)`` axes."""
    if isinstance(fft_type, str):
        typ = _str_to_fft_type(fft_type)
    elif isinstance(fft_type, FftType):
        typ = fft_type
    else:
        raise TypeError(f"Unknown FFT type value '{fft_type}'")
    if typ == FftType.RFFT and dtypes.issubdtype(dtypes.dtype(x), np.complexfloating):
        raise ValueError("only real valued inputs supported for rfft")
    if typ == FftType.RFFT:
        x = st.convert_element_type(x, dtypes.to_inexact_dtype(dtypes.dtype(x)))
    else:
        x = st.convert_element_type(x, dtypes.to_complex_dtype(dtypes.dtype(x)))
    fft_lengths = tuple(int(n) for n in fft_lengths)
    if len(fft_lengths) == 0:
        return x
    return fft_p.bind(x, fft_type=typ, fft_lengths=fft_lengths)


def _real_of(dtype) -> np.dtype:
    return np.dtype(np.finfo(dtype).dtype)


def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    if k > 3:
        raise ValueError(f"lax.fft: at most 3 fft_lengths are supported, got {fft_lengths}")
    if x.ndim < k:
        raise ValueError(f"FFT input must have at least as many dimensions as fft_lengths; "
                         f"got x.shape={x.shape} and fft_lengths={fft_lengths}")
    lead, tail = x.shape[:x.ndim - k], tuple(x.shape[x.ndim - k:])
    if fft_type == FftType.RFFT:
        if dtypes.issubdtype(x.dtype, np.complexfloating):
            raise ValueError("only real valued inputs supported for rfft")
        if tail != fft_lengths:
            raise ValueError(f"RFFT input shape {x.shape} must end in fft_lengths "
                             f"{fft_lengths}")
        shape = lead + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        return core.ShapedArray(shape, dtypes.to_complex_dtype(x.dtype))
    if not dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError(f"{fft_type.name} input must be complex, got {x.dtype.name}")
    if fft_type == FftType.IRFFT:
        want = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        if tail != want:
            raise ValueError(f"IRFFT input shape {x.shape} must end in {want} for fft_lengths "
                             f"{fft_lengths}")
        return core.ShapedArray(lead + fft_lengths, _real_of(x.dtype))
    if tail != fft_lengths:
        raise ValueError(f"{fft_type.name} input shape {x.shape} must end in fft_lengths "
                         f"{fft_lengths}")
    return core.ShapedArray(x.shape, x.dtype)


def _fft_lowering(ctx, x, *, fft_type, fft_lengths):
    aval_out = ctx.avals_out[0]
    if any(n == 0 for n in fft_lengths) or 0 in ctx.avals_in[0].shape:
        return mlir.full_like_aval(0, aval_out)
    return hlo.FftOp(x, hlo.FftTypeAttr.get(fft_type.name),
                     mlir.i64_attr(fft_lengths)).result


def _rfft_transpose(ct, fft_lengths):
    """RFFT is ``slice(FFT(complex(x)))``: transpose each step, in reverse order."""
    n = fft_lengths[-1]
    m = ct.shape[-1]
    config = [(0, 0, 0)] * (ct.ndim - 1) + [(0, n - m, 0)]
    full = slicing.pad(ct, np.zeros((), ct.dtype)[()], config)
    return ew.real(fft_p.bind(full, fft_type=FftType.FFT, fft_lengths=fft_lengths))


def _irfft_transpose(ct, fft_lengths):
    """IRFFT sums each stored frequency with its mirror image (weight 2) except DC and, for
    even lengths, Nyquist; its transpose is the RFFT of the cotangent with those weights."""
    # IRFFT's kernel is exp(+i...), the conjugate of RFFT's: conjugate the RFFT of ct.
    x = ew.conj(fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths))
    m = x.shape[-1]
    odd = fft_lengths[-1] % 2
    w = np.full((m,), 2.0)
    w[0] = 1.0
    if not odd:
        w[-1] = 1.0
    w = w / math.prod(fft_lengths)
    w = st.broadcast_in_dim(np.asarray(w, x.dtype), x.shape, (x.ndim - 1,))
    return ew.mul(x, w)


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


def _fft_batch(axis_data, args, dims, *, fft_type, fft_lengths):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), 0


fft_p = standard_primitive(lambda x, **p: _fft_abstract_eval(x, **p).shape,
                           lambda x, **p: _fft_abstract_eval(x, **p).dtype, "fft")
ad.deflinear2(fft_p, _fft_transpose)
batching.defrule(fft_p, _fft_batch)
mlir.register_lowering(fft_p, _fft_lowering)
shr.defsharding(fft_p, shr.fft_rule)
