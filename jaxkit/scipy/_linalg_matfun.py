"""Functions of matrices through the Schur form: ``sqrtm``, ``funm``, ``rsf2csf`` (real to
complex Schur form) and ``solve_sylvester`` (Bartels-Stewart, or by eigendecomposition).

A matrix function ``f(A) = Z f(T) Z^H`` is computed on the complex Schur form ``T`` (upper
triangular): ``f(T)`` is upper triangular too, its diagonal is ``f`` of ``T``'s, and each
superdiagonal follows from the ones below it (Parlett's recurrence for ``funm``, Bjorck and
Hammarling's for ``sqrtm``). The loops below run one superdiagonal per step, all of its
entries at once, so a matrix of size n costs n steps of O(n^2) work, not n^2 scalar steps.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.lax import linalg as lax_linalg
from jaxkit.numpy._jitted import jitted
from jaxkit.scipy._linalg_factor import schur
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.transforms.jit import jit
from jaxkit.typing import Array, ArrayLike

_HIGHEST = lax.Precision.HIGHEST


def _square_2d(name: str, a: Array) -> None:
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} expects a square 2-D matrix, got shape {a.shape}; "
                         f"for a batch of matrices use jax.vmap({name}).")


def _superdiagonal_loop(n: int, step: Callable, init):
    """Run ``step(d, cols, valid, carry)`` for the superdiagonals d = 1 .. n-1. Row i of
    superdiagonal d is entry ``(i, cols[i])`` with ``cols = (i + d) mod n``; ``valid`` masks
    the rows i + d >= n that wrap around."""
    rows = jnp.arange(n)

    def body(d, carry):
        cols = (rows + d) % n
        return step(d, cols, rows + d < n, carry)

    return lax.fori_loop(1, n, body, init) if n > 1 else init


def _shifted_columns(x: Array, cols: Array) -> Array:
    """``x[:, cols]``: column i holds ``x[:, i + d]``, so that a sum over k of
    ``x[i, k] * y[k, i + d]`` is the row sum of ``x * _shifted_columns(y, cols).T``."""
    return jnp.take(x, cols, axis=1)


# ---- sqrtm -----------------------------------------------------------------------------------
def _sqrtm_upper_triangular(t: Array) -> Array:
    """The upper triangular square root U of an upper triangular T (U @ U = T)."""
    n = t.shape[0]
    rows = jnp.arange(n)
    root_diag = jnp.sqrt(jnp.diagonal(t))
    u0 = jnp.diag(root_diag)

    def step(d, cols, valid, u):
        # U[i, i+d] = (T[i, i+d] - sum_{i<k<i+d} U[i, k] U[k, i+d]) / (U[i, i] + U[i+d, i+d]);
        # U[i, i+d] is still zero, so the full row-by-column sum is the inner sum.
        inner = jnp.sum(u * _shifted_columns(u, cols).T, axis=1)
        target = t[rows, cols]
        value = jnp.where(target == inner, 0,  # 0/0 of a singular T: as JAX, the entry is 0
                          (target - inner) / (root_diag + root_diag[cols]))
        return u.at[rows, cols].add(jnp.where(valid, value, 0))

    return _superdiagonal_loop(n, step, u0)


@jit
def _sqrtm(a: Array) -> Array:
    t, z = schur(a, output="complex")
    root = _sqrtm_upper_triangular(t)
    return jnp.matmul(jnp.matmul(z, root, precision=_HIGHEST), jnp.conj(z.T),
                      precision=_HIGHEST)


def sqrtm(A: ArrayLike, blocksize: int = 1) -> Array:
    """The principal square root of a square matrix, by the complex Schur method (always a
    complex array, as in JAX). ``blocksize`` must be 1: the blocked variant is not used."""
    if blocksize != 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    a, = promote_dtypes_inexact(jnp.asarray(A))
    _square_2d("sqrtm", a)
    return _sqrtm(a)


# ---- rsf2csf ---------------------------------------------------------------------------------
def _rsf2csf_2d(t: Array, z: Array) -> tuple[Array, Array]:
    n = t.shape[-1]
    eps = np.finfo(t.dtype).eps
    # A 2x2 block [[a, b], [c, d]] on the diagonal (c != 0) holds a complex conjugate pair;
    # a unitary rotation G of rows and columns m-1, m makes it upper triangular with the
    # eigenvalue of positive imaginary part first (LAPACK's order, as SciPy takes it).

    def body(step, tz):
        t, z = tz
        m = n - 1 - step
        block = lax.dynamic_slice(t, (m - 1, m - 1), (2, 2))
        a, b, c, d = block[0, 0], block[0, 1], block[1, 0], block[1, 1]
        is_block = jnp.abs(c) > eps * (jnp.abs(a) + jnp.abs(d))
        half = (a - d) / 2
        mu = half + jnp.sqrt(half * half + b * c)  # eigenvalue - d
        r = jnp.sqrt(jnp.abs(mu) ** 2 + jnp.abs(c) ** 2)
        safe_r = jnp.where(is_block & (r > 0), r, 1)
        cos = jnp.where(is_block, mu / safe_r, 1)
        sin = jnp.where(is_block, c / safe_r, 0)
        g = jnp.stack([jnp.stack([jnp.conj(cos), sin]), jnp.stack([-sin, cos])])
        g_h = jnp.conj(g.T)
        # Rows m-1, m are zero left of column m-1 and columns m-1, m below row m (the blocks
        # do not overlap and later ones are done), so whole rows and columns can turn.
        two_rows = lax.dynamic_slice(t, (m - 1, 0), (2, n))
        t = lax.dynamic_update_slice(t, jnp.matmul(g, two_rows, precision=_HIGHEST),
                                     (m - 1, 0))
        two_cols = lax.dynamic_slice(t, (0, m - 1), (n, 2))
        t = lax.dynamic_update_slice(t, jnp.matmul(two_cols, g_h, precision=_HIGHEST),
                                     (0, m - 1))
        z_cols = lax.dynamic_slice(z, (0, m - 1), (n, 2))
        z = lax.dynamic_update_slice(z, jnp.matmul(z_cols, g_h, precision=_HIGHEST),
                                     (0, m - 1))
        return t.at[m, m - 1].set(0), z

    if n < 2:
        return t, z
    return lax.fori_loop(0, n - 1, body, (t, z))


@jitted(static_argnames=("check_finite",), inline=False)
def rsf2csf(T: ArrayLike, Z: ArrayLike, check_finite: bool = True) -> tuple[Array, Array]:
    """Convert a real Schur form ``(T, Z)`` (``A = Z T Z^T``, ``T`` quasi-upper-triangular)
    to the complex one (``T`` upper triangular, ``Z`` unitary). Batch axes broadcast."""
    del check_finite
    t, z = promote_dtypes_inexact(jnp.asarray(T), jnp.asarray(Z))
    for name, x in (("T", t), ("Z", z)):
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"rsf2csf: {name} must be a square matrix (or a batch of them), "
                             f"got shape {x.shape}.")
    if t.shape[-1] != z.shape[-1]:
        raise ValueError(f"rsf2csf: T and Z must have the same size, got {t.shape} and "
                         f"{z.shape}.")
    complex_dtype = jnp.result_type(t.dtype, jnp.complex64)
    t, z = t.astype(complex_dtype), z.astype(complex_dtype)
    return jnp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(t, z)


# ---- funm ------------------------------------------------------------------------------------
@jit
def _parlett(t: Array, f_diag: Array) -> tuple[Array, Array]:
    """F = f(T) for upper triangular T given f of its diagonal (Parlett's recurrence), and the
    smallest |T[j, j] - T[i, i]| met (how close the recurrence came to dividing by zero)."""
    n = t.shape[0]
    rows = jnp.arange(n)
    diag = jnp.diagonal(t)

    def step(d, cols, valid, carry):
        f, smallest = carry
        # (T[j,j] - T[i,i]) F[i,j] = T[i,j] (F[j,j] - F[i,i])
        #                            + sum_{i<k<j} (T[i,k] F[k,j] - F[i,k] T[k,j]),  j = i+d:
        # with F[i, j] still zero, the whole-row sums give exactly the right-hand side.
        rhs = (jnp.sum(t * _shifted_columns(f, cols).T, axis=1)
               - jnp.sum(f * _shifted_columns(t, cols).T, axis=1))
        den = diag[cols] - diag
        value = jnp.where(den != 0, rhs / jnp.where(den != 0, den, 1), rhs)
        smallest = jnp.minimum(smallest, jnp.min(jnp.where(valid, jnp.abs(den), jnp.inf)))
        return f.at[rows, cols].add(jnp.where(valid, value, 0)), smallest

    f0 = jnp.diag(f_diag)
    smallest0 = jnp.abs(t[0, 0]).astype(jnp.finfo(t.dtype).dtype)
    return _superdiagonal_loop(n, step, (f0, smallest0))


def funm(A: ArrayLike, func: Callable[[Array], Array],
         disp: bool = True) -> Array | tuple[Array, Array]:
    """``func`` applied to a square matrix (through its complex Schur form; the result is
    complex). With ``disp=False`` also an estimate of the relative error."""
    a = jnp.asarray(A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("expected square array_like input")
    t, z = rsf2csf(*schur(a))
    f_diag = jnp.asarray(func(jnp.diagonal(t))).astype(t.dtype)
    f, smallest = _parlett(t, f_diag)
    f = jnp.matmul(jnp.matmul(z, f, precision=_HIGHEST), jnp.conj(z.T), precision=_HIGHEST)
    if disp:
        return f
    tol = np.finfo(f.dtype).eps
    smallest = jnp.where(smallest == 0, tol, smallest)
    err = jnp.where(jnp.any(jnp.isinf(f)), np.inf,
                    jnp.minimum(1, jnp.maximum(
                        tol, (tol / smallest) * jnp.linalg.norm(jnp.triu(t, 1), 1))))
    return f, err


# ---- solve_sylvester -------------------------------------------------------------------------
def _triangular_sylvester(r: Array, lower: Array, f: Array) -> Array:
    """Y with R Y + Y L = F, R upper and L lower triangular: column j of Y solves
    (R + L[j, j]) y_j = F[:, j] - sum_{k>j} Y[:, k] L[k, j], from the last column back."""
    m, n = f.shape
    eye = jnp.eye(m, dtype=r.dtype)

    def body(step, y):
        j = n - 1 - step
        rhs = lax.dynamic_slice(f, (0, j), (m, 1)) - jnp.matmul(
            y, lax.dynamic_slice(lower, (0, j), (n, 1)), precision=_HIGHEST)
        shifted = r + lower[j, j] * eye
        col = lax_linalg.triangular_solve(shifted, rhs, left_side=True, lower=False)
        return lax.dynamic_update_slice(y, col, (0, j))

    return lax.fori_loop(0, n, body, jnp.zeros_like(f))


def _solve_sylvester_2d(a, b, c, *, method: str, tol: float):
    if method == "schur":
        # A = U R U^H and B^H = V S V^H, so A X + X B = C is R Y + Y S^H = U^H C V, X = U Y V^H
        r, u = schur(a, output="complex")
        s, v = schur(jnp.conj(b.T), output="complex")
        f = jnp.conj(u.T) @ c.astype(r.dtype) @ v
        x = u @ _triangular_sylvester(r, jnp.conj(s.T), f) @ jnp.conj(v.T)
        eig_a, eig_b = jnp.diagonal(r), jnp.conj(jnp.diagonal(s))
    else:
        # A = P diag(ea) P^-1, B = Q diag(eb) Q^-1: (ea_i + eb_j) Y_ij = (P^-1 C Q)_ij
        eig_a, p = jnp.linalg.eig(a)
        eig_b, q = jnp.linalg.eig(b)
        y = jnp.linalg.solve(p, c.astype(eig_a.dtype) @ q) / (eig_a[:, None] + eig_b[None, :])
        x = p @ y @ jnp.linalg.inv(q)
    if not jnp.issubdtype(c.dtype, jnp.complexfloating):
        x = x.real
    # A + (-B) with a common eigenvalue has no unique solution: NaNs, as JAX returns
    singular = jnp.any(jnp.abs(eig_a[:, None] + eig_b[None, :]) < tol)
    return jnp.where(singular, jnp.zeros_like(x) * np.nan, x)


@partial(jit, static_argnames=("method",))
def _solve_sylvester(a, b, c, tol, *, method):
    return jnp.vectorize(partial(_solve_sylvester_2d, method=method, tol=tol),
                         signature="(m,m),(n,n),(m,n)->(m,n)")(a, b, c)


@jitted(static_argnames=("method",), inline=False)
def solve_sylvester(A: ArrayLike, B: ArrayLike, C: ArrayLike, *, method: str = "schur",
                    tol: float = 1e-8) -> Array:
    """Solve ``A X + X B = C`` by the Bartels-Stewart algorithm (``method='schur'``) or by
    eigendecomposition (``'eigen'``, faster, less accurate for ill-conditioned A, B). Where
    an eigenvalue of A and one of B sum to less than ``tol`` in size, the result is NaN."""
    if method not in ("schur", "eigen"):
        raise ValueError(f'Unrecognized method {method}. The two valid methods are either '
                         f'"schur" or "eigen".')
    a, b, c = promote_dtypes_inexact(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
    if c.ndim < 2:
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {a.shape}\n"
                         f"B: {b.shape}\nC: {c.shape}")
    m, n = c.shape[-2:]
    if a.shape[-2:] != (m, m) or b.shape[-2:] != (n, n):
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {a.shape}\n"
                         f"B: {b.shape}\nC: {c.shape}")
    return _solve_sylvester(a, b, c, tol, method=method)
