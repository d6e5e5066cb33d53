"""``jaxkit.scipy.stats.gennorm``: the generalized normal distribution (shape beta)."""
from __future__ import annotations

from jaxkit import lax
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """Log of the density ``beta / (2 Gamma(1/beta)) exp(-|x|**beta)``."""
    x, beta = promote_args_inexact("gennorm.logpdf", x, beta)
    return lax.log(.5 * beta) - lax.lgamma(1 / beta) - lax.abs(x) ** beta


def cdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """The CDF ``(1 + sign(x) P(1/beta, |x|**beta)) / 2``."""
    x, beta = promote_args_inexact("gennorm.cdf", x, beta)
    return .5 * (1 + lax.sign(x) * lax.igamma(1 / beta, lax.abs(x) ** beta))


def pdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """The density."""
    return lax.exp(logpdf(x, beta))
