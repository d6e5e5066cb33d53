"""Solves on an LU factorization, staged as JAX 0.10.2 stages them: ``lu_solve`` (a nested
``jit[name=_lu_solve]`` that gathers the permuted rows and runs two triangular solves, mapped
with ``vmap`` over batch dimensions) and ``solve`` (one ``lu`` under ``custom_linear_solve``,
whose solve and transpose solve are ``lu_solve``). ``jnp.linalg.solve``/``inv`` and
``jax.scipy.linalg.lu_solve``/``solve`` build on them, so their jaxprs print as JAX's and
reverse mode reuses the factorization through the linear solve's transpose rule.

JAX keeps these in ``lax.linalg``; here they sit above ``lax`` because they index arrays
(``x[perm, :]``) and ``vmap`` a function, which ``lax`` does not import.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from jaxkit import lax
from jaxkit.lax import linalg as lax_linalg
from jaxkit.runtime.array import Array
from jaxkit.transforms.jit import jit
from jaxkit.transforms.vmap import vmap


def _broadcast_to(x: Array, shape: tuple[int, ...]) -> Array:
    """``x`` broadcast to ``shape`` along its trailing axes (one ``broadcast_in_dim``)."""
    return lax.broadcast_in_dim(x, shape, tuple(range(len(shape) - x.ndim, len(shape))))


def _lu_solve_core(lu: Array, permutation: Array, b: Array, trans: int) -> Array:
    # One unbatched system: b is [m, ...] and is solved as an [m, k] matrix.
    m = lu.shape[0]
    x = lax.reshape(b, (m, math.prod(b.shape[1:])))
    if trans == 0:  # lu = P A: x = U^-1 L^-1 (P b)
        x = x[permutation, :]
        x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
        x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    elif trans in (1, 2):  # A^T = U^T L^T P (conjugated for 2): x = P^T L^-T U^-T b
        conj = trans == 2
        x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False, transpose_a=True,
                                        conjugate_a=conj)
        x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True,
                                        transpose_a=True, conjugate_a=conj)
        _, ind = lax.sort_key_val(permutation, lax.iota(np.int32, permutation.shape[0]))
        x = x[ind, :]
    else:
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    return lax.reshape(x, b.shape)


@partial(jit, static_argnums=(3,))
def _lu_solve(lu: Array, permutation: Array, b: Array, trans: int) -> Array:
    if lu.ndim < 2 or lu.shape[-1] != lu.shape[-2]:
        raise ValueError("last two dimensions of LU decomposition must be equal, "
                         f"got shape {lu.shape}")
    if b.ndim < 1:
        raise ValueError(f"b matrix must have rank >= 1, got shape {b.shape}")
    # NumPy's linalg.solve convention: b is a (batched) vector when it has one axis fewer.
    rhs_vector = lu.ndim == b.ndim + 1
    if rhs_vector:
        if b.shape[-1] != lu.shape[-1]:
            raise ValueError("When LU decomposition matrix and b have the same number of "
                             f"dimensions, last axis of LU decomposition matrix (shape "
                             f"{lu.shape}) and b array (shape {b.shape}) must match")
        b = b[..., np.newaxis]
    elif b.shape[-2] != lu.shape[-1]:
        raise ValueError("When LU decomposition matrix and b different numbers of dimensions, "
                         f"last axis of LU decomposition matrix (shape {lu.shape}) and second "
                         f"to last axis of b array (shape {b.shape}) must match")
    batch_shape = lax.broadcast_shapes(lu.shape[:-2], permutation.shape[:-1], b.shape[:-2])
    lu = _broadcast_to(lu, (*batch_shape, *lu.shape[-2:]))
    permutation = _broadcast_to(permutation, (*batch_shape, permutation.shape[-1]))
    b = _broadcast_to(b, (*batch_shape, *b.shape[-2:]))
    fn = _lu_solve_core
    for _ in batch_shape:
        fn = vmap(fn, in_axes=(0, 0, 0, None))
    x = fn(lu, permutation, b, trans)
    return x[..., 0] if rhs_vector else x


def lu_solve(lu: Array, permutation: Array, b: Array, trans: int = 0) -> Array:
    """``x`` with ``A x = b`` (``trans`` 1: ``A^T``, 2: ``A^H``) given ``lu`` and the row
    ``permutation`` of ``lax.linalg.lu(A)``; batch dimensions broadcast."""
    return _lu_solve(lu, permutation, b, trans)


def broadcasted_matvec(a: Array, b: Array) -> Array:
    # (..., n, m), (..., m) -> (..., n), batch dimensions broadcast.
    batch_shape = lax.broadcast_shapes(a.shape[:-2], b.shape[:-1])
    n_batch = len(batch_shape)
    a = _broadcast_to(a, (*batch_shape, *a.shape[-2:]))
    b = _broadcast_to(b, (*batch_shape, b.shape[-1]))
    batch = tuple(range(n_batch))
    return lax.dot_general(a, b, (((a.ndim - 1,), (b.ndim - 1,)), (batch, batch)),
                           precision=lax.Precision.HIGHEST)


def check_solve_shapes(a: Array, b: Array) -> None:
    """Refuse operands that are not ``a`` ``[..., m, m]`` with ``b`` ``[..., m]`` or
    ``[..., m, k]``."""
    if not (a.ndim >= 2 and b.ndim in (a.ndim, a.ndim - 1)
            and a.shape[-1] == a.shape[-2] == b.shape[a.ndim - 2]):
        raise ValueError("The arguments to solve must have shapes a=[..., m, m] and "
                         f"b=[..., m, k] or b=[..., m]; got a={a.shape} and b={b.shape}")


def solve(a: Array, b: Array) -> Array:
    """``x`` with ``a @ x == b`` for ``a`` ``[..., m, m]`` and ``b`` ``[..., m]`` or
    ``[..., m, k]``: one LU factorization under ``custom_linear_solve``, so derivatives reuse
    it (JAX's ``lax.linalg._solve``)."""
    check_solve_shapes(a, b)
    # b's leading dimensions broadcast to a's, as custom_linear_solve needs.
    out_shape = tuple(d_a if d_b == 1 else d_b for d_a, d_b in zip(a.shape[:-1] + (1,), b.shape))
    b = lax.broadcast_in_dim(b, out_shape, tuple(range(b.ndim)))
    lu, _, permutation = lax_linalg.lu(lax.stop_gradient(a))
    custom_solve = partial(
        lax.custom_linear_solve, lambda x: broadcasted_matvec(a, x),
        solve=lambda _, x: lu_solve(lu, permutation, x, trans=0),
        transpose_solve=lambda _, x: lu_solve(lu, permutation, x, trans=1))
    if a.ndim == b.ndim + 1:
        return custom_solve(b)
    return vmap(custom_solve, b.ndim - 1, max(a.ndim, b.ndim) - 1)(b)
