"""Elementwise primitives: arithmetic, comparisons, rounding, complex parts, and selection.

Operands of an n-ary primitive have equal shapes and dtypes (``jaxkit.numpy`` broadcasts and
promotes before calling these); a rank-0 operand may stand beside arrays and broadcasts (as in
JAX, ``mul a 2.0:f32[]``). The result is weakly typed only if every operand is. Each primitive
is one block: the wrapper, the primitive with its shape/dtype rule, then its JVP (or
transpose), batching and lowering rules. Exponentials, logarithms, trigonometric functions,
roots and ``pow`` are in ``elementwise_math.py``; bitwise logic, shifts, bit counts, bit casts
and ``nextafter`` in ``elementwise_bits.py``; special functions in ``elementwise_special.py``;
``clamp`` in ``clamp.py``.
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np

from jaxkit import core, dtypes, literals
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import chlo, hlo, ir
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax import sharding_ur
from jaxkit.lax.standard import (
    _any,
    _complex,
    _float,
    _inexact,
    _int,
    _int_or_bool,
    _num,
    _ordered,
    _signedint,
    broadcast_elementwise_shapes,
    check_dtype,
    standard_naryop,
    standard_primitive,
    standard_unop,
)
from jaxkit.lax.structural import _reduce_sum, broadcast_in_dim, reshape
from jaxkit.typing import Array, ArrayLike

# --------------------------------------------------------------------------------------------
# Helpers shared by the rules (also used by elementwise_math and elementwise_special)
# --------------------------------------------------------------------------------------------


def _unbroadcast(aval: core.ShapedArray, ct):
    """The cotangent of an operand that broadcast (from rank 0, or along size-1 dimensions):
    summed over the dimensions it was broadcast along, back to the operand's shape."""
    ct_shape = core.get_aval(ct).shape
    if ct_shape == aval.shape:
        return ct
    if not aval.shape:
        return _reduce_sum(ct, tuple(range(len(ct_shape))))
    axes = tuple(i for i, (a, c) in enumerate(zip(aval.shape, ct_shape)) if a != c)
    return reshape(_reduce_sum(ct, axes), aval.shape)


def _broadcast_to(x, shape):
    """A tangent of a broadcast operand (rank 0, or size-1 dimensions), at the output shape."""
    x_shape = core.get_aval(x).shape
    if x_shape == tuple(shape):
        return x
    return broadcast_in_dim(x, shape, tuple(range(len(x_shape))))


def _out_shape(*xs) -> tuple[int, ...]:
    """The shape of an elementwise result, the operands broadcast together."""
    return broadcast_elementwise_shapes("elementwise", *(core.get_aval(x).shape for x in xs))


def _bcast_rule(rule):
    """Wrap a ``defjvp`` rule so that its contribution has the output shape even when it is
    computed from the tangent of a rank-0 operand alone (contributions are summed)."""

    def wrapped(g, *primals, **params):
        return _broadcast_to(rule(g, *primals, **params), _out_shape(*primals))

    return wrapped


def _const(x, value) -> Any:
    """A rank-0 constant of ``x``'s dtype: a Python scalar (weakly typed) when ``x`` is a
    weakly typed scalar, as JAX's ``_const``, so rules keep a weak scalar's results weak."""
    aval = core.get_aval(x)
    if aval.weak_type and not aval.shape:
        v = dtypes.scalar_type_of(x)(value)
        if dtypes.dtype(v, canonicalize=True) == aval.dtype:
            return v
    # Typed, so a float64 made under x64 and used without keeps its constants float64 (a
    # plain NumPy array would be canonicalized to float32, as a user's is).
    return literals.TypedNdArray(np.array(value, dtype=aval.dtype))


def _one(x):
    """A rank-0 one of ``x``'s dtype, weakly typed when ``x`` is (JAX's ``_one``, a
    ``full_like``): the JVP rules written with it keep a weak primal's tangent weak."""
    aval = core.get_aval(x)
    return dtypes.scalar_type_of(x)(1) if aval.weak_type else np.array(1, dtype=aval.dtype)


