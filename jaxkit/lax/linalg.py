"""Linear-algebra primitives that XLA has no operation for, lowered to LAPACK custom calls.

XLA has no general (non-symmetric) eigendecomposition, so ``eig`` lowers, as in JAX, to
jaxlib's CPU LAPACK ``?geev`` typed-FFI targets (``lapack_sgeev_ffi`` ... ``lapack_zgeev_ffi``):
matrices are passed in column-major layout, the ``compute_left``/``compute_right`` modes are
attributes in the ``mhlo.backend_config`` dictionary, and a nonzero LAPACK ``info`` turns that
matrix's results into NaN. Only the CPU backend has these targets.
"""
from __future__ import annotations

import numpy as np

from jaxkit import core, dtypes
from jaxkit.runtime import pjrt
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import elementwise as ew
from jaxkit.lax.standard import standard_multi_result_primitive
from jaxkit.lax.dot import dot_general
from jaxkit.lax.structural import convert_element_type, reduce_sum
from jaxkit.typing import Array, ArrayLike

__all__ = ["eig", "eig_p"]


# ---- eig -----------------------------------------------------------------------------------
def eig(x: ArrayLike, *, compute_left_eigenvectors: bool = True,
        compute_right_eigenvectors: bool = True) -> list[Array]:
    """Eigendecomposition of general square matrices ``x`` (batched over leading axes):
    ``[w, vl, vr]`` (eigenvalues, then left and right eigenvectors as columns, each present if
    asked for), all complex. Eigenvalues are unordered; eigenvectors have unit norm. Lowers to
    a LAPACK ``?geev`` custom call (CPU only)."""
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors))


_EIG_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def _eig_abstract_eval(x, *, compute_left_eigenvectors, compute_right_eigenvectors):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError("Argument to nonsymmetric eigendecomposition must have shape "
                         f"[..., n, n], got shape {x.shape}")
    if x.dtype not in _EIG_DTYPES:
        raise TypeError(f"eig does not accept dtype {x.dtype.name}; accepted dtypes are "
                        "float32, float64, complex64 and complex128.")
    complex_dtype = dtypes.to_complex_dtype(x.dtype)
    outs = [core.ShapedArray(x.shape[:-1], complex_dtype)]
    outs += [core.ShapedArray(x.shape, complex_dtype)] * (compute_left_eigenvectors +
                                                          compute_right_eigenvectors)
    return outs


def _column_major(ndim: int) -> tuple[int, ...]:
    """Minor-to-major layout of a batch of Fortran-order matrices."""
    return (ndim - 2, ndim - 1) + tuple(range(ndim - 3, -1, -1))


def _nan_unless_ok(ok: ir.Value, x: ir.Value, aval: core.ShapedArray, nbatch: int) -> ir.Value:
    """``x`` where LAPACK reported success for the matrix, else NaN."""
    ok = hlo.BroadcastInDimOp(mlir.aval_to_ir_type(core.ShapedArray(aval.shape, np.bool_)),
                              ok, mlir.i64_attr(range(nbatch))).result
    nan = hlo.BroadcastInDimOp(mlir.aval_to_ir_type(aval),
                               mlir.ir_constant(np.array(np.nan, aval.dtype)),
                               mlir.i64_attr(())).result
    return hlo.SelectOp(ok, x, nan).result


def _eig_cpu_lowering(ctx, x, *, compute_left_eigenvectors, compute_right_eigenvectors):
    (aval,) = ctx.avals_in
    ndim, batch = aval.ndim, aval.shape[:-2]
    is_real = not dtypes.issubdtype(aval.dtype, np.complexfloating)
    complex_dtype = dtypes.to_complex_dtype(aval.dtype)
    w_avals = ([core.ShapedArray(aval.shape[:-1], aval.dtype)] * 2 if is_real  # wr, wi
               else [core.ShapedArray(aval.shape[:-1], complex_dtype)])
    v_aval = core.ShapedArray(aval.shape, complex_dtype)
    result_avals = [*w_avals, v_aval, v_aval, core.ShapedArray(batch, np.int32)]
    layouts = [_column_major(ndim) if a.ndim == ndim else mlir.row_major(a.ndim)
               for a in result_avals]
    # LAPACK's JOBVL/JOBVR: 'V' computes the eigenvectors, 'N' does not.
    mode = {True: ord("V"), False: ord("N")}
    u8 = ir.IntegerType.get_unsigned(8)
    op = hlo.CustomCallOp.build_generic(
        results=[mlir.aval_to_ir_type(a) for a in result_avals], operands=[x],
        attributes={
            "call_target_name": ir.StringAttr.get(pjrt.lapack_target("geev_ffi",
                                                                         aval.dtype)),
            "has_side_effect": ir.BoolAttr.get(False),
            "backend_config": ir.StringAttr.get(""),
            "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
            "called_computations": ir.ArrayAttr.get([]),
            "operand_layouts": mlir.layouts_attr([_column_major(ndim)]),
            "result_layouts": mlir.layouts_attr(layouts)})
    # A dictionary backend_config holds the typed-FFI attributes (as JAX's ffi_lowering).
    op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get({
        "compute_left": ir.IntegerAttr.get(u8, mode[compute_left_eigenvectors]),
        "compute_right": ir.IntegerAttr.get(u8, mode[compute_right_eigenvectors])})
    op.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {"num_batch_dims": ir.StringAttr.get(str(len(batch)))})
    results = list(op.results)
    info = results[-1]
    if is_real:
        w = hlo.ComplexOp(results[0], results[1]).result
        vl, vr = results[2], results[3]
    else:
        w, vl, vr = results[0], results[1], results[2]
    zero = hlo.BroadcastInDimOp(mlir.aval_to_ir_type(core.ShapedArray(batch, np.int32)),
                                mlir.ir_constant(np.int32(0)), mlir.i64_attr(())).result
    ok = hlo.CompareOp(info, zero, hlo.ComparisonDirectionAttr.get("EQ"),
                       compare_type=hlo.ComparisonTypeAttr.get("SIGNED")).result
    outs = [_nan_unless_ok(ok, w, ctx.avals_out[0], len(batch))]
    for wanted, v in ((compute_left_eigenvectors, vl), (compute_right_eigenvectors, vr)):
        if wanted:
            outs.append(_nan_unless_ok(ok, v, v_aval, len(batch)))
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
