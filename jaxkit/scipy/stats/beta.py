"""``jaxkit.scipy.stats.beta``: the beta distribution (a, b, loc, scale)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import betainc, betaln, xlog1py, xlogy
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Array:
    """Log of the beta density; NaN unless ``a, b, scale > 0``."""
    x, a, b, loc, scale = promote_args_inexact("beta.logpdf", x, a, b, loc, scale)
    y = (x - loc) / scale
    log_probs = -betaln(a, b) + (xlogy(a - 1, y) + xlog1py(b - 1, -y)) - lax.log(scale)
    out = jnp.where((x > loc + scale) | (x < loc), -np.inf, log_probs)
    return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, out)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Array:
    """The beta density."""
    return lax.exp(logpdf(x, a, b, loc, scale))


def _unit(x, loc, scale):
    return lax.clamp(np.array(0, x.dtype), (x - loc) / scale, np.array(1, x.dtype))


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Array:
    """The beta CDF ``I_y(a, b)``."""
    x, a, b, loc, scale = promote_args_inexact("beta.cdf", x, a, b, loc, scale)
    return betainc(a, b, _unit(x, loc, scale))


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Array:
    """Log of the CDF."""
    return lax.log(cdf(x, a, b, loc, scale))


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
       scale: ArrayLike = 1) -> Array:
    """The survival function ``I_{1-y}(b, a)``."""
    x, a, b, loc, scale = promote_args_inexact("beta.sf", x, a, b, loc, scale)
    return betainc(b, a, 1 - _unit(x, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
          scale: ArrayLike = 1) -> Array:
    """Log of the survival function."""
    return lax.log(sf(x, a, b, loc, scale))
