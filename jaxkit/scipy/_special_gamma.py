"""``jax.scipy.special``'s gamma and beta family: ``gammaln``, ``gammasgn``, ``loggamma``,
``gamma``, ``beta``, ``betaln``, ``betainc``, ``factorial``, ``comb``, ``poch``, ``digamma``,
``polygamma``, ``multigammaln``, ``gammainc``, ``gammaincc``, ``zeta`` and ``bernoulli``.

Each is a thin layer over lax's special-function primitives (``lgamma``, ``digamma``,
``polygamma``, ``igamma``, ``zeta``, ``betainc``) after JAX's argument promotion; ``zeta`` gets
its derivatives (in both arguments) from a differentiable Euler-Maclaurin series, as JAX does.
"""
from __future__ import annotations

import operator
from fractions import Fraction
from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.api import jvp
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.numpy._jitted import jitted
from jaxkit.scipy._util import concrete, promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def _real_only(name: str, x: Array) -> None:
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")


def gammaln(x: ArrayLike) -> Array:
    """``log|Gamma(x)|``."""
    x, = promote_args_inexact("gammaln", x)
    return lax.lgamma(x)


@jitted
def gammasgn(x: ArrayLike) -> Array:
    """The sign of ``Gamma(x)``: NaN at the poles (non-positive integers) and for NaN, ``-1``
    on the negative intervals ``(-2k-1, -2k)`` and at ``-0.0``, else ``1``."""
    x, = promote_args_inexact("gammasgn", x)
    _real_only("gammasgn", x)
    floor_x = lax.floor(x)
    negative = x < 0
    nan = (negative & (x == floor_x)) | jnp.isnan(x)
    minus = (negative & (floor_x % 2 != 0)) | ((x == 0) & jnp.signbit(x))
    one = jnp.ones_like(x)
    return jnp.where(nan, jnp.nan, jnp.where(minus, -one, one))


