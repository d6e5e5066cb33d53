"""Bit-level elementwise primitives: bitwise logic (not, and, or, xor), shifts, population
count and leading zeros, bit casts between dtypes (of equal or multiple widths), precision
reduction, ``nextafter``, and ``copy``.

Same conventions as ``elementwise.py`` (one block per primitive; rank-0 operands broadcast;
weak only if every operand is). Only ``reduce_precision`` and ``copy`` are differentiable (both
are linear); the others have zero or no JVP, as in JAX.
"""
from __future__ import annotations

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import dispatch
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import chlo, hlo
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.standard import (
    _float,
    _int,
    _int_or_bool,
    check_dtype,
    standard_naryop,
    standard_primitive,
    standard_unop,
)
from jaxkit.typing import Array, ArrayLike, DTypeLike


# ---- bitwise logic: not, and, or, xor ------------------------------------------------------
def bitwise_not(x: ArrayLike) -> Array:
    """Elementwise NOT (logical for booleans). Lowers to ``stablehlo.not``."""
    return not_p.bind(x)


not_p = standard_unop("not", _int_or_bool)
ad.defjvp_zero(not_p)
batching.defvectorized(not_p)
mlir.register_lowering(not_p, mlir.nary_lowering(hlo.NotOp))


def bitwise_and(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise AND. Lowers to ``stablehlo.and``."""
    return and_p.bind(x, y)


def bitwise_or(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise OR. Lowers to ``stablehlo.or``."""
    return or_p.bind(x, y)


def bitwise_xor(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise XOR. Lowers to ``stablehlo.xor``."""
    return xor_p.bind(x, y)


def _integer_binop(name: str, accepted, op) -> core.Primitive:
    """A binary primitive on integers (or booleans): its result is never differentiable."""
    prim = standard_naryop(name, [accepted, accepted])
    ad.defjvp_zero(prim)
    batching.defbroadcasting(prim)
    mlir.register_lowering(prim, mlir.nary_lowering(op))
    return prim


and_p = _integer_binop("and", _int_or_bool, hlo.AndOp)
or_p = _integer_binop("or", _int_or_bool, hlo.OrOp)
xor_p = _integer_binop("xor", _int_or_bool, hlo.XorOp)


# ---- nextafter -----------------------------------------------------------------------------
def nextafter(x1: ArrayLike, x2: ArrayLike) -> Array:
    """The next representable value after ``x1`` in the direction of ``x2``. Lowers to
    ``chlo.next_after``. Not differentiable (as in JAX)."""
    return nextafter_p.bind(x1, x2)


nextafter_p = standard_naryop("nextafter", [_float, _float])
batching.defbroadcasting(nextafter_p)
mlir.register_lowering(nextafter_p, mlir.nary_lowering(chlo.NextAfterOp))


# ---- shifts --------------------------------------------------------------------------------
def shift_left(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x << y`` (0 when ``y`` is at least the bit width). Lowers to
    ``stablehlo.shift_left``."""
    return shift_left_p.bind(x, y)


def shift_right_logical(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise logical ``x >> y`` (zeros shifted in). Lowers to
    ``stablehlo.shift_right_logical``."""
    return shift_right_logical_p.bind(x, y)


def shift_right_arithmetic(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise arithmetic ``x >> y`` (the sign bit shifted in). Lowers to
    ``stablehlo.shift_right_arithmetic``."""
    return shift_right_arithmetic_p.bind(x, y)


def mulhi(x: ArrayLike, y: ArrayLike, /) -> Array:
    """Elementwise high half of the double-width product ``x * y`` (signed for signed
    integers). Lowers to ``chlo.mulhi``."""
    return mulhi_p.bind(x, y)


shift_left_p = _integer_binop("shift_left", _int, hlo.ShiftLeftOp)
shift_right_logical_p = _integer_binop("shift_right_logical", _int, hlo.ShiftRightLogicalOp)
shift_right_arithmetic_p = _integer_binop("shift_right_arithmetic", _int,
                                          hlo.ShiftRightArithmeticOp)
mulhi_p = _integer_binop("mulhi", _int, chlo.MulhiOp)


# ---- population_count / clz ----------------------------------------------------------------
def population_count(x: ArrayLike) -> Array:
    """Elementwise number of set bits. Lowers to ``stablehlo.popcnt``."""
    return population_count_p.bind(x)


population_count_p = standard_unop("population_count", _int)
ad.defjvp_zero(population_count_p)
batching.defvectorized(population_count_p)
mlir.register_lowering(population_count_p, mlir.nary_lowering(hlo.PopulationCountOp))


def clz(x: ArrayLike) -> Array:
    """Elementwise number of leading zero bits. Lowers to ``stablehlo.count_leading_zeros``."""
    return clz_p.bind(x)


clz_p = standard_unop("clz", _int)
ad.defjvp_zero(clz_p)
batching.defvectorized(clz_p)
mlir.register_lowering(clz_p, mlir.nary_lowering(hlo.ClzOp))


# ---- bitcast_convert_type ------------------------------------------------------------------
def bitcast_convert_type(operand: ArrayLike, new_dtype: DTypeLike) -> Array:
    """Reinterpret the bits of ``operand`` as ``new_dtype``; a narrower type adds a trailing
    axis, a wider one consumes it. Lowers to ``stablehlo.bitcast_convert``."""
    return bitcast_convert_type_p.bind(operand, new_dtype=dtypes.check_and_canonicalize_user_dtype(
        new_dtype, "bitcast_convert_type"))


def _bit_width(dt) -> int:
    if dtypes.issubdtype(dt, np.integer):
        return int(dtypes.iinfo(dt).bits)
    if dtypes.issubdtype(dt, np.floating):
        return int(dtypes.finfo(dt).bits)
    return np.dtype(dt).itemsize * 8


def _bitcast_shape_rule(operand, *, new_dtype):
    old, new = _bit_width(operand.dtype), _bit_width(new_dtype)
    if old == new:
        return operand.shape
    if old > new:
        return (*operand.shape, old // new)
    last = operand.shape[-1] if operand.shape else 1
    if last * old != new:
        raise ValueError(f"Attempting to convert array of shape {operand.shape} from "
                         f"{operand.dtype.name} of size {old} bits to {np.dtype(new_dtype).name}"
                         f" of size {new}, bits but {last} * {old} != {new}")
    return operand.shape[:-1]


def _bitcast_dtype_rule(operand, *, new_dtype):
    old = operand.dtype
    special = (np.bool_, np.complexfloating)
    if any(dtypes.issubdtype(d, t) for d in (old, new_dtype) for t in special) and \
            old != new_dtype:
        raise TypeError("lax.bitcast_convert_type does not support bool or complex values "
                        "unless the operand and destination types match. Got operand "
                        f"dtype={old.name}, new_dtype={np.dtype(new_dtype)!r}. Consider "
                        "using the arr.view() method instead.")
    return np.dtype(new_dtype)


def _bitcast_batch(axis_data, args, dims, *, new_dtype):
    (x,), (d,) = args, dims
    if _bit_width(new_dtype) > _bit_width(core.get_aval(x).dtype) and d == np.ndim(x) - 1:
        x, d = batching.moveaxis(x, d, 0), 0  # the last axis is consumed: move the batch off it
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


bitcast_convert_type_p = standard_primitive(_bitcast_shape_rule, _bitcast_dtype_rule,
                                            "bitcast_convert_type")
ad.defjvp_zero(bitcast_convert_type_p)
batching.defrule(bitcast_convert_type_p, _bitcast_batch)


@shr.keeps_operand_mesh
def _bitcast_sharding(operand, *, new_dtype):
    """The operand's layout; an axis of the narrower pieces added or consumed is unsplit."""
    old, new = _bit_width(operand.dtype), _bit_width(new_dtype)
    spec = shr.parts(operand)
    return spec if old == new else (*spec, None) if old > new else spec[:-1]


shr.defsharding(bitcast_convert_type_p, _bitcast_sharding)
mlir.register_lowering(bitcast_convert_type_p, lambda ctx, x, *, new_dtype: hlo.BitcastConvertOp(
    mlir.aval_to_ir_type(ctx.avals_out[0]), x).result)


# ---- reduce_precision ----------------------------------------------------------------------
def reduce_precision(operand: ArrayLike, exponent_bits: int, mantissa_bits: int) -> Array:
    """Round to a float format with the given exponent and mantissa bits (staying in the
    operand's dtype). Lowers to ``stablehlo.reduce_precision``."""
    return reduce_precision_p.bind(
        operand,
        exponent_bits=int(core.concrete_or_error(exponent_bits, "reduce_precision exponent")),
        mantissa_bits=int(core.concrete_or_error(mantissa_bits, "reduce_precision mantissa")))


def _reduce_precision_shape_rule(operand, *, exponent_bits, mantissa_bits):
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got {exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError("reduce_precision: mantissa_bits must be non-negative; got "
                         f"{mantissa_bits}")
    return operand.shape


def _reduce_precision_dtype_rule(operand, **params):
    check_dtype("reduce_precision", operand, _float)
    return operand.dtype


reduce_precision_p = standard_primitive(_reduce_precision_shape_rule,
                                        _reduce_precision_dtype_rule, "reduce_precision",
                                        lambda x, **_: x.weak_type)
ad.deflinear(reduce_precision_p, lambda ct, **params: [reduce_precision_p.bind(ct, **params)])
batching.defvectorized(reduce_precision_p)
shr.defsharding(reduce_precision_p, shr.unary_rule)
shr.defur(reduce_precision_p, shr.sharding_ur.keep_rule)
mlir.register_lowering(reduce_precision_p, lambda ctx, x, *, exponent_bits, mantissa_bits:
                       hlo.ReducePrecisionOp(x, exponent_bits, mantissa_bits).result)


# ---- copy ----------------------------------------------------------------------------------
def copy(x: ArrayLike) -> Array:
    """A copy of ``x`` in a new buffer (``jnp.array(x, copy=True)``); never simplified away.
    Lowers to nothing: XLA writes the result to a fresh buffer."""
    return copy_p.bind(x)


copy_p = core.Primitive("copy")
copy_p.def_impl(lambda x: dispatch.apply_primitive(copy_p, x))
copy_p.def_abstract_eval(lambda x: x)
ad.deflinear(copy_p, lambda ct: [copy_p.bind(ct)])
batching.defvectorized(copy_p)
shr.defsharding(copy_p, shr.unary_rule)
shr.defur(copy_p, shr.sharding_ur.keep_rule)
mlir.register_lowering(copy_p, lambda ctx, x: x)

__all__ = [
    "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "and_p", "not_p", "or_p", "xor_p",
    "bitcast_convert_type", "bitcast_convert_type_p", "clz", "clz_p", "copy", "copy_p",
    "mulhi", "mulhi_p", "nextafter", "nextafter_p", "population_count", "population_count_p",
    "reduce_precision", "reduce_precision_p", "shift_left", "shift_left_p",
    "shift_right_arithmetic", "shift_right_arithmetic_p", "shift_right_logical",
    "shift_right_logical_p",
]
