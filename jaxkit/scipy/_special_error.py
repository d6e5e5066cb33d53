"""``jax.scipy.special``'s error-function family: ``erf``, ``erfc``, ``erfinv``, ``erfcx``,
``wofz`` (Faddeeva), ``dawsn``, and the normal distribution's ``ndtr``, ``ndtri``, ``log_ndtr``.

``erf``/``erfc``/``erfinv`` are lax primitives; the others are the published rational and
asymptotic approximations JAX evaluates (Cephes for ``ndtri`` and ``dawsn``, Weideman's series
for ``wofz``), each with the closed-form derivative as a custom JVP.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.scipy._util import promote_args_complex, promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def _polyval(coefs, x):
    """Horner's rule with NumPy coefficients (highest degree first) cast to ``x``'s dtype."""
    coefs = np.asarray(coefs, dtype=x.dtype)
    out = jnp.full_like(x, coefs[0])
    for c in coefs[1:]:
        out = out * x + c
    return out


def erf(x: ArrayLike) -> Array:
    """The error function."""
    x, = promote_args_inexact("erf", x)
    return lax.erf(x)


def erfc(x: ArrayLike) -> Array:
    """The complementary error function ``1 - erf(x)``."""
    x, = promote_args_inexact("erfc", x)
    return lax.erfc(x)


def erfinv(x: ArrayLike) -> Array:
    """The inverse of ``erf`` on ``(-1, 1)``."""
    x, = promote_args_inexact("erfinv", x)
    return lax.erf_inv(x)


# ---- Faddeeva function w(z) = exp(-z**2) erfc(-i z) --------------------------------------------
# Weideman (1994), "Computation of the complex error function", N = 32 expansion.
_WOFZ_L = 4.7568284600108841
_WOFZ_C = np.array([
    -1.3034426067909105e-12, 3.7411838373738471e-12, 8.030427700497756e-12,
    -2.1543593557490879e-11, -5.5442449963237932e-11, 1.165824698850374e-10,
    4.1537441121999766e-10, -5.2310202114920615e-10, -3.2080151339721323e-09,
    8.1248864216535907e-10, 2.3797556530014025e-08, 2.2930438438915445e-08,
    -1.4813078929137642e-07, -4.1840763750512053e-07, 4.2558331397138446e-07,
    4.4015317312832251e-06, 6.8210319443575151e-06, -2.1409619201999998e-05,
    -0.00013075449254579421, -0.00024532980270038237, 0.00039259136070109705,
    0.0045195411053493093, 0.019006155784845501, 0.057304403529837282, 0.14060716226893755,
    0.29544451071508743, 0.54601397206393376, 0.9019254893648001, 1.3455441692345449,
    1.8256696296324815, 2.2635372999002676, 2.5722534081245696])


def _wofz_upper_half(z):
    # Valid for Im(z) >= 0.
    re = lax.real(z)
    big_l = lax.complex(jnp.full_like(re, _WOFZ_L), jnp.zeros_like(re))
    iz = lax.complex(-lax.imag(z), re)
    denom = big_l - iz
    p = _polyval(_WOFZ_C.astype(re.dtype), (big_l + iz) / denom)
    inv_sqrt_pi = lax.complex(jnp.full_like(re, 1 / np.sqrt(np.pi)), jnp.zeros_like(re))
    return 2 * p / (denom * denom) + inv_sqrt_pi / denom


@custom_jvp
def _wofz(z):
    upper = lax.imag(z) >= 0
    w = _wofz_upper_half(lax.select(upper, z, -z))
    # w(-z) = 2 exp(-z**2) - w(z) maps the lower half plane to the upper one.
    return lax.select(upper, w, 2 * lax.exp(-(z * z)) - w)


_wofz.defjvps(lambda g, w, z: g * (-2 * z * w + lax.complex(
    jnp.zeros_like(lax.real(z)), jnp.full_like(lax.real(z), 2 / np.sqrt(np.pi)))))


def wofz(z: ArrayLike) -> Array:
    """The Faddeeva function ``w(z) = exp(-z**2) erfc(-i z)`` (complex result)."""
    z, = promote_args_complex("wofz", z)
    return _wofz(z)


# ---- erfcx(x) = exp(x**2) erfc(x) -------------------------------------------------------------
_ERFCX_ASYMPTOTIC = [7918.06640625, -1055.7421875, 162.421875, -29.53125, 6.5625, -1.875, .75,
                     -.5, 1.]


def _erfcx_impl(x, nterms):
    # Past sqrt(log(max)) exp(x**2) overflows: there the asymptotic series in 1/x**2.
    large = x > np.sqrt(np.log(dtypes.finfo(x.dtype).max))
    safe = lax.select(large, jnp.ones_like(x), x)
    direct = lax.exp(lax.square(safe)) * lax.erfc(safe)
    t = 1 / lax.square(x)
    asymptotic = _polyval(np.array(_ERFCX_ASYMPTOTIC[-nterms:], x.dtype), t) / (
        x * np.array(np.sqrt(np.pi), x.dtype))
    return lax.select(large, asymptotic, direct)


@custom_jvp
def _erfcx(x):
    if x.dtype == np.float64:
        return _erfcx_impl(x, 9)
    if x.dtype == np.float32:
        return _erfcx_impl(x, 5)
    return _erfcx_impl(x.astype(np.float32), 5).astype(x.dtype)


_erfcx.defjvps(lambda g, y, x: g * (2 * x * y - np.array(2 / np.sqrt(np.pi), x.dtype)))


def erfcx(x: ArrayLike) -> Array:
    """The scaled complementary error function ``exp(x**2) erfc(x)``; complex ``x`` through
    ``wofz(i x)``."""
    x, = promote_args_inexact("erfcx", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        return _wofz(lax.complex(-lax.imag(x), lax.real(x)))
    return _erfcx(x)


# ---- Dawson's integral (Cephes dawsn.c) ---------------------------------------------------------
_DAWSN_AN = [1.13681498971755972054e-11, 8.49262267667473811108e-10, 1.94434204175553054283e-8,
             9.53151741254484363489e-7, 3.07828309874913200438e-6, 3.52513368520288738649e-4,
             -8.50149846724410912031e-4, 4.22618223005546594270e-2, -9.17480371773452345351e-2,
             9.99999999999999994612e-1]
_DAWSN_AD = [2.40372073066762605484e-11, 1.48864681368493396752e-9, 5.21265281010541664570e-8,
             1.27258478273186970203e-6, 2.32490249820789513991e-5, 3.25524741826057911661e-4,
             3.48805814657162590916e-3, 2.79448531198828973716e-2, 1.58874241960120565368e-1,
             5.74918629489320327824e-1, 1.00000000000000000539e0]
_DAWSN_BN = [5.08955156417900903354e-1, -2.44754418142697847934e-1, 9.41512335303534411857e-2,
             -2.18711255142039025206e-2, 3.66207612329569181322e-3, -4.23209114460388756528e-4,
             3.59641304793896631888e-5, -2.14640351719968974225e-6, 9.10010780076391431042e-8,
             -2.40274520828250956942e-9, 3.59233385440928410398e-11]
_DAWSN_BD = [1.00000000000000000000e0, -6.31839869873368190192e-1, 2.36706788228248691528e-1,
             -5.31806367003223277662e-2, 8.48041718586295374409e-3, -9.47996768486665330168e-4,
             7.81025592944552338085e-5, -4.55875153252442634831e-6, 1.89100358111421846170e-7,
             -4.91324691331920606875e-9, 7.18466403235734541950e-11]
_DAWSN_CN = [-5.90592860534773254987e-1, 6.29235242724368800674e-1, -1.72858975380388136411e-1,
             1.64837047825189632310e-2, -4.86827613020462700845e-4]
_DAWSN_CD = [1.00000000000000000000e0, -2.69820057197544900361e0, 1.73270799045947845857e0,
             -3.93708582281939493482e-1, 3.44278924041233391079e-2, -9.73655226040941223894e-4]


def _dawsn_impl(x):
    dt = x.dtype
    ax = lax.abs(x)
    t = 1 / lax.square(ax)
    one = jnp.ones_like(ax)
    r1, r3 = ax < 3.25, ax >= 6.25
    r2 = ~r1 & ~r3
    a1 = lax.select(r1, ax, one)
    near = a1 * _polyval(np.array(_DAWSN_AN, dt), a1 * a1) / _polyval(np.array(_DAWSN_AD, dt),
                                                                         a1 * a1)
    t2, a2 = lax.select(r2, t, one), lax.select(r2, ax, one)
    mid = (0.5 / a2) * (1 + t2 * _polyval(np.array(_DAWSN_BN, dt), t2)
                        / _polyval(np.array(_DAWSN_BD, dt), t2))
    t3, a3 = lax.select(r3, t, one), lax.select(r3, ax, one)
    far = (0.5 / a3) * (1 + t3 * _polyval(np.array(_DAWSN_CN, dt), t3)
                        / _polyval(np.array(_DAWSN_CD, dt), t3))
    return jnp.sign(x) * lax.select(r1, near, lax.select(r2, mid, far))


@custom_jvp
def _dawsn(x):
    if x.dtype in (np.float32, np.float64):
        return _dawsn_impl(x)
    return _dawsn_impl(x.astype(np.float32)).astype(x.dtype)


_dawsn.defjvps(lambda g, y, x: g * (1 - 2 * x * y))


def dawsn(x: ArrayLike) -> Array:
    """Dawson's integral ``exp(-x**2) * integral_0^x exp(t**2) dt``."""
    x, = promote_args_inexact("dawsn", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("dawsn does not support complex-valued inputs.")
    return _dawsn(x)


# ---- the standard normal CDF and its inverse -------------------------------------------------
def _check_float(name, x):
    dtype = x.dtype
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={dtype} is not supported, see docstring for supported types.")


def _ndtr(x):
    dt = x.dtype.type
    half_sqrt_2 = dt(0.5) * np.sqrt(2., dtype=dt)
    w = x * half_sqrt_2
    z = lax.abs(w)
    # erf is accurate near 0, erfc in the tails.
    y = lax.select(z < half_sqrt_2, dt(1.) + lax.erf(w),
                   lax.select(w > dt(0.), dt(2.) - lax.erfc(z), lax.erfc(z)))
    return dt(0.5) * y


def ndtr(x: ArrayLike) -> Array:
    """The standard normal CDF (float32/float64 only)."""
    x = jnp.asarray(x)
    _check_float("ndtr", x)
    return _ndtr(x)


# Cephes ndtri.c: rational approximations on the central part and two tail ranges.
_NDTRI_P0 = [-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0]
_NDTRI_Q0 = [1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0]
_NDTRI_P1 = [4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2,
             -8.57456785154685413611E-4]
_NDTRI_Q1 = [1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4]
_NDTRI_P2 = [3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9]
_NDTRI_Q2 = [1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9]


def _ndtri(p):
    dt = p.dtype.type
    cast = partial(np.array, dtype=p.dtype)
    # Work on min(p, 1 - p) (the tail is the accurate side), then restore the sign.
    q = jnp.where(p > dt(-np.expm1(-2.)), dt(1.) - p, p)
    q = jnp.where(q == dt(0.), jnp.full_like(q, dt(0.5)), q)
    w = q - dt(0.5)
    ww = lax.square(w)
    central = w + w * ww * (_polyval(cast(_NDTRI_P0), ww) / _polyval(cast(_NDTRI_Q0), ww))
    central = central * -dt(np.sqrt(2. * np.pi))
    z = lax.sqrt(dt(-2.) * lax.log(q))
    head = z - lax.log(z) / z
    inv_z = 1 / z
    far = head - _polyval(cast(_NDTRI_P2), inv_z) / _polyval(cast(_NDTRI_Q2), inv_z) / z
    near = head - _polyval(cast(_NDTRI_P1), inv_z) / _polyval(cast(_NDTRI_Q1), inv_z) / z
    x = jnp.where(q > dt(np.exp(-2.)), central, jnp.where(z >= dt(8.0), far, near))
    x = jnp.where(p > dt(1. - np.exp(-2.)), x, -x)
    inf = jnp.full_like(x, np.inf)
    return jnp.where(p == dt(0.0), -inf, jnp.where(p == dt(1.0), inf, x))


def ndtri(p: ArrayLike) -> Array:
    """The inverse of ``ndtr`` (float32/float64 only): ``-inf`` at 0, ``inf`` at 1."""
    p = jnp.asarray(p)
    _check_float("ndtri", p)
    return _ndtri(p)


# log_ndtr switches from log(ndtr(x)) to an asymptotic series below `lower`, and to
# -ndtr(-x) above `upper`.
_LOG_NDTR_SEGMENTS = {np.dtype(np.float64): (-20., 8.), np.dtype(np.float32): (-10., 5.)}


def _norm_logpdf(x):
    return -0.5 * lax.square(x) - np.array(np.log(np.sqrt(2 * np.pi)), x.dtype)


def _log_ndtr_lower(x, series_order):
    dt = x.dtype.type
    x2 = lax.square(x)
    log_scale = -dt(0.5) * x2 - lax.log(-x) - dt(0.5 * np.log(2. * np.pi))
    # 1 + sum_n (-1)**n (2n-1)!! / x**(2n)
    total = jnp.ones_like(x)
    x_2n = x2
    for n in range(1, series_order + 1):
        term = np.array(np.prod(np.arange(2 * n - 1, 1, -2)), x.dtype) / x_2n
        total = total - term if n % 2 else total + term
        x_2n = x_2n * x2
    return log_scale + lax.log(total)


def log_ndtr(x: ArrayLike, series_order: int = 3) -> Array:
    """``log(ndtr(x))``, accurate in both tails (an asymptotic series of ``series_order``
    terms far left)."""
    return _log_ndtr(x, series_order)


@partial(custom_jvp, nondiff_argnums=(1,))
def _log_ndtr(x, series_order):
    if not isinstance(series_order, int):
        raise TypeError("series_order must be a Python integer.")
    if series_order < 0:
        raise ValueError("series_order must be non-negative.")
    if series_order > 30:
        raise ValueError("series_order must be <= 30.")
    x = jnp.asarray(x)
    if x.dtype not in _LOG_NDTR_SEGMENTS:
        raise TypeError(f"x.dtype={np.dtype(x.dtype)} is not supported.")
    lower, upper = (np.array(v, x.dtype) for v in _LOG_NDTR_SEGMENTS[x.dtype])
    above = x > upper
    value = _ndtr(jnp.where(above, -x, lax.max(x, lower)))
    return jnp.where(above, -value,
                     jnp.where(x > lower, lax.log(value),
                               _log_ndtr_lower(lax.min(x, lower), series_order)))


@_log_ndtr.defjvp
def _log_ndtr_jvp(series_order, primals, tangents):
    (x,), (t,) = primals, tangents
    out = _log_ndtr(x, series_order)
    return out, t * lax.exp(_norm_logpdf(x) - out)
