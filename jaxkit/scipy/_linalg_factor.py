"""The factorizations of ``jax.scipy.linalg`` and the solvers built on them, on the
LAPACK-backed ``lax.linalg`` primitives (their derivatives and batching come with them):
``cho_factor``/``cho_solve``, ``lu``/``lu_factor``/``lu_solve``, ``solve_triangular``,
``qr``, ``qr_multiply``, ``svd``, ``eigh``, ``schur``, ``hessenberg`` and
``polar``; and ``det``, ``inv`` and ``solve`` over ``jnp.linalg`` (Cholesky for ``'pos'``).
SciPy's conventions:
``lu`` returns ``p, l, u`` with ``a = p @ l @ u``; ``cho_factor`` returns ``(c, lower)``.
"""
from __future__ import annotations

import warnings
from functools import partial


from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.lax import linalg as lax_linalg
from jaxkit.lax.linalg.qr import geqp3_p, geqrf
from jaxkit.numpy import _linalg_lu_solve as _lu_solve_mod
from jaxkit.numpy._jitted import jitted
from jaxkit.scipy._util import promote_dtypes_inexact
from jaxkit.transforms.jit import jit
from jaxkit.transforms.vmap import vmap
from jaxkit.typing import Array, ArrayLike


def _inexact(*xs):
    return promote_dtypes_inexact(*(jnp.asarray(x) for x in xs))


def _check_matrix(name: str, a: Array, square: bool = True) -> None:
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        what = "square matrix" if square else "matrix"
        raise ValueError(f"{name}: expected a (batched) {what}, got shape {a.shape}")


def _batched_vectors(a: Array, b: Array) -> bool:
    """Whether ``b`` is a batch of vectors for a batch of matrices ``a``: a form JAX's solves
    still take, with a deprecation warning (``_solve_signature``)."""
    return 1 < b.ndim == a.ndim - 1 and b.shape[-1] == a.shape[-1]


def _check_rhs(name: str, a: Array, b: Array) -> None:
    if _batched_vectors(a, b):
        return
    if b.ndim < 1 or b.shape[0 if b.ndim == 1 else -2] != a.shape[-1]:
        raise ValueError(f"{name}: b.shape={b.shape} does not match a.shape={a.shape} (b's "
                         "leading (vector) or second-to-last (matrix) dimension must equal "
                         "a's size)")


def _as_matrix_rhs(a: Array, b: Array):
    """``b`` as ``[..., n, k]`` broadcast against ``a``'s batch, and how to undo it."""
    vector = b.ndim == 1
    bm = b[:, None] if vector else b
    batch = jnp.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    bm = jnp.broadcast_to(bm, batch + bm.shape[-2:])
    return a, bm, (lambda x: x[..., 0] if vector else x)


# ---- Cholesky ----------------------------------------------------------------------------------
@partial(jit, static_argnames=("lower",))
def _cholesky(a: ArrayLike, lower: bool) -> Array:
    a, = promote_dtypes_inexact(jnp.asarray(a))
    # The triangle asked for is factored as given (no symmetrizing), as JAX's.
    factor = lax_linalg.cholesky(a if lower else jnp.conj(a.mT), symmetrize_input=False)
    return factor if lower else jnp.conj(factor.mT)


