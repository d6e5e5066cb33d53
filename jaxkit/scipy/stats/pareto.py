"""``jaxkit.scipy.stats.pareto``: the Pareto distribution (shape b, loc, scale)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def _args(name, x, b, loc, scale):
    x, b, loc, scale = promote_args_inexact(f"pareto.{name}", x, b, loc, scale)
    return x, b, (x - loc) / scale, x < loc + scale


def logpdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the density ``b / z**(b+1) / scale`` for ``z >= 1``."""
    x, b, loc, scale = promote_args_inexact("pareto.logpdf", x, b, loc, scale)
    z = (x - loc) / scale
    log_probs = -(lax.log(scale / b) + (b + 1) * lax.log(z))
    return jnp.where(x < loc + scale, -np.inf, log_probs)


def pdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The density."""
    return lax.exp(logpdf(x, b, loc, scale))


def cdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The CDF ``1 - z**-b``."""
    x, b, z, below = _args("cdf", x, b, loc, scale)
    return jnp.where(below, jnp.zeros_like(x), 1 - lax.pow(z, -b))


def logcdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the CDF."""
    x, b, z, below = _args("logcdf", x, b, loc, scale)
    return jnp.where(below, -np.inf, lax.log1p(-lax.pow(z, -b)))


def logsf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the survival function ``-b log(z)``."""
    x, b, z, below = _args("logsf", x, b, loc, scale)
    return jnp.where(below, jnp.zeros_like(x), -(b * lax.log(z)))


def sf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The survival function."""
    return lax.exp(logsf(x, b, loc, scale))


def ppf(q: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The quantile function ``loc + scale (1 - q)**(-1/b)``; NaN outside [0, 1]."""
    q, b, loc, scale = promote_args_inexact("pareto.ppf", q, b, loc, scale)
    value = loc + scale * lax.pow(1 - q, -(1 / b))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, value)
