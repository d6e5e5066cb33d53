"""``lobpcg_standard``: the ``k`` largest eigenpairs of a Hermitian operator by the Locally
Optimal Block Preconditioned Conjugate Gradient method (Knyazev 2001), without a
preconditioner.

Each step spans the current eigenvector estimates ``X``, their residuals ``R`` and the previous
step's direction ``P``; a Rayleigh-Ritz solve on that (up to ``3k``-dimensional) space picks the
best ``k`` vectors. The space is kept orthonormal explicitly (projection against ``X`` and an
SVQB orthonormalization of ``[R, P]``, each done twice): columns that are numerically dependent
are dropped by zeroing them, and their Ritz values are pushed below every real one so they are
never chosen. The loop is a ``while_loop`` that stops after ``m`` steps or once every residual
passes the documented test ``|A v - t v| < tol * 10 * n * (t + |A v|)``."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.transforms.jit import jit

__all__ = ["lobpcg_standard"]

_HIGHEST = (lax.Precision.HIGHEST, lax.Precision.HIGHEST)


def _mm(a, b):
    return lax.dot(a, b, precision=_HIGHEST)


def _project_out(basis, V):
    """``V`` minus its component in the span of the orthonormal columns of ``basis``."""
    return V - _mm(basis, _mm(basis.T, V))


def _svqb(V):
    """Orthonormal columns spanning ``V`` (Stathopoulos and Wu's SVQB): columns along
    directions whose Gram eigenvalue is negligible come back as zeros."""
    gram = _mm(V.T, V)
    lam, vecs = jnp.linalg.eigh(gram)
    keep = lam > jnp.finfo(V.dtype).eps * V.shape[1] * jnp.max(jnp.abs(lam))
    scale = jnp.where(keep, lax.rsqrt(jnp.where(keep, lam, 1)), 0)
    return _mm(V, vecs * scale[None, :])


def _extend(X, V):
    """Orthonormal directions of ``V`` outside span(``X``) (twice, for rounding errors)."""
    for _ in range(2):
        V = _svqb(_project_out(X, V))
    return V


def _lobpcg(matvec: Callable, X, m: int, tol):
    n, k = X.shape
    X = _svqb(jnp.linalg.qr(X)[0])
    AX = matvec(X)
    theta = jnp.sum(X * AX, axis=0)
    P = jnp.zeros_like(X)

    def cond(state):
        i, _, _, _, _, converged = state
        return (i < m) & (converged < k)

    def body(state):
        i, X, AX, P, theta, _ = state
        R = AX - X * theta[None, :]
        W = _extend(X, jnp.concatenate([R, P], axis=1))
        S = jnp.concatenate([X, W], axis=1)
        T = _mm(S.T, matvec(S))
        T = (T + T.T) / 2
        # Dropped (zero) columns give zero rows and columns of T: move their Ritz values below
        # every real one so the top-k choice never lands on them.
        dropped = jnp.sum(S * S, axis=0) < 0.5
        floor = -(jnp.sqrt(jnp.sum(T * T)) + 1)
        T = jnp.where(jnp.diag(dropped), floor, T)
        vals, vecs = jnp.linalg.eigh(T)
        C = vecs[:, ::-1][:, :k]  # eigh is ascending; the largest come first in the answer
        theta = vals[::-1][:k]
        X_new = _mm(S, C)
        X_new = X_new / jnp.linalg.norm(X_new, axis=0, keepdims=True)
        P = _mm(W, C[k:])
        norm_p = jnp.linalg.norm(P, axis=0, keepdims=True)
        P = P / jnp.where(norm_p == 0, 1, norm_p)
        AX = matvec(X_new)
        resid = jnp.linalg.norm(AX - X_new * theta[None, :], axis=0)
        bound = tol * 10 * n * (jnp.linalg.norm(AX, axis=0) + theta)
        converged = jnp.sum(resid < bound).astype(np.int32)
        return i + 1, X_new, AX, P, theta, converged

    state = (jnp.zeros((), np.int32), X, AX, P, theta, jnp.zeros((), np.int32))
    i, X, _, _, theta, _ = lax.while_loop(cond, body, state)
    return theta, X, i


def _check_inputs(matvec: Callable, X) -> None:
    if X.ndim != 2:
        raise ValueError(f"X must be an (n, k) matrix of search directions, got shape {X.shape}")
    n, k = X.shape
    if k == 0:
        raise ValueError(f"must have search dim > 0, got {k}")
    if k * 5 >= n:
        raise ValueError(f"expected search dim * 5 < matrix dim (got {k * 5}, {n})")
    out = matvec(jnp.zeros((n, 1), X.dtype))
    if out.dtype != X.dtype:
        raise ValueError(f"A, X must have same dtypes (were {out.dtype}, {X.dtype})")
    if out.shape != (n, 1):
        raise ValueError(f"A must be ({n}, {n}) matrix A, got output {out.shape}")


def _matrix_lobpcg(A, X, m: int, tol):
    return _lobpcg(lambda V: _mm(A, V), X, m, tol)


_matrix_lobpcg_jit = jit(_matrix_lobpcg, static_argnames=("m",))


def lobpcg_standard(A, X, m: int = 100, tol=None):
    """The ``k`` largest eigenvalues of the Hermitian ``A`` (an ``(n, n)`` array or a function
    applying it to an ``(n, j)`` block) and their eigenvectors, by LOBPCG started from the
    ``(n, k)`` directions ``X`` (orthonormalized first; ``0 < 5 k < n``).

    At most ``m`` iterations run; they stop early once every eigenpair ``(t, v)`` has
    ``|A v - t v| < tol * 10 * n * (t + |A v|)``; ``tol`` defaults to the dtype's epsilon.
    Returns ``(theta, U, i)``: eigenvalues (largest first), eigenvectors as columns, and the
    number of iterations run."""
    X = jnp.asarray(X)
    is_matrix = not callable(A)
    matvec = (lambda V: _mm(A, V)) if is_matrix else A
    if is_matrix:
        A = jnp.asarray(A)
    _check_inputs(matvec, X)
    if tol is None:
        tol = float(np.finfo(X.dtype).eps)
    if is_matrix:
        return _matrix_lobpcg_jit(A, X, m=int(m), tol=tol)
    return _lobpcg(A, X, int(m), tol)
