"""``jax.scipy.special.hyp2f1``: the Gauss hypergeometric function ``2F1(a, b; c; x)`` for real
arguments, ``x <= 1``.

Cephes' scheme, as JAX evaluates it per element (``vectorize``): the power series, the
terminating polynomial when ``a`` or ``b`` is a non-positive integer, Euler's transformation
for ``c - a - b <= -1``, and near ``x = 1`` the transformation to ``1 - x`` (with the digamma
series of DLMF 15.8.10 when ``c - a - b`` is an integer). Parameter derivatives are the
termwise-differentiated series, the ``x`` derivative ``ab/c 2F1(a+1, b+1; c+1; x)``.
"""
from __future__ import annotations

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.transforms.jit import jit
from jaxkit.scipy._special_gamma import digamma, gamma
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def _one(x, v=1):
    return jnp.array(v, dtype=x.dtype)


def _terminating(a, b, c, x):
    """The polynomial case: ``a`` (after swapping, if ``b`` is the smaller non-positive
    integer) is a non-positive integer, so the series stops after ``|a|`` terms."""
    eps = dtypes.finfo(x.dtype).eps * 50
    b_is_int = jnp.abs(b - jnp.round(b)) < eps
    c_pole_before_b = (c % 1 == 0) & (c <= 0) & (c > b)
    swap = (b < a) & b_is_int & ~c_pole_before_b
    a, b = jnp.where(swap, b, a), jnp.where(swap, a, b)
    n = jnp.abs(a)

    def body(i, state):
        total, term = state
        term = term * -(n - i + 1) / (c + i - 1) * (b + i - 1) / i * x
        return total + term, term

    return lax.fori_loop(_one(n), n + 1, body, (_one(x), _one(x)))[0]


def _power_series(a, b, c, x):
    rtol = dtypes.finfo(x.dtype).eps

    def body(state):
        total, k, term = state
        return total + term, k + 1, term * (a + k - 1) * (b + k - 1) / (c + k - 1) / k * x

    def cond(state):
        total, k, term = state
        return (k < 250) & (lax.abs(term) > rtol * lax.abs(total))

    return lax.while_loop(cond, body, (_one(x, 0), _one(x), _one(x)))[0]


def _integer_d_transform(a, b, c, x):
    """Near ``x = 1`` with ``d = c - a - b`` an integer: DLMF 15.8.10's logarithmic series."""
    rtol = dtypes.finfo(x.dtype).eps
    d = c - a - b
    s = 1 - x
    rd = jnp.round(d)
    e = jnp.where(rd >= 0, d, -d)
    d1 = jnp.where(rd >= 0, d, _one(d, 0))
    d2 = jnp.where(rd >= 0, _one(d, 0), d)
    ard = jnp.where(rd >= 0, rd, -rd).astype("int32")
    log_s = jnp.log(s)
    y = digamma(1.0) + digamma(1.0 + e) - digamma(a + d1) - digamma(b + d1) - log_s
    y = y / gamma(e + 1.0)
    p = (a + d1) * (b + d1) * s / gamma(e + 2.0)

    def cond(state):
        p, q, t, y = state
        return (t < 250) & (jnp.abs(q) >= rtol * jnp.abs(y))

    def body(state):
        p, q, t, y = state
        r = (digamma(1.0 + t) + digamma(1.0 + t + e) - digamma(a + t + d1)
             - digamma(b + t + d1) - log_s)
        q = p * r
        p = p * s * (a + t + d1) / (t + 1.0)
        p = p * (b + t + d1) / (t + 1.0 + e)
        return p, q, t + 1.0, y + q

    y = lax.while_loop(cond, body, (p, y, _one(x), y))[3]

    def finite_part(y):
        def step(i, state):
            p, t, y1 = state
            p = p * s * (a + t + d2) * (b + t + d2) / (1.0 - e + t)
            t = t + 1.0
            p = p / t
            return p, t, y1 + p

        y1 = lax.fori_loop(1, ard, step, (_one(x), _one(x, 0), _one(x)))[2]
        gc = gamma(c)
        y1 = y1 * gamma(e) * gc / (gamma(a + d1) * gamma(b + d1))
        y = y * gc / (gamma(a + d2) * gamma(b + d2))
        y = jnp.where((ard & 1) != 0, -y, y)
        q = s ** rd
        return jnp.where(rd > 0, y * q + y1, y + y1 * q)

    return jnp.where(rd == 0, y * gamma(c) / (gamma(a) * gamma(b)), finite_part(y))


