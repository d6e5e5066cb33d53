"""``jaxkit.scipy.stats.norm``: the normal distribution (loc, scale)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import log_ndtr, ndtr, ndtri
from jaxkit.typing import Array, ArrayLike

_LOG_2PI = np.log(2 * np.pi)


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the normal density."""
    x, loc, scale = promote_args_inexact("norm.logpdf", x, loc, scale)
    var = lax.square(scale)
    log_normalizer = lax.log(np.array(2 * np.pi, x.dtype) * var)
    return (log_normalizer + lax.square(x - loc) / var) / np.array(-2, x.dtype)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The normal density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The normal CDF."""
    x, loc, scale = promote_args_inexact("norm.cdf", x, loc, scale)
    return ndtr((x - loc) / scale)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the normal CDF, accurate in the left tail."""
    x, loc, scale = promote_args_inexact("norm.logcdf", x, loc, scale)
    return log_ndtr((x - loc) / scale)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The normal quantile function."""
    return jnp.asarray(ndtri(q) * scale + loc, float)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the survival function."""
    x, loc, scale = promote_args_inexact("norm.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The survival function 1 - cdf."""
    x, loc, scale = promote_args_inexact("norm.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The inverse survival function."""
    q = jnp.asarray(q)
    return ppf(1 - q, loc, scale)