def loggamma(x: ArrayLike) -> Array:
    """The principal branch of ``log(Gamma(x))``: ``gammaln`` for positive real ``x``, NaN for
    the others (complex arguments are not supported)."""
    x, = promote_args_inexact("loggamma", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise NotImplementedError("jaxkit.scipy.special.loggamma of complex arguments")
    return jnp.where(x > 0, lax.lgamma(x), jnp.nan)


def gamma(x: ArrayLike) -> Array:
    """``Gamma(x) = gammasgn(x) * exp(gammaln(x))``."""
    x, = promote_args_inexact("gamma", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise NotImplementedError("jaxkit.scipy.special.gamma of complex arguments")
    return gammasgn(x) * lax.exp(lax.lgamma(x))


def _algdiv(a, b):
    """``log(Gamma(b) / Gamma(a + b))`` for ``b >= 8`` and ``a <= b``: TOMS 708's ``algdiv``
    (the correction terms of Stirling's series for ``b`` and ``a + b``)."""
    c = (0.833333333333333e-01, -0.277777777760991e-02, 0.793650666825390e-03,
         -0.595202931351870e-03, 0.837308034031215e-03, -0.165322962780713e-02)
    h = a / b
    x = h / (1 + h)
    x2 = x * x
    s = [1.0]  # s[k] = (1 - x**(2k+1)) / (1 - x) for k = 1..5
    for _ in range(5):
        s.append(1.0 + (x + x2 * s[-1]))
    t = (1.0 / b) ** 2
    w = c[5] * s[5] * t
    for k in (4, 3, 2, 1):
        w = (w + c[k] * s[k]) * t
    w = (w + c[0]) * (x / b)
    u = (b + (a - 0.5)) * lax.log1p(a / b)
    v = a * (lax.log(b) - 1.0)
    return jnp.where(u <= v, (w - v) - u, (w - u) - v)


@jitted
def _betaln(a, b):
    # lgamma(a) + lgamma(b) - lgamma(a + b) cancels badly for large b: there use algdiv.
    a, b = jnp.minimum(a, b), jnp.maximum(a, b)
    small_b = lax.lgamma(a) + (lax.lgamma(b) - lax.lgamma(a + b))
    large_b = lax.lgamma(a) + _algdiv(a, b)
    return jnp.where(b < 8, small_b, large_b)


def betaln(a: ArrayLike, b: ArrayLike) -> Array:
    """``log|B(a, b)|``."""
    a, b = promote_args_inexact("betaln", a, b)
    return _betaln(a, b)


def beta(a: ArrayLike, b: ArrayLike) -> Array:
    """The beta function ``B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b)``."""
    a, b = promote_args_inexact("beta", a, b)
    _real_only("beta", a)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * lax.exp(betaln(a, b))


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """The regularized incomplete beta function ``I_x(a, b)`` (``lax.betainc``)."""
    a, b, x = promote_args_inexact("betainc", a, b, x)
    _real_only("betainc", x)
    return lax.betainc(a, b, x)


def factorial(n: ArrayLike, exact: bool = False) -> Array:
    """``n!`` as ``Gamma(n + 1)``, 0 for negative ``n``."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n, = promote_args_inexact("factorial", n)
    return jnp.where(n < 0, 0, lax.exp(lax.lgamma(n + 1)))


def comb(N: ArrayLike, k: ArrayLike, *, repetition: bool = False) -> Array:
    """The number of combinations of ``N`` things taken ``k`` at a time (with repetition if
    asked), through log-gamma; 0 outside ``0 <= k <= N``."""
    N, k = promote_args_inexact("comb", N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k))
    valid = (k <= N) & (N >= 0) & (k >= 0)
    safe_n, safe_k = jnp.where(valid, N, 0.0), jnp.where(valid, k, 0.0)
    out = lax.exp(gammaln(safe_n + 1) - gammaln(safe_k + 1) - gammaln(safe_n + 1 - safe_k))
    return jnp.where(valid, out, 0.0)


def digamma(x: ArrayLike) -> Array:
    """The digamma function ``psi(x) = d/dx log Gamma(x)``."""
    x, = promote_args_inexact("digamma", x)
    return lax.digamma(x)


def polygamma(n: ArrayLike, x: ArrayLike) -> Array:
    """The ``n``-th derivative of ``digamma``; ``n`` must have an integer dtype."""
    if not dtypes.issubdtype(np.result_type(n) if not hasattr(n, "dtype") else n.dtype,
                             np.integer):
        raise ValueError("Argument `n` to polygamma must be of integer type. Got dtype "
                         f"{np.result_type(n) if not hasattr(n, 'dtype') else n.dtype}.")
    n, x = promote_args_inexact("polygamma", n, x)
    _real_only("polygamma", x)
    return lax.polygamma(n, x)


def multigammaln(a: ArrayLike, d: ArrayLike) -> Array:
    """The log of the multivariate gamma function of dimension ``d`` (a concrete integer)."""
    d = concrete(int, d, "d argument of multigammaln")
    a, d_ = promote_args_inexact("multigammaln", a, d)
    constant = 0.25 * d_ * (d_ - 1) * np.log(np.pi).astype(a.dtype)
    b = jnp.arange(d, dtype=a.dtype) / 2
    terms = gammaln(jnp.expand_dims(a, -1) - jnp.expand_dims(b, tuple(range(a.ndim))))
    return jnp.sum(terms, axis=-1) + constant


def gammainc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized lower incomplete gamma function ``P(a, x)``."""
    a, x = promote_args_inexact("gammainc", a, x)
    return lax.igamma(a, x)


def gammaincc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    a, x = promote_args_inexact("gammaincc", a, x)
    return lax.igammac(a, x)


# (2k)! / B_{2k} for k = 1..16: the Euler-Maclaurin remainder coefficients of zeta's series.
_BERNOULLI_RATIOS = np.array([
    12, -720, 30240, -1209600, 47900160, -1307674368000 / 691, 74724249600,
    -10670622842880000 / 3617, 5109094217170944000 / 43867,
    -802857662698291200000 / 174611, 14101100039391805440000 / 77683,
    -1693824136731743669452800000 / 236364091, 186134520519971831808000000 / 657931,
    -37893265687455865519472640000000 / 3392780147,
    759790291646040068357842010112000000 / 1723168255201,
    -134196726836183700385281186201600000000 / 7709321041217])


def _riemann_not_implemented():
    raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                              "compute the Hurwitz Zeta function.")


def _zeta_series(x, q):
    """Hurwitz zeta by Euler-Maclaurin summation: differentiable in both arguments, it gives
    ``zeta``'s derivatives."""
    s, a = promote_args_inexact("zeta", x, q)
    dtype = a.dtype.type
    n = dtype(8) if a.dtype == np.float32 else dtype(16)
    s_, a_ = jnp.expand_dims(s, -1), jnp.expand_dims(a, -1)
    k = jnp.expand_dims(np.arange(n, dtype=a.dtype), tuple(range(a.ndim)))
    head = jnp.sum((a_ + k) ** -s_, -1)
    integral = (a + n) ** (dtype(1) - s) / (s - dtype(1))
    t0 = (a + n) ** -s
    m = jnp.expand_dims(np.arange(2 * int(n), dtype=a.dtype), tuple(range(s.ndim)))
    rising = jnp.cumprod((s_ + m) / (a_ + n), -1)[..., ::2]
    rising = jnp.clip(rising, max=dtypes.finfo(a.dtype).max)
    coefs = np.array(_BERNOULLI_RATIOS[:rising.shape[-1]], dtype=a.dtype)
    tail = t0 * (dtype(0.5) + jnp.sum(rising / coefs, -1))
    return head + integral + tail


@custom_jvp
def _zeta(x, q):
    return lax.zeta(x, q)


_zeta.defjvp(partial(jvp, _zeta_series))


def zeta(x: ArrayLike, q: ArrayLike | None = None) -> Array:
    """The Hurwitz zeta function ``sum_k (k + q) ** -x`` (``q`` is required)."""
    if q is None:
        _riemann_not_implemented()
    x, q = promote_args_inexact("zeta", x, q)
    return _zeta(x, q)


@custom_jvp
def poch(z: ArrayLike, m: ArrayLike) -> Array:
    """The Pochhammer symbol ``(z)_m = Gamma(z + m) / Gamma(z)`` (1 for ``m = 0``)."""
    z, m = promote_args_inexact("poch", z, m)
    _real_only("poch", z)
    return jnp.where(m == 0., jnp.array(1, dtype=z.dtype), gamma(z + m) / gamma(z))


poch.defjvps(lambda dz, out, z, m: (digamma(z + m) - digamma(z)) * poch(z, m) * dz,
             lambda dm, out, z, m: digamma(z + m) * poch(z, m) * dm)


def bernoulli(n: int) -> Array:
    """The Bernoulli numbers ``B_0 .. B_n`` (``B_1 = -1/2`` as SciPy), from the Akiyama-Tanigawa
    recurrence in exact rationals; ``n`` is a concrete integer."""
    n = concrete(operator.index, n, "Argument n of bernoulli")
    if n < 0:
        raise ValueError("n must be a non-negative integer.")
    dtype = dtypes.canonicalize_dtype(np.float64)
    numbers = _bernoulli_numbers(n)
    return jnp.asarray(np.array(numbers, dtype=dtype))


def _bernoulli_numbers(n: int) -> list[float]:
    a = [Fraction(0)] * (n + 1)
    out = []
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(float(a[0]))
    if n >= 1:
        out[1] = -0.5  # the convention B_1 = -1/2 (SciPy's and JAX's)
    return out
