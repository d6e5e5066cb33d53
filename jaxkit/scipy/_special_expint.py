"""``jax.scipy.special``'s exponential integrals and dilogarithm: ``expi``, ``exp1``,
``expn`` and ``spence``, plus the modified Bessel functions ``i0``, ``i0e``, ``i1``, ``i1e`` and
``bessel_jn``.

The approximations are Cephes' (rational fits of ``Ei`` on the octaves of ``(0, 64]``, the
power series and continued fraction of ``E_n``, the rational fit of the dilogarithm), as JAX
evaluates them; derivatives are the closed forms, as custom JVPs.
"""
from __future__ import annotations

import operator
from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.transforms.jit import jit
from jaxkit.transforms.vmap import vmap
from jaxkit.scipy._special_error import _polyval
from jaxkit.scipy._special_gamma import gammaln
from jaxkit.scipy._util import concrete, promote_args_inexact, promote_dtypes_inexact
from jaxkit.typing import Array, ArrayLike

# ---- Ei(x) for x > 0: Cephes expn.c's rational fits, (num, den) per range ----------------------
_EI_SMALL = (  # 0 < x <= 2: Ei(x) = euler_gamma + log(x) + x * A(x) / B(x)
    [-5.350447357812542947283e0, 2.185049168816613393830e2, -4.176572384826693777058e3,
     5.541176756393557601232e4, -3.313381331178144034309e5, 1.592627163384945414220e6],
    [1.0, -5.250547959112862969197e1, 1.259616186786790571525e3, -1.756549581973534652631e4,
     1.493062117002725991967e5, -7.294949239640527645655e5, 1.592627163384945429726e6])
# 2**k < x <= 2**(k+1), k = 1..5: Ei(x) = exp(x) / x * (1 + A(1/x) / B(1/x) / x)
_EI_OCTAVES = [
    ([1.981808503259689673238e-2, -1.271645625984917501326e0, -2.088160335681228318920e0,
      2.755544509187936721172e0, -4.409507048701600257171e-1, 4.665623805935891391017e-2,
      -1.545042679673485262580e-3, 7.059980605299617478514e-5],
     [1.0, 1.476498670914921440652e0, 5.629177174822436244827e-1, 1.699017897879307263248e-1,
      2.291647179034212017463e-2, 4.450150439728752875043e-3, 1.727439612206521482874e-4,
      3.953167195549672482304e-5]),
    ([-1.373215375871208729803e0, -7.084559133740838761406e-1, 1.580806855547941010501e0,
      -2.601500427425622944234e-1, 2.994674694113713763365e-2, -1.038086040188744005513e-3,
      4.371064420753005429514e-5, 2.141783679522602903795e-6],
     [1.0, 8.585231423622028380768e-1, 4.483285822873995129957e-1, 7.687932158124475434091e-2,
      2.449868241021887685904e-2, 8.832165941927796567926e-4, 4.590952299511353531215e-4,
      -4.729848351866523044863e-6, 2.665195537390710170105e-6]),
    ([-2.106934601691916512584e0, 1.732733869664688041885e0, -2.423619178935841904839e-1,
      2.322724180937565842585e-2, 2.372880440493179832059e-4, -8.343219561192552752335e-5,
      1.363408795605250394881e-5, -3.655412321999253963714e-7, 1.464941733975961318456e-8,
      6.176407863710360207074e-10],
     [1.0, -2.298062239901678075778e-1, 1.105077041474037862347e-1, -1.566542966630792353556e-2,
      2.761106850817352773874e-3, -2.089148012284048449115e-4, 1.708528938807675304186e-5,
      -4.459311796356686423199e-7, 1.394634930353847498145e-8, 6.150865933977338354138e-10]),
    ([-2.458119367674020323359e-1, -1.483382253322077687183e-1, 7.248291795735551591813e-2,
      -1.348315687380940523823e-2, 1.342775069788636972294e-3, -7.942465637159712264564e-5,
      2.644179518984235952241e-6, -4.239473659313765177195e-8],
     [1.0, -1.044225908443871106315e-1, -2.676453128101402655055e-1, 9.695000254621984627876e-2,
      -1.601745692712991078208e-2, 1.496414899205908021882e-3, -8.462452563778485013756e-5,
      2.728938403476726394024e-6, -4.239462431819542051337e-8]),
    ([1.212561118105456670844e-1, -5.823133179043894485122e-1, 2.348887314557016779211e-1,
      -3.040034318113248237280e-2, 1.510082146865190661777e-3, -2.523137095499571377122e-5],
     [1.0, -1.002252150365854016662e0, 2.928709694872224144953e-1, -3.337004338674007801307e-2,
      1.560544881127388842819e-3, -2.523137093603234562648e-5]),
    ([-7.657847078286127362028e-1, 6.886192415566705051750e-1, -2.132598113545206124553e-1,
      3.346107552384193813594e-2, -3.076541477344756050249e-3, 1.747119316454907477380e-4,
      -6.103711682274170530369e-6, 1.218032765428652199087e-7, -1.086076102793290233007e-9],
     [1.0, -1.888802868662308731041e0, 1.066691687211408896850e0, -2.751915982306380647738e-1,
      3.930852688233823569726e-2, -3.414684558602365085394e-3, 1.866844370703555398195e-4,
      -6.345146083130515357861e-6, 1.239754287483206878024e-7, -1.086076102793126632978e-9]),
]