def cholesky(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Array:
    """The Cholesky factor of a Hermitian positive-definite matrix (upper unless ``lower``)."""
    del overwrite_a, check_finite
    return _cholesky(a, lower)


def cho_factor(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Array, bool]:
    """``(c, lower)``: the Cholesky factor in the triangle ``lower`` says, for ``cho_solve``."""
    del overwrite_a, check_finite
    return cholesky(a, lower=lower), lower


def _solve_signature(fix: str, a: Array, b: Array, factors: str) -> str:
    """``jnp.vectorize``'s signature for a solve with ``factors`` (their core shapes): ``b`` is
    one vector, one matrix, or (deprecated, with JAX's warning) a batch of vectors."""
    if b.ndim == 1:
        return f"{factors},(n)->(n)"
    if _batched_vectors(a, b):
        _warn_batched_vectors(fix, stacklevel=4)
        return f"{factors},(n)->(n)"
    return f"{factors},(n,k)->(n,k)"


def _warn_batched_vectors(fix: str, stacklevel: int) -> None:
    name = fix.split("(", 1)[0]
    warnings.warn(
        f"jax.scipy.linalg.{name}: batched 1D solves with b.ndim > 1 are deprecated, and "
        f"in the future will be treated as a batched 2D solve. Use {fix} to avoid this "
        "warning.", category=FutureWarning, stacklevel=stacklevel)


@partial(jit, static_argnames=("lower",))
def _cho_solve(c: Array, b: Array, lower: bool) -> Array:
    c, b = _inexact(c, b)
    signature = _solve_signature("cho_solve(c_and_lower, b[..., None]).squeeze(-1)", c, b,
                                 "(n,n)")
    # a = L L^H (lower) or U^H U (upper): solve with the first factor, then the second.
    b = jnp.vectorize(partial(lax_linalg.triangular_solve, left_side=True, lower=lower,
                              transpose_a=not lower, conjugate_a=not lower),
                      signature=signature)(c, b)
    return jnp.vectorize(partial(lax_linalg.triangular_solve, left_side=True, lower=lower,
                                 transpose_a=lower, conjugate_a=lower),
                         signature=signature)(c, b)


def cho_solve(c_and_lower: tuple[ArrayLike, bool], b: ArrayLike, overwrite_b: bool = False,
              check_finite: bool = True) -> Array:
    """``x`` with ``a @ x == b``, given ``cho_factor(a)``."""
    del overwrite_b, check_finite
    c, lower = c_and_lower
    c, b = _inexact(c, b)
    _check_matrix("cho_solve", c)
    _check_rhs("cho_solve", c, b)
    return _cho_solve(c, b, bool(lower))


# ---- LU ----------------------------------------------------------------------------------------
@partial(jit, static_argnames=("permute_l",))
def _lu(a: Array, permute_l: bool):
    lu, _, permutation = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    # a[permutation] = l @ u, so a = p @ l @ u with p[i, j] = (permutation[j] == i)
    p = jnp.real(jnp.array(permutation[..., None, :] == jnp.arange(m)[:, None], dtype=a.dtype))
    lower = jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
    upper = jnp.triu(lu[..., :k, :])
    if permute_l:
        return jnp.matmul(p.astype(a.dtype), lower, precision=lax.Precision.HIGHEST), upper
    return p, lower, upper


@jitted(static_argnames=("permute_l", "overwrite_a", "check_finite"), inline=False)
def lu(a: ArrayLike, permute_l: bool = False, overwrite_a: bool = False,
       check_finite: bool = True):
    """``p, l, u`` with ``a = p @ l @ u`` (``l`` unit lower, ``u`` upper); with
    ``permute_l``, ``(p @ l, u)``."""
    del overwrite_a, check_finite
    a, = _inexact(a)
    _check_matrix("lu", a, square=False)
    return _lu(a, bool(permute_l))


@jitted(static_argnames=("overwrite_a", "check_finite"), inline=False)
def lu_factor(a: ArrayLike, overwrite_a: bool = False,
              check_finite: bool = True) -> tuple[Array, Array]:
    """``(lu, piv)`` as LAPACK's getrf gives them: both factors in one matrix, and the row
    interchanges (row ``i`` was swapped with row ``piv[i]``)."""
    del overwrite_a, check_finite
    a, = _inexact(a)
    _check_matrix("lu_factor", a, square=False)
    factors, pivots, _ = lax_linalg.lu(a)
    return factors, pivots


@jitted(static_argnames=("trans", "overwrite_b", "check_finite"), inline=False,
        pytree_args=True)
def lu_solve(lu_and_piv: tuple[Array, ArrayLike], b: ArrayLike, trans: int = 0,
             overwrite_b: bool = False, check_finite: bool = True) -> Array:
    """``x`` with ``a @ x == b`` (``trans=1``: ``a.T``; ``trans=2``: ``a.conj().T``), given
    ``lu_factor(a)``."""
    del overwrite_b, check_finite
    factors, pivots = lu_and_piv
    factors, b = _inexact(factors, b)
    m = factors.shape[-2]
    perm = lax_linalg.lu_pivots_to_permutation(pivots, m)
    signature = _solve_signature("lu_solve(lu_and_piv, b[..., None]).squeeze(-1)", factors,
                                 b, "(n,n),(n)")
    return jnp.vectorize(partial(_lu_solve_mod.lu_solve, trans=trans),
                         signature=signature)(factors, perm, b)


# ---- triangular solves ---------------------------------------------------------------------------
_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


@partial(jit, static_argnames=("trans", "lower", "unit_diagonal"))
def _solve_triangular(a: Array, b: Array, trans: int, lower: bool,
                      unit_diagonal: bool) -> Array:
    a, b, undo = _as_matrix_rhs(a, b)
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower,
                                    transpose_a=trans != 0, conjugate_a=trans == 2,
                                    unit_diagonal=unit_diagonal)
    return undo(x)


