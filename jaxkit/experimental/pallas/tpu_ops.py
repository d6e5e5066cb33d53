"""The TPU kernel language's value operations (``pltpu.bitcast``, ``roll``, ``load``/``store``,
``touch``, ``trace_value``, elementwise packing, the MXU's ``matmul_*``,
``with_memory_space_constraint``), each a primitive printed as JAX prints it.

Interpret mode runs what JAX's interpreters run on a CPU: ``bitcast`` and ``roll`` lower to
ordinary XLA (re-packing the second-minor dimension, rotating an axis); masked ``load``/
``store`` are Triton's masked ones. The rest only exist in the Mosaic compiler: they trace,
type-check their operands with JAX's errors, and fail to lower on a CPU as JAX's do
(``NotImplementedError`` naming the missing lowering rule).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax, tree_util
from jaxkit import numpy as jnp
from jaxkit.experimental.pallas import triton as _masked
from jaxkit.experimental.pallas.core import MemorySpace as _PlMemorySpace
from jaxkit.interpreters import batching, mlir
from jaxkit.interpreters import partial_eval as pe

__all__ = ["LoweringException", "bitcast", "load", "matmul_acc_lhs", "matmul_pop",
           "matmul_push_rhs", "pack_elementwise", "roll", "store", "touch", "trace_value",
           "unpack_elementwise", "with_memory_space_constraint"]


class LoweringException(Exception):
    """Raised when a kernel cannot be lowered by the Mosaic TPU compiler."""


LoweringException.__module__ = "jax._src.pallas.mosaic.lowering"


def _bits(dtype: Any) -> int:
    return dtypes.itemsize_bits(np.dtype(dtype))


def _effectful(name: str, abstract_eval) -> core.Primitive:
    # An operation kept for its effect on the TPU (no results): never dead code.
    prim = core.Primitive(name)
    prim.multiple_results = True
    prim.def_abstract_eval(abstract_eval)
    pe.defeffectful(prim)
    return prim


# ---- bitcast -------------------------------------------------------------------------------
def bitcast(x: Any, ty: Any) -> Any:
    """``x``'s bits as ``ty``: the second-minor dimension grows or shrinks by the ratio of
    the bit widths (32-bit rows of packed narrower values, as the TPU lays them out)."""
    ty = dtypes.canonicalize_dtype(ty)
    if len(x.shape) < 2:
        raise ValueError("Not implemented: bitcast 1D")
    if x.shape[-2] * _bits(x.dtype) % _bits(ty):
        raise ValueError("Not implemented: the 2nd minor dim can not be perfectly packed or"
                         " unpacked")
    return bitcast_p.bind(x, ty=ty)


def _bitcast_abstract_eval(x, *, ty):
    shape = list(x.shape)
    shape[-2] = shape[-2] * _bits(x.dtype) // _bits(ty)
    return core.ShapedArray(tuple(shape), ty)


def _bitcast_value(x, *, ty):
    src, dst = _bits(x.dtype), _bits(ty)
    if src < dst:
        *lead, m, n = x.shape
        packed = x.reshape(*lead, m // (dst // src), dst // src, n)
        return lax.bitcast_convert_type(jnp.swapaxes(packed, -1, -2), ty)
    if src > dst:
        y = lax.bitcast_convert_type(x, ty)
        *lead, m, n, k = y.shape
        return jnp.swapaxes(y, -1, -2).reshape(*lead, m * k, n)
    return lax.bitcast_convert_type(x, ty)


bitcast_p = core.Primitive("bitcast")
bitcast_p.def_abstract_eval(_bitcast_abstract_eval)
mlir.register_lowering(bitcast_p, mlir.lower_fun(_bitcast_value, multiple_results=False))
# As JAX's rule: the batch axis stays where it is (it must not be one of the minor two).
batching.defrule(bitcast_p, lambda axis_data, args, dims, *, ty: (bitcast(args[0], ty), dims[0]))


# ---- roll ----------------------------------------------------------------------------------
def roll(x: Any, shift: Any, axis: int, *, stride: int | None = None,
         stride_axis: int | None = None) -> Any:
    """``x`` rotated by ``shift`` along ``axis`` (``jnp.roll``); with ``stride``, slice ``k``
    along ``stride_axis`` rotates by ``shift + k * stride``."""
    if isinstance(shift, int) and shift < 0:
        raise ValueError("shift must be non-negative.")
    if axis < 0 or axis >= len(x.shape):
        raise ValueError("axis is out of range.")
    if (stride is None) != (stride_axis is None):
        raise ValueError("stride and stride_axis must be both specified or not.")
    if stride is not None and stride_axis is not None:
        if stride < 0:
            raise ValueError("stride must be non-negative.")
        if stride_axis < 0 or stride_axis >= len(x.shape):
            raise ValueError("stride_axis is out of range")
        if axis == stride_axis:
            raise ValueError("expected axis and stride_axis are different.")
    if isinstance(shift, int):
        shift = np.int32(shift)
    return roll_p.bind(x, shift, axis=axis, stride=stride, stride_axis=stride_axis)


def _roll_value(x, shift, *, axis, stride, stride_axis):
    if stride is None:
        return jnp.roll(x, shift, axis)
    parts = [jnp.roll(part, shift + k * stride, axis)
             for k, part in enumerate(jnp.split(x, x.shape[stride_axis], stride_axis))]
    return jnp.concatenate(parts, stride_axis)


roll_p = core.Primitive("roll")
roll_p.def_abstract_eval(lambda x, shift, **_: x)
mlir.register_lowering(roll_p, mlir.lower_fun(_roll_value, multiple_results=False))


# ---- load / store --------------------------------------------------------------------------
def load(ref: Any, *, mask: Any = None) -> Any:
    """Read ``ref`` (or a view of it); ``mask`` marks the elements needed (interpret mode
    reads them all, as JAX's ``interpret=True``)."""
    return _masked.load(ref, mask=mask)


def store(ref: Any, val: Any, *, mask: Any = None) -> None:
    """Write ``val`` into ``ref`` (or a view of it), only where ``mask`` is True."""
    _masked.store(ref, val, mask=mask)


# ---- touch, trace_value --------------------------------------------------------------------
def touch(ref: Any) -> None:
    """A fake read and write of ``ref`` (orders the kernel's operations around it)."""
    for leaf in tree_util.tree_leaves(ref):
        touch_p.bind(getattr(leaf, "ref", leaf))


touch_p = _effectful("add_dependency", lambda ref: [])


def _touch_batch(axis_data, args, dims):
    touch_p.bind(*args)
    return [], []


batching.defrule(touch_p, _touch_batch)


def trace_value(label: str, value: Any) -> None:
    """Emit a scalar ``int32``/``float32`` to the TPU profiler's trace (a TPU-only
    operation)."""
    trace_value_p.bind(value, label=label)


def _trace_value_abstract_eval(value, *, label):
    if value.shape:
        raise ValueError(f"trace_value requires a scalar value, got shape {value.shape}")
    if value.dtype not in (np.dtype(np.int32), np.dtype(np.float32)):
        raise ValueError(f"trace_value requires i32 or f32, got {value.dtype}")
    return []


trace_value_p = _effectful("trace_value", _trace_value_abstract_eval)


# ---- elementwise packing -------------------------------------------------------------------
def _packing_factor(unpacked: Any, packed: Any) -> int:
    u, p = _bits(unpacked), _bits(packed)
    if u % p != 0:
        raise ValueError(f"Unpacked bitwidth must be a multiple of packed bitwidth, got {u} "
                         f"and {p}")
    return u // p


def pack_elementwise(xs: Any, *, packed_dtype: Any) -> Any:
    """Pack the arrays ``xs`` elementwise into unsigned words of their width, each element
    narrowed to ``packed_dtype``, the first in the lowest bits (a TPU-only operation)."""
    return pack_elementwise_p.bind(*xs, packed_dtype=packed_dtype)


def _pack_abstract_eval(*xs, packed_dtype):
    if not xs:
        raise ValueError("At least one source is required")
    first = xs[0]
    if not all(x.shape == first.shape for x in xs):
        raise ValueError("All sources must have the same shape")
    if not all(x.dtype == first.dtype for x in xs):
        raise ValueError("All sources must have the same dtype")
    packed = np.dtype(packed_dtype)
    if not (first.dtype == np.dtype(np.float32) and packed == np.dtype(dtypes.bfloat16)) and (
            not (dtypes.issubdtype(first.dtype, np.integer)
                 and dtypes.issubdtype(packed, np.integer))):
        raise ValueError(f"Only f32 -> bf16 and int -> int are supported. Got {first.dtype} "
                         f"and {packed_dtype}")
    factor = _packing_factor(first.dtype, packed)
    if len(xs) != factor:
        raise ValueError(f"The number of sources must match the packing factor ({factor}), "
                         f"got {len(xs)}")
    return core.ShapedArray(first.shape, np.dtype(f"uint{_bits(first.dtype)}"))


pack_elementwise_p = core.Primitive("pack_elementwise")
pack_elementwise_p.def_abstract_eval(_pack_abstract_eval)


def unpack_elementwise(x: Any, *, index: int, packed_dtype: Any, unpacked_dtype: Any) -> Any:
    """Element ``index`` of each packed word of ``x``, widened to ``unpacked_dtype`` (the
    inverse of ``pack_elementwise``; a TPU-only operation)."""
    return unpack_elementwise_p.bind(x, index=index, packed_dtype=packed_dtype,
                                     unpacked_dtype=unpacked_dtype)


def _unpack_abstract_eval(x, *, index, packed_dtype, unpacked_dtype):
    if _bits(x.dtype) != _bits(unpacked_dtype):
        raise ValueError("The bitwidth of `x` must match the bitwidth of `unpacked_dtype` for "
                         f"unpack_elementwise, but got {x.dtype} and {unpacked_dtype}")
    factor = _packing_factor(unpacked_dtype, packed_dtype)
    if index < 0 or index >= factor:
        raise ValueError(f"Index {index} is out of bounds for packing factor {factor}")
    return core.ShapedArray(x.shape, np.dtype(unpacked_dtype))


unpack_elementwise_p = core.Primitive("unpack_elementwise")
unpack_elementwise_p.def_abstract_eval(_unpack_abstract_eval)


# ---- the MXU -------------------------------------------------------------------------------
def matmul_push_rhs(rhs: Any, staging_register: int, mxu_index: int, *,
                    transpose: bool = False) -> None:
    """Stage ``rhs`` (256x256) in a staging register of MXU ``mxu_index`` (TPU only)."""
    matmul_push_rhs_p.bind(rhs, staging_register=staging_register, mxu_index=mxu_index,
                           transpose=transpose)


def matmul_acc_lhs(acc_addr: int, lhs: Any, mxu_index: int,
                   load_staged_rhs: int | None = None) -> None:
    """Multiply ``lhs`` by the MXU's right-hand side, accumulating at ``acc_addr`` (first
    loading the one staged in register ``load_staged_rhs``; TPU only)."""
    if isinstance(load_staged_rhs, bool):  # True would name staging register 1
        raise TypeError("load_staged_rhs must be an integer or None.")
    matmul_acc_lhs_p.bind(lhs, acc_addr=acc_addr, mxu_index=mxu_index,
                          load_staged_rhs=load_staged_rhs)


def matmul_pop(acc_addr: int, shape: tuple[int, int], dtype: Any, mxu_index: int) -> Any:
    """The accumulated product at ``acc_addr``, zeroing it (TPU only)."""
    return matmul_pop_p.bind(acc_addr=acc_addr, shape=shape, mxu_index=mxu_index,
                             dtype=np.dtype(dtype))


def _matmul_pop_abstract_eval(*, shape, dtype, **_):
    if dtype not in (np.dtype(np.float32), np.dtype(np.int32)):
        raise ValueError(f"Only float32 and int32 accumulators are supported, got {dtype}")
    return core.ShapedArray(tuple(shape), dtype)


matmul_push_rhs_p = _effectful("matmul_push_rhs", lambda rhs, **_: [])
matmul_acc_lhs_p = _effectful("matmul_acc_lhs", lambda lhs, **_: [])
matmul_pop_p = core.Primitive("matmul_pop")
matmul_pop_p.def_abstract_eval(_matmul_pop_abstract_eval)
pe.defeffectful(matmul_pop_p)


# ---- with_memory_space_constraint ----------------------------------------------------------
_CONSTRAINABLE = ("hbm", "vmem", "smem")


def with_memory_space_constraint(x: Any, memory_space: Any) -> Any:
    """``x``, to be placed in ``memory_space`` (HBM, VMEM or SMEM) when it is an operand of a
    ``pallas_call``; ``pl.ANY`` leaves it unconstrained."""
    if memory_space is _PlMemorySpace.ANY:
        return x
    if getattr(memory_space, "value", None) not in _CONSTRAINABLE:
        raise NotImplementedError(
            "with_memory_space_constraint only supports HBM, VMEM and SMEM.")
    return with_memory_space_constraint_p.bind(x, memory_space=memory_space)


def _wmsc_impl(x, *, memory_space):
    raise ValueError("Cannot eagerly run with_memory_space_constraint.")


with_memory_space_constraint_p = core.Primitive("with_memory_space_constraint")
with_memory_space_constraint_p.def_abstract_eval(lambda x, **_: x)
with_memory_space_constraint_p.def_impl(_wmsc_impl)
mlir.register_lowering(with_memory_space_constraint_p, lambda ctx, x, **_: [x])
