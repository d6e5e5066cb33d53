"""``jaxkit.scipy.stats.betabinom``: the beta-binomial distribution (n, a, b)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import betaln
from jaxkit.typing import Array, ArrayLike


@jit
def logpmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the probability mass at ``k``."""
    k, n, a, b, loc = promote_args_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = lax.floor(k) - loc
    log_comb = -(lax.log1p(n) + betaln(n - y + 1, y + 1))
    log_probs = log_comb + (betaln(y + a, n - y + b) - betaln(a, b))
    log_probs = jnp.where((y == 0) & (n == 0), 0., log_probs)
    log_probs = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, log_probs)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, log_probs)


def pmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Array:
    """The probability mass at ``k``."""
    return lax.exp(logpmf(k, n, a, b, loc))
