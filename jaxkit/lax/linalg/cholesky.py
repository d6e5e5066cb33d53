"""Cholesky factorization, triangular solves, rank-one Cholesky updates and ``A A^T``.

``cholesky`` lowers to LAPACK ``?potrf`` and ``triangular_solve`` to BLAS ``?trsm`` (jaxlib's
typed-FFI CPU kernels, as JAX lowers them on the CPU); ``cholesky_update`` and
``symmetric_product`` are written in jaxkit operations (a loop of Givens rotations and one
``dot_general``), as JAX writes them for the CPU. For NVIDIA GPUs, as JAX: cuSOLVER's
``potrf``, XLA's own ``triangular_solve``, jaxlib's CUDA kernel ``cu_cholesky_update_ffi`` and
cuBLAS's ``syrk`` (``cusolver_syrk_ffi``).
"""
from __future__ import annotations

import numpy as np

from jaxkit import core
from jaxkit import lax as _lax
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax.standard import standard_primitive
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.interpreters.mlir_platforms import reads_platform
from jaxkit.lax.linalg._lapack import (
    T,
    bool_attr,
    check_dtype,
    check_square,
    eye,
    ffi_call,
    info_ok,
    is_complex,
    lapack_call,
    matmul,
    nan_unless_ok,
    on_cuda,
    symmetrize,
    tril,
    triu,
    u8_attr,
)
from jaxkit.typing import Array, ArrayLike

__all__ = ["cholesky", "cholesky_p", "cholesky_update", "cholesky_update_p",
           "symmetric_product", "symmetric_product_p", "triangular_solve", "triangular_solve_p"]

# ---- cholesky ------------------------------------------------------------------------------
def cholesky(x: ArrayLike, *, symmetrize_input: bool = True) -> Array:
    """Lower Cholesky factors ``L`` (``x = L L^H``) of Hermitian positive-definite matrices
    ``[..., n, n]``; NaN for a matrix that is not positive definite. With
    ``symmetrize_input`` the factorization uses ``(x + x^H) / 2``."""
    _cholesky_shape(core.get_aval(x))
    if symmetrize_input:
        x = symmetrize(x)
    return tril(cholesky_p.bind(x))


def _cholesky_shape(x):
    check_square("cholesky", x)
    check_dtype("cholesky", x)
    return x.shape


def _cholesky_jvp(primals, tangents):
    # dL = L Phi(L^{-1} dA L^{-H}), Phi taking the lower triangle with a halved diagonal
    # (Murray, "Differentiation of the Cholesky decomposition", 2016).
    (x,), (t,) = primals, tangents
    L = tril(cholesky_p.bind(x))
    if type(t) is ad.Zero:
        return L, ad.Zero(core.get_aval(L).to_tangent_aval())
    t = symmetrize(t)
    tmp = triangular_solve(L, t, left_side=False, transpose_a=True, conjugate_a=True,
                           lower=True)
    inner = triangular_solve(L, tmp, left_side=True, transpose_a=False, lower=True)
    half_diag = _lax.add(eye(inner.shape, inner.dtype), _lax.full_like(inner, 1))
    phi = _lax.div(tril(inner), half_diag)
    return L, matmul(L, phi)


@reads_platform
def _cholesky_lowering(ctx, x):
    (aval,), (out_aval,) = ctx.avals_in, ctx.avals_out
    nbatch = aval.ndim - 2
    info_aval = core.ShapedArray(aval.shape[:-2], np.int32)
    if on_cuda(ctx):
        factor, info = ffi_call("cusolver_potrf_ffi", [x], [aval], [aval, info_aval], nbatch,
                                {"lower": bool_attr(True)}, aliases={0: 0})
    else:
        factor, info = lapack_call("potrf_ffi", aval.dtype, [x], [aval], [aval, info_aval],
                                   nbatch, {"uplo": u8_attr("L")}, aliases={0: 0})
    return nan_unless_ok(info_ok(info, aval.shape[:-2]), factor, out_aval, nbatch)


