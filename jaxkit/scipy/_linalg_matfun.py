"""Functions of matrices through the Schur form: ``sqrtm``, ``funm``, ``rsf2csf`` (real to
complex Schur form) and ``solve_sylvester`` (Bartels-Stewart, or by eigendecomposition).

A matrix function ``f(A) = Z f(T) Z^H`` is computed on the complex Schur form ``T`` (upper
triangular): ``f(T)`` is upper triangular too, its diagonal is ``f`` of ``T``'s, and each
entry above it follows from the ones below and left of it (Parlett's recurrence for ``funm``,
Bjorck and Hammarling's for ``sqrtm``). The recurrences run one entry per loop step, in JAX's
order, so that the staged programs are JAX's (and the rounding too).
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.scipy._linalg_factor import inv, schur, solve
from jaxkit.numpy._promotion import promote_dtypes_complex
from jaxkit.scipy._util import promote_args_inexact, promote_dtypes_inexact
from jaxkit.transforms.jit import jit
from jaxkit.typing import Array, ArrayLike

_HIGHEST = lax.Precision.HIGHEST


def _square_2d(name: str, a: Array) -> None:
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} expects a square 2-D matrix, got shape {a.shape}; "
                         f"for a batch of matrices use jax.vmap({name}).")


# ---- sqrtm -----------------------------------------------------------------------------------
@jit
def _sqrtm_triu(t: Array) -> Array:
    """The upper triangular square root U of an upper triangular T (U @ U = T), Bjorck and
    Hammarling's recurrence one entry at a time, as JAX stages it: column j from its
    diagonal up, ``U[i, j] = (T[i, j] - sum_{i<k<j} U[i, k] U[k, j]) / (U[i, i] + U[j, j])``."""
    diag = jnp.sqrt(jnp.diag(t))
    n = diag.size
    u = jnp.diag(diag)

    def entry(step, data):
        j, u = data
        i = j - 1 - step
        inner = lax.fori_loop(i + 1, j, lambda k, acc: acc + u[i, k] * u[k, j], 0.0)
        # 0/0 of a singular T: the entry is 0, as JAX
        value = jnp.where(t[i, j] == inner, 0.0, (t[i, j] - inner) / (diag[i] + diag[j]))
        return j, u.at[i, j].set(value)

    def column(j, u):
        return lax.fori_loop(0, j, entry, (j, u))[1]

    return lax.fori_loop(0, n, column, u)


@jit
def _sqrtm(a: Array) -> Array:
    t, z = schur(a, output="complex")
    root = _sqrtm_triu(t)
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
@jit
def _rsf2csf_2d(T: Array, Z: Array) -> tuple[Array, Array]:
    T, Z = promote_dtypes_complex(T, Z)
    eps = dtypes.finfo(T.dtype).eps
    N = T.shape[0]
    if N == 1:
        return T, Z

    def rotate(m, T, Z):
        # A 2x2 block on the diagonal at m-1 holds a complex conjugate pair: a unitary
        # rotation G of rows and columns m-1, m (from an eigenvalue of the block) makes it
        # upper triangular. Only the columns from m-1 on (rows up to m) of T change.
        mu = jnp.linalg.eigvals(lax.dynamic_slice(T, (m - 1, m - 1), (2, 2))) - T[m, m]
        r = jnp.linalg.norm(jnp.array([mu[0], T[m, m - 1]])).astype(T.dtype)
        c, s = mu[0] / r, T[m, m - 1] / r
        G = jnp.array([[c.conj(), s], [-s, c]], dtype=T.dtype)
        T_rows = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=0)
        col_mask = jnp.arange(N) >= m - 1
        rotated = G @ jnp.where(col_mask, T_rows, 0)
        T = lax.dynamic_update_slice_in_dim(T, jnp.where(~col_mask, T_rows, rotated), m - 1,
                                            axis=0)
        T_cols = lax.dynamic_slice_in_dim(T, m - 1, 2, axis=1)
        row_mask = jnp.arange(N)[:, np.newaxis] < m + 1
        rotated = jnp.where(row_mask, T_cols, 0) @ G.conj().T
        T = lax.dynamic_update_slice_in_dim(T, jnp.where(~row_mask, T_cols, rotated), m - 1,
                                            axis=1)
        Z_cols = lax.dynamic_slice_in_dim(Z, m - 1, 2, axis=1)
        Z = lax.dynamic_update_slice_in_dim(Z, Z_cols @ G.conj().T, m - 1, axis=1)
        return T, Z

    def step(i, TZ):
        m = N - i
        T, Z = TZ
        T, Z = lax.cond(jnp.abs(T[m, m - 1]) > eps * (jnp.abs(T[m - 1, m - 1])
                                                       + jnp.abs(T[m, m])),
                        rotate, lambda m, T, Z: (T, Z), m, T, Z)
        return T.at[m, m - 1].set(0.0), Z

    return lax.fori_loop(1, N, step, (T, Z))


@partial(jit, static_argnames=("check_finite",))
def rsf2csf(T: ArrayLike, Z: ArrayLike, check_finite: bool = True) -> tuple[Array, Array]:
    """Convert a real Schur form ``(T, Z)`` (``A = Z T Z^T``, ``T`` quasi-upper-triangular)
    to the complex one (``T`` upper triangular, ``Z`` unitary). Batch axes broadcast."""
    del check_finite
    T_arr, Z_arr = jnp.asarray(T), jnp.asarray(Z)
    if T_arr.ndim < 2 or T_arr.shape[-1] != T_arr.shape[-2]:
        raise ValueError("Input 'T' must be square.")
    if Z_arr.ndim < 2 or Z_arr.shape[-1] != Z_arr.shape[-2]:
        raise ValueError("Input 'Z' must be square.")
    if T_arr.shape[-1] != Z_arr.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {Z_arr.shape} vs. T: "
                         f"{T_arr.shape}")
    return jnp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(T_arr, Z_arr)


# ---- funm ------------------------------------------------------------------------------------
@jit
def _algorithm_11_1_1(F: Array, T: Array) -> tuple[Array, Array]:
    """F = f(T) for upper triangular T given ``F`` holding f of its diagonal, by Parlett's
    recurrence one entry at a time (Golub and Van Loan's Algorithm 11.1.1, as JAX stages it),
    and the smallest |T[j, j] - T[i, i]| met (how close it came to dividing by zero):
    ``(T[j,j] - T[i,i]) F[i,j] = T[i,j] (F[j,j] - F[i,i]) + sum_{i<k<j} (T[i,k] F[k,j] -
    F[i,k] T[k,j])`` along the superdiagonals p = 1 .. N-1."""
    N = T.shape[0]
    minden = jnp.abs(T[0, 0])

    def superdiagonal(p, F_minden):
        _, F, minden = lax.fori_loop(1, N - p + 1, entry, (p, *F_minden))
        return F, minden

    def entry(i, p_F_minden):
        p, F, minden = p_F_minden
        j = i + p
        s = T[i - 1, j - 1] * (F[j - 1, j - 1] - F[i - 1, i - 1])
        T_row, T_col = T[i - 1], T[:, j - 1]
        F_row, F_col = F[i - 1], F[:, j - 1]
        inside = (jnp.arange(N) >= i) & (jnp.arange(N) < j - 1)
        s = s + (jnp.where(inside, T_row, 0) @ jnp.where(inside, F_col, 0)
                 - jnp.where(inside, F_row, 0) @ jnp.where(inside, T_col, 0))
        den = T[j - 1, j - 1] - T[i - 1, i - 1]
        s = jnp.where(den != 0, s / den, s)
        return p, F.at[i - 1, j - 1].set(s), jnp.minimum(minden, jnp.abs(den))

    return lax.fori_loop(1, N, superdiagonal, (F, minden))


def funm(A: ArrayLike, func: Callable[[Array], Array],
         disp: bool = True) -> Array | tuple[Array, Array]:
    """``func`` applied to a square matrix (through its complex Schur form; the result is
    complex). With ``disp=False`` also an estimate of the relative error."""
    A_arr = jnp.asarray(A)
    if A_arr.ndim != 2 or A_arr.shape[0] != A_arr.shape[1]:
        raise ValueError("expected square array_like input")
    T, Z = rsf2csf(*schur(A_arr))
    F = jnp.diag(func(jnp.diag(T))).astype(T.dtype.char)
    F, minden = _algorithm_11_1_1(F, T)
    F = Z @ F @ Z.conj().T
    if disp:
        return F
    # JAX's tolerance: single precision's epsilon for complex64, double's otherwise.
    tol = dtypes.finfo(np.float32 if F.dtype.char.lower() == "f" else np.float64).eps
    minden = jnp.where(minden == 0.0, tol, minden)
    err = jnp.where(jnp.any(jnp.isinf(F)), np.inf, jnp.minimum(1, jnp.maximum(
        tol, (tol / minden) * jnp.linalg.norm(jnp.triu(T, 1), 1))))
    return F, err


# ---- solve_sylvester -------------------------------------------------------------------------
def _solve_sylvester_triangular_scan(R: Array, S: Array, F: Array) -> Array:
    """Y with R Y + Y S = F for R upper and S lower triangular, one entry per scan step from
    the bottom-right corner back (as JAX stages it): ``(R[i, i] + S[j, j]) Y[i, j] = F[i, j]
    - sum_{k>i} R[i, k] Y[k, j] - sum_{k>j} Y[i, k] S[k, j]``."""
    R, S, F = promote_args_inexact("_solve_sylvester_triangular_scan", R, S, F)
    m, n = F.shape
    flat_indices = jnp.arange(m * n - 1, -1, -1)
    Y0 = jnp.zeros((m * n,), dtype=F.dtype)

    def step(Y_flat, idx):
        i, j = idx // n, idx % n
        Y = Y_flat.reshape((m, n))
        rhs = F[i, j]
        row_term = jnp.sum(jnp.where(jnp.arange(m) > i, R[i, :] * Y[:, j], 0.0))
        col_term = jnp.sum(jnp.where(jnp.arange(n) > j, Y[i, :] * S[:, j], 0.0))
        rhs -= row_term + col_term
        value = rhs / (R[i, i] + S[j, j])
        return Y_flat.at[i * n + j].set(value), None

    Y_flat, _ = lax.scan(step, Y0, flat_indices)
    return Y_flat.reshape((m, n))


@partial(jit, static_argnames=["method"])
def _solve_sylvester_2d(A: Array, B: Array, C: Array, *, method: str, tol: float) -> Array:
    m, n = C.shape[-2:]
    if method == "schur":
        # A = U R U^H and B^H = V S V^H: A X + X B = C is R Y + Y S^H = U^H C V, X = U Y V^H
        R, U = schur(A, output="complex")
        S, V = schur(B.conj().T, output="complex")
        F = U.conj().T @ C.astype(R.dtype) @ V
        Y = _solve_sylvester_triangular_scan(R, S.conj().T, F)
        X = U @ Y @ V.conj().T
    elif method == "eigen":
        # A = P diag(ea) P^-1, B = Q diag(eb) Q^-1: (ea_i + eb_j) Y_ij = (P^-1 C Q)_ij
        RA, UA = jnp.linalg.eig(A)
        RB, UB = jnp.linalg.eig(B)
        F = solve(UA, C.astype(RA.dtype) @ UB)
        Y = F / (RA[:, None] + RB[None, :])
        X = UA[:m, :m] @ Y[:m, :n] @ inv(UB)[:n, :n]
    else:
        raise ValueError(f'Unrecognized method {method}. The two valid methods are either '
                         f'"schur" or "eigen".')
    if not dtypes.issubdtype(C.dtype, np.complexfloating):
        X = X.real
    # An eigenvalue of A and one of -B in common: no unique solution, NaNs (as JAX).
    return lax.cond(
        jnp.any(jnp.abs(jnp.linalg.eigvals(A)[:, None] + jnp.linalg.eigvals(B)[None, :])
                < tol),
        lambda: jnp.zeros_like(X) * np.nan, lambda: X)


@partial(jit, static_argnames=["method"])
def solve_sylvester(A: ArrayLike, B: ArrayLike, C: ArrayLike, *, method: str = "schur",
                    tol: float = 1e-8) -> Array:
    """Solve ``A X + X B = C`` by the Bartels-Stewart algorithm (``method='schur'``) or by
    eigendecomposition (``'eigen'``, faster, less accurate for ill-conditioned A, B). Where
    an eigenvalue of A and one of B sum to less than ``tol`` in size, the result is NaN."""
    A, B, C = promote_dtypes_inexact(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
    if C.ndim < 2:
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {A.shape}\n"
                         f"B: {B.shape}\nC: {C.shape}")
    m, n = C.shape[-2:]
    if A.shape[-2:] != (m, m) or B.shape[-2:] != (n, n):
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {A.shape}\n"
                         f"B: {B.shape}\nC: {C.shape}")
    return jnp.vectorize(partial(_solve_sylvester_2d, method=method, tol=tol),
                         signature="(m,m),(n,n),(m,n)->(m,n)")(A, B, C)
