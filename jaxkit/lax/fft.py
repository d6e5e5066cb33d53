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
from jaxkit.lax.nested_jit import nested_jit
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


@nested_jit(static_argnums=(1, 2))
def fft(x: ArrayLike, fft_type: FftType | str, fft_lengths: Sequence[int]) -> Array:
    """``lax.fft``: an FFT of ``x`` over its last ``len(fft_lengths)`` axes (a ``jit`` with
    ``fft_type`` and ``fft_lengths`` static, as JAX's). Lowers to ``stablehlo.fft``."""
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


def _hermitian_mask(like, m: int, n: int, dtype) -> Array:
    """Weights of the ``m`` stored frequencies of a length-``n`` real transform: 2 for each
    one standing for itself and its mirror image, 1 for DC and (``n`` even) Nyquist."""
    mask = st.full_like(like, 2.0, dtype=dtype, shape=(m,))
    starts = (0,) if n % 2 else (0, m - 1)
    for start in starts:  # a fresh ``1`` each time, as JAX's (one equation each in jaxprs)
        one = st.full_like(like, 1.0, dtype=dtype, shape=(1,))
        mask = slicing.dynamic_update_slice(mask, one, (start,))
    return mask


@nested_jit(static_argnums=(1,))
def _rfft_transpose(ct, fft_lengths):
    """RFFT's transpose: an IRFFT of the conjugate cotangent, each stored frequency divided by
    its Hermitian weight (a ``jit`` of its own, as JAX's)."""
    mask = _hermitian_mask(ct, ct.shape[-1], fft_lengths[-1], None)
    mask = st.expand_dims(mask, range(ct.ndim - 1))
    out = fft(ew.div(ew.conj(ct), mask), FftType.IRFFT, fft_lengths)
    return ew.mul(_weak_scalar(math.prod(fft_lengths), out.dtype), out)


def _irfft_transpose(ct, fft_lengths):
    """IRFFT sums each stored frequency with its mirror image (weight 2) except DC and, for
    even lengths, Nyquist; its transpose is the conjugate RFFT of the cotangent with those
    weights, scaled by ``1/N``."""
    x = fft(ct, FftType.RFFT, fft_lengths)
    mask = _hermitian_mask(ct, x.shape[-1], fft_lengths[-1], x.dtype)
    scale = _weak_scalar(1 / math.prod(fft_lengths), x.dtype)
    out = ew.mul(ew.mul(scale, st.expand_dims(mask, range(x.ndim - 1))), x)
    return ew.conj(out)


def _weak_scalar(value, dtype):
    """``value`` as a weakly typed scalar of ``dtype``: a literal in jaxprs, as the Python
    scalar of JAX's ``N * x`` is."""
    return st.convert_element_type(value, dtype, weak_type=True)


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval)]
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    return [fft(ct, fft_type, fft_lengths)]


def _fft_batch(axis_data, args, dims, *, fft_type, fft_lengths):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    return fft(x, fft_type, fft_lengths), 0


fft_p = standard_primitive(lambda x, **p: _fft_abstract_eval(x, **p).shape,
                           lambda x, **p: _fft_abstract_eval(x, **p).dtype, "fft")
ad.deflinear2(fft_p, _fft_transpose)
batching.defrule(fft_p, _fft_batch)
mlir.register_lowering(fft_p, _fft_lowering)
shr.defsharding(fft_p, shr.fft_rule)
