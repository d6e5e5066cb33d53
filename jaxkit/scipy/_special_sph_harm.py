"""``jax.scipy.special.sph_harm_y``: spherical harmonics ``Y_n^m(theta, phi)`` from the
fully normalized associated Legendre functions (Condon-Shortley phase), built by the standard
three-term recurrence in the degree up to a static ``n_max``."""
from __future__ import annotations

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit
from jaxkit.scipy._util import concrete
from jaxkit.typing import Array


def _normalized_legendre_table(n_max: int, x: Array) -> Array:
    """``P[l, m, k]``: the normalized associated Legendre function of degree ``l`` and order
    ``m`` at ``x[k]`` (0 for ``m > l``)."""
    m = np.arange(n_max + 1, dtype=np.float64)[:, None]
    sin = jnp.sqrt(1.0 - x * x)
    diag = jnp.full_like(x, 0.5 / np.sqrt(np.pi))       # P[m, m], advanced with m
    diags = [diag]
    for k in range(1, n_max + 1):
        diag = -np.sqrt(1.0 + 0.5 / k) * sin * diag
        diags.append(diag)
    zero = jnp.zeros((n_max + 1,) + x.shape, x.dtype)
    rows, prev2, prev1 = [], zero, zero
    for deg in range(n_max + 1):
        with np.errstate(divide="ignore", invalid="ignore"):
            d0 = np.sqrt((4.0 * deg * deg - 1.0) / (deg * deg - m * m))
            d1 = np.sqrt((2.0 * deg + 1.0) * ((deg - 1.0) ** 2 - m * m)
                         / ((2.0 * deg - 3.0) * (deg * deg - m * m)))
        below = m <= deg - 2
        d0, d1 = np.where(below, d0, 0.0).astype(x.dtype), np.where(below, d1, 0.0).astype(
            x.dtype)
        row = d0 * x * prev1 - d1 * prev2
        row = row.at[deg].set(diags[deg])
        if deg >= 1:
            row = row.at[deg - 1].set(np.sqrt(2.0 * deg + 1.0) * x * diags[deg - 1])
        rows.append(row)
        prev2, prev1 = prev1, row
    return jnp.stack(rows)


@jit(static_argnums=(4,))
def _sph_harm(n, m, theta, phi, n_max):
    table = _normalized_legendre_table(n_max, jnp.cos(theta))
    value = table.at[n, abs(m), jnp.arange(len(n))].get(mode="clip")
    angle = abs(m) * phi
    harmonics = lax.complex(value * jnp.cos(angle), value * jnp.sin(angle))
    return jnp.where(m < 0, (-1.0) ** abs(m) * jnp.conjugate(harmonics), harmonics)


def sph_harm_y(n: Array, m: Array, theta: Array, phi: Array, diff_n: int | None = None,
               n_max: int | None = None) -> Array:
    """Spherical harmonics of degree ``n`` and order ``m`` at polar angle ``theta`` and
    azimuth ``phi`` (1-D arrays); ``n_max`` (default ``max(n)``) must be static under
    transformations."""
    if diff_n is not None:
        raise NotImplementedError(
            "The 'diff_n' argument to jax.scipy.special.sph_harm_y is not supported.")
    if jnp.isscalar(theta):
        theta = jnp.array([theta])
    if n_max is None:
        n_max = np.max(n)
    n_max = concrete(int, n_max, "The `n_max` argument of `jnp.scipy.special.sph_harm` must be "
                     "statically specified to use `sph_harm` within JAX transformations.")
    return _sph_harm(n, m, theta, phi, n_max)
