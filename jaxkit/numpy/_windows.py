"""Window functions (``bartlett``, ``blackman``, ``hamming``, ``hanning``, ``kaiser``) and
``i0``, the Bessel function ``kaiser`` is built on."""
from __future__ import annotations

import operator

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.numpy._jitted import jitted
from jaxkit.runtime.array import Array
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.numpy._creation import ones
from jaxkit.numpy._promotion import (
    promote_args_inexact,
)
from jaxkit.numpy._ufuncs import abs as _abs
from jaxkit.numpy._ufuncs import (
    cos,
    multiply,
    sqrt,
    subtract,
    true_divide,
)
from jaxkit.typing import ArrayLike


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


@jitted(inline=False)
def i0(x: ArrayLike) -> Array:
    """``jnp.i0``: the modified Bessel function of the first kind, order 0."""
    x, = promote_args_inexact("i0", x)
    if not dtypes.issubdtype(x.dtype, np.floating):
        raise ValueError(f"Unsupported input type to jax.numpy.i0: {x.dtype}")
    return _i0(x)


@custom_jvp
def _i0(x: Array) -> Array:
    abs_x = lax.abs(x)
    return lax.mul(lax.exp(abs_x), lax.bessel_i0e(abs_x))


@_i0.defjvp
def _i0_jvp(primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    # I0' = I1 = exp(|x|) i1e(x), which is 0 at 0; differentiating the formula above instead
    # would carry abs's one-sided derivative there and give 1 (JAX gives 0 too).
    x, = primals
    g, = tangents
    return _i0(x), lax.mul(g, lax.mul(lax.exp(lax.abs(x)), lax.bessel_i1e(x)))


# --------------------------------------------------------------------------------------------
# Bits, axes, I/O
# --------------------------------------------------------------------------------------------