def solve_triangular(a: ArrayLike, b: ArrayLike, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False, debug=None,
                     check_finite: bool = True) -> Array:
    """``x`` with ``op(a) @ x == b`` for triangular ``a`` (``trans``: 0/'N' ``a``, 1/'T'
    ``a.T``, 2/'C' ``a.conj().T``)."""
    del overwrite_b, debug, check_finite
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
                         f"{trans!r}")
    a, b = _inexact(a, b)
    _check_matrix("solve_triangular", a)
    _check_rhs("solve_triangular", a, b)
    if _batched_vectors(a, b):
        _warn_batched_vectors("solve_triangular(a, b[..., None]).squeeze(-1)", stacklevel=3)
        return _solve_triangular(a, b[..., None], _TRANS[trans], bool(lower),
                                 bool(unit_diagonal))[..., 0]
    return _solve_triangular(a, b, _TRANS[trans], bool(lower), bool(unit_diagonal))


# ---- QR, SVD, eigh, Schur, Hessenberg, polar -----------------------------------------------------
@partial(jit, static_argnames=("mode", "pivoting"))
def _qr(a: Array, mode: str, pivoting: bool):
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    a, = _inexact(a)
    _check_matrix("qr", a, square=False)
    # SciPy's 'r' mode keeps the full (m, n) r, so it factors as 'full' does.
    q, r, *p = lax_linalg.qr(a, pivoting=pivoting, full_matrices=mode != "economic")
    if mode == "r":
        return (r, p[0]) if pivoting else (r,)
    return (q, r, p[0]) if pivoting else (q, r)


def qr(a: ArrayLike, overwrite_a: bool = False, lwork=None, mode: str = "full",
       pivoting: bool = False, check_finite: bool = True):
    """``q, r`` (``mode='full'`` or ``'economic'``), ``r`` alone (``'r'``), with the column
    permutation last when ``pivoting``."""
    del overwrite_a, lwork, check_finite
    return _qr(a, mode, pivoting)


@partial(jit, static_argnames=("full_matrices", "compute_uv"))
def _svd(a: Array, *, full_matrices: bool, compute_uv: bool):
    a, = _inexact(a)
    _check_matrix("svd", a, square=False)
    return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        overwrite_a: bool = False, check_finite: bool = True, lapack_driver: str = "gesdd"):
    """``u, s, vh`` with ``a = u @ diag(s) @ vh`` (``s`` alone unless ``compute_uv``)."""
    del overwrite_a, check_finite, lapack_driver
    return _svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


@partial(jit, static_argnames=("lower", "eigvals_only", "eigvals", "type"))
def _eigh(a: Array, b: Array | None, lower: bool, eigvals_only: bool, eigvals, type: int):
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented")
    if type != 1:
        raise NotImplementedError("Only the type=1 case of eigh is implemented.")
    if eigvals is not None:
        raise NotImplementedError(
            "Only the eigvals=None case of eigh is implemented.")
    a, = _inexact(a)
    _check_matrix("eigh", a)
    # The input is symmetrized first (lax.linalg.eigh's default), as JAX's.
    v, w = lax_linalg.eigh(a, lower=lower)
    return w if eigvals_only else (w, v)


