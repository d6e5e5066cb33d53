"""Singular value decomposition and the QDWH polar decomposition.

``svd`` lowers to LAPACK ``?gesdd`` (divide and conquer, the default) or ``?gesvd`` (the QR
algorithm), jaxlib's typed-FFI CPU kernels, as JAX does; for NVIDIA GPUs to cuSOLVER's Jacobi
``gesvdj`` (JAX's default up to 1024 x 1024), QR ``gesvd`` (larger, or ``SvdAlgorithm.QR``)
or polar ``gesvdp``. ``qdwh`` (the QR-based dynamically weighted Halley iteration of
Nakatsukasa, Bai and Gygi 2010) is written in jaxkit operations: a ``while_loop`` over QR- or
Cholesky-based steps.
"""
from __future__ import annotations

import enum

import numpy as np

from jaxkit import core
from jaxkit import lax as _lax
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax.standard import standard_multi_result_primitive
from jaxkit.lax.linalg._lapack import (
    H,
    check_dtype,
    bool_attr,
    check_matrix,
    diagonal,
    eye,
    ffi_call,
    info_ok,
    is_complex,
    lapack_call,
    matmul,
    nan_unless_ok,
    on_cuda,
    real_dtype,
    u8_attr,
)
from jaxkit.lax.linalg.cholesky import cholesky, triangular_solve
from jaxkit.lax.linalg.qr import qr
from jaxkit.interpreters.mlir import hlo
from jaxkit.interpreters.mlir_platforms import reads_platform
from jaxkit.typing import ArrayLike

__all__ = ["SvdAlgorithm", "qdwh", "svd", "svd_p"]


