"""``jaxkit.scipy.stats.multinomial``: the multinomial distribution (counts on the last
axis)."""
from __future__ import annotations

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.numpy._promotion import promote_args_numeric
from jaxkit.scipy._util import asarray, promote_args_inexact
from jaxkit.scipy.special import gammaln, xlogy
from jaxkit.typing import Array, ArrayLike


def logpmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Array:
    """Log of the probability of the integer counts ``x`` summing to ``n``."""
    p, = promote_args_inexact("multinomial.logpmf", p)
    x, n = (asarray(v) for v in promote_args_numeric("multinomial.logpmf", x, n))
    if not dtypes.issubdtype(x.dtype, np.integer):
        raise ValueError(f"x and n must be of integer type; got x.dtype={x.dtype}, "
                         f"n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    log_probs = gammaln(n + 1) + jnp.sum(xlogy(x, p) - gammaln(x + 1), axis=-1)
    return jnp.where(jnp.equal(jnp.sum(x), n), log_probs, -np.inf)


def pmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Array:
    """The probability of the counts ``x``."""
    return lax.exp(logpmf(x, n, p))
