"""Matrix decompositions written with lax operations: Gaussian elimination with partial
pivoting (det, solve, inv), Cholesky, Householder QR, and cyclic Jacobi for symmetric
eigenproblems and SVD.

jaxkit.lax has no linear-algebra primitives yet (JAX lowers these to LAPACK custom calls).
Until it does, these loops are unrolled in Python over the static matrix size and batched over
leading axes with masks, so they work eagerly, under ``jit``, ``vmap`` and autodiff. Their
program size grows like n (elimination, QR, Cholesky) or n^2 per sweep (Jacobi): fine for the
small and medium matrices of tutorials, slow to compile for large ones.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import dtypes, lax
from jaxkit.runtime.array import Array
from jaxkit.numpy._promotion import broadcast_to_shape
from jaxkit.numpy._ufuncs import where3


def _iota(n: int, shape: tuple[int, ...], axis: int) -> Array:
    return lax.broadcasted_iota(np.int32, shape, axis) if n else lax.full(shape, 0, np.int32)


def _real_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(np.finfo(dt).dtype) if dtypes.issubdtype(dt, np.complexfloating) else dt


def _c(x: Any, v: Any) -> np.generic:
    return np.asarray(v).astype(x.dtype)[()]


def _abs2(x: Array) -> Array:
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        return lax.add(lax.square(lax.real(x)), lax.square(lax.imag(x)))
    return lax.square(x)


def _row(a: Array, k: int) -> Array:
    """Row ``k`` of the matrices of ``a`` (..., n, m) as (..., m)."""
    return lax.squeeze(lax.slice_in_dim(a, k, k + 1, axis=a.ndim - 2), (a.ndim - 2,))


def _col(a: Array, k: int) -> Array:
    """Column ``k`` of the matrices of ``a`` (..., n, m) as (..., n)."""
    return lax.squeeze(lax.slice_in_dim(a, k, k + 1, axis=a.ndim - 1), (a.ndim - 1,))


def _outer(u: Array, v: Array) -> Array:
    """(..., n) x (..., m) -> (..., n, m)."""
    shape = u.shape + (v.shape[-1],)
    return lax.mul(broadcast_to_shape(lax.expand_dims(u, (u.ndim,)), shape),
                   broadcast_to_shape(lax.expand_dims(v, (v.ndim - 1,)), shape))


def _take_row(a: Array, p: Array) -> Array:
    """Row ``p[...]`` (a traced index per batch element) of the matrices of ``a``."""
    n = a.shape[-2]
    onehot = lax.eq(_iota(n, a.shape[:-1], a.ndim - 2), broadcast_to_shape(
        lax.expand_dims(p, (p.ndim,)), a.shape[:-1]))
    picked = lax.select(broadcast_to_shape(lax.expand_dims(onehot, (a.ndim - 1,)), a.shape), a,
                        lax.full_like(a, 0))
    return lax.reduce_sum(picked, (a.ndim - 2,))


def _set_rows(a: Array, mask: Array, row: Array) -> Array:
    """``a`` with the rows where ``mask`` (..., n) is true replaced by ``row`` (..., m)."""
    m3 = broadcast_to_shape(lax.expand_dims(mask, (mask.ndim,)), a.shape)
    return lax.select(m3, broadcast_to_shape(lax.expand_dims(row, (row.ndim - 1,)), a.shape), a)


def _pivot_index(a: Array, k: int) -> Array:
    """Partial pivoting at step ``k``: the row at or below ``k`` whose entry in column ``k``
    is largest in magnitude."""
    n = a.shape[-2]
    rows = _iota(n, a.shape[:-1], a.ndim - 2)
    col = _abs2(_col(a, k))
    cand = lax.select(lax.ge(rows, np.int32(k)), col, lax.full_like(col, -1))
    return lax.argmax(cand, cand.ndim - 1, np.int32)


def _swap_rows(a: Array, k: int, p: Array) -> Array:
    """``a`` with rows ``k`` and ``p[...]`` exchanged (linear in ``a``)."""
    rows = _iota(a.shape[-2], a.shape[:-1], a.ndim - 2)
    row_k, row_p = _row(a, k), _take_row(a, p)
    p_b = broadcast_to_shape(lax.expand_dims(p, (p.ndim,)), rows.shape)
    a = _set_rows(a, lax.eq(rows, p_b), row_k)
    return _set_rows(a, lax.eq(rows, np.int32(k)), row_p)


def _pivot(a: Array, k: int) -> tuple[Array, Array]:
    p = _pivot_index(a, k)
    return _swap_rows(a, k, p), lax.ne(p, np.int32(k))


def lu_eliminate(a: Array) -> tuple[Array, Array]:
    """Forward elimination with partial pivoting: the upper-triangular factor U of the
    pivoted LU decomposition and the parity (True: odd) of the row permutation."""
    n = a.shape[-1]
    parity = lax.full(a.shape[:-2], False, np.bool_)
    rows = _iota(n, a.shape[:-1], a.ndim - 2)
    for k in range(n):
        a, swapped = _pivot(a, k)
        parity = lax.bitwise_xor(parity, swapped)
        pivot_row = _row(a, k)
        pivot = lax.squeeze(lax.slice_in_dim(pivot_row, k, k + 1, axis=pivot_row.ndim - 1),
                            (pivot_row.ndim - 1,))
        col = _col(a, k)
        zero = lax.eq(pivot, _c(pivot, 0))
        safe = lax.select(zero, lax.full_like(pivot, 1), pivot)
        factor = lax.div(col, broadcast_to_shape(lax.expand_dims(safe, (safe.ndim,)), col.shape))
        below = lax.bitwise_and(lax.gt(rows, np.int32(k)), lax.bitwise_not(broadcast_to_shape(
            lax.expand_dims(zero, (zero.ndim,)), rows.shape)))
        factor = lax.select(below, factor, lax.full_like(factor, 0))
        a = lax.sub(a, _outer(factor, pivot_row))
    return a, parity


def gauss_jordan_solve(a: Array, b: Array) -> Array:
    """The solution of ``a @ x = b`` for square ``a`` (..., n, n) and ``b`` (..., n, m)
    (Gauss-Jordan elimination with partial pivoting). The row operations are chosen from
    ``a`` alone and applied to ``b`` separately, so the result is linear in ``b`` (as autodiff
    needs when ``b`` is a tangent)."""
    n = a.shape[-1]
    rows_a = _iota(n, a.shape[:-1], a.ndim - 2)
    for k in range(n):
        p = _pivot_index(a, k)
        a, b = _swap_rows(a, k, p), _swap_rows(b, k, p)
        row_a = _row(a, k)
        pivot = lax.squeeze(lax.slice_in_dim(row_a, k, k + 1, axis=row_a.ndim - 1),
                            (row_a.ndim - 1,))
        pivot_e = lax.expand_dims(pivot, (pivot.ndim,))
        row_a = lax.div(row_a, broadcast_to_shape(pivot_e, row_a.shape))
        row_b = _row(b, k)
        row_b = lax.div(row_b, broadcast_to_shape(pivot_e, row_b.shape))
        col = _col(a, k)
        col = lax.select(lax.eq(rows_a, np.int32(k)), lax.full_like(col, 0), col)
        is_k = lax.eq(rows_a, np.int32(k))
        a = _set_rows(lax.sub(a, _outer(col, row_a)), is_k, row_a)
        b = _set_rows(lax.sub(b, _outer(col, row_b)), is_k, row_b)
    return b


def cholesky(a: Array) -> Array:
    """The lower Cholesky factor L (``L @ L^H == a``); NaNs if ``a`` is not positive
    definite (as LAPACK reports through JAX)."""
    n = a.shape[-1]
    complex_ = dtypes.issubdtype(a.dtype, np.complexfloating)
    L = lax.full_like(a, 0)
    rows = _iota(n, a.shape[:-1], a.ndim - 2)
    cols = _iota(n, a.shape, a.ndim - 1)
    for k in range(n):
        lk = _row(L, k)
        lk = lax.conj(lk) if complex_ else lk
        c = lax.sub(_col(a, k), lax.reduce_sum(lax.mul(L, broadcast_to_shape(
            lax.expand_dims(lk, (lk.ndim - 1,)), L.shape)), (L.ndim - 1,)))
        ckk = lax.squeeze(lax.slice_in_dim(c, k, k + 1, axis=c.ndim - 1), (c.ndim - 1,))
        d = lax.sqrt(lax.real(ckk) if complex_ else ckk)
        d = lax.convert_element_type(d, a.dtype)
        d_b = broadcast_to_shape(lax.expand_dims(d, (d.ndim,)), c.shape)
        colk = where3(lax.gt(rows, np.int32(k)), lax.div(c, d_b),
                      where3(lax.eq(rows, np.int32(k)), d_b, lax.full_like(c, 0)))
        L = lax.select(lax.eq(cols, np.int32(k)),
                       broadcast_to_shape(lax.expand_dims(colk, (colk.ndim,)), L.shape), L)
    return L


def householder_qr(a: Array) -> tuple[Array, Array]:
    """Householder QR of ``a`` (..., m, n): Q (..., m, m) unitary and R (..., m, n) upper
    triangular, with LAPACK's sign convention (R[j, j] = -sign(a_jj) * ||column||)."""
    m, n = a.shape[-2:]
    complex_ = dtypes.issubdtype(a.dtype, np.complexfloating)
    batch = a.shape[:-2]
    q = broadcast_to_shape(lax.convert_element_type(
        lax.eq(lax.broadcasted_iota(np.int32, (m, m), 0),
               lax.broadcasted_iota(np.int32, (m, m), 1)), a.dtype), batch + (m, m))
    r = a
    rows = _iota(m, batch + (m,), len(batch))
    for j in range(min(m, n)):
        x = _col(r, j)
        x = lax.select(lax.ge(rows, np.int32(j)), x, lax.full_like(x, 0))
        alpha = lax.squeeze(lax.slice_in_dim(x, j, j + 1, axis=x.ndim - 1), (x.ndim - 1,))
        norm_x = lax.sqrt(lax.reduce_sum(_abs2(x), (x.ndim - 1,)))
        abs_alpha = lax.sqrt(_abs2(alpha))
        zero_alpha = lax.eq(abs_alpha, _c(abs_alpha, 0))
        if complex_:
            s = lax.select(zero_alpha, lax.full_like(alpha, 1),
                           lax.div(alpha, lax.convert_element_type(
                               lax.select(zero_alpha, lax.full_like(abs_alpha, 1), abs_alpha),
                               a.dtype)))
            shift = lax.mul(s, lax.convert_element_type(norm_x, a.dtype))
        else:
            s = lax.select(zero_alpha, lax.full_like(alpha, 1), lax.sign(alpha))
            shift = lax.mul(s, norm_x)
        e_j = lax.eq(rows, np.int32(j))
        v = lax.add(x, lax.select(e_j, broadcast_to_shape(lax.expand_dims(shift, (shift.ndim,)),
                                                          x.shape), lax.full_like(x, 0)))
        vnorm2 = lax.reduce_sum(_abs2(v), (v.ndim - 1,))
        # As LAPACK's larfg: no reflection when the part below the diagonal is already zero
        # (and the diagonal entry real), so that its sign is kept.
        tail = lax.reduce_sum(_abs2(lax.select(lax.gt(rows, np.int32(j)), x,
                                               lax.full_like(x, 0))), (x.ndim - 1,))
        skip = lax.eq(tail, _c(tail, 0))
        if complex_:
            skip = lax.bitwise_and(skip, lax.eq(lax.imag(alpha), _c(tail, 0)))
        skip = lax.bitwise_or(skip, lax.eq(vnorm2, _c(vnorm2, 0)))
        tau = lax.select(skip, lax.full_like(vnorm2, 0),
                         lax.div(_c(vnorm2, 2), lax.select(skip, lax.full_like(vnorm2, 1),
                                                           vnorm2)))
        tau = lax.convert_element_type(tau, a.dtype)
        vc = lax.conj(v) if complex_ else v
        # r -= tau v (v^H r);  q -= tau (q v) v^H
        vhr = lax.reduce_sum(lax.mul(broadcast_to_shape(lax.expand_dims(vc, (vc.ndim,)),
                                                        r.shape), r), (r.ndim - 2,))
        tau_b = lax.expand_dims(tau, (tau.ndim,))
        r = lax.sub(r, _outer(lax.mul(broadcast_to_shape(tau_b, v.shape), v), vhr))
        qv = lax.reduce_sum(lax.mul(q, broadcast_to_shape(lax.expand_dims(v, (v.ndim - 1,)),
                                                          q.shape)), (q.ndim - 1,))
        q = lax.sub(q, _outer(lax.mul(broadcast_to_shape(tau_b, qv.shape), qv), vc))
    # Exact zeros below the diagonal.
    tri = lax.ge(lax.broadcasted_iota(np.int32, (m, n), 1),
                 lax.broadcasted_iota(np.int32, (m, n), 0))
    r = lax.select(broadcast_to_shape(tri, r.shape), r, lax.full_like(r, 0))
    return q, r