class SvdAlgorithm(enum.Enum):
    """Which algorithm ``svd`` uses; the CPU has ``DEFAULT``/``DIVIDE_AND_CONQUER``
    (``gesdd``) and ``QR`` (``gesvd``), NVIDIA GPUs ``DEFAULT`` (Jacobi up to 1024 x 1024,
    else QR), ``QR``, ``JACOBI`` and ``POLAR``."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


# ---- svd -----------------------------------------------------------------------------------
def svd(x: ArrayLike, *, full_matrices: bool = True, compute_uv: bool = True,
        subset_by_index: tuple[int, int] | None = None,
        algorithm: SvdAlgorithm | None = None):
    """Singular value decomposition of matrices ``[..., m, n]``: ``(u, s, vh)`` with ``x ==
    u @ diag(s) @ vh`` and ``s`` descending (real), or just ``s`` if not ``compute_uv``."""
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                      subset_by_index=None if subset_by_index is None
                      else tuple(subset_by_index), algorithm=algorithm)
    if compute_uv:
        s, u, vh = outs
        return u, s, vh
    return outs[0]


def _svd_abstract_eval(x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    check_matrix("svd", x)
    check_dtype("svd", x)
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    k = min(m, n)
    if subset_by_index is not None:
        lo, hi = subset_by_index
        if full_matrices and (lo, hi) != (0, k):
            raise ValueError("full_matrices and subset_by_index cannot be used together")
        if not 0 <= lo < hi <= k:
            raise ValueError(f"svd: subset_by_index must satisfy 0 <= start < end <= {k}, got "
                             f"{subset_by_index}.")
        k = hi - lo
    s = core.ShapedArray(batch + (k,), real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [s, core.ShapedArray(batch + (m, ku), x.dtype),
            core.ShapedArray(batch + (kv, n), x.dtype)]


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv, subset_by_index, algorithm):
    (a,), (da,) = primals, tangents
    if subset_by_index is not None:
        raise NotImplementedError("jvp rule for 'svd' with subset_by_index is not implemented.")
    params = dict(subset_by_index=None, algorithm=algorithm)
    outs = svd_p.bind(a, full_matrices=full_matrices, compute_uv=compute_uv, **params)
    if type(da) is ad.Zero:
        return outs, [ad.Zero(core.get_aval(o).to_tangent_aval()) for o in outs]
    if compute_uv and full_matrices and a.shape[-1] != a.shape[-2]:
        raise NotImplementedError("Singular value decomposition JVP not implemented for full "
                                  "matrices")
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True, **params)
    nb = a.ndim - 2
    m, n = a.shape[-2:]
    k = s.shape[-1]
    ut, v = H(u), H(vt)
    ds_mat = matmul(matmul(ut, da), v)
    ds = _lax.real(diagonal(ds_mat)) if is_complex(a.dtype) else diagonal(ds_mat)
    if not compute_uv:
        return outs, [ds]
    sq = (k, k)
    batch = a.shape[:-2]
    s_row = _lax.broadcast_in_dim(s, batch + sq, tuple(range(nb)) + (nb + 1,))  # s_j
    s_col = _lax.broadcast_in_dim(s, batch + sq, tuple(range(nb)) + (nb,))  # s_i
    eye_r = eye(batch + sq, s.dtype)
    s_diffs = _lax.mul(_lax.add(s_row, s_col), _lax.sub(s_row, s_col))
    f = _lax.sub(_lax.reciprocal(_lax.add(s_diffs, eye_r)), eye_r)
    fc = _lax.convert_element_type(f, a.dtype)
    s_row_c = _lax.convert_element_type(s_row, a.dtype)
    s_col_c = _lax.convert_element_type(s_col, a.dtype)
    dss = _lax.mul(s_row_c, ds_mat)
    sds = _lax.mul(s_col_c, ds_mat)
    s_zero = _lax.convert_element_type(_lax.eq(s, _lax.full_like(s, 0)), s.dtype)
    s_inv = _lax.sub(_lax.reciprocal(_lax.add(s, s_zero)), s_zero)
    s_inv_mat = _lax.mul(_lax.broadcast_in_dim(s_inv, batch + sq, tuple(range(nb)) + (nb + 1,)),
                         eye_r)
    half = _lax.full((), 0.5, a.dtype)
    du_dv_diag = _lax.mul(_lax.mul(half, _lax.sub(ds_mat, H(ds_mat))),
                          _lax.convert_element_type(s_inv_mat, a.dtype))
    du = matmul(u, _lax.add(_lax.mul(fc, _lax.add(dss, H(dss))), du_dv_diag))
    dv = matmul(v, _lax.mul(fc, _lax.add(sds, H(sds))))
    s_div = _lax.convert_element_type(s, a.dtype)
    if m > n:
        dav = matmul(da, v)
        du = _lax.add(du, _lax.div(_lax.sub(dav, matmul(u, matmul(ut, dav))),
                                   _lax.broadcast_in_dim(s_div, batch + (m, k),
                                                         tuple(range(nb)) + (nb + 1,))))
    if n > m:
        dahu = matmul(H(da), u)
        dv = _lax.add(dv, _lax.div(_lax.sub(dahu, matmul(v, matmul(vt, dahu))),
                                   _lax.broadcast_in_dim(s_div, batch + (n, k),
                                                         tuple(range(nb)) + (nb + 1,))))
    return outs, [ds, du, H(dv)]


@reads_platform
def _svd_lowering(ctx, x, *, full_matrices, compute_uv, subset_by_index, algorithm):
    (aval,) = ctx.avals_in
    batch, (m, n), nbatch = aval.shape[:-2], aval.shape[-2:], aval.ndim - 2
    k = min(m, n)
    ku, kv = (m, n) if full_matrices else (k, k)
    s_aval = core.ShapedArray(batch + (k,), real_dtype(aval.dtype))
    u_aval = core.ShapedArray(batch + (m, ku), aval.dtype)
    vt_aval = core.ShapedArray(batch + (kv, n), aval.dtype)
    if k == 0:  # LAPACK rejects empty matrices: no singular values, identity factors
        def empty(x):
            outs = [_lax.full(s_aval.shape, 0, s_aval.dtype)]
            if compute_uv:
                outs += [eye(u_aval.shape, aval.dtype), eye(vt_aval.shape, aval.dtype)]
            return outs
        return mlir.lower_fun(empty, multiple_results=True)(ctx, x)
    if on_cuda(ctx):
        s, u, vt, info = _cusolver_svd(x, aval, full_matrices, compute_uv, algorithm)
    else:
        if algorithm in (SvdAlgorithm.JACOBI, SvdAlgorithm.POLAR):
            raise NotImplementedError("The SVD Jacobi and Polar algorithms are not "
                                      "implemented on CPU.")
        # LAPACK's JOBZ: all (A) or the leading min(m, n) (S) singular vectors, or none (N);
        # with none the factors' results are still [m, m] and [n, n].
        mode = "N" if not compute_uv else "A" if full_matrices else "S"
        ku, kv = (k, k) if mode == "S" else (m, n)
        _, s, u, vt, info = lapack_call(
            "gesvd_ffi" if algorithm == SvdAlgorithm.QR else "gesdd_ffi", aval.dtype, [x],
            [aval], [aval, s_aval, core.ShapedArray(batch + (m, ku), aval.dtype),
                     core.ShapedArray(batch + (kv, n), aval.dtype),
                     core.ShapedArray(batch, np.int32)], nbatch,
            {"mode": u8_attr(mode)}, aliases={0: 0})
    ok = info_ok(info, batch)
    outs = [nan_unless_ok(ok, s, s_aval, nbatch)]
    if compute_uv:
        outs += [nan_unless_ok(ok, u, u_aval, nbatch), nan_unless_ok(ok, vt, vt_aval, nbatch)]
    if subset_by_index is not None and tuple(subset_by_index) != (0, k):
        lo, hi = subset_by_index
        sub = ctx.replace(avals_in=[s_aval, u_aval, vt_aval][:len(outs)],
                          avals_out=list(ctx.avals_out))

        def pick(s, u=None, vt=None):
            picked = [_lax.slice_in_dim(s, lo, hi, axis=nbatch)]
            if u is not None:
                picked += [_lax.slice_in_dim(u, lo, hi, axis=nbatch + 1),
                           _lax.slice_in_dim(vt, lo, hi, axis=nbatch)]
            return picked

        return mlir.lower_fun(pick, multiple_results=True)(sub, *outs)
    return outs


def _cusolver_svd(x, aval, full_matrices, compute_uv, algorithm):
    """cuSOLVER's SVD of ``x`` as JAX 0.10.2 calls it: ``(s, u, vt, info)``, ``u``/``vt``
    shaped as the primitive's results (meaningless scalars without ``compute_uv``)."""
    batch, (m, n), nbatch = aval.shape[:-2], aval.shape[-2:], aval.ndim - 2
    k = min(m, n)
    dtype = aval.dtype
    s_aval = core.ShapedArray(batch + (k,), real_dtype(dtype))
    info_aval = core.ShapedArray(batch, np.int32)
    if algorithm in (None, SvdAlgorithm.DEFAULT):
        # Jacobi is the faster for matrices up to 1024 x 1024 (NVIDIA's GTC 2019 s9226).
        algorithm = SvdAlgorithm.JACOBI if m <= 1024 and n <= 1024 else SvdAlgorithm.QR
    if algorithm == SvdAlgorithm.DIVIDE_AND_CONQUER:
        raise NotImplementedError("Divide-and-conquer SVD (SvdAlgorithm.DIVIDE_AND_CONQUER) "
                                  "is only supported on AMD (ROCm) GPUs, not on NVIDIA CUDA.")
    if algorithm == SvdAlgorithm.QR:
        # gesvd needs m >= n: a wide matrix is passed in row-major order, which it reads as
        # its tall transpose, whose U and V^T are our V^T and U.
        transposed = m < n
        ku, kv = (m, n) if full_matrices else (k, k)
        u_aval = core.ShapedArray(batch + (m, ku) if compute_uv else (), dtype)
        vt_aval = core.ShapedArray(batch + (kv, n) if compute_uv else (), dtype)
        factors = [vt_aval, u_aval] if transposed else [u_aval, vt_aval]
        _, s, f1, f2, info = ffi_call(
            "cusolver_gesvd_ffi", [x], [aval], [aval, s_aval, *factors, info_aval], nbatch,
            {"full_matrices": bool_attr(full_matrices), "compute_uv": bool_attr(compute_uv),
             "transposed": bool_attr(transposed)}, aliases={0: 0},
            matrices_column_major=not transposed)
        u, vt = (f2, f1) if transposed else (f1, f2)
        return s, u, vt, info
    # Jacobi and polar always compute U and V (not V^T), all of them unless "economic";
    # batched Jacobi (used up to 32 x 32) has no economic mode.
    if algorithm == SvdAlgorithm.JACOBI:
        target, econ = "cusolver_gesvdj_ffi", not full_matrices and m > 32 and n > 32
    else:
        target, econ = "cusolver_gesvdp_ffi", not full_matrices
    u_aval = core.ShapedArray(batch + (m, k if econ else m), dtype)
    v_aval = core.ShapedArray(batch + (n, k if econ else n), dtype)
    _, s, u, v, info = ffi_call(
        target, [x], [aval], [aval, s_aval, u_aval, v_aval, info_aval], nbatch,
        {"full_matrices": bool_attr(not econ), "compute_uv": bool_attr(compute_uv)},
        aliases={0: 0})
    if not compute_uv:
        return s, u, v, info
    vt = hlo.TransposeOp(v, mlir.i64_attr(tuple(range(nbatch)) + (nbatch + 1, nbatch))).result
    if is_complex(dtype):
        vt = hlo.ComplexOp(hlo.RealOp(vt).result,
                           hlo.NegOp(hlo.ImagOp(vt).result).result).result
    if not full_matrices and not econ:  # keep the leading min(m, n) singular vectors
        ones = [1] * aval.ndim
        u = hlo.SliceOp(u, mlir.i64_attr([0] * aval.ndim), mlir.i64_attr(batch + (m, k)),
                        mlir.i64_attr(ones)).result
        vt = hlo.SliceOp(vt, mlir.i64_attr([0] * aval.ndim), mlir.i64_attr(batch + (k, n)),
                         mlir.i64_attr(ones)).result
    return s, u, vt, info