def _full(x, value):
    """An array of ``x``'s shape and dtype filled with ``value``, laid out as ``x`` over
    Explicit mesh axes (JAX's ``full_like``)."""
    aval = core.get_aval(x)
    return broadcast_in_dim(np.array(value, aval.dtype), aval.shape, (),
                            out_sharding=getattr(aval, "_sharding", None))


def _zeros(x):
    return _full(x, 0)


def _ones(x):
    return _full(x, 1)


def _is_complex(x) -> bool:
    return dtypes.issubdtype(core.get_aval(x).dtype, np.complexfloating)


def _linear_binary_jvp(prim, y_alone):
    """JVP of add and sub, linear in both operands. A symbolic-zero tangent stays symbolic (no
    zero array is made, so none is left in grad jaxprs); ``y_alone(ty)`` is the output tangent
    when only the second operand's is nonzero."""

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        shape = core.get_aval(out).shape
        tx, ty = tangents
        if type(tx) is ad.Zero:
            if type(ty) is ad.Zero:
                return out, ad.Zero(core.get_aval(out).to_tangent_aval())
            return out, _broadcast_to(y_alone(ty), shape)
        if type(ty) is ad.Zero:
            return out, _broadcast_to(tx, shape)
        return out, _broadcast_to(prim.bind(tx, ty, **params), shape)

    return jvp


def _compare_type(dtype) -> str:
    if dtypes.issubdtype(dtype, np.inexact):
        return "FLOAT"
    if dtypes.issubdtype(dtype, np.signedinteger):
        return "SIGNED"
    return "UNSIGNED"


def _compare(x, y, direction: str, dtype):
    """``stablehlo.compare`` of two IR values of ``dtype``."""
    return hlo.CompareOp(x, y, hlo.ComparisonDirectionAttr.get(direction),
                         compare_type=hlo.ComparisonTypeAttr.get(_compare_type(dtype))).result


def _bool_result(*dts) -> np.dtype:
    return np.dtype(np.bool_)


