"""The linear-algebra primitives lowered for NVIDIA GPUs, as JAX lowers them there.

``triangular_solve`` is XLA's own ``triangular_solve`` operation (XLA calls cuBLAS). The
factorizations call the cuSOLVER kernels of the CUDA plugin's kernels wheel
(``jax-cuda13-plugin``/``jax-cuda12-plugin``; ``jaxkit/runtime/gpu.py`` registers them):
``cusolver_potrf_ffi``, ``cusolver_getrf_ffi``, ``cusolver_geqrf_ffi``,
``cusolver_orgqr_ffi``, ``cusolver_syevd_ffi``, in the layout and attribute conventions of
the CPU's LAPACK kernels (Fortran-order matrices, a batch of leading dimensions), and turn a
failed factorization into NaNs as on the CPU. The primitives jaxkit computes with LAPACK
only say so when lowered for the GPU, instead of failing inside XLA.
"""
from __future__ import annotations

import numpy as np

from jaxkit import core
from jaxkit.interpreters import mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax.linalg._lapack import (bool_attr, ffi_call, info_ok, nan_unless_ok,
                                       real_dtype)
from jaxkit.lax.linalg.cholesky import cholesky_p, triangular_solve_p
from jaxkit.lax.linalg.eig import eig_p
from jaxkit.lax.linalg.eigh import (EighImplementation, eigh_p, hessenberg_p, schur_p,
                                    tridiagonal_p)
from jaxkit.lax.linalg.lu import _permutation_from_pivots, lu_p, tridiagonal_solve_p
from jaxkit.lax.linalg.qr import geqp3_p, geqrf_p, householder_product_p, ormqr_p
from jaxkit.lax.linalg.svd import svd_p

PLATFORM = "cuda"


def _u8(v: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), int(v))


def _cholesky(ctx, x):
    (aval,), (out_aval,) = ctx.avals_in, ctx.avals_out
    nbatch = aval.ndim - 2
    info_aval = core.ShapedArray(aval.shape[:-2], np.int32)
    factor, info = ffi_call("cusolver_potrf_ffi", [x], [aval], [aval, info_aval], nbatch,
                            {"lower": bool_attr(True)}, aliases={0: 0})
    return nan_unless_ok(info_ok(info, aval.shape[:-2]), factor, out_aval, nbatch)


def _triangular_solve(ctx, a, b, *, left_side, lower, transpose_a, conjugate_a,
                      unit_diagonal):
    if conjugate_a and not transpose_a:  # XLA's operation conjugates only with a transpose
        a = mlir.chlo.ConjOp(a).result
        conjugate_a = False
    transpose = ("ADJOINT" if conjugate_a else "TRANSPOSE") if transpose_a else "NO_TRANSPOSE"
    return hlo.TriangularSolveOp(a, b, ir.BoolAttr.get(left_side), ir.BoolAttr.get(lower),
                                 ir.BoolAttr.get(unit_diagonal),
                                 hlo.TransposeAttr.get(transpose)).result


def _lu(ctx, x):
    (aval,) = ctx.avals_in
    lu_aval, piv_aval, perm_aval = ctx.avals_out
    batch, nbatch = aval.shape[:-2], aval.ndim - 2
    info_aval = core.ShapedArray(batch, np.int32)
    lu_, piv, info = ffi_call("cusolver_getrf_ffi", [x], [aval],
                              [lu_aval, piv_aval, info_aval], nbatch, {}, aliases={0: 0})
    one = hlo.BroadcastInDimOp(mlir.aval_to_ir_type(piv_aval), mlir.ir_constant(np.int32(1)),
                               mlir.i64_attr(())).result
    piv = hlo.SubtractOp(piv, one).result  # cuSOLVER's pivots count from 1, as LAPACK's
    lu_ = nan_unless_ok(info_ok(info, batch, "GE"), lu_, lu_aval, nbatch)
    perm_ctx = ctx.replace(avals_in=[piv_aval], avals_out=[perm_aval])
    perm = mlir.lower_fun(_permutation_from_pivots)(perm_ctx, piv,
                                                    permutation_size=aval.shape[-2])
    return [lu_, piv, perm]


def _geqrf(ctx, a):
    (aval,) = ctx.avals_in
    return ffi_call("cusolver_geqrf_ffi", [a], [aval], list(ctx.avals_out), aval.ndim - 2, {},
                    aliases={0: 0})


def _householder_product(ctx, a, taus):
    a_aval, taus_aval = ctx.avals_in
    return ffi_call("cusolver_orgqr_ffi", [a, taus], [a_aval, taus_aval], [a_aval],
                    a_aval.ndim - 2, {}, aliases={0: 0})[0]


def _eigh(ctx, x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    (aval,) = ctx.avals_in
    batch, n, nbatch = aval.shape[:-2], aval.shape[-1], aval.ndim - 2
    if subset_by_index is not None and tuple(subset_by_index) != (0, n):
        raise NotImplementedError("eigh: subset_by_index is not supported on the GPU "
                                  "(cuSOLVER's syevd computes every eigenpair); slice the "
                                  "full result instead.")
    if algorithm == EighImplementation.QDWH:
        raise NotImplementedError("QDWH implementation is only supported on TPU")
    # cuSOLVER's choice (0), its QR-based syevd (1) or its Jacobi syevj (2), as JAX numbers them
    code = 0 if algorithm is None else 2 if algorithm == EighImplementation.JACOBI else 1
    w_aval = core.ShapedArray(aval.shape[:-1], real_dtype(aval.dtype))
    v, w, info = ffi_call("cusolver_syevd_ffi", [x], [aval],
                          [aval, w_aval, core.ShapedArray(batch, np.int32)], nbatch,
                          {"lower": bool_attr(lower), "algorithm": _u8(code)}, aliases={0: 0})
    ok = info_ok(info, batch)
    return [nan_unless_ok(ok, v, aval, nbatch), nan_unless_ok(ok, w, w_aval, nbatch)]


def _lapack_only(name: str):
    def rule(ctx, *args, **params):
        raise NotImplementedError(
            f"lowering rule for '{name}' on the GPU: jaxkit computes {name} with LAPACK on "
            "the CPU only so far. Run this computation on the CPU, e.g. "
            "`with jax.default_device(jax.devices('cpu')[0]):`.")
    return rule


for prim, rule in ((cholesky_p, _cholesky), (triangular_solve_p, _triangular_solve),
                   (lu_p, _lu), (geqrf_p, _geqrf),
                   (householder_product_p, _householder_product), (eigh_p, _eigh)):
    mlir.register_lowering(prim, rule, platform=PLATFORM)
for prim in (svd_p, eig_p, schur_p, hessenberg_p, tridiagonal_p, tridiagonal_solve_p, geqp3_p,
             ormqr_p):
    mlir.register_lowering(prim, _lapack_only(prim.name), platform=PLATFORM)
