"""``jaxkit.scipy.sparse.linalg``: the Krylov solvers ``cg``, ``bicgstab`` and ``gmres`` for
``A x = b`` with ``A`` a matrix or a function (a linear operator), on arrays or pytrees, as
``jax.scipy.sparse.linalg`` runs them (``while`` loops; SciPy's default ``maxiter = 10 n``).
They return ``(x, info)``; ``info`` is None for cg/bicgstab and 0/-1 (NaN result) for gmres,
as in JAX."""
from __future__ import annotations

import operator
from functools import partial

import numpy as np

from jaxkit import dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.runtime.array import Array
from jaxkit.scipy.sparse._implicit import linear_solve
from jaxkit.tree_util import tree_leaves, tree_map, tree_reduce, tree_structure

_dot = partial(jnp.dot, precision=lax.Precision.HIGHEST)
_vdot = partial(jnp.vdot, precision=lax.Precision.HIGHEST)
_einsum = partial(jnp.einsum, precision=lax.Precision.HIGHEST)


def _vdot_real_part(x, y):
    out = _vdot(x.real, y.real)
    if jnp.iscomplexobj(x) or jnp.iscomplexobj(y):
        out = out + _vdot(x.imag, y.imag)
    return out


def _vdot_real_tree(x, y):
    return sum(tree_leaves(tree_map(_vdot_real_part, x, y)))


def _vdot_tree(x, y):
    return sum(tree_leaves(tree_map(_vdot, x, y)))


def _norm(x):
    xs = tree_leaves(x)
    return jnp.sqrt(sum(map(_vdot_real_part, xs, xs)))


def _mul(scalar, tree):
    return tree_map(partial(operator.mul, scalar), tree)


_add = partial(tree_map, operator.add)
_sub = partial(tree_map, operator.sub)


def _identity(x):
    return x


def _normalize_matvec(f):
    """A matrix becomes ``x -> f @ x``; a function is used as it is."""
    if callable(f):
        return f
    if isinstance(f, (np.ndarray, Array)):
        if f.ndim != 2 or f.shape[0] != f.shape[1]:
            raise ValueError(f"linear operator must be a square matrix, but has shape: "
                             f"{f.shape}")
        return partial(_dot, f)
    if hasattr(f, "__matmul__"):
        if hasattr(f, "shape") and len(f.shape) != 2 or f.shape[0] != f.shape[1]:
            raise ValueError(f"linear operator must be a square matrix, but has shape: "
                             f"{f.shape}")
        return partial(operator.matmul, f)
    raise TypeError(f"linear operator must be either a function or ndarray: {f}")


# ---- conjugate gradients and BiCGSTAB ------------------------------------------------------------
def _cg_solve(A, b, x0, *, maxiter, tol, atol, M):
    atol2 = jnp.maximum(jnp.square(tol) * _vdot_real_tree(b, b), jnp.square(atol))
    r0 = _sub(b, A(x0))
    p0 = z0 = M(r0)
    dtype = dtypes.result_type(*tree_leaves(p0))
    gamma0 = _vdot_real_tree(r0, z0).astype(dtype)

    def cond(value):
        _, r, gamma, _, k = value
        rs = gamma.real if M is _identity else _vdot_real_tree(r, r)
        return (rs > atol2) & (k < maxiter)

    def body(value):
        x, r, gamma, p, k = value
        ap = A(p)
        alpha = gamma / _vdot_real_tree(p, ap).astype(dtype)
        x = _add(x, _mul(alpha, p))
        r = _sub(r, _mul(alpha, ap))
        z = M(r)
        gamma_next = _vdot_real_tree(r, z).astype(dtype)
        p = _add(z, _mul(gamma_next / gamma, p))
        return x, r, gamma_next, p, k + 1

    return lax.while_loop(cond, body, (x0, r0, gamma0, p0, 0))[0]


