"""General (non-symmetric) eigendecomposition, lowered to LAPACK ``?geev`` or, for NVIDIA
GPUs, to cuSOLVER's ``geev`` or the CUDA plugin's hybrid kernel.

XLA has no general (non-symmetric) eigendecomposition, so ``eig`` lowers, as in JAX, to
jaxlib's CPU LAPACK ``?geev`` typed-FFI targets (``lapack_sgeev_ffi`` ... ``lapack_zgeev_ffi``):
matrices are passed in column-major layout, the ``compute_left``/``compute_right`` modes are
attributes in the ``mhlo.backend_config`` dictionary, and a nonzero LAPACK ``info`` turns that
matrix's results into NaN. For the GPU, JAX 0.10.2 calls cuSOLVER's ``geev``
(``cusolver_geev_ffi``; from cuSOLVER 11.7.1 on, right eigenvectors only) or else the hybrid
``cuhybrid_eig_real``/``cuhybrid_eig_comp``, which copy the matrix to the host and run LAPACK
(or MAGMA) there; jaxkit chooses as JAX does.
"""
from __future__ import annotations

import enum
import warnings

import numpy as np

from jaxkit import core, dtypes
from jaxkit import lax as _lax
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax import elementwise as ew
from jaxkit.lax.standard import standard_multi_result_primitive
from jaxkit.lax.dot import dot_general
from jaxkit.lax.linalg._lapack import (
    LAPACK_DTYPES,
    bool_attr,
    cusolver_version,
    ffi_call,
    hybrid_target,
    info_ok,
    is_complex,
    lapack_call,
    magma_attr,
    nan_unless_ok,
    on_cuda,
    u8_attr,
)
from jaxkit.lax.structural import convert_element_type, reduce_sum
from jaxkit.typing import Array, ArrayLike
from jaxkit.interpreters.mlir import hlo
from jaxkit.interpreters.mlir_platforms import reads_platform

__all__ = ["EigImplementation", "eig", "eig_p"]


