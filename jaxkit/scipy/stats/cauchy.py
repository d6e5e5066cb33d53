"""``jaxkit.scipy.stats.cauchy``: the Cauchy distribution (loc, scale)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the Cauchy density."""
    x, loc, scale = promote_args_inexact("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -(lax.log(np.array(np.pi, x.dtype) * scale) + lax.log1p(z * z))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The Cauchy density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The Cauchy CDF ``1/2 + arctan(z) / pi``."""
    x, loc, scale = promote_args_inexact("cauchy.cdf", x, loc, scale)
    z = (x - loc) / scale
    return np.array(0.5, x.dtype) + np.array(1 / np.pi, x.dtype) * jnp.arctan(z)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the CDF."""
    return lax.log(cdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The survival function."""
    x, loc, scale = promote_args_inexact("cauchy.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the survival function."""
    x, loc, scale = promote_args_inexact("cauchy.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The inverse survival function ``tan(pi/2 - pi q)``."""
    q, loc, scale = promote_args_inexact("cauchy.isf", q, loc, scale)
    return lax.tan(np.array(np.pi / 2, q.dtype) - np.array(np.pi, q.dtype) * q) * scale + loc


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The quantile function ``tan(pi q - pi/2)``."""
    q, loc, scale = promote_args_inexact("cauchy.ppf", q, loc, scale)
    return lax.tan(np.array(np.pi, q.dtype) * q - np.array(np.pi / 2, q.dtype)) * scale + loc