cholesky_p = standard_primitive(_cholesky_shape, lambda x: x.dtype, "cholesky")
ad.defjvp_rule(cholesky_p, _cholesky_jvp)
batching.defleading(cholesky_p)
mlir.register_lowering(cholesky_p, _cholesky_lowering)


# ---- triangular_solve ----------------------------------------------------------------------
def triangular_solve(a: ArrayLike, b: ArrayLike, *, left_side: bool = False,
                     lower: bool = False, transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False) -> Array:
    """Solves ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for ``x``, with ``a``
    triangular (only its ``lower`` or upper triangle is read) and ``op`` transposing and/or
    conjugating ``a`` as asked. Batched over the leading dimensions of both operands."""
    # Conjugating a real matrix is no operation: the parameter says False then, as JAX's.
    conjugate_a = bool(conjugate_a) and is_complex(core.get_aval(a).dtype)
    # A b with one axis fewer than a is one vector per matrix (JAX's "singleton" case).
    singleton = np.ndim(b) == np.ndim(a) - 1
    if singleton:
        b = _lax.expand_dims(b, (-1 if left_side else -2,))
    out = triangular_solve_p.bind(
        a, b, left_side=bool(left_side), lower=bool(lower), transpose_a=bool(transpose_a),
        conjugate_a=conjugate_a, unit_diagonal=bool(unit_diagonal))
    if singleton:
        out = _lax.squeeze(out, (out.ndim - 1 if left_side else out.ndim - 2,))
    return out


def _triangular_solve_shape(a, b, *, left_side, lower, transpose_a, conjugate_a,
                            unit_diagonal):
    check_square("triangular_solve (a)", a)
    check_dtype("triangular_solve", a)
    if b.ndim != a.ndim or a.shape[:-2] != b.shape[:-2]:
        raise TypeError("triangular_solve requires both arguments to have the same number of "
                        f"dimensions and equal batch dimensions, got {a.shape} and {b.shape}.")
    if a.dtype != b.dtype:
        raise TypeError("triangular_solve requires both arguments to have the same dtype, got "
                        f"{a.dtype.name} and {b.dtype.name}.")
    common = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[-1] != common:
        side = "left" if left_side else "right"
        raise TypeError(f"Incompatible shapes for arguments to triangular_solve ({side} side):"
                        f" {a.shape} and {b.shape}.")
    return b.shape


def _op_a(a, transpose_a, conjugate_a):
    if transpose_a:
        a = T(a)
    if conjugate_a and is_complex(a.dtype):
        a = _lax.conj(a)
    return a


def _triangular_solve_jvp_a(g_a, ans, a, b, *, left_side, lower, transpose_a, conjugate_a,
                            unit_diagonal):
    # d(op(a)^{-1} b) = -op(a)^{-1} op(da) x (left side), -x op(da) op(a)^{-1} (right side).
    g_a = tril(g_a, -1 if unit_diagonal else 0) if lower else triu(g_a, 1 if unit_diagonal
                                                                    else 0)
    g_a = _lax.neg(_op_a(g_a, transpose_a, conjugate_a))
    rhs = matmul(g_a, ans) if left_side else matmul(ans, g_a)
    return triangular_solve(a, rhs, left_side=left_side, lower=lower, transpose_a=transpose_a,
                            conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)


def _triangular_solve_jvp_b(g_b, ans, a, b, **params):
    return triangular_solve_p.bind(a, g_b, **params)


def _triangular_solve_transpose(ct, a, b, *, left_side, lower, transpose_a, conjugate_a,
                                unit_diagonal):
    if ad.is_undefined_primal(a):
        raise NotImplementedError("transpose rule for 'triangular_solve' with respect to its "
                                  "matrix 'a': it is linear only in 'b'.")
    if type(ct) is ad.Zero:
        return [None, ad.Zero(b.aval)]
    # x = M b with M = op(a)^{-1} (left) or b M (right): the transpose uses op(a)^T.
    ct_b = triangular_solve(a, ct, left_side=left_side, lower=lower,
                            transpose_a=not transpose_a, conjugate_a=conjugate_a,
                            unit_diagonal=unit_diagonal)
    return [None, ct_b]


