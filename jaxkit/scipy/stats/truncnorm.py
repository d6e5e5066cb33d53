"""``jaxkit.scipy.stats.truncnorm``: the normal distribution truncated to [a, b] (in standard
units), with loc and scale. The normalizing mass is computed in log space, from the tail that
keeps it accurate."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.scipy.special import log_ndtr, logsumexp, ndtr
from jaxkit.scipy.stats import norm


def _log_diff(x, y):
    # log(exp(x) - exp(y)) for x >= y.
    return logsumexp(jnp.array([x, y]), b=jnp.array([jnp.ones_like(x), -jnp.ones_like(y)]),
                     axis=0)


def _log_gauss_mass(a, b):
    """log(ndtr(b) - ndtr(a)), through whichever tail the interval lies in."""
    a, b = jnp.broadcast_arrays(jnp.array(a), jnp.array(b))
    left, right = b <= 0, a > 0
    central = ~(left | right)
    a_tail = jnp.where(right, -b, a)
    b_tail = jnp.where(right, -a, b)
    tail = _log_diff(log_ndtr(b_tail), log_ndtr(a_tail))
    return jnp.where(central, jnp.log1p(-ndtr(a) - ndtr(-b)), tail)


@jit
def logpdf(x, a, b, loc=0, scale=1):
    """Log of the truncated normal density."""
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    value = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    value = jnp.where((z < a) | (z > b), -np.inf, value)
    return jnp.where(a >= b, np.nan, value)


def pdf(x, a, b, loc=0, scale=1):
    """The truncated normal density."""
    return lax.exp(logpdf(x, a, b, loc, scale))


@jit
def logcdf(x, a, b, loc=0, scale=1):
    """Log of the CDF (through the survival mass where the CDF is close to 1)."""
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = jnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    log_total = _log_gauss_mass(a, b)
    log_cdf = _log_gauss_mass(a, z) - log_total
    log_sf = _log_gauss_mass(z, b) - log_total
    out = jnp.select([z >= b, z <= a, log_cdf > -0.1, z > a],
                     [0, -np.inf, jnp.log1p(-jnp.exp(log_sf)), log_cdf])
    return jnp.where(a >= b, np.nan, out)


@jit
def logsf(x, a, b, loc=0, scale=1):
    """Log of the survival function (the CDF of the mirrored distribution)."""
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


@jit
def cdf(x, a, b, loc=0, scale=1):
    """The CDF."""
    return lax.exp(logcdf(x, a, b, loc, scale))


@jit
def sf(x, a, b, loc=0, scale=1):
    """The survival function."""
    return lax.exp(logsf(x, a, b, loc, scale))
