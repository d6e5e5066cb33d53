"""``jaxkit.scipy.stats.binom``: the binomial distribution (n, p)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import gammaln, xlog1py, xlogy
from jaxkit.typing import Array, ArrayLike


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the probability mass at ``k``."""
    k, n, p, loc = promote_args_inexact("binom.logpmf", k, n, p, loc)
    y = k - loc
    log_comb = gammaln(n + 1) - (gammaln(y + 1) + gammaln(n - y + 1))
    log_linear = xlogy(y, p) + xlog1py(n - y, -p)
    log_probs = jnp.where(((y == 0) & (n == 0)) | (log_linear == 0), 0., log_comb + log_linear)
    return jnp.where((k >= loc) & (k < loc + n + 1), log_probs, -np.inf)


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """The probability mass at ``k``."""
    return lax.exp(logpmf(k, n, p, loc))