def _ei_small(x):
    num, den = _EI_SMALL
    return x * (_polyval(num, x) / _polyval(den, x)) + np.euler_gamma + jnp.log(x)


def _ei_octave(num, den, x):
    w = 1 / x
    return jnp.exp(x) * w * (w * (_polyval(num, w) / _polyval(den, w)) + 1)


def _expi_pos(x):
    # The last octave (32, 64] also serves every larger x.
    conds = [(x > 0) & (x <= 2)] + [(x > 2 ** k) & (x <= 2 ** (k + 1)) for k in range(1, 6)]
    funs = [_ei_small] + [partial(_ei_octave, num, den) for num, den in _EI_OCTAVES]
    return jnp.piecewise(x, conds, funs)


@custom_jvp
@jit
def expi(x: ArrayLike) -> Array:
    """The exponential integral ``Ei(x)``."""
    x, = promote_args_inexact("expi", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("expi does not support complex-valued inputs.")
    return jnp.piecewise(x, [x < 0], [lambda v: -exp1(-v), _expi_pos])


@expi.defjvp
def _expi_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return expi(x), jnp.exp(x) / x * dx


# ---- E_n(x) (Cephes expn.c) ------------------------------------------------------------------
def _expn_series(x, n):
    """Power series for 0 < x <= 1."""
    eps = dtypes.finfo(x.dtype).eps
    one, zero = jnp.ones_like(x), jnp.zeros_like(x)
    psi = lax.fori_loop(np.array(1, n.dtype), n, lambda i, p: p + one / i,
                        -np.euler_gamma - jnp.log(x))
    n1 = jnp.where(n == 1, n + n, n)

    def body(state):
        xk, yk, pk, ans, _ = state
        xk = xk + one
        yk = yk * -x / xk
        pk = pk + one
        ans = ans + jnp.where(pk != zero, yk / pk, zero)
        return xk, yk, pk, ans, jnp.where(ans != zero, abs(yk / ans), one)

    state = (zero, one, one - n, jnp.where(n == 1, zero, one / (one - n1)),
             jnp.full_like(x, np.inf))
    ans = lax.while_loop(lambda s: (x > 0) & (s[4] > eps), body, state)[3]
    return (-x) ** (n - 1) * psi / jnp.exp(gammaln(n)) - ans


def _expn_fraction(x, n):
    """Continued fraction for x > 1 (rescaled when the convergents grow large)."""
    big = np.array(1.44115188075855872e17, x.dtype)
    eps = dtypes.finfo(x.dtype).eps
    one = jnp.ones_like(x)

    def body(state):
        k, pkm2, qkm2, pkm1, qkm1, ans, _, r = state
        k = k + 1
        odd = k % 2 == 1
        yk = jnp.where(odd, one, x)
        xk = jnp.where(odd, n + (k - 1) / 2, k / 2)
        pk = pkm1 * yk + pkm2 * xk
        qk = qkm1 * yk + qkm2 * xk
        nonzero = qk != 0
        r = jnp.where(nonzero, pk / qk, r)
        t = jnp.where(nonzero, abs((ans - r) / r), one)
        ans = jnp.where(nonzero, r, ans)
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        scale = abs(pk) > big
        pkm2, pkm1, qkm2, qkm1 = (jnp.where(scale, v / big, v) for v in (pkm2, pkm1, qkm2, qkm1))
        return k, pkm2, qkm2, pkm1, qkm1, ans, t, r

    state = (jnp.ones_like(n), one, x, one, x + n, one / (x + n), jnp.full_like(x, np.inf),
             jnp.zeros_like(x))
    ans = lax.while_loop(lambda s: (x > s[0] * 0) & (s[6] > eps), body, state)[5]
    return ans * jnp.exp(-x)


def _expn_large_n(x, n):
    """Asymptotic expansion for n >= 5000."""
    xk = x + n
    yk = 1 / (xk * xk)
    ans = yk * n * (6 * x * x - 8 * n * x + n * n)
    ans = yk * (ans + n * (n - 2 * x))
    ans = yk * (ans + n)
    return (ans + 1) * jnp.exp(-x) / xk


@partial(jnp.vectorize)
@jit
def _expn(n, x):
    conds = [(n < 0) | (x < 0), (x == 0) & (n < 2), (x == 0) & (n >= 2), (n == 0) & (x >= 0),
             n >= 5000, x > 1]
    n1 = jnp.where(n == 1, n + n, n)
    values = [np.nan, np.inf, 1 / n1, jnp.exp(-x) / x, _expn_large_n, _fraction_in_domain,
              _series_in_domain]
    return jnp.piecewise(x, conds, values, n=n)


# Under vmap (jnp.vectorize) every branch runs on every element, and an iteration runs until
# all lanes converge: the continued fraction at x = 1e-6 needs ~1e6 steps (45 s on a CPU, as
# in JAX 0.10.2) and the series diverges for large x. Each branch gets a point of its own
# domain where it is not selected, so every lane converges in a few dozen steps.
def _fraction_in_domain(x, n):
    return _expn_fraction(jnp.where(x > 1, x, jnp.full_like(x, 2.0)), n)


def _series_in_domain(x, n):
    return _expn_series(jnp.where((x > 0) & (x <= 1), x, jnp.full_like(x, 0.5)), n)


@partial(custom_jvp, nondiff_argnums=(0,))
def expn(n: ArrayLike, x: ArrayLike) -> Array:
    """The generalized exponential integral ``E_n(x)``."""
    n, x = promote_args_inexact("expn", n, x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("expn does not support complex-valued inputs.")
    return _expn(n, x)


@expn.defjvp
def _expn_jvp(n, primals, tangents):
    (x,), (dx,) = primals, tangents
    # dE_n/dx = -E_{n-1}(x); E_{-1} is outside expn's domain (NaN, as JAX 0.10.2 returns), so
    # n = 0 takes the closed form d/dx exp(-x)/x = -exp(-x) (1 + x) / x**2.
    n_arr = jnp.asarray(n)
    previous = expn(jnp.maximum(n_arr - 1, 0).astype(n_arr.dtype), x)
    slope = jnp.where(n_arr == 0, -jnp.exp(-x) * (1 + x) / (x * x), -previous)
    out = expn(n, x)
    return out, dx * slope.astype(out.dtype)


def exp1(x: ArrayLike) -> Array:
    """The exponential integral ``E_1(x)``."""
    x, = promote_args_inexact("exp1", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError("exp1 does not support complex-valued inputs.")
    return expn(1, x)


# ---- the dilogarithm (Cephes spence.c) ---------------------------------------------------------
_SPENCE_A = [4.65128586073990045278E-5, 7.31589045238094711071E-3, 1.33847639578309018650E-1,
             8.79691311754530315341E-1, 2.71149851196553469920E0, 4.25697156008121755724E0,
             3.29771340985225106936E0, 1.00000000000000000126E0]
_SPENCE_B = [6.90990488912553276999E-4, 2.54043763932544379113E-2, 2.82974860602568089943E-1,
             1.41172597751831069617E0, 3.63800533345137075418E0, 5.03278880143316990390E0,
             3.54771340985225096217E0, 9.99999999999999998740E-1]


def _spence_core(x):
    inverted = x > 2.0
    x = jnp.piecewise(x, [inverted], [lambda v: 1.0 / v, lambda v: v])
    above, below = x > 1.5, x < 0.5
    inverted = inverted | above
    w = jnp.piecewise(x, [above, below], [lambda v: 1.0 / v - 1.0, lambda v: -v,
                                          lambda v: v - 1.0])
    y = -w * _polyval(_SPENCE_A, w) / _polyval(_SPENCE_B, w)
    # log(1 - x) is NaN where the branch is not taken (x > 1); feeding it 1 there keeps the
    # derivative of the unselected branch finite (NaN * 0 would poison the gradient).
    log1mx = jnp.log(jnp.where(below, 1.0 - x, 1.0))
    y = jnp.where(below, np.pi ** 2 / 6.0 - jnp.log(x) * log1mx - y, y)
    return jnp.where(inverted, -0.5 * jnp.log(x) ** 2 - y, y)


def spence(x: Array) -> Array:
    """Spence's function ``integral_1^x log(t) / (1 - t) dt`` (float32/float64, ``x >= 0``)."""
    x = jnp.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"x.dtype={x.dtype} is not supported, see docstring for supported "
                        "types.")
    return jnp.piecewise(x, [x < 0.0, x == 1.0, x == 0.0], [np.nan, 0, np.pi ** 2 / 6,
                                                            _spence_core])


# ---- modified Bessel functions ----------------------------------------------------------------
def i0e(x: ArrayLike) -> Array:
    """The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``."""
    x, = promote_args_inexact("i0e", x)
    return lax.bessel_i0e(x)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of order 0."""
    x, = promote_args_inexact("i0", x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


def i1e(x: ArrayLike) -> Array:
    """The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) I1(x)``."""
    x, = promote_args_inexact("i1e", x)
    return lax.bessel_i1e(x)


def i1(x: ArrayLike) -> Array:
    """The modified Bessel function of order 1."""
    x, = promote_args_inexact("i1", x)
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i1e(x))


def _bessel_jn_one(z, *, v, n_iter):
    """J_0..J_v at scalar ``z`` by Miller's backward recurrence from order ``n_iter``,
    normalized by ``J_0 + 2 (J_2 + J_4 + ...) = 1``."""
    def step(carry, k):
        f0, f1, total = carry
        f = 2.0 * (k + 1.0) * f1 / z - f0
        total = jnp.where(k % 2 == 0, total + 2.0 * f, total)
        return (f1, f, total), f

    init = (jnp.zeros_like(z), jnp.full_like(z, 1e-16), jnp.zeros_like(z))
    (_, _, total), values = lax.scan(step, init, lax.iota(z.dtype, n_iter + 1), reverse=True)
    return values[:v + 1] / (total - values[0])


@partial(jit, static_argnames=["v", "n_iter"])
def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Array:
    """Bessel functions of the first kind of orders ``0..v`` at ``z``, stacked on a new
    leading axis."""
    z, = promote_dtypes_inexact(jnp.asarray(z))
    if dtypes.issubdtype(z.dtype, np.complexfloating):
        raise ValueError("complex input not supported.")
    v = concrete(operator.index, v, "Argument v of bessel_jn.")
    n_iter = concrete(int, n_iter, "Argument n_iter of bessel_jn.")
    fun = partial(_bessel_jn_one, v=v, n_iter=n_iter)
    for _ in range(z.ndim):
        fun = vmap(fun)
    return jnp.moveaxis(fun(z), -1, 0)
