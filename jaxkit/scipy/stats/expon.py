"""``jaxkit.scipy.stats.expon``: the exponential distribution (loc, scale)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the exponential density."""
    x, loc, scale = promote_args_inexact("expon.logpdf", x, loc, scale)
    return jnp.where(x < loc, -np.inf, -((x - loc) / scale + lax.log(scale)))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The exponential density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The CDF ``1 - exp(-z)``."""
    x, loc, scale = promote_args_inexact("expon.cdf", x, loc, scale)
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), -lax.expm1(neg_z))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the survival function, ``-z``."""
    x, loc, scale = promote_args_inexact("expon.sf", x, loc, scale)
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), neg_z)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The survival function ``exp(-z)``."""
    return lax.exp(logsf(x, loc, scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the CDF, ``log1p(-sf)``."""
    return lax.log1p(-sf(x, loc, scale))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The quantile function ``loc - scale log1p(-q)``; NaN outside [0, 1]."""
    q, loc, scale = promote_args_inexact("expon.ppf", q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc - scale * lax.log1p(-q))