def _triangular_solve_batch(axis_data, args, dims, **params):
    a, b = args
    da, db = dims
    if da is batching.not_mapped and db is not batching.not_mapped:
        # One matrix for every batch member: fold the batch into b's columns (rows for a
        # right-side solve) and solve once, as JAX does (its jaxprs print this way).
        if params["left_side"]:
            b = batching.moveaxis(b, db, -1)
            flat = b.shape[:-2] + (b.shape[-2] * b.shape[-1],)
            out_dim = b.ndim - 1
        else:
            b = batching.moveaxis(b, db, -2)
            flat = b.shape[:-3] + (b.shape[-3] * b.shape[-2], b.shape[-1])
            out_dim = b.ndim - 2
        out = triangular_solve_p.bind(a, _lax.reshape(b, flat), **params)
        return _lax.reshape(out, b.shape), out_dim
    size = axis_data.size
    a, b = (batching.bdim_at_front(x, d, size) for x, d in zip(args, dims))
    return triangular_solve_p.bind(a, b, **params), 0


@reads_platform
def _triangular_solve_lowering(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a,
                               unit_diagonal):
    a_aval, b_aval = ctx.avals_in
    if conjugate_a and not transpose_a and is_complex(a_aval.dtype):
        # trsm (and XLA's operation) conjugates only together with transposing: conjugate the
        # matrix itself, with chlo's conj as JAX does
        a = mlir.chlo.ConjOp(a).result
        conjugate_a = False
    if on_cuda(ctx):  # XLA's own operation (XLA calls cuBLAS), as JAX lowers it there
        transpose = ("ADJOINT" if conjugate_a else "TRANSPOSE") if transpose_a else \
            "NO_TRANSPOSE"
        return hlo.TriangularSolveOp(a, b, ir.BoolAttr.get(left_side), ir.BoolAttr.get(lower),
                                     ir.BoolAttr.get(unit_diagonal),
                                     hlo.TransposeAttr.get(transpose)).result
    trans = ("C" if conjugate_a and is_complex(a_aval.dtype) else "T") if transpose_a else "N"
    attrs = {"side": u8_attr("L" if left_side else "R"), "uplo": u8_attr("L" if lower else "U"),
             "trans_x": u8_attr(trans), "diag": u8_attr("U" if unit_diagonal else "N")}
    (out,) = lapack_call("trsm_ffi", a_aval.dtype, [a, b], [a_aval, b_aval], [b_aval],
                         a_aval.ndim - 2, attrs, aliases={0: 1})
    return out


triangular_solve_p = standard_primitive(_triangular_solve_shape, lambda a, b, **_: b.dtype,
                                        "triangular_solve")
ad.defjvp2(triangular_solve_p, _triangular_solve_jvp_a, _triangular_solve_jvp_b)
ad.deftranspose(triangular_solve_p, _triangular_solve_transpose)
batching.defrule(triangular_solve_p, _triangular_solve_batch)
mlir.register_lowering(triangular_solve_p, _triangular_solve_lowering)


_REAL = (np.dtype(np.float32), np.dtype(np.float64))


# ---- cholesky_update -----------------------------------------------------------------------
def cholesky_update(r_matrix: ArrayLike, w_vector: ArrayLike) -> Array:
    """The upper Cholesky factor of ``R^T R + w w^T`` given the upper factor ``R`` of a
    matrix ``[n, n]`` and a vector ``w`` ``[n]`` (a rank-one update in O(n^2) work)."""
    return cholesky_update_p.bind(r_matrix, w_vector)


def _cholesky_update_shape(r, w):
    check_square("cholesky_update", r)
    if r.dtype != w.dtype or r.dtype not in _REAL:
        raise TypeError("cholesky_update requires real floating operands of one dtype, got "
                        f"{r.dtype.name} and {w.dtype.name}.")
    if w.shape != r.shape[:-1]:
        raise ValueError("cholesky_update: w_vector must have shape r_matrix.shape[:-1], got "
                         f"{w.shape} and {r.shape}.")
    return r.shape