class EigImplementation(enum.Enum):
    """Which eigensolver ``eig`` uses: the CPU has LAPACK's; NVIDIA GPUs cuSOLVER's ``geev``
    (``CUSOLVER``), or LAPACK (``LAPACK``) or MAGMA (``MAGMA``) through the hybrid kernel."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


# ---- eig -----------------------------------------------------------------------------------
def eig(x: ArrayLike, *, compute_left_eigenvectors: bool = True,
        compute_right_eigenvectors: bool = True, enable_eigvec_derivs: bool = False,
        implementation: EigImplementation | None = None,
        use_magma: bool | None = None) -> list[Array]:
    """Eigendecomposition of general square matrices ``x`` (batched over leading axes):
    ``[w, vl, vr]`` (eigenvalues, then left and right eigenvectors as columns, each present if
    asked for), all complex. Eigenvalues are unordered; eigenvectors have unit norm. Lowers to
    a LAPACK ``?geev`` custom call on the CPU, to cuSOLVER's or the hybrid kernel on the GPU
    (``implementation`` chooses; ``use_magma`` is its deprecated spelling)."""
    if use_magma is not None:
        warnings.warn("use_magma is deprecated, please use implementation="
                      "EigImplementation.MAGMA instead.", DeprecationWarning, stacklevel=2)
        implementation = EigImplementation.MAGMA if use_magma else EigImplementation.LAPACK
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs),
                      implementation=implementation)


def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors, **_):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError("Argument to nonsymmetric eigendecomposition must have shape "
                         f"[..., n, n], got shape {x.shape}")
    if x.dtype not in LAPACK_DTYPES:
        raise TypeError(f"eig does not accept dtype {x.dtype.name}; accepted dtypes are "
                        "float32, float64, complex64 and complex128.")
    complex_dtype = dtypes.to_complex_dtype(x.dtype)
    outs = [core.ShapedArray(x.shape[:-1], complex_dtype)]
    outs += [core.ShapedArray(x.shape, complex_dtype)] * (compute_left_eigenvectors +
                                                          compute_right_eigenvectors)
    return outs


@reads_platform
def _eig_lowering(ctx, x, *, compute_left_eigenvectors, compute_right_eigenvectors,
                  enable_eigvec_derivs, implementation):
    (aval,) = ctx.avals_in
    ndim, batch = aval.ndim, aval.shape[:-2]
    is_real = not is_complex(aval.dtype)
    complex_dtype = dtypes.to_complex_dtype(aval.dtype)
    w_avals = ([core.ShapedArray(aval.shape[:-1], aval.dtype)] * 2 if is_real  # wr, wi
               else [core.ShapedArray(aval.shape[:-1], complex_dtype)])
    v_aval = core.ShapedArray(aval.shape, complex_dtype)
    result_avals = [*w_avals, v_aval, v_aval, core.ShapedArray(batch, np.int32)]
    left, right = compute_left_eigenvectors, compute_right_eigenvectors
    if on_cuda(ctx) and _use_cusolver_geev(implementation, left):
        w, vl, vr, info = _cusolver_geev(ctx, x, aval, left, right)
    else:
        if on_cuda(ctx):  # LAPACK (or MAGMA) on the host, between copies
            magma = None if implementation is None else implementation == EigImplementation.MAGMA
            results = ffi_call(hybrid_target("eig_real" if is_real else "eig_comp"), [x],
                               [aval], result_avals, ndim - 2,
                               {"magma": magma_attr(magma), "left": bool_attr(left),
                                "right": bool_attr(right)})
        else:
            if implementation not in (None, EigImplementation.LAPACK):
                raise ValueError("Only the lapack implementation is supported on CPU.")
            # LAPACK's JOBVL/JOBVR: 'V' computes the eigenvectors, 'N' does not.
            mode = {True: "V", False: "N"}
            results = lapack_call("geev_ffi", aval.dtype, [x], [aval], result_avals, ndim - 2,
                                  {"compute_left": u8_attr(mode[left]),
                                   "compute_right": u8_attr(mode[right])})
        info = results[-1]
        if is_real:
            w = hlo.ComplexOp(results[0], results[1]).result
            vl, vr = results[2], results[3]
        else:
            w, vl, vr = results[0], results[1], results[2]
    ok = info_ok(info, batch)
    outs = [nan_unless_ok(ok, w, ctx.avals_out[0], len(batch))]
    for wanted, v in ((left, vl), (right, vr)):
        if wanted:
            outs.append(nan_unless_ok(ok, v, v_aval, len(batch)))
    return outs


def _use_cusolver_geev(implementation, left: bool) -> bool:
    """JAX's choice on NVIDIA GPUs: cuSOLVER's geev when asked for, or by default when the
    installed cuSOLVER has it (11.7.1) and no left eigenvectors are wanted; else hybrid."""
    version = cusolver_version()
    has_geev = version is not None and version >= 11701
    if implementation == EigImplementation.CUSOLVER:
        if not has_geev:
            raise RuntimeError("Nonsymmetric eigendecomposition requires cusolver 11.7.1 or "
                               "newer")
        if left:
            raise NotImplementedError("Left eigenvectors are not supported by cusolver")
        return True
    return implementation is None and has_geev and not left


def _cusolver_geev(ctx, x, aval, left: bool, right: bool):
    """``cusolver_geev_ffi``: eigenvalues come complex; a real matrix's eigenvectors come
    real, LAPACK-packed (a conjugate pair's real and imaginary parts in adjacent columns)."""
    batch, n, nbatch = aval.shape[:-2], aval.shape[-1], aval.ndim - 2
    complex_dtype = dtypes.to_complex_dtype(aval.dtype)
    w_aval = core.ShapedArray(batch + (n,), complex_dtype)
    _, w, vl, vr, info = ffi_call(
        "cusolver_geev_ffi", [x], [aval],
        [aval, w_aval, aval, aval, core.ShapedArray(batch, np.int32)], nbatch,
        {"left": bool_attr(left), "right": bool_attr(right)})
    if not is_complex(aval.dtype) and right:
        unpack_ctx = ctx.replace(avals_in=[w_aval, aval],
                                 avals_out=[core.ShapedArray(aval.shape, complex_dtype)])
        (vr,) = mlir.lower_fun(_unpack_conjugate_pairs, multiple_results=True)(
            unpack_ctx, w, vr)
    return w, vl, vr, info


def _unpack_conjugate_pairs(w: Array, v: Array) -> list[Array]:
    """Complex eigenvectors from LAPACK's packed real ones: for a conjugate pair of
    eigenvalues at columns j, j+1, ``v[:, j] ± i v[:, j+1]``; a real eigenvalue's column is its
    vector itself."""
    nb = w.ndim - 1
    if w.shape[-1] == 0:
        return [_lax.complex(v, _lax.full_like(v, 0))]
    wi = _lax.imag(w)
    real = _lax.eq(wi, _lax.full_like(wi, 0))
    # The first of a pair is where the count of complex eigenvalues so far is odd.
    count = _lax.cumsum(_lax.convert_element_type(_lax.bitwise_not(real), np.int32), axis=nb)
    first = _lax.eq(_lax.rem(count, _lax.full_like(count, 2)), _lax.full_like(count, 1))
    zero = _lax.full((), 0, v.dtype)
    rows = [(0, 0, 0)] * (nb + 1)
    next_col = _lax.pad(v, zero, rows + [(-1, 1, 0)])  # column j+1 at j
    prev_col = _lax.pad(v, zero, rows + [(1, -1, 0)])  # column j-1 at j
    dims = tuple(range(nb)) + (nb + 1,)
    real_b = _lax.broadcast_in_dim(real, v.shape, dims)
    first_b = _lax.broadcast_in_dim(first, v.shape, dims)
    re = _lax.select(_lax.bitwise_or(real_b, first_b), v, prev_col)
    im = _lax.select(first_b, next_col, _lax.neg(v))
    im = _lax.select(real_b, _lax.full_like(v, 0), im)
    return [_lax.complex(re, im)]


def _eig_batch(axis_data, args, dims, **params):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    outs = eig_p.bind(x, **params)
    return outs, [0] * len(outs)


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs, implementation):
    """Eigenvalue derivatives only: ``dw_i = u_i^H dA v_i / u_i^H v_i`` with ``u_i``/``v_i``
    the left/right eigenvectors (eqn. 4.60 of arXiv:1701.00392 in left-eigenvector form)."""
    if compute_left_eigenvectors or compute_right_eigenvectors:
        raise NotImplementedError(
            "jvp rule for 'eig' with compute_left_eigenvectors or compute_right_eigenvectors: "
            "the derivatives of eigenvectors are not implemented, only of eigenvalues (use "
            "jnp.linalg.eigvals, or lax.linalg.eig with both flags False).")
    (x,), (t,) = primals, tangents
    # The left eigenvectors are needed, which cuSOLVER's geev does not give.
    if implementation == EigImplementation.CUSOLVER:
        implementation = None
    w, vl, vr = eig(x, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
                    implementation=implementation)
    if type(t) is ad.Zero:
        return [w], [ad.Zero(core.get_aval(w).to_tangent_aval())]
    t = convert_element_type(ad.instantiate_zeros(t), core.get_aval(vr).dtype)
    nb = core.get_aval(x).ndim - 2
    batch = tuple(range(nb))
    t_vr = dot_general(t, vr, (((nb + 1,), (nb,)), (batch, batch)))  # dA @ vr
    ul = ew.conj(vl)
    num = reduce_sum(ew.mul(ul, t_vr), (nb,))
    den = reduce_sum(ew.mul(ul, vr), (nb,))
    return [w], [ew.div(num, den)]


eig_p = standard_multi_result_primitive(_eig_abstract_eval, "eig")
ad.defjvp_rule(eig_p, _eig_jvp)
batching.defrule(eig_p, _eig_batch)
mlir.register_lowering(eig_p, _eig_lowering)
