"""``jaxkit.scipy.stats.logistic``: the logistic distribution (loc, scale)."""
from __future__ import annotations

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import expit, logit
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the density, ``-2 logaddexp(z/2, -z/2) - log(scale)``."""
    x, loc, scale = promote_args_inexact("logistic.logpdf", x, loc, scale)
    half_z = (x - loc) / scale / 2
    return -2 * jnp.logaddexp(half_z, -half_z) - lax.log(scale)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The density."""
    return lax.exp(logpdf(x, loc, scale))


def ppf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The quantile function ``loc + scale logit(q)``."""
    x, loc, scale = promote_args_inexact("logistic.ppf", x, loc, scale)
    return logit(x) * scale + loc


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The survival function ``expit(-z)``."""
    x, loc, scale = promote_args_inexact("logistic.sf", x, loc, scale)
    return expit(-((x - loc) / scale))


def isf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The inverse survival function ``loc - scale logit(q)``."""
    x, loc, scale = promote_args_inexact("logistic.isf", x, loc, scale)
    return -logit(x) * scale + loc


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The CDF ``expit(z)``."""
    x, loc, scale = promote_args_inexact("logistic.cdf", x, loc, scale)
    return expit((x - loc) / scale)
