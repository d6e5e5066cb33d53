"""Hermitian eigendecomposition and the reductions to condensed forms.

``eigh`` lowers to LAPACK ``?syevd``/``?heevd``, ``tridiagonal`` to ``?sytrd``/``?hetrd``,
``hessenberg`` to ``?gehrd`` and ``schur`` to ``?gees`` (jaxlib's typed-FFI CPU kernels, with
the attributes JAX gives them); a nonzero LAPACK ``info`` turns that matrix's results into NaN.
For NVIDIA GPUs ``eigh`` and ``tridiagonal`` call cuSOLVER's ``syevd``/``sytrd`` kernels, as
JAX does; ``hessenberg`` and ``schur`` have no GPU kernel, in JAX as in jaxkit.
"""
from __future__ import annotations

import enum

import numpy as np

from jaxkit import core
from jaxkit import lax as _lax
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir_platforms import reads_platform
from jaxkit.lax.standard import standard_multi_result_primitive
from jaxkit.lax.linalg._lapack import (
    H,
    bool_attr,
    check_dtype,
    check_square,
    diagonal,
    eye,
    ffi_call,
    i32_attr,
    info_ok,
    is_complex,
    lapack_call,
    matmul,
    nan_unless_ok,
    no_gpu_kernel,
    on_cuda,
    real_dtype,
    symmetrize,
    u8_attr,
    u8_int,
)
from jaxkit.typing import Array, ArrayLike

__all__ = ["EighImplementation", "eigh", "eigh_p", "hessenberg", "hessenberg_p", "schur",
           "schur_p", "tridiagonal", "tridiagonal_p"]