def eigh(a: ArrayLike, b: ArrayLike | None = None, lower: bool = True,
         eigvals_only: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
         turbo: bool = True, eigvals=None, type: int = 1, check_finite: bool = True):
    """Eigenvalues (ascending) and eigenvectors of a Hermitian matrix, read from the triangle
    ``lower`` says."""
    del overwrite_a, overwrite_b, turbo, check_finite
    return _eigh(a, b, lower, eigvals_only, eigvals, type)


def schur(a: ArrayLike, output: str = "real") -> tuple[Array, Array]:
    """``t, z`` with ``a = z @ t @ z^H``: ``t`` quasi-upper-triangular (``'real'``) or upper
    triangular (``'complex'``)."""
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got "
                         f"output={output!r}.")
    a, = _inexact(a)
    _check_matrix("schur", a)
    return _schur(a, output)


@partial(jit, static_argnames=("output",))
def _schur(a: Array, output: str) -> tuple[Array, Array]:
    if output == "complex":
        a = a.astype(jnp.result_type(a.dtype, jnp.complex64))
    return lax_linalg.schur(a)


@jitted(static_argnames=("calc_q", "check_finite", "overwrite_a"), inline=False)
def hessenberg(a: ArrayLike, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True):
    """The upper Hessenberg form ``h`` of ``a`` (and ``q`` with ``a = q @ h @ q^H``)."""
    del overwrite_a, check_finite
    a, = _inexact(a)
    _check_matrix("hessenberg", a)
    packed, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(packed, -1)
    if not calc_q:
        return h
    if a.shape[-1] == 1:
        return h, jnp.ones_like(a)
    # the reflectors are stored below the subdiagonal: q is their product, bordered by e_0
    inner = lax_linalg.householder_product(packed[..., 1:, :-1], taus)
    q = jnp.pad(inner, [(0, 0)] * (a.ndim - 2) + [(1, 0), (1, 0)])
    return h, q.at[..., 0, 0].set(1)


@jitted(static_argnames=("side", "method"), inline=False)
def polar(a: ArrayLike, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Array, Array]:
    """``u, p`` with ``a = u @ p`` (``side='right'``) or ``a = p @ u`` (``'left'``): ``u``
    unitary, ``p`` Hermitian positive semidefinite."""
    if side not in ("right", "left"):
        raise ValueError(f"side={side!r} is not 'right' or 'left'")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"Unknown polar decomposition method {method!r}.")
    a, = _inexact(a)
    _check_matrix("polar", a, square=False)
    if method == "svd":
        u_svd, s, vh = lax_linalg.svd(a, full_matrices=False)
        unitary = jnp.matmul(u_svd, vh, precision=lax.Precision.HIGHEST)
    else:
        if a.shape[-2] < a.shape[-1]:
            raise ValueError("The input matrix of shape m x n must have m >= n for the "
                             f"qdwh method, got shape {a.shape}")
        unitary = lax_linalg.qdwh(a, max_iterations=max_iterations, eps=eps)[0]
    h = jnp.conj(jnp.swapaxes(unitary, -1, -2))
    if side == "right":
        posdef = jnp.matmul(h, a, precision=lax.Precision.HIGHEST)
    else:
        posdef = jnp.matmul(a, h, precision=lax.Precision.HIGHEST)
    posdef = 0.5 * (posdef + jnp.conj(jnp.swapaxes(posdef, -1, -2)))
    return unitary, posdef


