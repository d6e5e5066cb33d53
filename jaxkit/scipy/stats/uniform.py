"""``jaxkit.scipy.stats.uniform``: the uniform distribution on [loc, loc + scale]."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the density, ``-log(scale)`` inside the interval."""
    x, loc, scale = promote_args_inexact("uniform.logpdf", x, loc, scale)
    return jnp.where((x > loc + scale) | (x < loc), -np.inf, -lax.log(scale))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The density."""
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The CDF."""
    x, loc, scale = promote_args_inexact("uniform.cdf", x, loc, scale)
    zero, one = jnp.array(0, x.dtype), jnp.array(1, x.dtype)
    inside = (x >= loc) & (x <= loc + scale)
    return jnp.select([x < loc, x > loc + scale, inside], [zero, one, (x - loc) / scale])


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The quantile function ``loc + scale q``; NaN outside [0, 1]."""
    q, loc, scale = promote_args_inexact("uniform.ppf", q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)
