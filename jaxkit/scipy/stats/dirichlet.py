"""``jaxkit.scipy.stats.dirichlet``: the Dirichlet distribution over the simplex (the
components on the leading axis of ``x``)."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.scipy.special import gammaln, xlogy
from jaxkit.typing import Array, ArrayLike


def _is_simplex(x: Array) -> Array:
    return jnp.all(x > 0, axis=0) & (abs(jnp.sum(x, axis=0) - 1) < 1E-6)


def logpdf(x: ArrayLike, alpha: ArrayLike) -> Array:
    """Log of the Dirichlet density; ``x`` may leave out its last component."""
    x, alpha = promote_dtypes_inexact(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError("`x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, 1 - x.sum(0, keepdims=True)], axis=0)
    log_norm = jnp.sum(gammaln(alpha)) - gammaln(jnp.sum(alpha))
    if x.ndim > 1:
        alpha = lax.broadcast_in_dim(alpha, alpha.shape + (1,) * (x.ndim - 1), (0,))
    log_probs = jnp.sum(xlogy(alpha - 1, x), axis=0) - log_norm
    return jnp.where(_is_simplex(x), log_probs, -np.inf)


def pdf(x: ArrayLike, alpha: ArrayLike) -> Array:
    """The Dirichlet density."""
    return lax.exp(logpdf(x, alpha))
