"""``jaxkit.scipy.stats.chi2``: the chi-squared distribution (df, loc, scale)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import gammainc, gammaincc
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the chi-squared density."""
    x, df, loc, scale = promote_args_inexact("chi2.logpdf", x, df, loc, scale)
    two = np.array(2, x.dtype)
    y = (x - loc) / scale
    half_df = df / two
    kernel = (half_df - 1) * lax.log(y) - y / two
    log_norm = -(lax.lgamma(half_df) + lax.log(two) * df / two)
    return jnp.where(x < loc, -np.inf, (log_norm - lax.log(scale)) + kernel)


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The chi-squared density."""
    return lax.exp(logpdf(x, df, loc, scale))


def _half_y(x, loc, scale):
    return lax.clamp(np.array(0, x.dtype), (x - loc) / (scale * 2), np.array(np.inf, x.dtype))


def cdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The chi-squared CDF ``P(df/2, y/2)``."""
    x, df, loc, scale = promote_args_inexact("chi2.cdf", x, df, loc, scale)
    return gammainc(df / 2, _half_y(x, loc, scale))


def logcdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the CDF."""
    return lax.log(cdf(x, df, loc, scale))


def sf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The survival function ``Q(df/2, y/2)``."""
    x, df, loc, scale = promote_args_inexact("chi2.sf", x, df, loc, scale)
    return gammaincc(df / 2, _half_y(x, loc, scale))


def logsf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the survival function."""
    return lax.log(sf(x, df, loc, scale))