def _terminating_or_series(a, b, c, x):
    eps = dtypes.finfo(x.dtype).eps * 50
    d = c - a - b
    neg_int_a = (a <= 0) & (jnp.abs(a - jnp.round(a)) < eps)
    neg_int_b = (b <= 0) & (jnp.abs(b - jnp.round(b)) < eps)
    neg_int = neg_int_a | neg_int_b
    index = jnp.where((x > 0.9) & ~neg_int, jnp.where(jnp.abs(d - jnp.round(d)) >= eps, 0, 1),
                      jnp.where(neg_int, 2, 0))
    return lax.select_n(index, _power_series(a, b, c, x), _integer_d_transform(a, b, c, x),
                        _terminating(a, b, c, x))


def _parameter_derivative(a, b, c, x, weight):
    precision = dtypes.finfo(x.dtype).eps

    def body(state):
        total, k, term = state
        return (total + term * weight(k), k + 1,
                term * (a + k) * (b + k) / (c + k) / (k + 1) * x)

    def cond(state):
        total, k, term = state
        return (k < 250) & (lax.abs(term) / lax.abs(total) > precision)

    return lax.while_loop(cond, body, (_one(x, 0), _one(x), a * b / c * x))[0]


@jit
@jnp.vectorize
def _hyp2f1_da(a, b, c, x):
    return _parameter_derivative(a, b, c, x, lambda k: digamma(a + k) - digamma(a))


@jit
@jnp.vectorize
def _hyp2f1_db(a, b, c, x):
    return _parameter_derivative(a, b, c, x, lambda k: digamma(b + k) - digamma(b))


@jit
@jnp.vectorize
def _hyp2f1_dc(a, b, c, x):
    return _parameter_derivative(a, b, c, x, lambda k: digamma(c) - digamma(c + k))


@custom_jvp
@jit
@jnp.vectorize
def hyp2f1(a: ArrayLike, b: ArrayLike, c: ArrayLike, x: ArrayLike) -> Array:
    """The Gauss hypergeometric function ``2F1(a, b; c; x)`` (real, ``x <= 1``; ``inf`` past
    1 and at the poles of ``c``)."""
    a, b, c, x = promote_args_inexact("hyp2f1", a, b, c, x)
    eps = dtypes.finfo(x.dtype).eps * 50
    d = c - a - b
    s = 1 - x
    ca, cb = c - a, c - b
    d_int = jnp.abs(d - jnp.round(d)) < eps
    trivial = (x == 0) | (((a == 0) | (b == 0)) & (c != 0))
    c_pole = (c == 0) | ((c < 0) & (c % 1 == 0))
    euler = (d <= -1) & ~(~d_int & (s < 0))
    index = jnp.where(trivial, 0, jnp.where(c_pole, 1, jnp.where(euler, 2, jnp.where(
        (d <= 0) & (x == 1), 1, jnp.where((x < 1) & (b == c), 3, jnp.where(
            (x < 1) & (a == c), 4, jnp.where(x > 1, 1, jnp.where(x == 1, 5, 6))))))))
    return lax.select_n(index, _one(x), _one(x, np.inf),
                        s ** d * _terminating_or_series(ca, cb, c, x),
                        s ** (-a), s ** (-b),
                        gamma(c) * gamma(d) / (gamma(ca) * gamma(cb)),
                        _terminating_or_series(a, b, c, x))


hyp2f1.defjvps(lambda da, out, a, b, c, x: _hyp2f1_da(a, b, c, x) * da,
               lambda db, out, a, b, c, x: _hyp2f1_db(a, b, c, x) * db,
               lambda dc, out, a, b, c, x: _hyp2f1_dc(a, b, c, x) * dc,
               lambda dx, out, a, b, c, x: a * b / c * hyp2f1(a + 1, b + 1, c + 1, x) * dx)
