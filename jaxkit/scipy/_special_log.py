"""``jax.scipy.special``'s logarithmic and information-theory functions: ``logit``,
``expit``, ``logsumexp``, ``softmax``, ``log_softmax``, ``xlogy``, ``xlog1py``, ``entr``,
``rel_entr``, ``kl_div``, ``boxcox`` and ``boxcox1p``.

``xlogy``-style functions are 0 where their first argument is 0 and carry custom JVPs so that
their derivatives are finite there, as in JAX.
"""
from __future__ import annotations

import numpy as np

from jaxkit import dtypes, lax, nn
from jaxkit import numpy as jnp
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike

logsumexp = nn.logsumexp


def _real_only(name: str, x: Array) -> None:
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise ValueError(f"{name} does not support complex-valued inputs.")


@custom_jvp
def logit(x: ArrayLike) -> Array:
    """``log(x / (1 - x))``, the inverse of ``expit``."""
    x, = promote_args_inexact("logit", x)
    return lax.log(lax.div(x, 1 - x))


logit.defjvps(lambda g, y, x: lax.div(g, lax.mul(x, 1 - x)))


def expit(x: ArrayLike) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    x, = promote_args_inexact("expit", x)
    return lax.logistic(x)


def softmax(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """``exp(x) / sum(exp(x))`` over ``axis`` (all axes by default)."""
    return nn.softmax(x, axis=axis)


def log_softmax(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """``x - logsumexp(x)`` over ``axis`` (all axes by default)."""
    return nn.log_softmax(x, axis=axis)


@custom_jvp
def xlogy(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(y)``, 0 where ``x == 0`` (unless ``y`` is NaN)."""
    x, y = promote_args_inexact("xlogy", x, y)
    return jnp.where((x != 0.) | jnp.isnan(y), lax.mul(x, lax.log(y)), jnp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    out = xlogy(x, y)
    return out, (dx * lax.log(y) + dy * x / y).astype(out.dtype)


@custom_jvp
def xlog1py(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log1p(y)``, 0 where ``x == 0`` (unless ``y`` is NaN)."""
    x, y = promote_args_inexact("xlog1py", x, y)
    return jnp.where((x != 0.) | jnp.isnan(y), lax.mul(x, lax.log1p(y)), jnp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    out = xlog1py(x, y)
    return out, (dx * lax.log1p(y) + dy * x / (1 + y)).astype(out.dtype)


@custom_jvp
def _xlogx(x):
    return xlogy(x, x)


@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _xlogx(x), dx * (lax.log(x) + 1)


def entr(x: ArrayLike) -> Array:
    """Elementwise entropy ``-x log(x)``; ``-inf`` for negative ``x``, 0 at 0."""
    x, = promote_args_inexact("entr", x)
    _real_only("entr", x)
    return lax.select(x < 0, jnp.full_like(x, -np.inf), lax.neg(_xlogx(x)))


def rel_entr(p: ArrayLike, q: ArrayLike) -> Array:
    """Elementwise relative entropy ``p log(p / q)`` (0 for ``p == 0 <= q``, else ``inf``
    outside ``p, q > 0``)."""
    p, q = promote_args_inexact("rel_entr", p, q)
    _real_only("rel_entr", p)
    both_positive = (p > 0) & (q > 0)
    p_zero = (p == 0) & (q >= 0)
    safe_p = jnp.where(both_positive, p, 1)
    safe_q = jnp.where(both_positive, q, 1)
    value = _xlogx(safe_p) - xlogy(safe_p, safe_q)
    return jnp.where(both_positive, value, jnp.where(p_zero, jnp.zeros_like(p), np.inf))


def kl_div(p: ArrayLike, q: ArrayLike) -> Array:
    """Elementwise Kullback-Leibler divergence ``p log(p / q) - p + q``."""
    p, q = promote_args_inexact("kl_div", p, q)
    _real_only("kl_div", p)
    return rel_entr(p, q) - p + q


def _boxcox(log_x, lmbda):
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


def boxcox(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda`` (``log(x)`` at ``lmbda = 0``)."""
    x, lmbda = promote_args_inexact("boxcox", x, lmbda)
    return _boxcox(jnp.log(x), lmbda)


def boxcox1p(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform of ``1 + x``."""
    x, lmbda = promote_args_inexact("boxcox1p", x, lmbda)
    return _boxcox(jnp.log1p(x), lmbda)
