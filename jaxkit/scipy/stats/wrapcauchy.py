"""``jaxkit.scipy.stats.wrapcauchy``: the wrapped Cauchy distribution on [0, 2 pi]."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, c: ArrayLike) -> Array:
    """Log of the density; NaN unless ``0 < c < 1``, ``-inf`` outside [0, 2 pi]."""
    x, c = promote_args_inexact("wrapcauchy.logpdf", x, c)
    value = (jnp.log(1 - c * c) - jnp.log(2 * np.pi)
             - jnp.log(1 + c * c - 2 * c * jnp.cos(x)))
    inside = (x >= 0) & (x <= np.array(np.pi * 2, x.dtype))
    return jnp.where((c > 0) & (c < 1), jnp.where(inside, value, -np.inf), np.nan)


def pdf(x: ArrayLike, c: ArrayLike) -> Array:
    """The density."""
    return lax.exp(logpdf(x, c))
