"""jnp's floating-point decomposition and special elementwise functions: ``heaviside``,
``hypot``, ``sinc`` (with derivatives right at 0), ``spacing``, ``frexp`` and ``ldexp``.

Built from lax and the basic ufuncs of ``_ufuncs``; jitted like them (``_jitted``).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.numpy._jitted import jitted
from jaxkit.numpy._promotion import (
    check_arraylike,
    ensure_arraylike,
    promote_args_inexact,
    promote_dtypes_inexact,
)
from jaxkit.numpy._ufuncs import (
    _const,
    _dtype,
    _isnan,
    _strong,
    add,
    copysign,
    isinf,
    isnan,
    isposinf,
    maximum,
    minimum,
    multiply,
    subtract,
    where3,
)
from jaxkit.typing import Array, ArrayLike


@jitted(inline=False)
def heaviside(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.heaviside``: 0 for negative ``x1``, 1 for positive, ``x2`` at zero."""
    check_arraylike("heaviside", x1, x2)
    x1, x2 = promote_dtypes_inexact(x1, x2)
    zero = _const(x1, 0)
    return where3(lax.lt(x1, zero), zero,
                  where3(lax.gt(x1, zero), _const(x1, 1), where3(_isnan(x1), x1, x2)))


@jitted(inline=False)
def hypot(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.hypot``: ``sqrt(x1**2 + x2**2)`` without intermediate overflow."""
    x1, x2 = promote_args_inexact("hypot", x1, x2)
    if dtypes.issubdtype(_dtype(x1), np.complexfloating):
        raise ValueError("jnp.hypot is not well defined for complex-valued inputs. Please "
                         "convert to real values first, such as by using abs(x)")
    x1, x2 = lax.abs(x1), lax.abs(x2)
    idx_inf = lax.bitwise_or(isposinf(x1), isposinf(x2))
    x1, x2 = maximum(x1, x2), minimum(x1, x2)
    # One expression, so the two ``x1 == 0`` are staged in JAX's order.
    x = where3(x1 == 0, x1, x1 * lax.sqrt(
        1 + lax.square(lax.div(x2, where3(x1 == 0, lax.full_like(x1, 1), x1)))))
    return where3(idx_inf, _const(x, np.inf), x)


@jitted(inline=False)
def sinc(x: ArrayLike, /) -> Array:
    """``jnp.sinc``: ``sin(pi x) / (pi x)``, 1 at 0."""
    x = ensure_arraylike("sinc", x)
    x, = promote_dtypes_inexact(x)
    eq_zero = lax.eq(x, _strong(x, 0))
    pi_x = lax.mul(_const(x, np.pi), x)
    safe_pi_x = where3(eq_zero, _const(x, 1), pi_x)
    return where3(eq_zero, _sinc_maclaurin(0, pi_x), lax.div(lax.sin(safe_pi_x), safe_pi_x))


@partial(custom_jvp, nondiff_argnums=(0,))
def _sinc_maclaurin(k: int, x: Array) -> Array:
    """The k-th derivative of sinc at 0 (times ``x * 0`` to keep shape and weak type); its
    JVP is the next one, so that every derivative of ``sinc`` is right at 0, as in JAX."""
    if k % 2:
        return multiply(x, 0)
    return add(multiply(x, 0), _const(x, (-1) ** (k // 2) / (k + 1)))


@_sinc_maclaurin.defjvp
def _sinc_maclaurin_jvp(k: int, primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    (x,), (t,) = primals, tangents
    return _sinc_maclaurin(k, x), multiply(_sinc_maclaurin(k + 1, x), t)


@jitted
def spacing(x: ArrayLike, /) -> Array:
    """``jnp.spacing``: the distance to the next representable number away from zero."""
    arr, = promote_args_inexact("spacing", x)
    if dtypes.isdtype(_dtype(arr), "complex floating"):
        raise ValueError("jnp.spacing is not defined for complex inputs.")
    inf = _const(arr, np.inf)
    if _dtype(arr) == np.float16:
        return subtract(lax.nextafter(arr, inf), arr)
    result = subtract(lax.nextafter(arr, copysign(inf, arr)), arr)
    # A NumPy scalar of the dtype (as JAX's), so this copysign is the first one's program.
    tiny = dtypes.finfo(_dtype(arr)).smallest_subnormal
    return where3(lax.eq(result, _strong(result, 0)), copysign(tiny, arr), result)


_INT_FOR_BITS = {16: np.int16, 32: np.int32, 64: np.int64}


def _normalize_float(x: Array) -> tuple[Array, Array]:
    """``x``'s bits as integers, subnormals first scaled into the normal range, and the
    exponent correction that scaling needs."""
    info = dtypes.finfo(_dtype(x))
    int_type = _INT_FOR_BITS[info.bits]
    cond = lax.abs(x) < info.tiny
    x1 = where3(cond, x * _const(x, 1 << info.nmant), x)
    x2 = where3(cond, int_type(-info.nmant), int_type(0))
    return lax.bitcast_convert_type(x1, int_type), x2


@jitted(inline=False)
def frexp(x: ArrayLike, /) -> tuple[Array, Array]:
    """``jnp.frexp``: mantissa in [0.5, 1) and exponent with ``x = m * 2**e``."""
    x = ensure_arraylike("frexp", x)
    x, = promote_dtypes_inexact(x)
    if dtypes.issubdtype(_dtype(x), np.complexfloating):
        raise TypeError("frexp does not support complex-valued inputs")
    return _frexp(x)


@custom_jvp
def _frexp(x: Array) -> tuple[Array, Array]:
    # The exponent field, unbiased, is the exponent; the mantissa keeps its bits under the
    # exponent of 0.5. Infinities, NaNs and zeros are their own mantissa, exponent 0.
    dtype = _dtype(x)
    info = dtypes.finfo(dtype)
    mask = (1 << info.nexp) - 1
    bias = 1 - info.minexp
    x1, x2 = _normalize_float(x)
    x2 += ((x1 >> info.nmant) & mask) - bias + 1
    x1 &= ~(mask << info.nmant)
    x1 |= (bias - 1) << info.nmant
    x1 = lax.bitcast_convert_type(x1, dtype)
    cond = isinf(x) | isnan(x) | (x == 0)
    x2 = where3(cond, lax.full_like(x2, 0), x2)
    return where3(cond, x, x1), lax.convert_element_type(x2, np.int32)


@_frexp.defjvp
def _frexp_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    m, e = frexp(x)
    mdot = t * lax.exp2(-e.astype(t.dtype))
    edot = lax.full_like(e, fill_value=0, dtype=dtypes.float0)
    return (m, e), (mdot, edot)


@jitted(inline=False)
def ldexp(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.ldexp``: ``x1 * 2**x2``."""
    x1, x2 = ensure_arraylike("ldexp", x1, x2)
    if dtypes.issubdtype(x1.dtype, np.complexfloating) or \
            dtypes.issubdtype(x2.dtype, np.inexact):
        raise ValueError(f"ldexp not supported for input types {(x1.dtype, x2.dtype)}")
    x1, = promote_args_inexact("ldexp", x1)
    x2 = lax.convert_element_type(x2, x1.dtype)
    # The exponent split off first, so that a small x1 and a large x2 do not overflow; the
    # result's exponent may still be one too large for a finite result: moved to the mantissa.
    m, e = frexp(x1)
    e = (e.astype(x2.dtype) + x2).astype(x1.dtype)
    m = where3(e > 0, m * 2, m)
    e = where3(e > 0, e - 1, e)
    x = m * (2 ** e.astype(m.dtype))
    return where3(isinf(x1) | (x1 == 0), x1, x)