def _bicgstab_solve(A, b, x0, *, maxiter, tol, atol, M):
    atol2 = jnp.maximum(jnp.square(tol) * _vdot_real_tree(b, b), jnp.square(atol))

    def cond(value):
        _, r, *_, k = value
        return (_vdot_real_tree(r, r) > atol2) & (k < maxiter) & (k >= 0)

    def body(value):
        x, r, rhat, alpha, omega, rho, p, q, k = value
        rho_next = _vdot_tree(rhat, r)
        beta = rho_next / rho * alpha / omega
        p = _add(r, _mul(beta, _sub(p, _mul(omega, q))))
        phat = M(p)
        q = A(phat)
        alpha = rho_next / _vdot_tree(rhat, q)
        s = _sub(r, _mul(alpha, q))
        exit_early = _vdot_real_tree(s, s) < atol2
        shat = M(s)
        t = A(shat)
        omega = _vdot_tree(t, s) / _vdot_tree(t, t)
        x = tree_map(partial(jnp.where, exit_early), _add(x, _mul(alpha, phat)),
                     _add(x, _add(_mul(alpha, phat), _mul(omega, shat))))
        r = tree_map(partial(jnp.where, exit_early), s, _sub(s, _mul(omega, t)))
        # Breakdowns end the loop with negative codes (as SciPy's info).
        k = jnp.where((omega == 0) | (alpha == 0), -11, k + 1)
        k = jnp.where(rho_next == 0, -10, k)
        return x, r, rhat, alpha, omega, rho_next, p, q, k

    r0 = _sub(b, A(x0))
    one = jnp.ones((), dtype=dtypes.result_type(*tree_leaves(b)))
    return lax.while_loop(cond, body, (x0, r0, r0, one, one, one, r0, r0, 0))[0]


def _shapes(tree):
    return list(map(np.shape, tree_leaves(tree)))


def _isolve(method, A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None,
            check_symmetric=False):
    if x0 is None:
        x0 = tree_map(jnp.zeros_like, b)
    b, x0 = tree_map(jnp.asarray, b), tree_map(jnp.asarray, x0)
    if maxiter is None:
        maxiter = 10 * sum(bi.size for bi in tree_leaves(b))  # SciPy's default
    M = _identity if M is None else _normalize_matvec(M)
    A = _normalize_matvec(A)
    if tree_structure(x0) != tree_structure(b):
        raise ValueError("x0 and b must have matching tree structure: "
                         f"{tree_structure(x0)} vs {tree_structure(b)}")
    if _shapes(x0) != _shapes(b):
        raise ValueError(f"arrays in x0 and b must have matching shapes: {_shapes(x0)} vs "
                         f"{_shapes(b)}")
    symmetric = check_symmetric and all(
        not dtypes.issubdtype(x.dtype, np.complexfloating) for x in tree_leaves(b))
    solve = partial(_solve_with, method, tol=tol, atol=atol, maxiter=maxiter, M=M)
    return linear_solve(A, b, x0, solve, symmetric=symmetric), None