class EighImplementation(enum.Enum):
    """Which algorithm ``eigh`` uses (only LAPACK's, ``QR``-family ``syevd``, on the CPU)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


def _nan_results(ctx, info, results, nbatch):
    ok = info_ok(info, ctx.avals_in[0].shape[:-2])
    return [nan_unless_ok(ok, r, a, nbatch) for r, a in zip(results, ctx.avals_out)]


# ---- eigh ----------------------------------------------------------------------------------
def eigh(x: ArrayLike, *, lower: bool = True, symmetrize_input: bool = True,
         sort_eigenvalues: bool = True, subset_by_index: tuple[int, int] | None = None,
         implementation: EighImplementation | None = None) -> tuple[Array, Array]:
    """Eigendecomposition of Hermitian matrices ``[..., n, n]``: ``(v, w)`` with eigenvectors
    as the columns of ``v`` and real eigenvalues ``w`` in ascending order. Only the ``lower``
    (or upper) triangle is read unless ``symmetrize_input`` averages ``x`` with ``x^H``."""
    check_square("eigh", core.get_aval(x))
    if symmetrize_input:
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                       subset_by_index=None if subset_by_index is None
                       else tuple(subset_by_index), algorithm=implementation)
    return v, w


def _eigh_abstract_eval(x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    check_square("eigh", x)
    check_dtype("eigh", x)
    n = x.shape[-1]
    k = n if subset_by_index is None else subset_by_index[1] - subset_by_index[0]
    return [core.ShapedArray(x.shape[:-1] + (k,), x.dtype),
            core.ShapedArray(x.shape[:-2] + (k,), real_dtype(x.dtype))]


def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    # dw = diag(V^H dA V) and dV = V (F o V^H dA V) with F_ij = 1 / (w_j - w_i) off the
    # diagonal (the input is Hermitian, so its tangent is taken as such).
    if subset_by_index is not None and subset_by_index != (0, primals[0].shape[-1]):
        raise NotImplementedError("jvp rule for 'eigh' with subset_by_index is not "
                                  "implemented, as in JAX.")
    (x,), (t,) = primals, tangents
    v, w = eigh_p.bind(x, lower=lower, sort_eigenvalues=sort_eigenvalues,
                       subset_by_index=subset_by_index, algorithm=algorithm)
    if type(t) is ad.Zero:
        return [v, w], [ad.Zero(core.get_aval(o).to_tangent_aval()) for o in (v, w)]
    shape = x.shape
    wc = _lax.convert_element_type(w, x.dtype)
    nb = x.ndim - 2
    w_row = _lax.broadcast_in_dim(wc, shape, tuple(range(nb)) + (nb + 1,))
    w_col = _lax.broadcast_in_dim(wc, shape, tuple(range(nb)) + (nb,))
    eye_n = eye(shape, x.dtype)
    f = _lax.sub(_lax.reciprocal(_lax.add(eye_n, _lax.sub(w_row, w_col))), eye_n)
    vh_t_v = matmul(matmul(H(v), t), v)
    dv = matmul(v, _lax.mul(f, vh_t_v))
    dw = _lax.real(diagonal(vh_t_v)) if is_complex(x.dtype) else diagonal(vh_t_v)
    return [v, w], [dv, dw]


@reads_platform
def _eigh_lowering(ctx, x, *, lower, sort_eigenvalues, subset_by_index, algorithm):
    (aval,) = ctx.avals_in
    batch, n, nbatch = aval.shape[:-2], aval.shape[-1], aval.ndim - 2
    w_aval = core.ShapedArray(aval.shape[:-1], real_dtype(aval.dtype))
    results = [aval, w_aval, core.ShapedArray(batch, np.int32)]
    if algorithm == EighImplementation.QDWH:
        raise NotImplementedError("QDWH implementation is only supported on TPU")
    if on_cuda(ctx):
        # cuSOLVER's choice (0), its QR-based syevd (1) or Jacobi syevj (2), as JAX numbers them
        code = 0 if algorithm is None else 2 if algorithm == EighImplementation.JACOBI else 1
        v, w, info = ffi_call("cusolver_syevd_ffi", [x], [aval], results, nbatch,
                              {"lower": bool_attr(lower), "algorithm": u8_int(code)},
                              aliases={0: 0})
    else:
        if algorithm == EighImplementation.JACOBI:
            raise NotImplementedError("Jacobi implementation is not supported on CPU")
        v, w, info = lapack_call("heevd_ffi" if is_complex(aval.dtype) else "syevd_ffi",
                                 aval.dtype, [x], [aval], results, nbatch,
                                 {"mode": u8_attr("V"), "uplo": u8_attr("L" if lower else "U")},
                                 aliases={0: 0})
    ok = info_ok(info, batch)
    v = nan_unless_ok(ok, v, aval, nbatch)
    w = nan_unless_ok(ok, w, w_aval, nbatch)
    if subset_by_index is not None and tuple(subset_by_index) != (0, n):
        lo, hi = subset_by_index
        sub = ctx.replace(avals_in=[aval, w_aval], avals_out=list(ctx.avals_out))
        return mlir.lower_fun(lambda v, w: [
            _lax.slice_in_dim(v, lo, hi, axis=nbatch + 1),
            _lax.slice_in_dim(w, lo, hi, axis=nbatch)], multiple_results=True)(sub, v, w)
    return [v, w]


eigh_p = standard_multi_result_primitive(_eigh_abstract_eval, "eigh")
ad.defjvp_rule(eigh_p, _eigh_jvp)
batching.defleading(eigh_p)
mlir.register_lowering(eigh_p, _eigh_lowering)


# ---- tridiagonal ---------------------------------------------------------------------------
def tridiagonal(a: ArrayLike, *, lower: bool = True) -> tuple[Array, Array, Array, Array]:
    """Reduces Hermitian matrices ``[..., n, n]`` to real symmetric tridiagonal form
    ``Q^H A Q`` (LAPACK ``sytrd``/``hetrd``): ``(arr, d, e, taus)`` with the reflectors in
    ``arr``, the diagonal ``d``, the off-diagonal ``e`` and the reflector scales ``taus``."""
    arr, d, e, taus = tridiagonal_p.bind(a, lower=bool(lower))
    return arr, d, e, taus


def _tridiagonal_abstract_eval(a, *, lower):
    check_square("tridiagonal", a)
    check_dtype("tridiagonal", a)
    batch, n = a.shape[:-2], a.shape[-1]
    real = real_dtype(a.dtype)
    return [a, core.ShapedArray(batch + (n,), real),
            core.ShapedArray(batch + (max(n - 1, 0),), real),
            core.ShapedArray(batch + (max(n - 1, 0),), a.dtype)]


@reads_platform
def _tridiagonal_lowering(ctx, a, *, lower):
    (aval,) = ctx.avals_in
    batch, nbatch = aval.shape[:-2], aval.ndim - 2
    results = [*ctx.avals_out, core.ShapedArray(batch, np.int32)]
    if on_cuda(ctx):  # cuSOLVER's sytrd (hetrd for complex matrices: one kernel for both)
        *results, info = ffi_call("cusolver_sytrd_ffi", [a], [aval], results, nbatch,
                                  {"lower": bool_attr(lower)}, aliases={0: 0})
    else:
        *results, info = lapack_call(
            "hetrd_ffi" if is_complex(aval.dtype) else "sytrd_ffi", aval.dtype, [a], [aval],
            results, nbatch, {"uplo": u8_attr("L" if lower else "U")}, aliases={0: 0})
    return _nan_results(ctx, info, results, nbatch)


tridiagonal_p = standard_multi_result_primitive(_tridiagonal_abstract_eval, "tridiagonal")
batching.defleading(tridiagonal_p)
mlir.register_lowering(tridiagonal_p, _tridiagonal_lowering)


# ---- hessenberg ----------------------------------------------------------------------------
def hessenberg(a: ArrayLike) -> tuple[Array, Array]:
    """Reduces square matrices ``[..., n, n]`` to upper Hessenberg form ``Q^H A Q`` (LAPACK
    ``gehrd``): ``(arr, taus)``, the Hessenberg matrix on and above the first subdiagonal of
    ``arr`` with the Householder reflectors below it, and their scales ``taus``."""
    arr, taus = hessenberg_p.bind(a)
    return arr, taus


def _hessenberg_abstract_eval(a):
    check_square("hessenberg", a)
    check_dtype("hessenberg", a)
    return [a, core.ShapedArray(a.shape[:-2] + (max(a.shape[-1] - 1, 0),), a.dtype)]


def _hessenberg_lowering(ctx, a):
    (aval,) = ctx.avals_in
    batch, nbatch = aval.shape[:-2], aval.ndim - 2
    *results, info = lapack_call(
        "gehrd_ffi", aval.dtype, [a], [aval], [*ctx.avals_out,
                                               core.ShapedArray(batch, np.int32)], nbatch,
        {"high": i32_attr(aval.shape[-1]), "low": i32_attr(1)}, aliases={0: 0})
    return _nan_results(ctx, info, results, nbatch)


hessenberg_p = standard_multi_result_primitive(_hessenberg_abstract_eval, "hessenberg")
batching.defleading(hessenberg_p)
mlir.register_lowering(hessenberg_p, _hessenberg_lowering)
mlir.register_lowering(hessenberg_p, no_gpu_kernel("hessenberg"), platform="cuda")


# ---- schur ---------------------------------------------------------------------------------
def schur(x: ArrayLike, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable=None) -> tuple[Array, Array]:
    """Schur decomposition ``x = Z T Z^H`` of square matrices (LAPACK ``gees``): ``(T, Z)``,
    ``T`` quasi-upper-triangular (upper triangular for complex input); ``(T,)`` when
    ``compute_schur_vectors`` is False."""
    return tuple(schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors),
                              sort_eig_vals=bool(sort_eig_vals),
                              select_callable=select_callable))


def _schur_abstract_eval(x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    check_square("schur", x)
    check_dtype("schur", x)
    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("The sort feature of LAPACK's gees routine is not "
                                  "implemented.")
    return [x, x] if compute_schur_vectors else [x]


def _schur_lowering(ctx, x, *, compute_schur_vectors, sort_eig_vals, select_callable):
    (aval,) = ctx.avals_in
    batch, n, nbatch = aval.shape[:-2], aval.shape[-1], aval.ndim - 2
    vec = core.ShapedArray(batch + (n,), aval.dtype)
    scalar = core.ShapedArray(batch, np.int32)
    eig_avals = [vec] if is_complex(aval.dtype) else [vec, vec]
    results = lapack_call(
        "gees_ffi", aval.dtype, [x], [aval], [aval, aval, *eig_avals, scalar, scalar], nbatch,
        {"mode": u8_attr("V" if compute_schur_vectors else "N"), "sort": u8_attr("N")},
        aliases={0: 0})
    outs = results[:2] if compute_schur_vectors else results[:1]
    return _nan_results(ctx, results[-1], outs, nbatch)


schur_p = standard_multi_result_primitive(_schur_abstract_eval, "schur")
batching.defleading(schur_p)
mlir.register_lowering(schur_p, _schur_lowering)
mlir.register_lowering(schur_p, no_gpu_kernel("schur"), platform="cuda")
