"""``jaxkit.scipy.stats.multivariate_normal``: the multivariate normal density (mean, cov),
through the Cholesky factor of ``cov``."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.typing import Array, ArrayLike


def logpdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike, allow_singular: None = None) -> Array:
    """Log of the density; ``cov`` may be a scalar (isotropic) or a matrix (batched)."""
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote_dtypes_inexact(x, mean, cov)
    log_2pi = np.log(2 * np.pi)
    if not mean.shape:
        return -1 / 2 * jnp.square(x - mean) / cov - 1 / 2 * (log_2pi + jnp.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if not np.shape(cov):
        return (-1 / 2 * jnp.einsum("...i,...i->...", y, y) / cov
                - n / 2 * (log_2pi + jnp.log(cov)))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes")
    chol = jnp.linalg.cholesky(cov)
    # Whiten: solve L z = y (a triangular system; jnp.linalg.solve until lax.linalg has
    # triangular_solve).
    z = jnp.vectorize(jnp.linalg.solve, signature="(n,n),(n)->(n)")(chol, y)
    return (-1 / 2 * jnp.einsum("...i,...i->...", z, z) - n / 2 * log_2pi
            - jnp.log(jnp.diagonal(chol, axis1=-1, axis2=-2)).sum(-1))


def pdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike) -> Array:
    """The density."""
    return lax.exp(logpdf(x, mean, cov))
