"""``jaxkit.scipy.stats.gumbel_r``: the right-skewed (maximum) Gumbel distribution (loc, scale);
NaN for ``scale <= 0``."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.nn import log1mexp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def _z(name, x, loc, scale):
    x, loc, scale = promote_args_inexact(f"gumbel_r.{name}", x, loc, scale)
    return (x - loc) / scale, scale > 0, scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the density."""
    z, ok, scale = _z("logpdf", x, loc, scale)
    return jnp.where(ok, -(z + lax.exp(-z)) - lax.log(scale), np.nan)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The density."""
    return lax.exp(logpdf(x, loc, scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the CDF."""
    z, ok, _ = _z("logcdf", x, loc, scale)
    return jnp.where(ok, -lax.exp(-z), np.nan)


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The CDF."""
    return lax.exp(logcdf(x, loc, scale))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the survival function."""
    z, ok, _ = _z("logsf", x, loc, scale)
    return jnp.where(ok, log1mexp(lax.exp(-z)), np.nan)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The survival function ``1 - exp(-exp(-z))``."""
    x, loc, scale = promote_args_inexact("gumbel_r.sf", x, loc, scale)
    value = 1 - lax.exp(-lax.exp((loc - x) / scale))
    return jnp.where(scale > 0, value, np.nan)


def ppf(p: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The quantile function ``loc - scale log(-log(p))``; NaN outside (0, 1)."""
    p, loc, scale = promote_args_inexact("gumbel_r.ppf", p, loc, scale)
    quantile = loc - scale * lax.log(-lax.log(p))
    return jnp.where((p > 0) & (p < 1), quantile, np.nan)
