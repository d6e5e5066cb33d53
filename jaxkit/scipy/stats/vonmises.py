"""``jaxkit.scipy.stats.vonmises``: the von Mises distribution (concentration kappa)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_args_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, kappa: ArrayLike) -> Array:
    """Log of the density ``exp(kappa cos x) / (2 pi I0(kappa))``; NaN for ``kappa <= 0``."""
    x, kappa = promote_args_inexact("vonmises.logpdf", x, kappa)
    value = kappa * (jnp.cos(x) - 1) - jnp.log(2 * np.pi * lax.bessel_i0e(kappa))
    return jnp.where(kappa > 0, value, np.nan)


def pdf(x: ArrayLike, kappa: ArrayLike) -> Array:
    """The density."""
    return lax.exp(logpdf(x, kappa))