svd_p = standard_multi_result_primitive(_svd_abstract_eval, "svd")
ad.defjvp_rule(svd_p, _svd_jvp)
batching.defleading(svd_p)
mlir.register_lowering(svd_p, _svd_lowering)


# ---- qdwh ----------------------------------------------------------------------------------
def _norm(x, ord_axis):
    """The 1-norm (``ord_axis`` 0: max column sum) or inf-norm (1: max row sum) of a matrix."""
    return _lax.reduce_max(_lax.reduce_sum(_lax.abs(x), (ord_axis,)), (0,))


def _fro(x):
    a = _lax.abs(x)
    return _lax.sqrt(_lax.reduce_sum(_lax.mul(a, a), (0, 1)))


def qdwh(x, *, is_hermitian: bool = False, max_iterations: int | None = None,
         eps: float | None = None, dynamic_shape: tuple[int, int] | None = None):
    """Polar decomposition ``x = u @ h`` of a matrix ``[m, n]`` (``m >= n``) by the QDWH
    iteration: ``(u, h, num_iterations, is_converged)`` with ``u`` having orthonormal columns
    and ``h`` Hermitian positive semi-definite."""
    if dynamic_shape is not None:
        raise NotImplementedError("qdwh with dynamic_shape is not implemented in jaxkit.")
    if x.ndim != 2 or x.shape[0] < x.shape[1]:
        raise ValueError(f"qdwh requires a matrix [m, n] with m >= n, got shape {x.shape}.")
    check_dtype("qdwh", core.get_aval(x))
    del is_hermitian  # the iteration is the same; JAX uses it only to skip a symmetrization
    m, n = x.shape
    dtype = x.dtype
    rdt = real_dtype(dtype)
    max_iterations = 10 if max_iterations is None else int(max_iterations)
    eps = float(np.finfo(rdt).eps) if eps is None else float(eps)
    alpha = _lax.mul(_lax.sqrt(_norm(x, 0)), _lax.sqrt(_norm(x, 1)))
    alpha = _lax.select(_lax.eq(alpha, _lax.full_like(alpha, 0)), _lax.full_like(alpha, 1),
                        alpha)
    u0 = _lax.div(x, _lax.convert_element_type(alpha, dtype))
    tol = _lax.full((), np.cbrt(eps * 5), rdt)
    eye_n = eye((n, n), dtype)

    def weights(l_):
        l2 = _lax.mul(l_, l_)
        d = _lax.cbrt(_lax.div(_lax.mul(_lax.full_like(l_, 4), _lax.sub(_lax.full_like(l_, 1),
                                                                         l2)),
                               _lax.mul(l2, l2)))
        sqd = _lax.sqrt(_lax.add(_lax.full_like(l_, 1), d))
        a = _lax.add(sqd, _lax.mul(_lax.full_like(l_, 0.5), _lax.sqrt(
            _lax.add(_lax.sub(_lax.full_like(l_, 8), _lax.mul(_lax.full_like(l_, 4), d)),
                     _lax.div(_lax.mul(_lax.full_like(l_, 8), _lax.sub(_lax.full_like(l_, 2),
                                                                        l2)),
                              _lax.mul(l2, sqd))))))
        b = _lax.div(_lax.mul(_lax.sub(a, _lax.full_like(a, 1)),
                              _lax.sub(a, _lax.full_like(a, 1))), _lax.full_like(a, 4))
        c = _lax.sub(_lax.add(a, b), _lax.full_like(a, 1))
        l_new = _lax.div(_lax.mul(l_, _lax.add(a, _lax.mul(b, l2))),
                         _lax.add(_lax.full_like(l2, 1), _lax.mul(c, l2)))
        return a, b, c, _lax.min(l_new, _lax.full_like(l_new, 1))

    def qr_step(u, a, b, c):
        sc = _lax.convert_element_type(_lax.sqrt(c), dtype)
        stacked = _lax.concatenate([_lax.mul(sc, u), eye_n], 0)
        q, _ = qr(stacked, full_matrices=False)
        q1, q2 = _lax.slice(q, (0, 0), (m, n)), _lax.slice(q, (m, 0), (m + n, n))
        e = _lax.convert_element_type(_lax.div(b, c), dtype)
        coef = _lax.div(_lax.sub(_lax.convert_element_type(a, dtype), e), sc)
        return _lax.add(_lax.mul(e, u), _lax.mul(coef, matmul(q1, H(q2))))

    def chol_step(u, a, b, c):
        cc = _lax.convert_element_type(c, dtype)
        z = _lax.add(eye_n, _lax.mul(cc, matmul(H(u), u)))
        w = cholesky(z)
        # u W^{-H} W^{-1} = (W^{-1}... ) as two triangular solves from the right.
        y = triangular_solve(w, u, left_side=False, lower=True, transpose_a=True,
                             conjugate_a=True)
        y = triangular_solve(w, y, left_side=False, lower=True)
        e = _lax.convert_element_type(_lax.div(b, c), dtype)
        return _lax.add(_lax.mul(e, u), _lax.mul(_lax.sub(_lax.convert_element_type(a, dtype),
                                                          e), y))

    def cond_fun(state):
        _, _, it, not_done = state
        return _lax.bitwise_and(_lax.lt(it, np.int32(max_iterations)), not_done)

    def body_fun(state):
        u, l_, it, _ = state
        a, b, c, l_new = weights(l_)
        u_new = _lax.cond(_lax.gt(c, _lax.full_like(c, 100)), qr_step, chol_step, u, a, b, c)
        delta = _fro(_lax.sub(u_new, u))
        not_done = _lax.bitwise_or(_lax.gt(delta, tol),
                                   _lax.gt(_lax.abs(_lax.sub(_lax.full_like(l_new, 1), l_new)),
                                           tol))
        return u_new, l_new, _lax.add(it, np.int32(1)), not_done

    init = (u0, _lax.full((), eps, rdt), _lax.full((), 0, np.int32), _lax.full((), True, bool))
    u, _, iterations, not_done = _lax.while_loop(cond_fun, body_fun, init)
    h = matmul(H(u), x)
    h = _lax.div(_lax.add(h, H(h)), _lax.full_like(h, 2))
    return u, h, iterations, _lax.bitwise_not(not_done)