def _sweeps(dt: np.dtype) -> int:
    return 12 if _real_dtype(dt).itemsize >= 8 else 8


def _rotation(app: Array, aqq: Array, apq: Array) -> tuple[Array, Array]:
    """Cosine and sine of the Jacobi rotation that zeroes ``apq`` of a symmetric 2x2 block."""
    zero = lax.eq(apq, _c(apq, 0))
    safe = lax.select(zero, lax.full_like(apq, 1), apq)
    theta = lax.div(lax.sub(aqq, app), lax.mul(_c(apq, 2), safe))
    t = lax.div(lax.sign(theta), lax.add(lax.abs(theta),
                                         lax.sqrt(lax.add(lax.square(theta), _c(theta, 1)))))
    t = lax.select(lax.bitwise_or(zero, lax.eq(theta, _c(theta, 0))),
                   lax.select(zero, lax.full_like(t, 0), lax.full_like(t, 1)), t)
    c = lax.rsqrt(lax.add(lax.square(t), _c(t, 1)))
    return c, lax.mul(t, c)


def _rotate_cols(a: Array, p: int, q: int, c: Array, s: Array) -> Array:
    """Columns p, q of ``a`` become ``c*a_p - s*a_q`` and ``s*a_p + c*a_q``."""
    ap, aq = _col(a, p), _col(a, q)
    cb = broadcast_to_shape(lax.expand_dims(c, (c.ndim,)), ap.shape)
    sb = broadcast_to_shape(lax.expand_dims(s, (s.ndim,)), ap.shape)
    new_p = lax.sub(lax.mul(cb, ap), lax.mul(sb, aq))
    new_q = lax.add(lax.mul(sb, ap), lax.mul(cb, aq))
    cols = _iota(a.shape[-1], a.shape, a.ndim - 1)
    a = lax.select(lax.eq(cols, np.int32(p)),
                   broadcast_to_shape(lax.expand_dims(new_p, (new_p.ndim,)), a.shape), a)
    return lax.select(lax.eq(cols, np.int32(q)),
                      broadcast_to_shape(lax.expand_dims(new_q, (new_q.ndim,)), a.shape), a)