# ---- add -----------------------------------------------------------------------------------
def add(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise addition. Lowers to ``stablehlo.add``."""
    return add_p.bind(x, y)


def _add_transpose(ct, x, y):
    return [_unbroadcast(x.aval, ct) if ad.is_undefined_primal(x) else None,
            _unbroadcast(y.aval, ct) if ad.is_undefined_primal(y) else None]


add_p = standard_naryop("add", [_num, _num])
shr.defsharding(add_p, shr.add_rule)
sharding_ur.defur(add_p, sharding_ur.add_rule)
ad.deflinear2(add_p, _add_transpose)
ad.defjvp_rule(add_p, _linear_binary_jvp(add_p, lambda ty: ty))
batching.defbroadcasting(add_p)
mlir.register_lowering(add_p, mlir.nary_lowering(hlo.AddOp))

# ---- add_any: the sum of two tangents/cotangents (the primitive lives in ad) ---------------
# Tangents of an extended dtype are summed by its own rule (Flax's fp8 meta dtype: ``max``).
def _add_any(x, y):
    dt = core.get_aval(x).dtype
    return dt.add(x, y) if dtypes.is_extended(dt) else add(x, y)


def _add_any_lowering(ctx, x, y):
    dt = ctx.avals_in[0].dtype
    if dtypes.is_extended(dt):
        return mlir.lower_fun(dt.add)(ctx, x, y)
    return mlir.nary_lowering(hlo.AddOp)(ctx, x, y)


ad.add_jaxvals_p.def_impl(_add_any)
ad.deflinear2(ad.add_jaxvals_p, lambda ct, x, y: [ct, ct])
batching.defbroadcasting(ad.add_jaxvals_p)
mlir.register_lowering(ad.add_jaxvals_p, _add_any_lowering, physical=True)


# ---- sub -----------------------------------------------------------------------------------
def sub(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise subtraction. Lowers to ``stablehlo.subtract``."""
    return sub_p.bind(x, y)


def _sub_transpose(ct, x, y):
    return [_unbroadcast(x.aval, ct) if ad.is_undefined_primal(x) else None,
            _unbroadcast(y.aval, neg(ct)) if ad.is_undefined_primal(y) else None]


sub_p = standard_naryop("sub", [_num, _num])
ad.deflinear2(sub_p, _sub_transpose)
ad.defjvp_rule(sub_p, _linear_binary_jvp(sub_p, lambda ty: neg(ty)))
batching.defbroadcasting(sub_p)
mlir.register_lowering(sub_p, mlir.nary_lowering(hlo.SubtractOp))


# ---- mul -----------------------------------------------------------------------------------
def mul(x: ArrayLike, y: ArrayLike, *, out_dtype: Any = None) -> Array:
    """Elementwise multiplication. With ``out_dtype`` the result has that dtype (the
    operands, which may then differ in dtype, are converted to it first). Lowers to
    ``stablehlo.multiply``."""
    return mul_p.bind(x, y, out_dtype=out_dtype)


def _mul_transpose_left(ct, x, y, *, out_dtype):
    """The cotangent of ``x`` (at its own dtype when ``out_dtype`` cast it)."""
    cast = None if out_dtype is None else x.aval.dtype
    return _unbroadcast(x.aval, mul(ct, y, out_dtype=cast))


def _mul_transpose_right(ct, x, y, *, out_dtype):
    cast = None if out_dtype is None else y.aval.dtype
    return _unbroadcast(y.aval, mul(x, ct, out_dtype=cast))


mul_p = standard_naryop("mul", [_num, _num])
mul_p.def_param_defaults(out_dtype=None)
sharding_ur.defur(mul_p, sharding_ur.mul_rule)
ad.defbilinear(mul_p, _mul_transpose_left, _mul_transpose_right)
batching.defbroadcasting(mul_p)
mlir.register_lowering(mul_p, mlir.nary_lowering(hlo.MulOp))


# ---- div -----------------------------------------------------------------------------------
def div(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise division; integer division rounds toward zero. Lowers to
    ``stablehlo.divide``."""
    return div_p.bind(x, y)


def _div_transpose(ct, x, y):
    if ad.is_undefined_primal(y):
        raise ValueError("div is not linear in its divisor and cannot be transposed with "
                         "respect to it")
    if type(ct) is ad.Zero:
        return [ad.Zero(x.aval), None]
    return [_unbroadcast(x.aval, div(ct, y)), None]


div_p = standard_naryop("div", [_num, _num])
ad.defjvp(div_p, lambda g, x, y: div(g, y),
          lambda g, x, y: mul(mul(neg(g), x), integer_pow(y, -2)))
ad.deftranspose(div_p, _div_transpose)
batching.defbroadcasting(div_p)
mlir.register_lowering(div_p, mlir.nary_lowering(hlo.DivOp))


# ---- rem -----------------------------------------------------------------------------------
def rem(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise remainder ``x - y * trunc(x / y)`` (sign of ``x``). Lowers to
    ``stablehlo.remainder``."""
    return rem_p.bind(x, y)


rem_p = standard_naryop("rem", [_int + _float, _int + _float])
ad.defjvp(rem_p, _bcast_rule(lambda g, x, y: g),
          lambda g, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))
batching.defbroadcasting(rem_p)
mlir.register_lowering(rem_p, mlir.nary_lowering(hlo.RemOp))


# ---- neg -----------------------------------------------------------------------------------
def neg(x: ArrayLike) -> Array:
    """Elementwise negation. Lowers to ``stablehlo.negate``."""
    return neg_p.bind(x)


neg_p = standard_unop("neg", _num)
ad.deflinear2(neg_p, lambda ct, x: [neg(ct)])
batching.defvectorized(neg_p)
mlir.register_lowering(neg_p, mlir.nary_lowering(hlo.NegOp))


# ---- max / min -----------------------------------------------------------------------------
def max(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise maximum (NaN-propagating; complex numbers compare lexicographically).
    Lowers to ``stablehlo.maximum``."""
    return max_p.bind(x, y)


def min(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise minimum (NaN-propagating; complex numbers compare lexicographically).
    Lowers to ``stablehlo.minimum``."""
    return min_p.bind(x, y)


def _balanced_eq(x, z, y):
    """1 where ``x == z`` (and ``y != z``), 1/2 where all three are equal, else 0: the
    derivative of max/min, which splits the tangent evenly at ties as JAX does."""
    return div(select(eq(x, z), _ones(z), _zeros(z)),
               select(eq(y, z), _full(z, 2), _ones(z)))


def minmax_hlo(op, direction: str):
    """A builder of ``op(x, y)`` (``hlo.MaxOp``/``hlo.MinOp``) on IR values that compares
    complex values lexicographically on (real, imag), as JAX: XLA has no complex max/min.
    Shared by the elementwise and the reduction lowerings; returns the op."""

    def build(x, y):
        if not isinstance(ir.RankedTensorType(x.type).element_type, ir.ComplexType):
            return op(x, y)
        rx, ry = hlo.RealOp(x).result, hlo.RealOp(y).result
        real_eq = _compare(rx, ry, "EQ", np.float32)
        real_cmp = _compare(rx, ry, direction, np.float32)
        imag_cmp = _compare(hlo.ImagOp(x).result, hlo.ImagOp(y).result, direction, np.float32)
        which = hlo.SelectOp(real_eq, imag_cmp, real_cmp).result
        return hlo.SelectOp(which, x, y)

    return build


def _minmax_lowering(op, direction):
    build = minmax_hlo(op, direction)

    def rule(ctx, x, y):
        x, y = mlir.broadcast_operands_to_output(ctx, (x, y))
        return build(x, y).result

    return rule


max_p = standard_naryop("max", [_any, _any])
ad.defjvp2(max_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
           lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
batching.defbroadcasting(max_p)
mlir.register_lowering(max_p, _minmax_lowering(hlo.MaxOp, "GT"))

min_p = standard_naryop("min", [_any, _any])
ad.defjvp2(min_p, lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
           lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
batching.defbroadcasting(min_p)
mlir.register_lowering(min_p, _minmax_lowering(hlo.MinOp, "LT"))


# ---- integer_pow ---------------------------------------------------------------------------
def integer_pow(x: ArrayLike, y: int) -> Array:
    """Elementwise ``x ** y`` for a static integer ``y``. Lowers to O(log y)
    ``stablehlo.multiply`` (and a ``stablehlo.divide`` for negative ``y``)."""
    return integer_pow_p.bind(x, y=int(core.concrete_or_error(y, "integer_pow exponent")))


def reciprocal(x: ArrayLike) -> Array:
    """Elementwise ``1 / x``, as ``integer_pow(x, -1)``."""
    return integer_pow(x, -1)


def _integer_pow_dtype_rule(x, *, y):
    check_dtype("integer_pow", x, _num)
    if y < 0 and dtypes.issubdtype(x.dtype, np.integer):
        raise TypeError(f"Integers cannot be raised to negative powers, got "
                        f"integer_pow({x.str_short()}, {y})")
    return x.dtype


def _integer_pow_jvp(g, x, *, y):
    if y == 0:
        return _zeros(g)
    if y == 1:
        return g
    if y == 2:
        return mul(g, mul(_const(x, y), x))
    return mul(g, mul(_const(x, y), integer_pow(x, y - 1)))


def _integer_pow_lowering(ctx, x, *, y):
    aval = ctx.avals_in[0]
    if y == 0:
        return mlir.full_like_aval(1, aval)
    # Square-and-multiply in the order JAX uses, so rounding matches.
    n, acc = -y if y < 0 else y, None
    while n > 0:
        if n & 1:
            acc = x if acc is None else hlo.MulOp(acc, x).result
        n >>= 1
        if n > 0:
            x = hlo.MulOp(x, x).result
    if y < 0:
        acc = hlo.DivOp(mlir.full_like_aval(1, aval), acc).result
    return acc


integer_pow_p = standard_primitive(lambda x, **_: x.shape, _integer_pow_dtype_rule,
                                   "integer_pow", lambda x, **_: x.weak_type)
ad.defjvp(integer_pow_p, _integer_pow_jvp)
batching.defvectorized(integer_pow_p)
shr.defsharding(integer_pow_p, shr.unary_rule)
mlir.register_lowering(integer_pow_p, _integer_pow_lowering)


# ---- square --------------------------------------------------------------------------------
def square(x: ArrayLike) -> Array:
    """Elementwise ``x * x``. Lowers to ``chlo.square`` (``stablehlo.multiply`` for
    integers)."""
    return square_p.bind(x)


def _square_lowering(ctx, x):
    if dtypes.issubdtype(ctx.avals_in[0].dtype, np.integer):
        return hlo.MulOp(x, x).result
    return chlo.SquareOp(x).result


square_p = standard_unop("square", _num)
ad.defjvp2(square_p, lambda g, ans, x: mul(g, mul(_const(x, 2), x)))
batching.defvectorized(square_p)
mlir.register_lowering(square_p, _square_lowering)


# ---- abs -----------------------------------------------------------------------------------
def abs(x: ArrayLike) -> Array:
    """Elementwise absolute value; the modulus (a real number) for complex input. Lowers to
    ``stablehlo.abs``."""
    return abs_p.bind(x)


def _abs_jvp(g, ans, x):
    if _is_complex(x):
        # d|x| = Re(conj(x) dx / |x|), with |x| = 0 replaced by 1 (the tangent is then 0).
        return real(mul(g, div(conj(x), _replace_zero(complex(ans, _zeros(ans))))))
    # A scalar zero, as JAX's rule compares with (``ge x 0.0``, no broadcast).
    return select(ge(x, _const(x, 0)), g, neg(g))


def _replace_zero(x):
    return select(eq(x, _zeros(x)), _ones(x), x)


abs_p = standard_unop("abs", _inexact + _signedint,
                      lambda dt: np.finfo(dt).dtype if dtypes.issubdtype(dt, np.complexfloating)
                      else dt)
ad.defjvp2(abs_p, _abs_jvp)
batching.defvectorized(abs_p)
mlir.register_lowering(abs_p, mlir.nary_lowering(hlo.AbsOp))


# ---- sign ----------------------------------------------------------------------------------
def sign(x: ArrayLike) -> Array:
    """Elementwise sign (-1, 0 or 1; ``x / |x|`` for complex). Lowers to ``stablehlo.sign``."""
    return sign_p.bind(x)


def _sign_lowering(ctx, x):
    aval = ctx.avals_in[0]
    if dtypes.issubdtype(aval.dtype, np.unsignedinteger):
        # stablehlo.sign is for signed numbers: an unsigned sign is x != 0.
        zero = mlir.full_like_aval(0, aval)
        return hlo.SelectOp(_compare(x, zero, "EQ", aval.dtype), zero,
                            mlir.full_like_aval(1, aval)).result
    return hlo.SignOp(x).result


sign_p = standard_unop("sign", _num)
ad.defjvp_zero(sign_p)
batching.defvectorized(sign_p)
mlir.register_lowering(sign_p, _sign_lowering)


# ---- floor / ceil --------------------------------------------------------------------------
def floor(x: ArrayLike) -> Array:
    """Elementwise floor. Lowers to ``stablehlo.floor``."""
    return floor_p.bind(x)


floor_p = standard_unop("floor", _float)
ad.defjvp_zero(floor_p)
batching.defvectorized(floor_p)
mlir.register_lowering(floor_p, mlir.nary_lowering(hlo.FloorOp))


def ceil(x: ArrayLike) -> Array:
    """Elementwise ceiling. Lowers to ``stablehlo.ceil``."""
    return ceil_p.bind(x)


ceil_p = standard_unop("ceil", _float)
ad.defjvp_zero(ceil_p)
batching.defvectorized(ceil_p)
mlir.register_lowering(ceil_p, mlir.nary_lowering(hlo.CeilOp))


# ---- round ---------------------------------------------------------------------------------
class RoundingMethod(enum.IntEnum):
    """How ``round`` breaks ties: away from zero (C's ``round``) or to the nearest even
    integer (NumPy's ``round``)."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x: ArrayLike,
          rounding_method: RoundingMethod = RoundingMethod.AWAY_FROM_ZERO) -> Array:
    """Elementwise rounding to the nearest integer. Lowers to ``stablehlo.round_nearest_afz``
    or ``stablehlo.round_nearest_even``."""
    return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


def _round_lowering(ctx, x, *, rounding_method):
    if rounding_method == RoundingMethod.AWAY_FROM_ZERO:
        return hlo.RoundOp(x).result
    return hlo.RoundNearestEvenOp(x).result


round_p = standard_unop("round", _float)
ad.defjvp_zero(round_p)
batching.defvectorized(round_p)
mlir.register_lowering(round_p, _round_lowering)


# ---- is_finite -----------------------------------------------------------------------------
def is_finite(x: ArrayLike) -> Array:
    """Elementwise test for neither infinite nor NaN. Lowers to ``stablehlo.is_finite``."""
    return is_finite_p.bind(x)


is_finite_p = standard_unop("is_finite", _float, _bool_result)
ad.defjvp_zero(is_finite_p)
batching.defvectorized(is_finite_p)
mlir.register_lowering(is_finite_p, mlir.nary_lowering(hlo.IsFiniteOp))


# ---- comparisons: eq, ne, lt, le, gt, ge ---------------------------------------------------
def eq(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x == y``. Lowers to ``stablehlo.compare EQ``."""
    return eq_p.bind(x, y)


def ne(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x != y``. Lowers to ``stablehlo.compare NE``."""
    return ne_p.bind(x, y)


def lt(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x < y``. Lowers to ``stablehlo.compare LT``."""
    return lt_p.bind(x, y)


def le(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x <= y``. Lowers to ``stablehlo.compare LE``."""
    return le_p.bind(x, y)


def gt(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x > y``. Lowers to ``stablehlo.compare GT``."""
    return gt_p.bind(x, y)


def ge(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x >= y``. Lowers to ``stablehlo.compare GE``."""
    return ge_p.bind(x, y)


def _compare_primitive(name: str, accepted, direction: str, total_order: bool = False,
                       allow_extended: bool = False) -> core.Primitive:
    prim = standard_naryop(name, [accepted, accepted], _bool_result,
                           allow_extended=allow_extended)
    ad.defjvp_zero(prim)
    batching.defbroadcasting(prim)
    mlir.register_lowering(prim, mlir.compare_lowering(direction, total_order),
                           physical=allow_extended)
    return prim


# keys compare for equality (whole keys), as in JAX; they have no order
eq_p = _compare_primitive("eq", _any, "EQ", allow_extended=True)
ne_p = _compare_primitive("ne", _any, "NE", allow_extended=True)
lt_p = _compare_primitive("lt", _ordered, "LT")
le_p = _compare_primitive("le", _ordered, "LE")
gt_p = _compare_primitive("gt", _ordered, "GT")
ge_p = _compare_primitive("ge", _ordered, "GE")


# ---- real / imag / complex / conj ----------------------------------------------------------
def _complex_basetype(dt) -> np.dtype:
    return np.finfo(dt).dtype


def real(x: ArrayLike) -> Array:
    """Elementwise real part of a complex array. Lowers to ``stablehlo.real``."""
    return real_p.bind(x)


real_p = standard_unop("real", _complex, _complex_basetype)
# A rank-0 zero, as JAX's (a literal operand in jaxprs, broadcast by the lowering).
ad.deflinear2(real_p, lambda ct, x: [complex(ct, np.zeros((), ct.dtype)[()])])
batching.defvectorized(real_p)
mlir.register_lowering(real_p, mlir.nary_lowering(hlo.RealOp))


def imag(x: ArrayLike) -> Array:
    """Elementwise imaginary part of a complex array. Lowers to ``stablehlo.imag``."""
    return imag_p.bind(x)


imag_p = standard_unop("imag", _complex, _complex_basetype)
ad.deflinear2(imag_p, lambda ct, x: [complex(np.zeros((), ct.dtype)[()], neg(ct))])
batching.defvectorized(imag_p)
mlir.register_lowering(imag_p, mlir.nary_lowering(hlo.ImagOp))


def complex(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x + i y`` from float32 (float64) parts. Lowers to
    ``stablehlo.complex``."""
    return complex_p.bind(x, y)


def _complex_transpose(ct, x, y):
    return [_unbroadcast(x.aval, real(ct)) if ad.is_undefined_primal(x) else None,
            _unbroadcast(y.aval, imag(neg(ct))) if ad.is_undefined_primal(y) else None]


_complex_parts = (np.float32, np.float64)
complex_p = standard_naryop("complex", [_complex_parts, _complex_parts],
                            lambda dt, _: dtypes.to_complex_dtype(dt))
ad.deflinear2(complex_p, _complex_transpose)
batching.defbroadcasting(complex_p)
mlir.register_lowering(complex_p, mlir.nary_lowering(hlo.ComplexOp))


def conj(x: ArrayLike) -> Array:
    """Elementwise complex conjugate (a real input becomes complex). Lowers to
    ``stablehlo.complex`` of the real part and the negated imaginary part."""
    return conj_p.bind(x, input_dtype=core.get_aval(x).dtype)


def _conj_transpose(ct, x, *, input_dtype):
    if dtypes.issubdtype(input_dtype, np.complexfloating):
        return [conj(ct)]
    return [real(ct)]


def _conj_lowering(ctx, x, *, input_dtype):
    aval = ctx.avals_in[0]
    if dtypes.issubdtype(aval.dtype, np.complexfloating):
        return hlo.ComplexOp(hlo.RealOp(x).result, hlo.NegOp(hlo.ImagOp(x).result).result).result
    return hlo.ComplexOp(x, mlir.full_like_aval(0, aval)).result


conj_p = standard_unop("conj", _complex_parts + _complex, dtypes.to_complex_dtype)
ad.deflinear2(conj_p, _conj_transpose)
batching.defvectorized(conj_p)
mlir.register_lowering(conj_p, _conj_lowering)


# ---- select_n ------------------------------------------------------------------------------
def select(pred: ArrayLike, on_true: ArrayLike, on_false: ArrayLike) -> Array:
    """``on_true`` where ``pred`` else ``on_false`` (``select_n(pred, on_false, on_true)``).
    Lowers to ``stablehlo.select``."""
    return select_n_p.bind(pred, on_false, on_true)


def select_n(which: ArrayLike, *cases: ArrayLike) -> Array:
    """``cases[which]`` elementwise; ``which`` is boolean (two cases at most) or integer, a
    scalar or of the cases' shape. Lowers to a tree of ``stablehlo.select``."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    return select_n_p.bind(which, *cases)


def _select_n_shape_rule(which, *cases):
    if not cases:
        raise TypeError("select must have at least one case")
    if any(c.shape != cases[0].shape for c in cases[1:]):
        raise TypeError("select cases must have the same shapes, got "
                        f"[{', '.join(str(c.shape) for c in cases)}].")
    if which.shape and which.shape != cases[0].shape:
        raise TypeError("select `which` must be scalar or have the same shape as cases, got "
                        f"`which` shape {which.shape} but case shape {cases[0].shape}.")
    return cases[0].shape


def _select_n_dtype_rule(which, *cases):
    if any(c.dtype != cases[0].dtype for c in cases[1:]):
        raise TypeError("lax.select requires arguments to have the same dtypes, got "
                        f"{', '.join(c.dtype.name for c in cases)}. (Tip: jaxkit.numpy.where "
                        "is a similar function that does automatic type promotion on inputs).")
    if not any(dtypes.issubdtype(which.dtype, t) for t in _int_or_bool):
        raise TypeError(f"select `which` must be boolean or integer type, got "
                        f"{which.dtype.name}.")
    if which.dtype == np.bool_ and len(cases) > 2:
        raise TypeError("select with boolean `which` cannot have > 2 cases.")
    return cases[0].dtype


def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    case_tangents = tangents[1:]
    if all(type(t) is ad.Zero for t in case_tangents):
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    ts = [ad.instantiate_zeros(t) for t in case_tangents]
    return out, select_n_p.bind(which, *ts)


def _select_n_transpose(ct, which, *cases):
    if ad.is_undefined_primal(which):
        raise ValueError("select_n cannot be transposed with respect to `which`")
    if type(ct) is ad.Zero:
        return [None] + [ad.Zero(c.aval) if ad.is_undefined_primal(c) else None
                         for c in cases]
    zeros = _zeros(ct)
    if core.get_aval(which).dtype == np.bool_:
        cts = [select_n_p.bind(which, ct, zeros), select_n_p.bind(which, zeros, ct)]
    else:
        cts = [select_n_p.bind(eq(which, _const(which, i)), zeros, ct)
               for i in range(len(cases))]
    return [None] + [t if ad.is_undefined_primal(c) else None for t, c in zip(cts, cases)]


def _select_n_batch(axis_data, args, dims):
    which, *cases = args
    which_d, *case_ds = dims
    size = batching.batch_size(args, dims)
    if all(d == which_d for d in case_ds):  # everything batched along the same axis
        if np.shape(which) != np.shape(cases[0]):  # a per-example scalar `which`
            which = broadcast_in_dim(which, np.shape(cases[0]), (which_d,))
        return select_n_p.bind(which, *cases), which_d
    if np.ndim(which) == 0 and all(d is not batching.not_mapped for d in case_ds):
        d0 = case_ds[0]
        cases = [batching.moveaxis(c, d, d0) for c, d in zip(cases, case_ds)]
        return select_n_p.bind(which, *cases), d0
    which = batching.bdim_at_front(which, which_d, size) if np.shape(which) else which
    if any(np.shape(c) for c in cases):
        cases = [batching.bdim_at_front(c, d, size) for c, d in zip(cases, case_ds)]
    if 0 < np.ndim(which) < np.ndim(cases[0]):  # a batched per-example scalar `which`
        which = broadcast_in_dim(which, np.shape(cases[0]), (0,))
    if np.ndim(which) > np.ndim(cases[0]):  # batched `which`, unbatched scalar cases
        cases = [broadcast_in_dim(c, np.shape(which), ()) for c in cases]
    return select_n_p.bind(which, *cases), 0


def _select_n_lowering(ctx, which, *cases):
    which_aval = ctx.avals_in[0]
    if len(cases) == 1:
        return cases[0]
    if which_aval.dtype == np.bool_:
        return hlo.SelectOp(which, cases[1], cases[0]).result

    def tree(offset, cases):  # binary search on `which`, as JAX lowers it
        if len(cases) == 1:
            return cases[0]
        mid = len(cases) // 2
        pred = _compare(which, mlir.full_like_aval(offset + mid, which_aval), "LT",
                        which_aval.dtype)
        return hlo.SelectOp(pred, tree(offset, cases[:mid]),
                            tree(offset + mid, cases[mid:])).result

    return tree(0, cases)


select_n_p = standard_primitive(_select_n_shape_rule, _select_n_dtype_rule, "select_n",
                                lambda which, *cases: all(c.weak_type for c in cases))
ad.defjvp_rule(select_n_p, _select_n_jvp)
ad.deftranspose(select_n_p, _select_n_transpose)
batching.defrule(select_n_p, _select_n_batch)
shr.defsharding(select_n_p, shr.select_n_rule)
sharding_ur.defur(select_n_p, sharding_ur.select_n_rule)
mlir.register_lowering(select_n_p, _select_n_lowering)


__all__ = [
    "RoundingMethod", "abs", "abs_p", "add", "add_p", "ceil", "ceil_p", "complex", "complex_p",
    "conj", "conj_p", "div", "div_p", "eq", "eq_p", "floor", "floor_p", "ge", "ge_p", "gt", "gt_p",
    "imag", "imag_p", "integer_pow", "integer_pow_p", "is_finite", "is_finite_p", "le", "le_p",
    "lt", "lt_p", "max", "max_p", "min", "min_p", "mul", "mul_p", "ne", "ne_p", "neg", "neg_p",
    "real", "real_p", "reciprocal", "rem", "rem_p", "round", "round_p", "select", "select_n",
    "select_n_p", "sign", "sign_p", "square", "square_p", "sub", "sub_p",
]
