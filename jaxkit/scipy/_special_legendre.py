"""``jax.scipy.special.lpmn`` and ``lpmn_values`` (deprecated in JAX 0.10.2, which still
serves them with a warning): the associated Legendre functions of the first kind ``P_l^m``
(Condon-Shortley phase) for every order and degree up to ``n``, as a table ``[m, l, point]``.

Values come from the three-term recurrence in the degree, started on the diagonal; the
derivatives from identities that divide by ``sqrt(1 - x**2)`` only for ``m = 1`` (JAX's
choice too, so both give ``inf`` there at ``x = +-1``).
"""
from __future__ import annotations

import numpy as np

from jaxkit import core, dtypes
from jaxkit import numpy as jnp
from jaxkit.scipy._special_sph_harm import _normalized_legendre_table
from jaxkit.transforms.jit import jit
from jaxkit.typing import Array


def _legendre_table(n: int, x: Array) -> Array:
    """``P[m, l, k]``: the (unnormalized) associated Legendre function of order ``m`` and
    degree ``l`` at ``x[k]``; 0 where ``m > l``."""
    sin = jnp.sqrt(1.0 - x * x)
    diag = [jnp.ones_like(x)]                                 # P_m^m
    for m in range(1, n + 1):
        diag.append(-(2.0 * m - 1.0) * sin * diag[-1])
    zero = jnp.zeros_like(x)
    rows = []
    for m in range(n + 1):
        row = [zero] * m + [diag[m]]                          # degrees 0..m
        if m + 1 <= n:
            row.append((2.0 * m + 1.0) * x * diag[m])
        for deg in range(m + 2, n + 1):
            row.append(((2.0 * deg - 1.0) * x * row[deg - 1]
                        - (deg + m - 1.0) * row[deg - 2]) / (deg - m))
        rows.append(jnp.stack(row))
    return jnp.stack(rows)


def _legendre_derivatives(p: Array, x: Array) -> Array:
    """``dP[m, l, k] / dx`` from the table of values ``p`` (same layout)."""
    n = p.shape[0] - 1
    # p at degree l - 1 and order k (0 outside the table): the identities' raw material
    below = jnp.pad(p, ((0, 2), (1, 0), (0, 0)))[:, :n + 1]
    deg = np.arange(n + 1, dtype=np.float64)[:, None]

    def q(k: int) -> Array:
        """``P_l^k / sqrt(1 - x**2)`` for every degree ``l``, for an order ``k >= 1``."""
        return -(below[k + 1] + (deg + k - 1.0) * (deg + k) * below[k - 1]) / (2.0 * k)

    rows = []
    for m in range(n + 1):
        if m == 0:       # dP_l / dx = -P_l^1 / sqrt(1 - x**2)
            row = -q(1)
        elif m == 1:     # the one order whose identity keeps the division
            upper = p[2] if n >= 2 else jnp.zeros_like(p[0])
            row = 0.5 * ((deg + 1.0) * deg * p[0] - upper) / jnp.sqrt(1.0 - x * x)
            row = row.at[0].set(0.0)
        else:
            row = 0.5 * ((deg + m) * (deg - m + 1.0) * q(m - 1) - q(m + 1))
        rows.append(jnp.where(deg >= m, row, 0.0).astype(p.dtype))
    return jnp.stack(rows)


@jit(static_argnums=(0, 2, 3))
def _lpmn(n: int, z: Array, is_normalized: bool, derivatives: bool):
    if is_normalized:
        values = jnp.transpose(_normalized_legendre_table(n, z), (1, 0, 2))
    else:
        values = _legendre_table(n, z)
    return (values, _legendre_derivatives(values, z)) if derivatives else values


def _check(m, n, z) -> tuple[int, Array]:
    dtype = dtypes.dtype(z, canonicalize=True)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"z.dtype={dtype} is not supported, see docstring for supported types.")
    if np.ndim(z) != 1:
        raise ValueError("z must be a 1D array.")
    m = core.concrete_or_error(m, "Argument m of lpmn.")
    n = core.concrete_or_error(n, "Argument n of lpmn.")
    if m != n:
        raise NotImplementedError("Computations for m!=n are not yet supported.")
    return int(n), jnp.asarray(z)


def lpmn(m: int, n: int, z: Array) -> tuple[Array, Array]:
    """The associated Legendre functions of the first kind of orders and degrees ``0..n`` at
    the points ``z`` (1-D, float32 or float64) and their derivatives: two arrays of shape
    ``(n + 1, n + 1, len(z))`` indexed ``[order, degree, point]``. Only ``m == n``."""
    n, z = _check(m, n, z)
    return _lpmn(n, z, False, True)


def lpmn_values(m: int, n: int, z: Array, is_normalized: bool) -> Array:
    """The values of ``lpmn`` alone; ``is_normalized`` scales them so that the spherical
    harmonics built from them are orthonormal."""
    n, z = _check(m, n, z)
    return _lpmn(n, z, bool(is_normalized), False)