def _solve_with(method, A, b, x0, **kw):
    return method(A, b, x0, **kw)


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Conjugate gradients for Hermitian positive-definite ``A`` (preconditioner ``M``);
    stops when ``norm(residual) <= max(tol * norm(b), atol)``."""
    return _isolve(_cg_solve, A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M,
                   check_symmetric=True)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """BiCGSTAB for general (non-symmetric) ``A``."""
    return _isolve(_bicgstab_solve, A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M)


# ---- GMRES ---------------------------------------------------------------------------------------
def _safe_normalize(x, thresh=None):
    norm = _norm(x)
    dtype = dtypes.result_type(*tree_leaves(x))
    if thresh is None:
        thresh = dtypes.finfo(norm.dtype).eps
    thresh = jnp.asarray(thresh).astype(dtype).real
    use = norm > thresh
    normalized = tree_map(lambda y: jnp.where(use, y / norm.astype(dtype), 0.0), x)
    return normalized, jnp.where(use, norm, 0.0)


def _project_on_columns(Q, v):
    return tree_reduce(operator.add, tree_map(
        lambda X, y: _einsum("...n,...->n", X.conj(), y), Q, v))


def _gram_schmidt(Q, x, xnorm, max_iterations=2):
    """Classical Gram-Schmidt against the columns of ``Q``, repeated when it lost accuracy."""
    q0 = tree_leaves(Q)[0]
    r = jnp.zeros(q0.shape[-1], dtype=q0.dtype)

    def body(carry):
        k, q, r, qnorm_scaled = carry
        h = _project_on_columns(Q, q)
        q = _sub(q, tree_map(lambda X: _dot(X, h), Q))
        r = _add(r, h)

        def renorm_cond(c):
            k, not_done, _, _ = c
            return not_done & (k < max_iterations - 1)

        def renorm(c):
            k, _, q, _ = c
            return k, False, q, _safe_normalize(q)[1] / jnp.sqrt(2.0)

        _, _, q, qnorm_scaled = lax.while_loop(renorm_cond, renorm, (k, True, q, qnorm_scaled))
        return k + 1, q, r, qnorm_scaled

    def cond(carry):
        k, _, r, qnorm_scaled = carry
        return (k < max_iterations - 1) & (_safe_normalize(r)[1] < qnorm_scaled)

    carry = body((0, x, r, xnorm / jnp.sqrt(2.0)))
    _, q, r, _ = lax.while_loop(cond, body, carry)
    return q, r


def _arnoldi_step(k, A, M, V, H):
    dtype = dtypes.result_type(*tree_leaves(V))
    v = M(A(tree_map(lambda X: X[..., k], V)))
    _, norm0 = _safe_normalize(v)
    v, h = _gram_schmidt(V, v, norm0)
    unit_v, norm1 = _safe_normalize(v, thresh=dtypes.finfo(dtype).eps * norm0)
    V = tree_map(lambda X, y: X.at[..., k + 1].set(y), V, unit_v)
    h = h.at[k + 1].set(norm1.astype(dtype))
    return V, H.at[k, :].set(h), norm1 == 0.


def _rotate(H, i, cs, sn):
    x, y = H[i], H[i + 1]
    return H.at[i].set(cs.conj() * x - sn.conj() * y).at[i + 1].set(sn * x + cs * y)


def _givens(a, b):
    b_zero, a_lt_b = abs(b) == 0, abs(a) < abs(b)
    t = -jnp.where(a_lt_b, a, b) / jnp.where(a_lt_b, b, a)
    r = lax.rsqrt(1 + abs(t) ** 2).astype(t.dtype)
    return (jnp.where(b_zero, 1, jnp.where(a_lt_b, r * t, r)),
            jnp.where(b_zero, 0, jnp.where(a_lt_b, r, r * t)))


def _gmres_incremental(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
    """One restart cycle, updating a QR factorization of the Hessenberg matrix by Givens
    rotations so the residual is known every step."""
    V = tree_map(lambda x: jnp.pad(x[..., None], ((0, 0),) * x.ndim + ((0, restart),)),
                 unit_residual)
    dtype = dtypes.result_type(*tree_leaves(b))
    R = jnp.eye(restart, restart + 1, dtype=dtype)
    givens = jnp.zeros((restart, 2), dtype=dtype)
    beta = jnp.zeros((restart + 1), dtype=dtype).at[0].set(residual_norm.astype(dtype))

    def step(carry):
        k, _, V, R, beta, givens = carry
        V, H, _ = _arnoldi_step(k, A, M, V, R)
        row = lax.fori_loop(0, k, lambda i, row: _rotate(row, i, *givens[i, :]), H[k, :])
        factors = _givens(row[k], row[k + 1])
        givens = givens.at[k, :].set(jnp.stack(factors))
        R = R.at[k, :].set(_rotate(row, k, *factors))
        beta = _rotate(beta, k, *factors)
        return k + 1, abs(beta[k + 1]), V, R, beta, givens

    carry = lax.while_loop(lambda c: (c[0] < restart) & (c[1] > ptol), step,
                           (0, residual_norm, V, R, beta, givens))
    _, _, V, R, beta, _ = carry
    # R[:, :-1].T is upper triangular: a general solve gives the same y.
    y = jnp.linalg.solve(R[:, :-1].T, beta[:-1])
    x = _add(x0, tree_map(lambda X: _dot(X[..., :-1], y), V))
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x))))
    return x, unit_residual, residual_norm


def _gmres_batched(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
    """One restart cycle: the whole Arnoldi basis, then a least-squares solve."""
    V = tree_map(lambda x: jnp.pad(x[..., None], ((0, 0),) * x.ndim + ((0, restart),)),
                 unit_residual)
    dtype = dtypes.result_type(*tree_leaves(b))
    H = jnp.eye(restart, restart + 1, dtype=dtype)

    def step(carry):
        V, H, _, k = carry
        V, H, breakdown = _arnoldi_step(k, A, M, V, H)
        return V, H, breakdown, k + 1

    V, H, _, _ = lax.while_loop(lambda c: (c[3] < restart) & ~c[2], step, (V, H, False, 0))
    beta = jnp.zeros((restart + 1,), dtype=dtype).at[0].set(residual_norm.astype(dtype))
    h = H.T
    y = jnp.linalg.solve(_dot(h.T.conj(), h), _dot(h.T.conj(), beta))  # normal equations
    x = _add(x0, tree_map(lambda X: _dot(X[..., :-1], y), V))
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x))))
    return x, unit_residual, residual_norm


def _gmres_solve(A, b, x0, *, atol, ptol, restart, maxiter, M, cycle):
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x0))))

    def body(value):
        x, k, unit_residual, residual_norm = value
        x, unit_residual, residual_norm = cycle(A, b, x, unit_residual, residual_norm, ptol,
                                                restart, M)
        return x, k + 1, unit_residual, residual_norm

    return lax.while_loop(lambda v: (v[1] < maxiter) & (v[3] > atol), body,
                          (x0, 0, unit_residual, residual_norm))[0]


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """Restarted GMRES for general ``A`` (``restart`` Krylov vectors per cycle, at most
    ``maxiter`` cycles; ``solve_method`` 'batched' or 'incremental'). Returns ``(x, info)``,
    ``info`` -1 when ``x`` holds NaN."""
    if x0 is None:
        x0 = tree_map(jnp.zeros_like, b)
    M = _identity if M is None else _normalize_matvec(M)
    A = _normalize_matvec(A)
    b, x0 = tree_map(jnp.asarray, b), tree_map(jnp.asarray, x0)
    size = sum(bi.size for bi in tree_leaves(b))
    maxiter = 10 * size if maxiter is None else maxiter
    restart = min(restart, size)
    if tree_structure(x0) != tree_structure(b):
        raise ValueError("x0 and b must have matching tree structure: "
                         f"{tree_structure(x0)} vs {tree_structure(b)}")
    if solve_method == "incremental":
        cycle = _gmres_incremental
    elif solve_method == "batched":
        cycle = _gmres_batched
    else:
        raise ValueError(f"invalid solve_method {solve_method}, must be either 'incremental' "
                         "or 'batched'")

    def solve(A, b, x0):
        b_norm = _norm(b)
        atol_ = jnp.maximum(tol * b_norm, atol)
        ptol = _norm(M(b)) * jnp.minimum(1.0, atol_ / b_norm)
        return _gmres_solve(A, b, x0, atol=atol_, ptol=ptol, restart=restart,
                            maxiter=maxiter, M=M, cycle=cycle)

    x = linear_solve(A, b, x0, solve)
    return x, jnp.where(jnp.isnan(_norm(x)), -1, 0)
