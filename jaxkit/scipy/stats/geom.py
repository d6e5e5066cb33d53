"""``jaxkit.scipy.stats.geom``: the geometric distribution (trials up to the first success)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import xlog1py
from jaxkit.typing import Array, ArrayLike


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of the probability mass at ``k`` (``k >= 1``)."""
    k, p, loc = promote_args_inexact("geom.logpmf", k, p, loc)
    x = k - loc
    return jnp.where(x <= 0, -np.inf, xlog1py(x - 1, -p) + lax.log(p))


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """The probability mass at ``k``."""
    return jnp.exp(logpmf(k, p, loc))