def _cholesky_update_impl(r, w):
    # One Givens rotation per row k zeroes w[k] against R[k, k]; rows and entries are picked
    # with masks so that the loop body is a fixed handful of vector operations.
    n = r.shape[-1]
    rows = _lax.broadcasted_iota(np.int32, r.shape, r.ndim - 2)
    cols = _lax.broadcasted_iota(np.int32, w.shape, w.ndim - 1)

    def body(k, carry):
        k = _lax.convert_element_type(k, np.int32)  # the loop index is int64 under x64
        r, w = carry
        row = _lax.reduce_sum(_lax.select(_lax.eq(rows, k), r, _lax.full_like(r, 0)),
                              (r.ndim - 2,))
        at_k = _lax.eq(cols, k)
        zero = _lax.full_like(w, 0)
        rkk = _lax.reduce_sum(_lax.select(at_k, row, zero), (w.ndim - 1,))
        wk = _lax.reduce_sum(_lax.select(at_k, w, zero), (w.ndim - 1,))
        rad = _lax.sqrt(_lax.add(_lax.mul(rkk, rkk), _lax.mul(wk, wk)))
        c = _lax.broadcast_in_dim(_lax.div(rad, rkk), w.shape, tuple(range(w.ndim - 1)))
        s = _lax.broadcast_in_dim(_lax.div(wk, rkk), w.shape, tuple(range(w.ndim - 1)))
        after = _lax.gt(cols, k)
        new_row = _lax.select(after, _lax.div(_lax.add(row, _lax.mul(s, w)), c), row)
        new_row = _lax.select(at_k, _lax.broadcast_in_dim(rad, w.shape,
                                                          tuple(range(w.ndim - 1))), new_row)
        w = _lax.select(after, _lax.sub(_lax.mul(c, w), _lax.mul(s, new_row)), zero)
        new_rows = _lax.broadcast_in_dim(new_row, r.shape, tuple(range(r.ndim - 2)) +
                                         (r.ndim - 1,))
        return _lax.select(_lax.eq(rows, k), new_rows, r), w

    # Only the upper triangle is meaningful; the strictly lower one is zeroed (JAX leaves
    # whatever the rotations made of it).
    return triu(_lax.fori_loop(0, n, body, (r, w))[0])


def _cholesky_update_jvp(primals, tangents):
    # R'^T R' = R^T R + w w^T, differentiated: the tangent of the (upper) factor of that sum.
    r, w = primals
    dr, dw = (ad.instantiate_zeros(t) for t in tangents)
    dr = triu(dr)  # the primal reads only the upper triangle of R
    out = cholesky_update_p.bind(r, w)
    wm = _lax.broadcast_in_dim(w, w.shape + (1,), tuple(range(w.ndim)))
    dwm = _lax.broadcast_in_dim(dw, dw.shape + (1,), tuple(range(dw.ndim)))
    d_sum = _lax.add(_lax.add(matmul(T(dr), r), matmul(T(r), dr)),
                     _lax.add(matmul(dwm, T(wm)), matmul(wm, T(dwm))))
    lower = T(out)
    tmp = triangular_solve(lower, d_sum, left_side=False, transpose_a=True, lower=True)
    inner = triangular_solve(lower, tmp, left_side=True, lower=True)
    phi = _lax.div(tril(inner), _lax.add(eye(inner.shape, inner.dtype),
                                         _lax.full_like(inner, 1)))
    return out, T(matmul(lower, phi))


cholesky_update_p = standard_primitive(_cholesky_update_shape, lambda r, w: r.dtype,
                                       "cholesky_update")
ad.defjvp_rule(cholesky_update_p, _cholesky_update_jvp)
batching.defleading(cholesky_update_p)
mlir.register_lowering(cholesky_update_p, mlir.lower_fun(_cholesky_update_impl))