def qr_multiply(a: ArrayLike, c: ArrayLike, mode: str = "right", pivoting: bool = False,
                conjugate: bool = False, overwrite_a: bool = False, overwrite_c: bool = False):
    """``(Q @ c, R)`` (``mode='left'``) or ``(c @ Q, R)`` (``'right'``) for ``a = Q R``,
    applying the Householder reflectors of ``a``'s QR without forming ``Q`` (LAPACK
    ``ormqr``); ``conj(Q)`` if ``conjugate``, the column permutation last if ``pivoting``.
    A 1-D ``c`` is a column (left) or a row (right), and the product is 1-D."""
    del overwrite_a, overwrite_c
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    a, c = _inexact(a, c)
    _check_matrix("qr_multiply", a, square=False)
    one_dim = c.ndim == 1
    if one_dim:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape "
                         f"{tuple(a.shape)} so Q has {k} columns, but c has {c.shape[-2]} "
                         f"rows (expected {k}).")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape "
                         f"{tuple(a.shape)} so Q has {m} rows, but c has {c.shape[-1]} "
                         f"columns (expected {m}).")
    batch = jnp.broadcast_shapes(a.shape[:-2], c.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    c = jnp.broadcast_to(c, batch + c.shape[-2:])
    return _qr_multiply(a, c, mode, pivoting, conjugate, one_dim)


def _qr_multiply(a, c, mode, pivoting, conjugate, one_dim):
    # Staged inline (no jit of its own), as JAX's.
    m, n = a.shape[-2:]
    k = min(m, n)
    perm = None
    if pivoting:
        packed, perm, taus = geqp3_p.bind(
            a, jnp.zeros(a.shape[:-2] + (n,), jnp.int32))
        perm = perm - 1  # LAPACK's column indices count from 1
    else:
        packed, taus = geqrf(a)
    if mode == "left" and m > n:  # Q is m x m: c's rows beyond k meet zero columns of Q's k
        c = jnp.concatenate([c, jnp.zeros(c.shape[:-2] + (m - k, c.shape[-1]), c.dtype)], -2)
    # conj(Q) @ c = (c^T @ Q^H)^T and c @ conj(Q) = (Q^H @ c^T)^T: conjugation is the
    # transpose of the other side's product with Q^H, which ormqr does without a copy.
    if conjugate:
        c = jnp.swapaxes(c, -1, -2)
    product = lax_linalg.ormqr(packed, taus, c, left=(mode == "left") != conjugate,
                               transpose=conjugate)
    if conjugate:
        product = jnp.swapaxes(product, -1, -2)
    if mode == "right":
        product = product[..., :k]
    if one_dim:
        product = product.ravel()
    r = jnp.triu(packed[..., :k, :])
    return (product, r, perm) if pivoting else (product, r)


# ---- thin layers over jnp.linalg -------------------------------------------------------------
def det(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The determinant."""
    del overwrite_a, check_finite
    return jnp.linalg.det(a)


def inv(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The matrix inverse."""
    del overwrite_a, check_finite
    return jnp.linalg.inv(a)


@partial(jit, static_argnames=("assume_a", "lower"))
def _solve(a: ArrayLike, b: ArrayLike, assume_a: str, lower: bool) -> Array:
    if assume_a != "pos":
        return jnp.linalg.solve(a, b)  # 'sym' and 'her' too: LU reads the whole matrix
    a, b = promote_dtypes_inexact(jnp.asarray(a), jnp.asarray(b))
    _lu_solve_mod.check_solve_shapes(a, b)
    # One Cholesky factorization (of the triangle ``lower`` names) under
    # custom_linear_solve, so derivatives reuse it.
    factors = cho_factor(lax.stop_gradient(a), lower=lower)
    custom_solve = partial(lax.custom_linear_solve,
                           lambda x: _lu_solve_mod.broadcasted_matvec(a, x),
                           solve=lambda _, x: cho_solve(factors, x), symmetric=True)
    if a.ndim == b.ndim + 1:
        return custom_solve(b)
    return vmap(custom_solve, b.ndim - 1, max(a.ndim, b.ndim) - 1)(b)


def solve(a: ArrayLike, b: ArrayLike, lower: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, debug: bool = False, check_finite: bool = True,
          assume_a: str = "gen") -> Array:
    """Solve ``a x = b``: by LU with partial pivoting, or for ``assume_a='pos'`` by the
    Cholesky factorization of the triangle ``lower`` names."""
    del overwrite_a, overwrite_b, debug, check_finite
    if assume_a not in _VALID_ASSUME_A:
        raise ValueError(f"Expected assume_a to be one of {_VALID_ASSUME_A}; got {assume_a!r}")
    return _solve(a, b, assume_a, lower)


_VALID_ASSUME_A = ["gen", "sym", "her", "pos"]
