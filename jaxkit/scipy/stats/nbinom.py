"""``jaxkit.scipy.stats.nbinom``: the negative binomial distribution (n, p)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import gammaln, xlogy
from jaxkit.typing import Array, ArrayLike


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the probability mass at ``k``."""
    k, n, p, loc = promote_args_inexact("nbinom.logpmf", k, n, p, loc)
    y = k - loc
    log_comb = (gammaln(y + n) - gammaln(n)) - gammaln(y + 1)
    log_probs = log_comb + (xlogy(n, p) + xlogy(y, 1 - p))
    return jnp.where(k < loc, -np.inf, log_probs)


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """The probability mass at ``k``."""
    return lax.exp(logpmf(k, n, p, loc))
