"""``jaxkit.scipy.stats.laplace``: the Laplace distribution (loc, scale)."""
from __future__ import annotations

from jaxkit import lax
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the density ``exp(-|z|) / (2 scale)``."""
    x, loc, scale = promote_args_inexact("laplace.logpdf", x, loc, scale)
    return -(lax.abs(x - loc) / scale + lax.log(2 * scale))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The CDF."""
    x, loc, scale = promote_args_inexact("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    return lax.select(z <= 0, 0.5 * lax.exp(z), 1 - 0.5 * lax.exp(-z))
