"""``jaxkit.scipy.stats.poisson``: the Poisson distribution (mean mu)."""
from __future__ import annotations

import numpy as np

from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit
from jaxkit.scipy._util import promote_args_inexact, promote_dtypes_inexact
from jaxkit.scipy.special import entr, gammaincc, gammaln, xlogy
from jaxkit.typing import Array, ArrayLike


def logpmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the probability mass at ``k`` (``-inf`` off the non-negative integers)."""
    k, mu, loc = promote_args_inexact("poisson.logpmf", k, mu, loc)
    x = k - loc
    log_probs = xlogy(x, mu) - gammaln(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(k) != k), -np.inf, log_probs)


def pmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """The probability mass at ``k``."""
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """The CDF ``Q(floor(k) + 1, mu)``."""
    k, mu, loc = promote_args_inexact("poisson.logpmf", k, mu, loc)
    x = k - loc
    return jnp.where(x < 0, jnp.zeros_like(x), gammaincc(jnp.floor(1 + x), mu))


def _entropy_by_sum(mu, max_k, upper):
    # Sum -p log p over k below a bound past which the mass is negligible (static length).
    k = jnp.arange(max_k, dtype=mu.dtype)[:, None]
    probs = pmf(k, mu, 0)
    probs = jnp.where(k < jnp.ceil(upper).astype(k.dtype)[None, :], probs, 0.0)
    return jnp.sum(entr(probs), axis=0)


@jit
def entropy(mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """The entropy: a direct sum for ``mu < 100``, the asymptotic expansion beyond."""
    mu, loc = promote_dtypes_inexact(mu, loc)
    shape = jnp.broadcast_shapes(mu.shape, loc.shape)
    flat = jnp.ravel(mu)
    small = _entropy_by_sum(flat, 35, flat + 20)
    medium = _entropy_by_sum(flat, 250, flat + 10 * jnp.sqrt(flat) + 20)
    large = 0.5 * jnp.log(2 * np.pi * np.e * flat) - 1.0 / (12 * flat)
    out = jnp.where(flat == 0, jnp.zeros_like(flat),
                    jnp.where(flat < 10, small, jnp.where(flat < 100, medium, large)))
    return jnp.broadcast_to(jnp.reshape(out, mu.shape), shape)