def _cholesky_update_cuda_lowering(ctx, r, w):
    # jaxlib's CUDA kernel updates one matrix (JAX's primitive has no batching); a vmapped
    # batch is computed with the rotations written in jaxkit operations, as on the CPU.
    r_aval, w_aval = ctx.avals_in
    if r_aval.ndim != 2:
        return mlir.lower_fun(_cholesky_update_impl)(ctx, r, w)
    return ffi_call("cu_cholesky_update_ffi", [r, w], [r_aval, w_aval], [r_aval, w_aval], 0,
                    {}, aliases={0: 0, 1: 1}, matrices_column_major=False,
                    batch_attribute=False)[:1]


mlir.register_lowering(cholesky_update_p, _cholesky_update_cuda_lowering, platform="cuda")


# ---- symmetric_product ---------------------------------------------------------------------
def symmetric_product(a_matrix: ArrayLike, c_matrix: ArrayLike, *, alpha: float = 1.0,
                      beta: float = 0.0, symmetrize_output: bool = False) -> Array:
    """``alpha * a @ a^T + beta * c`` (BLAS ``syrk``); with ``symmetrize_output`` the result's
    upper triangle is copied from its lower one."""
    result = symmetric_product_p.bind(a_matrix, c_matrix, alpha=alpha, beta=beta)
    if symmetrize_output:
        result = _lax.add(tril(result), T(tril(result, -1)))
    return result


def _symmetric_product_shape(a, c, *, alpha, beta):
    if a.dtype != c.dtype or a.dtype not in _REAL:
        raise TypeError("symmetric_product requires real floating operands of one dtype, got "
                        f"{a.dtype.name} and {c.dtype.name}.")
    if a.ndim < 2 or c.ndim != a.ndim or c.shape[-1] != c.shape[-2] or \
            c.shape[-1] != a.shape[-2] or a.shape[:-2] != c.shape[:-2]:
        raise ValueError("symmetric_product: a_matrix must have shape [..., m, k] and "
                         f"c_matrix [..., m, m], got {a.shape} and {c.shape}.")
    return c.shape


def _symmetric_product_impl(a, c, *, alpha, beta):
    prod = matmul(a, T(a))
    return _lax.add(_lax.mul(_lax.full_like(prod, alpha), prod),
                    _lax.mul(_lax.full_like(c, beta), c))


def _symmetric_product_jvp(primals, tangents, *, alpha, beta):
    a, c = primals
    da, dc = tangents
    out = symmetric_product_p.bind(a, c, alpha=alpha, beta=beta)
    t = None
    if type(da) is not ad.Zero:
        prod = _lax.add(matmul(da, T(a)), matmul(a, T(da)))
        t = _lax.mul(_lax.full_like(prod, alpha), prod)
    if type(dc) is not ad.Zero:
        tc = _lax.mul(_lax.full_like(dc, beta), dc)
        t = tc if t is None else _lax.add(t, tc)
    return out, (ad.Zero(core.get_aval(out).to_tangent_aval()) if t is None else t)


symmetric_product_p = standard_primitive(_symmetric_product_shape, lambda a, c, **_: a.dtype,
                                         "symmetric_product")
ad.defjvp_rule(symmetric_product_p, _symmetric_product_jvp)
batching.defleading(symmetric_product_p)
mlir.register_lowering(symmetric_product_p, mlir.lower_fun(_symmetric_product_impl))


def _symmetric_product_cuda_lowering(ctx, a, c, *, alpha, beta):
    # cuBLAS's syrk through jaxlib's kernel, as JAX: it writes the lower triangle only (the
    # upper one keeps beta * c's; symmetrize_output copies the lower one over it).
    a_aval, c_aval = ctx.avals_in
    scalar = core.ShapedArray((), a_aval.dtype)
    return ffi_call("cusolver_syrk_ffi",
                    [a, c, mlir.ir_constant(np.array(alpha, a_aval.dtype)),
                     mlir.ir_constant(np.array(beta, a_aval.dtype))],
                    [a_aval, c_aval, scalar, scalar], [c_aval], 0,
                    {"transpose": bool_attr(False)}, aliases={0: 1},
                    matrices_column_major=False, batch_attribute=False)


mlir.register_lowering(symmetric_product_p, _symmetric_product_cuda_lowering, platform="cuda")
