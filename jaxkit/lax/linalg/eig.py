"""General (non-symmetric) eigendecomposition, lowered to LAPACK ``?geev``.

XLA has no general (non-symmetric) eigendecomposition, so ``eig`` lowers, as in JAX, to
jaxlib's CPU LAPACK ``?geev`` typed-FFI targets (``lapack_sgeev_ffi`` ... ``lapack_zgeev_ffi``):
matrices are passed in column-major layout, the ``compute_left``/``compute_right`` modes are
attributes in the ``mhlo.backend_config`` dictionary, and a nonzero LAPACK ``info`` turns that
matrix's results into NaN. Only the CPU backend has these targets.
"""
from __future__ import annotations

import numpy as np
import enum


from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax import elementwise as ew
from jaxkit.lax.standard import standard_multi_result_primitive
from jaxkit.lax.dot import dot_general
from jaxkit.lax.linalg._lapack import (
    LAPACK_DTYPES,
    cpu_only,
    info_ok,
    is_complex,
    lapack_call,
    nan_unless_ok,
    u8_attr,
)
from jaxkit.lax.structural import convert_element_type, reduce_sum
from jaxkit.typing import Array, ArrayLike
from jaxkit.interpreters.mlir import hlo

__all__ = ["EigImplementation", "eig", "eig_p"]


class EigImplementation(enum.Enum):
    """Which eigensolver ``eig`` uses; the CPU has LAPACK's."""
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
    a LAPACK ``?geev`` custom call (CPU only)."""
    if implementation not in (None, EigImplementation.LAPACK):
        raise NotImplementedError(f"eig implementation {implementation} is not available on "
                                  "the CPU; use implementation=None.")
    del enable_eigvec_derivs, use_magma  # eigenvector derivatives are not implemented
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors))


def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors):
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


def _eig_cpu_lowering(ctx, x, *, compute_left_eigenvectors, compute_right_eigenvectors):
    (aval,) = ctx.avals_in
    ndim, batch = aval.ndim, aval.shape[:-2]
    is_real = not is_complex(aval.dtype)
    complex_dtype = dtypes.to_complex_dtype(aval.dtype)
    w_avals = ([core.ShapedArray(aval.shape[:-1], aval.dtype)] * 2 if is_real  # wr, wi
               else [core.ShapedArray(aval.shape[:-1], complex_dtype)])
    v_aval = core.ShapedArray(aval.shape, complex_dtype)
    result_avals = [*w_avals, v_aval, v_aval, core.ShapedArray(batch, np.int32)]
    # LAPACK's JOBVL/JOBVR: 'V' computes the eigenvectors, 'N' does not.
    mode = {True: "V", False: "N"}
    results = lapack_call("geev_ffi", aval.dtype, [x], [aval], result_avals, ndim - 2,
                          {"compute_left": u8_attr(mode[compute_left_eigenvectors]),
                           "compute_right": u8_attr(mode[compute_right_eigenvectors])})
    info = results[-1]
    if is_real:
        w = hlo.ComplexOp(results[0], results[1]).result
        vl, vr = results[2], results[3]
    else:
        w, vl, vr = results[0], results[1], results[2]
    ok = info_ok(info, batch)
    outs = [nan_unless_ok(ok, w, ctx.avals_out[0], len(batch))]
    for wanted, v in ((compute_left_eigenvectors, vl), (compute_right_eigenvectors, vr)):
        if wanted:
            outs.append(nan_unless_ok(ok, v, v_aval, len(batch)))
    return outs


def _eig_batch(axis_data, args, dims, *, compute_left_eigenvectors, compute_right_eigenvectors):
    (x,), (d,) = args, dims
    x = batching.moveaxis(x, d, 0)
    outs = eig(x, compute_left_eigenvectors=compute_left_eigenvectors,
               compute_right_eigenvectors=compute_right_eigenvectors)
    return outs, [0] * len(outs)


def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors):
    """Eigenvalue derivatives only: ``dw_i = u_i^H dA v_i / u_i^H v_i`` with ``u_i``/``v_i``
    the left/right eigenvectors (eqn. 4.60 of arXiv:1701.00392 in left-eigenvector form)."""
    if compute_left_eigenvectors or compute_right_eigenvectors:
        raise NotImplementedError(
            "jvp rule for 'eig' with compute_left_eigenvectors or compute_right_eigenvectors: "
            "the derivatives of eigenvectors are not implemented, only of eigenvalues (use "
            "jnp.linalg.eigvals, or lax.linalg.eig with both flags False).")
    (x,), (t,) = primals, tangents
    w, vl, vr = eig(x, compute_left_eigenvectors=True, compute_right_eigenvectors=True)
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
mlir.register_lowering(eig_p, _eig_cpu_lowering)
mlir.register_lowering(eig_p, cpu_only("eig"), platform="cuda")
