"""What the linear-algebra primitives share: the LAPACK typed-FFI custom call, LAPACK's
``info`` turned into NaNs, dtype/shape checks, and the batched matrix helpers the JVP rules use.

jaxlib's CPU LAPACK kernels (``lapack_?potrf_ffi``, ``lapack_?getrf_ffi``, ...) take any
number of leading batch dimensions (``num_batch_dims`` frontend attribute) and loop over them
inside one call, so a vmapped batch of matrices is a single custom call. Matrices travel in
column-major (Fortran) layout, vectors and scalars in row-major; the kernel's options are
attributes of the ``mhlo.backend_config`` dictionary, as JAX's ``ffi_lowering`` writes them.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxkit import _config, core, dtypes
from jaxkit.runtime import gpu as _gpu
from jaxkit.runtime import pjrt as _runtime
from jaxkit import lax as _lax
from jaxkit.lax.elementwise import _const as _lax_const
from jaxkit.interpreters import mlir
from jaxkit.typing import Array
from jaxkit.interpreters.mlir import hlo, ir

LAPACK_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64,
                                            np.complex128))


def check_square(name: str, aval: core.ShapedArray) -> None:
    if aval.ndim < 2 or aval.shape[-1] != aval.shape[-2]:
        raise ValueError(f"Argument to {name} must have shape [..., n, n], got shape "
                         f"{aval.shape}.")


def check_matrix(name: str, aval: core.ShapedArray) -> None:
    if aval.ndim < 2:
        raise ValueError(f"Argument to {name} must have rank >= 2 (shape [..., m, n]), got "
                         f"shape {aval.shape}.")


def check_dtype(name: str, aval: core.ShapedArray) -> None:
    if np.dtype(aval.dtype) not in LAPACK_DTYPES:
        raise TypeError(f"{name} does not accept dtype {np.dtype(aval.dtype).name}; accepted "
                        "dtypes are float32, float64, complex64 and complex128 (convert the "
                        "operand with .astype first).")


def real_dtype(dtype) -> np.dtype:
    return np.finfo(np.dtype(dtype)).dtype


def is_complex(dtype) -> bool:
    return dtypes.issubdtype(dtype, np.complexfloating)


# ---- the custom call -----------------------------------------------------------------------
def column_major(ndim: int) -> tuple[int, ...]:
    """Minor-to-major layout of a batch of Fortran-order matrices."""
    return (ndim - 2, ndim - 1) + tuple(range(ndim - 3, -1, -1))


def _layout(aval: core.ShapedArray, nbatch: int, matrices_column_major: bool = True
            ) -> tuple[int, ...]:
    if matrices_column_major and aval.ndim - nbatch == 2:
        return column_major(aval.ndim)
    return mlir.row_major(aval.ndim)


def u8_attr(char: str) -> ir.Attribute:
    """A LAPACK character option (``'L'``, ``'V'``, ...) as the FFI's ``ui8`` attribute."""
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), ord(char))


def u8_int(v: int) -> ir.Attribute:
    """A small integer option as the FFI's ``ui8`` attribute (cuSOLVER's ``algorithm``)."""
    return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), int(v))


def i32_attr(v: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(v))


def bool_attr(v: bool) -> ir.Attribute:
    return ir.BoolAttr.get(bool(v))


def lapack_call(fn_base: str, dtype, operands: Sequence[ir.Value],
                operand_avals: Sequence[core.ShapedArray],
                result_avals: Sequence[core.ShapedArray], nbatch: int,
                attrs: dict[str, ir.Attribute] | None = None,
                aliases: dict[int, int] | None = None,
                target: str | None = None) -> list[ir.Value]:
    """One call of jaxlib's LAPACK kernel ``lapack_<s|d|c|z><fn_base>`` (or of ``target``, one
    of the dtype-generic kernels jaxlib registers with them) on a batch of ``nbatch`` leading
    dimensions. ``aliases`` maps result index -> operand index for results written in place
    of an operand (as LAPACK does), sparing XLA a copy."""
    name = _runtime.lapack_target(fn_base, dtype)  # also registers the kernels on first use
    return ffi_call(target or name, operands, operand_avals, result_avals, nbatch, attrs,
                    aliases)