def _swap_last2(a: Array) -> Array:
    return lax.transpose(a, (*range(a.ndim - 2), a.ndim - 1, a.ndim - 2))


def _entry(a: Array, i: int, j: int) -> Array:
    return lax.squeeze(lax.slice(a, (0,) * (a.ndim - 2) + (i, j),
                                 a.shape[:-2] + (i + 1, j + 1)), (a.ndim - 2, a.ndim - 1))


def jacobi_eigh(a: Array) -> tuple[Array, Array]:
    """Eigenvalues (ascending) and eigenvectors (columns) of real symmetric ``a``."""
    n = a.shape[-1]
    batch = a.shape[:-2]
    v = broadcast_to_shape(lax.convert_element_type(
        lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
               lax.broadcasted_iota(np.int32, (n, n), 1)), a.dtype), a.shape)
    for _ in range(_sweeps(a.dtype) if n > 1 else 0):
        for p in range(n - 1):
            for q in range(p + 1, n):
                c, s = _rotation(_entry(a, p, p), _entry(a, q, q), _entry(a, p, q))
                a = _rotate_cols(a, p, q, c, s)
                a = _swap_last2(_rotate_cols(_swap_last2(a), p, q, c, s))
                v = _rotate_cols(v, p, q, c, s)
    w = lax.reduce_sum(lax.select(broadcast_to_shape(lax.eq(
        lax.broadcasted_iota(np.int32, (n, n), 0), lax.broadcasted_iota(np.int32, (n, n), 1)),
        a.shape), a, lax.full_like(a, 0)), (a.ndim - 1,))
    order = lax.sort_key_val(w, lax.broadcasted_iota(np.int32, batch + (n,), len(batch)),
                             dimension=len(batch))
    w, idx = order
    return w, _permute_cols(v, idx)


