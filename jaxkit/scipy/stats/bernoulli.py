"""``jaxkit.scipy.stats.bernoulli``: the Bernoulli distribution with success probability p."""
from __future__ import annotations

import numpy as np

from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import xlog1py, xlogy
from jaxkit.typing import Array, ArrayLike


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the probability mass at ``k``."""
    k, p, loc = promote_args_inexact("bernoulli.logpmf", k, p, loc)
    x = k - loc
    log_probs = xlogy(x, p) + xlog1py(1 - x, -p)
    return jnp.where((x < 0) | (x > 1), -np.inf, log_probs)


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """The probability mass at ``k``."""
    return jnp.exp(logpmf(k, p, loc))


def cdf(k: ArrayLike, p: ArrayLike) -> Array:
    """The CDF: 0 below 0, ``1 - p`` on [0, 1), 1 from 1 on."""
    k, p = promote_args_inexact("bernoulli.cdf", k, p)
    zero, one = jnp.zeros_like(k), jnp.ones_like(k)
    invalid = jnp.isnan(k) | jnp.isnan(p) | (p < 0) | (p > 1)
    return jnp.select([invalid, k < 0, (k >= 0) & (k < 1), k >= 1],
                      [jnp.full_like(k, np.nan), zero, one - p, one])


def ppf(q: ArrayLike, p: ArrayLike) -> Array:
    """The quantile function: 0 for ``q <= 1 - p``, else 1."""
    q, p = promote_args_inexact("bernoulli.ppf", q, p)
    invalid = jnp.isnan(q) | jnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return jnp.where(invalid, np.nan, jnp.where(q <= 1 - p, jnp.zeros_like(q),
                                                jnp.ones_like(q)))