def ffi_call(target: str, operands: Sequence[ir.Value],
             operand_avals: Sequence[core.ShapedArray],
             result_avals: Sequence[core.ShapedArray], nbatch: int,
             attrs: dict[str, ir.Attribute] | None = None,
             aliases: dict[int, int] | None = None, *, matrices_column_major: bool = True,
             batch_attribute: bool = True) -> list[ir.Value]:
    """One typed-FFI custom call of ``target`` (a LAPACK kernel, or a GPU solver kernel of the
    CUDA plugin's wheel), in the conventions both follow: Fortran-order matrices, a batch of
    ``nbatch`` leading dimensions, options as ``mhlo.backend_config`` attributes.

    ``matrices_column_major=False`` passes matrices in row-major (C) order instead (cuSOLVER's
    ``gesvd`` of a wide matrix reads it as the tall transpose). ``batch_attribute=False``
    leaves out the ``num_batch_dims`` frontend attribute, as JAX does for the kernels that
    take no batch (``cu_cholesky_update_ffi``, ``cusolver_syrk_ffi``)."""
    i32 = ir.IntegerType.get_signless(32)
    attributes = {
        "call_target_name": ir.StringAttr.get(target),
        "has_side_effect": ir.BoolAttr.get(False),
        "backend_config": ir.StringAttr.get(""),
        "api_version": ir.IntegerAttr.get(i32, 1),
        "called_computations": ir.ArrayAttr.get([]),
        "operand_layouts": mlir.layouts_attr([_layout(a, nbatch, matrices_column_major)
                                              for a in operand_avals]),
        "result_layouts": mlir.layouts_attr([_layout(a, nbatch, matrices_column_major)
                                             for a in result_avals])}
    if aliases:
        single = len(result_avals) == 1
        attributes["output_operand_aliases"] = ir.ArrayAttr.get([
            hlo.OutputOperandAlias.get([] if single else [r], o, [])
            for r, o in aliases.items()])
    op = hlo.CustomCallOp.build_generic(
        results=[mlir.aval_to_ir_type(a) for a in result_avals], operands=list(operands),
        attributes=attributes)
    op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get(attrs or {})
    if batch_attribute:
        op.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
            {"num_batch_dims": ir.StringAttr.get(str(nbatch))})
    return list(op.results)


def info_ok(info: ir.Value, batch: Sequence[int], direction: str = "EQ") -> ir.Value:
    """``info <direction> 0`` per matrix: where LAPACK reported success."""
    zero = hlo.BroadcastInDimOp(mlir.aval_to_ir_type(core.ShapedArray(tuple(batch), np.int32)),
                                mlir.ir_constant(np.int32(0)), mlir.i64_attr(())).result
    return hlo.CompareOp(info, zero, hlo.ComparisonDirectionAttr.get(direction),
                         compare_type=hlo.ComparisonTypeAttr.get("SIGNED")).result


def nan_unless_ok(ok: ir.Value, x: ir.Value, aval: core.ShapedArray, nbatch: int) -> ir.Value:
    """``x`` where LAPACK reported success for the matrix, else NaN."""
    ok = hlo.BroadcastInDimOp(mlir.aval_to_ir_type(core.ShapedArray(aval.shape, np.bool_)),
                              ok, mlir.i64_attr(range(nbatch))).result
    nan = hlo.BroadcastInDimOp(mlir.aval_to_ir_type(aval),
                               mlir.ir_constant(np.array(np.nan, aval.dtype)),
                               mlir.i64_attr(())).result
    return hlo.SelectOp(ok, x, nan).result


def on_cuda(ctx) -> bool:
    """Whether the module is lowered for an NVIDIA GPU: the factorizations then call the
    cuSOLVER kernels of the CUDA plugin's kernels wheel (``cusolver_potrf_ffi``, ...), in the
    layout and attribute conventions of the LAPACK ones, as JAX does."""
    return ctx.module_context.platform == "cuda"


def hybrid_target(name: str) -> str:
    """``cuhybrid_<name>``: a kernel of the plugin's ``_hybrid`` module, which runs LAPACK on
    the host between copies (``eig``, ``geqp3``). Its LAPACK is set up first, as JAX does
    when it lowers one (a no-op where the plugin's kernels are not installed)."""
    _gpu.initialize_hybrid_kernels()
    return f"cuhybrid_{name}"