def _permute_cols(v: Array, idx: Array) -> Array:
    """Columns of ``v`` (..., m, n) in the order ``idx`` (..., n)."""
    n = v.shape[-1]
    onehot = lax.eq(lax.broadcasted_iota(np.int32, idx.shape + (n,), idx.ndim),
                    broadcast_to_shape(lax.expand_dims(idx, (idx.ndim,)), idx.shape + (n,)))
    # out[..., i, j] = v[..., i, idx[j]] = sum_k v[..., i, k] * [k == idx[j]]
    perm = lax.convert_element_type(onehot, v.dtype)  # (..., j, k)
    nb = v.ndim - 2
    return lax.dot_general(v, perm, (((v.ndim - 1,), (perm.ndim - 1,)),
                                     (tuple(range(nb)), tuple(range(nb)))),
                           precision=lax.Precision.HIGHEST)


def jacobi_svd(a: Array) -> tuple[Array, Array, Array]:
    """Thin SVD of real ``a`` (..., m, n) with m >= n by one-sided Jacobi: U (..., m, n),
    singular values (descending) and V (..., n, n), with ``a = U diag(s) V^T``."""
    n = a.shape[-1]
    u = a
    v = broadcast_to_shape(lax.convert_element_type(
        lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
               lax.broadcasted_iota(np.int32, (n, n), 1)), a.dtype), a.shape[:-2] + (n, n))
    for _ in range(_sweeps(a.dtype) if n > 1 else 0):
        for p in range(n - 1):
            for q in range(p + 1, n):
                up, uq = _col(u, p), _col(u, q)
                last = up.ndim - 1
                alpha = lax.reduce_sum(lax.square(up), (last,))
                beta = lax.reduce_sum(lax.square(uq), (last,))
                gamma = lax.reduce_sum(lax.mul(up, uq), (last,))
                c, s = _rotation(alpha, beta, gamma)
                u = _rotate_cols(u, p, q, c, s)
                v = _rotate_cols(v, p, q, c, s)
    sv = lax.sqrt(lax.reduce_sum(lax.square(u), (u.ndim - 2,)))
    batch = a.shape[:-2]
    neg, idx = lax.sort_key_val(lax.neg(sv), lax.broadcasted_iota(np.int32, batch + (n,),
                                                                  len(batch)),
                                dimension=len(batch))
    sv = lax.neg(neg)
    u = _permute_cols(u, idx)
    v = _permute_cols(v, idx)
    nonzero = lax.gt(sv, _c(sv, 0))
    safe = lax.select(nonzero, sv, lax.full_like(sv, 1))
    u = lax.div(u, broadcast_to_shape(lax.expand_dims(safe, (safe.ndim - 1,)), u.shape))
    return u, sv, v


def complete_basis(u: Array, sv: Array | None, full: bool) -> Array:
    """Orthonormal columns: those of ``u`` where the singular value is nonzero, completed (and
    extended to a square matrix if ``full``) from a Householder QR of ``u``."""
    m, k = u.shape[-2:]
    q, _ = householder_qr(u)
    keep = lax.full(u.shape[:-2] + (k,), True, np.bool_) if sv is None else \
        lax.gt(sv, _c(sv, 0))
    fixed = lax.select(broadcast_to_shape(lax.expand_dims(keep, (keep.ndim - 1,)), u.shape), u,
                       lax.slice_in_dim(q, 0, k, axis=q.ndim - 1))
    if full and m > k:
        return lax.concatenate([fixed, lax.slice_in_dim(q, k, m, axis=q.ndim - 1)], q.ndim - 1)
    return fixed