def magma_attr(override: bool | None) -> ir.Attribute:
    """Whether a hybrid kernel may use MAGMA (``"on"``/``"off"``/``"auto"``): the call's own
    choice if it made one, else the ``jax_use_magma`` option."""
    value = _config.config.jax_use_magma if override is None else "on" if override else "off"
    return ir.StringAttr.get(value)


def cusolver_version() -> int | None:
    """The version of the cuSOLVER library the CUDA plugin's kernels use (e.g. 11701), or
    None where they are not installed: JAX picks some kernels by it."""
    return _gpu.cusolver_version()


def no_gpu_kernel(name: str):
    """The lowering of ``name`` for the GPU, which neither JAX nor jaxkit has (LAPACK only):
    JAX's error, with how to run the computation on the CPU instead."""
    def rule(ctx, *args, **params):
        raise NotImplementedError(
            f"MLIR translation rule for primitive '{name}' not found for platform cuda: "
            f"{name} is computed with LAPACK on the CPU only (JAX has no GPU kernel for it "
            "either). Run it on the CPU device: put its operand there with "
            "`x = jax.device_put(x, jax.devices('cpu')[0])`.")
    return rule


# ---- batched matrix helpers (jaxkit operations, used by the JVP rules and wrappers) ---------
def matmul(a: Array, b: Array) -> Array:
    """``a @ b`` over matching leading batch dimensions."""
    nb = a.ndim - 2
    batch = tuple(range(nb))
    return _lax.dot_general(a, b, (((nb + 1,), (nb,)), (batch, batch)),
                            precision=_lax.Precision.HIGHEST)


def T(x: Array) -> Array:
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return _lax.transpose(x, perm)


def H(x: Array) -> Array:
    return _lax.conj(T(x)) if is_complex(x.dtype) else T(x)


def _iotas(shape: Sequence[int]) -> tuple[Array, Array]:
    shape = tuple(shape)
    return (_lax.broadcasted_iota(np.int32, shape, len(shape) - 2),
            _lax.broadcasted_iota(np.int32, shape, len(shape) - 1))


def _tri_mask(x: Array, k: int) -> Array:
    """``row + k >= column`` over ``x``'s last two axes, built on one matrix and broadcast
    over the batch, in JAX's equation order (row iota, offset, column iota), so jaxprs of the
    factorizations print as JAX's."""
    *batch, n, m = x.shape
    mask = _lax.ge(_lax.add(_lax.broadcasted_iota(np.int32, (n, m), 0), np.int32(k)),
                   _lax.broadcasted_iota(np.int32, (n, m), 1))
    return _lax.broadcast(mask, tuple(batch))


def tril(x: Array, k: int = 0) -> Array:
    return _lax.select(_tri_mask(x, k), x, _lax.full_like(x, 0))


def triu(x: Array, k: int = 0) -> Array:
    # The complement of the mask below the (k-1)th diagonal, as JAX writes it.
    return _lax.select(_tri_mask(x, k - 1), _lax.full_like(x, 0), x)


def eye(shape: Sequence[int], dtype) -> Array:
    """Identity matrices (ones where row == column) of ``shape`` ``[..., m, n]``."""
    i, j = _iotas(shape)
    return _lax.convert_element_type(_lax.eq(i, j), dtype)


def diagonal(x: Array) -> Array:
    """The main diagonals of a batch of matrices ``[..., m, n]`` -> ``[..., min(m, n)]``."""
    k = min(x.shape[-2:])
    x = _lax.slice(x, (0,) * x.ndim, x.shape[:-2] + (k, k))
    return _lax.reduce_sum(_lax.mul(x, eye(x.shape, x.dtype)), (x.ndim - 1,))


def diag(v: Array) -> Array:
    """Diagonal matrices ``[..., n, n]`` from vectors ``[..., n]``."""
    n = v.shape[-1]
    shape = v.shape + (n,)
    vb = _lax.broadcast_in_dim(v, shape, tuple(range(v.ndim - 1)) + (v.ndim,))
    return _lax.mul(vb, eye(shape, v.dtype))


def symmetrize(x: Array) -> Array:
    """``(x + x^H) / 2``: the Hermitian part LAPACK's one-triangle kernels assume."""
    # A weak scalar 2 (not a filled array): JAX's ``/ 2`` stages ``div x 2.0``.
    return _lax.div(_lax.add(x, H(x)), _lax_const(x, 2))
