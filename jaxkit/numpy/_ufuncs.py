"""Elementwise functions of ``jax.numpy`` (NumPy's ufuncs) with JAX's dtype semantics.

Each function promotes its arguments (``promote_args*``: weak-type aware dtype promotion, then
broadcasting), then calls ``jaxkit.lax``. The integer and float semantics follow JAX, e.g.
``floor_divide`` and ``remainder`` round towards minus infinity, ``power`` with a concrete
integer exponent is ``lax.integer_pow``, ``true_divide`` of integers gives a float.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.transforms.custom_derivatives import custom_jvp
from jaxkit.numpy._jitted import alias, jitted
from jaxkit.numpy._promotion import (
    asarray,
    broadcast_all,
    check_arraylike,
    check_no_float0s,
    convert,
    ensure_arraylike,
    promote_args,
    promote_args_inexact,
    promote_args_numeric,
    promote_dtypes,
    promote_dtypes_inexact,
    promote_dtypes_numeric,
    promote_shapes,
)
from jaxkit.typing import Array, ArrayLike


def _scalar_type_of(dt: np.dtype) -> type:
    if dt == np.bool_:
        return bool
    if dtypes.issubdtype(dt, np.integer):
        return int
    if dtypes.issubdtype(dt, np.floating):
        return float
    return complex


def _const(x: Any, value: Any) -> Any:
    """JAX's ``lax._const``: a constant of the dtype of ``x``; a weakly typed Python scalar if
    ``x`` is a weak scalar, else a strongly typed NumPy scalar."""
    dt = dtypes.dtype(x)
    if np.ndim(x) == 0 and dtypes.is_weakly_typed(x):
        typ = _scalar_type_of(dt)
        val = typ(value)
        if dtypes.dtype(val) == dt:
            return val
    return _strong(x, value)


def _strong(x: Any, value: Any) -> np.generic:
    """A strongly typed NumPy scalar of the dtype of ``x`` (JAX's ``_constant_like``)."""
    dt = dtypes.dtype(x)
    return np.asarray(value).astype(dt)[()]


def _lit(x: Any, value: Any) -> Any:
    """A Python literal as a jnp operation would see it beside ``x``: the dtype of ``x``,
    weak if ``x`` is."""
    return convert(value, dtypes.dtype(x), dtypes.is_weakly_typed(x))


def _dtype(x: Any) -> np.dtype:
    return dtypes.dtype(x, canonicalize=True)


def _isnan(x: Array) -> Array:
    return lax.ne(x, x)


@jitted(inline=False)
def _where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Array:
    """``jnp.where(condition, x, y)``: ``x`` where ``condition`` is true, else ``y``. A nested
    ``jit`` named ``_where`` when traced, as in JAX (which jits it so that eager calls with
    scalar branches do not materialize broadcast constants)."""
    check_arraylike("where", condition, x, y)
    if _dtype(condition) != np.bool_:
        condition = lax.ne(condition, _const(condition, 0))
    x, y = promote_dtypes(x, y)
    if np.ndim(condition) == 0:
        # select_n takes a scalar predicate as it is: only the branches are broadcast.
        x, y = broadcast_all("where", x, y)
    else:
        condition, x, y = broadcast_all("where", condition, x, y)
    # An empty result needs no select (JAX returns the broadcast ``x``).
    return x if 0 in np.shape(x) else lax.select(condition, x, y)


where3 = _where


def _to_bool(x: Array) -> Array:
    return x if _dtype(x) == np.bool_ else lax.ne(x, _const(x, 0))


def _unary_inexact(name: str, lax_name: str) -> Callable[[ArrayLike], Array]:
    def fn(x: ArrayLike, /) -> Array:
        return getattr(lax, lax_name)(*promote_args_inexact(name, x))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``jnp.{name}``: elementwise ``lax.{lax_name}`` after promotion to an "
                  "inexact dtype.")
    return jitted(fn)


exp = _unary_inexact("exp", "exp")
exp2 = _unary_inexact("exp2", "exp2")
log = _unary_inexact("log", "log")
expm1 = _unary_inexact("expm1", "expm1")
log1p = _unary_inexact("log1p", "log1p")
sin = _unary_inexact("sin", "sin")
cos = _unary_inexact("cos", "cos")
tan = _unary_inexact("tan", "tan")
arcsin = _unary_inexact("arcsin", "asin")
arccos = _unary_inexact("arccos", "acos")
arctan = _unary_inexact("arctan", "atan")
sinh = _unary_inexact("sinh", "sinh")
cosh = _unary_inexact("cosh", "cosh")
arcsinh = _unary_inexact("arcsinh", "asinh")
tanh = _unary_inexact("tanh", "tanh")
arctanh = _unary_inexact("arctanh", "atanh")
sqrt = _unary_inexact("sqrt", "sqrt")
cbrt = _unary_inexact("cbrt", "cbrt")


@jitted(inline=False)
def arccosh(x: ArrayLike, /) -> Array:
    """``jnp.arccosh``: inverse hyperbolic cosine (principal branch for complex inputs)."""
    result = lax.acosh(*promote_args_inexact("arccosh", x))
    if dtypes.issubdtype(_dtype(result), np.complexfloating):
        result = where3(lax.lt(lax.real(result), _const(lax.real(result), 0)),
                        lax.neg(result), result)
    return result


# JAX defines its aliases as functions of their own (named so, ``jit_acos`` programs).
acos, acosh, asin, asinh = (alias(arccos, "acos"), alias(arccosh, "acosh"),
                            alias(arcsin, "asin"), alias(arcsinh, "asinh"))
atan, atanh = alias(arctan, "atan"), alias(arctanh, "atanh")


@jitted
def fabs(x: ArrayLike, /) -> Array:
    """``jnp.fabs``: absolute value as a float (complex inputs are an error)."""
    x = ensure_arraylike("fabs", x)
    if dtypes.issubdtype(x.dtype, np.complexfloating):
        raise TypeError("ufunc 'fabs' does not support complex dtypes")
    return lax.abs(*promote_args_inexact("fabs", x))


@jitted
def bitwise_not(x: ArrayLike, /) -> Array:
    """``jnp.bitwise_not``: bitwise (logical, for booleans) NOT."""
    return lax.bitwise_not(*promote_args("bitwise_not", x))


invert, bitwise_invert = alias(bitwise_not, "invert"), alias(bitwise_not, "bitwise_invert")


@jitted
def negative(x: ArrayLike, /) -> Array:
    """``jnp.negative``: ``-x``."""
    return lax.neg(*promote_args("negative", x))


@jitted
def positive(x: ArrayLike, /) -> Array:
    """``jnp.positive``: ``+x`` (a copy)."""
    return ensure_arraylike("positive", x)


@jitted
def sign(x: ArrayLike, /) -> Array:
    """``jnp.sign``: -1, 0 or 1 (``x / |x|`` for complex ``x``)."""
    return lax.sign(*promote_args("sign", x))


@jitted
def floor(x: ArrayLike, /) -> Array:
    """``jnp.floor``: round towards minus infinity (integers are returned unchanged)."""
    x = ensure_arraylike("floor", x)
    if dtypes.isdtype(x.dtype, ("integral", "bool")):
        return x
    return lax.floor(*promote_args_inexact("floor", x))


@jitted
def ceil(x: ArrayLike, /) -> Array:
    """``jnp.ceil``: round towards plus infinity (integers are returned unchanged)."""
    x = ensure_arraylike("ceil", x)
    if dtypes.isdtype(x.dtype, ("integral", "bool")):
        return x
    return lax.ceil(*promote_args_inexact("ceil", x))


@jitted
def add(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.add``: ``x + y`` (logical or for booleans)."""
    x, y = promote_args("add", x, y)
    return lax.bitwise_or(x, y) if _dtype(x) == np.bool_ else lax.add(x, y)


@jitted
def multiply(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.multiply``: ``x * y`` (logical and for booleans)."""
    x, y = promote_args("multiply", x, y)
    return lax.bitwise_and(x, y) if _dtype(x) == np.bool_ else lax.mul(x, y)


@jitted
def subtract(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.subtract``: ``x - y``."""
    return lax.sub(*promote_args("subtract", x, y))


@jitted
def bitwise_and(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.bitwise_and``: ``x & y``."""
    return lax.bitwise_and(*promote_args("bitwise_and", x, y))


@jitted
def bitwise_or(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.bitwise_or``: ``x | y``."""
    return lax.bitwise_or(*promote_args("bitwise_or", x, y))


@jitted
def bitwise_xor(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.bitwise_xor``: ``x ^ y``."""
    return lax.bitwise_xor(*promote_args("bitwise_xor", x, y))


@jitted
def left_shift(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.left_shift``: ``x << y``."""
    return lax.shift_left(*promote_args_numeric("left_shift", x, y))


bitwise_left_shift = alias(left_shift, "bitwise_left_shift")


@jitted
def right_shift(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.right_shift``: ``x1 >> x2`` (logical for unsigned, arithmetic for signed)."""
    x1, x2 = promote_args_numeric("right_shift", x1, x2)
    if dtypes.issubdtype(_dtype(x1), np.unsignedinteger):
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


bitwise_right_shift = alias(right_shift, "bitwise_right_shift")


@jitted(inline=False)
def bitwise_count(x: ArrayLike, /) -> Array:
    """``jnp.bitwise_count``: the number of 1 bits of ``|x|``, as uint8."""
    x, = promote_args_numeric("bitwise_count", x)
    return lax.convert_element_type(lax.population_count(absolute(x)), np.uint8)


@jitted
def equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.equal``: ``x == y``."""
    return lax.eq(*promote_args("equal", x, y))


@jitted
def not_equal(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.not_equal``: ``x != y``."""
    return lax.ne(*promote_args("not_equal", x, y))


def _complex_comparison(lax_op: Callable, x: Array, y: Array) -> Array:
    # Complex numbers are ordered lexicographically (real part first), as NumPy.
    if dtypes.issubdtype(_dtype(x), np.complexfloating):
        return lax.select(lax.eq(lax.real(x), lax.real(y)), lax_op(lax.imag(x), lax.imag(y)),
                          lax_op(lax.real(x), lax.real(y)))
    return lax_op(x, y)


def _comparison(name: str, lax_name: str) -> Callable[[ArrayLike, ArrayLike], Array]:
    def fn(x: ArrayLike, y: ArrayLike, /) -> Array:
        x, y = promote_args(name, x, y)
        if dtypes.issubdtype(_dtype(x), np.complexfloating) and _shape(x) != _shape(y):
            x, y = broadcast_all(name, x, y)  # lax.select needs equal shapes
        return _complex_comparison(getattr(lax, lax_name), x, y)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``jnp.{name}``: elementwise ``lax.{lax_name}`` after promotion."
    return jitted(fn)


def _shape(x: Any) -> tuple[int, ...]:
    return core.get_aval(x).shape


greater_equal = _comparison("greater_equal", "ge")
greater = _comparison("greater", "gt")
less_equal = _comparison("less_equal", "le")
less = _comparison("less", "lt")


@jitted
def arctan2(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.arctan2``: the angle of the point ``(x2, x1)``."""
    return lax.atan2(*promote_args_inexact("arctan2", x1, x2))


atan2 = alias(arctan2, "atan2")


@jitted
def minimum(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.minimum``: elementwise minimum (NaN propagates)."""
    return lax.min(*promote_args("minimum", x, y))


@jitted
def maximum(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.maximum``: elementwise maximum (NaN propagates)."""
    return lax.max(*promote_args("maximum", x, y))


@jitted
def float_power(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.float_power``: ``x ** y`` computed in an inexact dtype."""
    return lax.pow(*promote_args_inexact("float_power", x, y))


@jitted
def nextafter(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.nextafter``: the next representable value after ``x`` towards ``y``."""
    return lax.nextafter(*promote_args_inexact("nextafter", x, y))


@jitted
def logical_and(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.logical_and``."""
    return lax.bitwise_and(*map(_to_bool, promote_args("logical_and", x, y)))


@jitted
def logical_or(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.logical_or``."""
    return lax.bitwise_or(*map(_to_bool, promote_args("logical_or", x, y)))


@jitted
def logical_xor(x: ArrayLike, y: ArrayLike, /) -> Array:
    """``jnp.logical_xor``."""
    return lax.bitwise_xor(*map(_to_bool, promote_args("logical_xor", x, y)))


@jitted
def logical_not(x: ArrayLike, /) -> Array:
    """``jnp.logical_not``."""
    return lax.bitwise_not(*map(_to_bool, promote_args("logical_not", x)))


@jitted
def absolute(x: ArrayLike, /) -> Array:
    """``jnp.absolute``: ``|x|`` (the modulus, a real number, for complex ``x``)."""
    x = ensure_arraylike("absolute", x)
    dt = x.dtype
    if dt == np.bool_ or dtypes.issubdtype(dt, np.unsignedinteger):
        return x
    return lax.abs(x)


abs = alias(absolute, "abs")


@jitted(inline=False)
def rint(x: ArrayLike, /) -> Array:
    """``jnp.rint``: round to the nearest integer, ties to even (integers become floats)."""
    x = ensure_arraylike("rint", x)
    dt = x.dtype
    if dt == np.bool_ or dtypes.issubdtype(dt, np.integer):
        return lax.convert_element_type(x, dtypes.default_float_dtype())
    if dtypes.issubdtype(dt, np.complexfloating):
        return lax.complex(rint(lax.real(x)), rint(lax.imag(x)))
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


@jitted(inline=False)
def signbit(x: ArrayLike, /) -> Array:
    """``jnp.signbit``: whether the sign bit is set (true for -0.0)."""
    x, = promote_args("signbit", x)
    dt = _dtype(x)
    if dtypes.issubdtype(dt, np.integer):
        return lax.lt(x, _const(x, 0))
    if dt == np.bool_:
        return lax.full_like(x, False, dtype=np.bool_)
    if not dtypes.issubdtype(dt, np.floating):
        raise ValueError(f"jax.numpy.signbit is not well defined for {dt}")
    info = dtypes.finfo(dt)
    int_type = {16: np.int16, 32: np.int32, 64: np.int64}.get(info.bits)
    if int_type is None:
        raise NotImplementedError("jax.numpy.signbit only supports 16, 32, and 64-bit types.")
    # The sign bit shifted down to bit 0, as JAX's (an arithmetic shift: -1 or 0).
    bits = lax.bitcast_convert_type(x, int_type)
    return lax.convert_element_type(bits >> (info.nexp + info.nmant), np.bool_)


@jitted(inline=False)
def copysign(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.copysign``: ``|x1|`` with the sign of ``x2``."""
    x1, x2 = promote_args_inexact("copysign", x1, x2)
    if dtypes.issubdtype(_dtype(x1), np.complexfloating):
        raise TypeError("copysign does not support complex-valued inputs")
    return where3(signbit(x2), -lax.abs(x1), lax.abs(x1))


@jitted
def true_divide(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.true_divide``: ``x1 / x2`` in an inexact dtype."""
    return lax.div(*promote_args_inexact("true_divide", x1, x2))


divide = true_divide


def _float_divmod(x1: Array, x2: Array) -> tuple[Array, Array]:
    mod = lax.rem(x1, x2)
    x1_corrected = where3(lax.eq(x2, _const(x2, 0)), x1, lax.sub(x1, mod))
    div = lax.div(x1_corrected, x2)
    ind = lax.bitwise_and(lax.ne(mod, _const(mod, 0)), lax.ne(lax.sign(x2), lax.sign(mod)))
    mod = lax.select(ind, lax.add(mod, x2), mod)
    div = lax.select(ind, lax.sub(div, _lit(div, 1)), div)
    return lax.round(div), mod


# floor_divide and remainder are plain jits, as JAX's: traced, they stage
# ``jit[name=floor_divide]``/``jit[name=remainder]``, and a scalar operand stays rank 0 (lax's
# binary operations take it beside an array), as in JAX's programs.
@jitted(inline=False)
def floor_divide(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.floor_divide``: ``x1 // x2``, rounding towards minus infinity."""
    x1, x2 = promote_args_numeric("floor_divide", x1, x2)
    dt = _dtype(x1)
    if dtypes.issubdtype(dt, np.unsignedinteger):
        return lax.div(x1, x2)
    if dtypes.issubdtype(dt, np.integer):
        quotient = lax.div(x1, x2)
        select = lax.bitwise_and(lax.ne(lax.sign(x1), lax.sign(x2)),
                                 lax.ne(lax.rem(x1, x2), _const(x1, 0)))
        return where3(select, lax.sub(quotient, _lit(quotient, 1)), quotient)
    if dtypes.issubdtype(dt, np.complexfloating):
        raise TypeError("floor_divide does not support complex-valued inputs")
    return _float_divmod(x1, x2)[0]


def _same_shape(name: str, *args: Any) -> list:
    """Broadcast rank-0 operands too (needed before ``lax.select``)."""
    shapes = {_shape(a) for a in args}
    return list(args) if len(shapes) == 1 else broadcast_all(name, *args)


@jitted(inline=False)
def remainder(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.remainder``: ``x1 % x2`` with the sign of ``x2`` (Python's ``%``)."""
    x1, x2 = promote_args_numeric("remainder", x1, x2)
    zero = _const(x1, 0)
    if dtypes.issubdtype(_dtype(x2), np.integer):
        x2 = where3(lax.eq(x2, _const(x2, 0)), lax.full_like(x2, 1), x2)
    trunc_mod = lax.rem(x1, x2)
    trunc_mod_not_zero = lax.ne(trunc_mod, zero)
    do_plus = lax.bitwise_and(lax.ne(lax.lt(trunc_mod, zero), lax.lt(x2, zero)),
                              trunc_mod_not_zero)
    return lax.select(do_plus, lax.add(trunc_mod, x2), trunc_mod)


mod = remainder


@jitted(inline=False)
def divmod(x1: ArrayLike, x2: ArrayLike, /) -> tuple[Array, Array]:
    """``jnp.divmod``: ``(x1 // x2, x1 % x2)``."""
    x1, x2 = promote_args_numeric("divmod", x1, x2)
    if dtypes.issubdtype(_dtype(x1), np.integer):
        return floor_divide(x1, x2), remainder(x1, x2)
    return _float_divmod(x1, x2)


@jitted(inline=False)
def fmod(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.fmod``: C's ``fmod`` (the remainder has the sign of ``x1``)."""
    check_arraylike("fmod", x1, x2)
    if dtypes.issubdtype(dtypes.result_type(x1, x2), np.integer):
        x2 = where3(lax.eq(x2, _const(x2, 0)), lax.full_like(x2, 1), x2)
    return lax.rem(*promote_args_numeric("fmod", x1, x2))


def power(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.power``: ``x1 ** x2``. A concrete integer exponent gives ``lax.integer_pow``;
    integer bases with integer exponents are computed by repeated squaring."""
    check_arraylike("power", x1, x2)
    check_no_float0s("power", x1, x2)
    if not isinstance(x2, core.Tracer):
        try:
            x2_int = operator.index(x2)
        except TypeError:
            pass
        else:
            x1, = promote_dtypes_numeric(x1)
            return lax.integer_pow(x1, x2_int)
    x1, x2 = promote_shapes("power", x1, x2)
    x1_, x2_ = promote_args_numeric("power", x1, x2)
    if dtypes.issubdtype(_dtype(x1_), np.integer) or _dtype(x1_) == np.bool_:
        return _pow_int_int(*_same_shape("power", x1_, x2_))
    d1, d2 = _dtype(x1), _dtype(x2)
    if dtypes.issubdtype(d1, np.inexact) and dtypes.issubdtype(d2, np.integer):
        return lax.pow(x1, x2)
    return lax.pow(x1_, x2_)


pow = power


def _pow_int_int(x1: Array, x2: Array) -> Array:
    bits = 6  # more would overflow for any |x1| > 1
    zero, one = _strong(x2, 0), _strong(x2, 1)
    acc = where3(lax.bitwise_and(lax.eq(x1, _strong(x1, 0)), lax.ne(x2, zero)), zero, one)
    for _ in range(bits):
        acc = where3(lax.ne(lax.bitwise_and(x2, one), zero), lax.mul(acc, x1), acc)
        x1 = lax.mul(x1, x1)
        x2 = lax.shift_right_logical(x2, one)
    return acc


def _replace_inf(x: Array) -> Array:
    return lax.select(isposinf(real(x)), lax.full_like(x, 0), x)


def _wrap_between(x: Array, a: float) -> Array:
    """``x`` wrapped into ``[-a, a)``."""
    rem = lax.rem(lax.add(x, _const(x, a)), _const(x, 2 * a))
    rem = lax.select(lax.lt(rem, _const(x, 0)), lax.add(rem, _const(x, 2 * a)), rem)
    return lax.sub(rem, _const(x, a))


def _complex_logaddexp(x1: Array, x2: Array, exp, scale: float, period: float) -> Array:
    # JAX's complex branch: amax + scale*log1p(exp(x1 + x2 - 2 amax)), the imaginary part
    # wrapped to one period (the real-valued form takes abs of the difference, which a complex
    # number does not fit).
    amax = lax.max(x1, x2)
    delta = lax.sub(lax.add(x1, x2), lax.mul(amax, _const(amax, 2)))
    out = lax.add(amax, lax.mul(_const(amax, scale), lax.log1p(exp(delta))))
    return lax.complex(lax.real(out), _wrap_between(lax.imag(out), period))


@custom_jvp
def _logaddexp(x1: Array, x2: Array) -> Array:
    if dtypes.issubdtype(x1.dtype, np.complexfloating):
        return _complex_logaddexp(x1, x2, lax.exp, 1.0, np.pi)
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    return lax.select(_isnan(delta), lax.add(x1, x2),
                      lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta))))))


@_logaddexp.defjvp
def _logaddexp_jvp(primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    # As JAX: exact tangents at ties and infinities, where the max/abs formulation has kinks.
    x1, x2 = primals
    t1, t2 = tangents
    out = _logaddexp(x1, x2)
    w1 = lax.exp(lax.sub(_replace_inf(x1), _replace_inf(out)))
    w2 = lax.exp(lax.sub(_replace_inf(x2), _replace_inf(out)))
    return out, lax.add(lax.mul(t1, w1), lax.mul(t2, w2))


@custom_jvp
def _logaddexp2(x1: Array, x2: Array) -> Array:
    if dtypes.issubdtype(x1.dtype, np.complexfloating):
        return _complex_logaddexp(x1, x2, lax.exp2, 1 / np.log(2), np.pi / np.log(2))
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    inv_ln2 = _const(amax, 1 / np.log(2))
    return lax.select(_isnan(delta), lax.add(x1, x2),
                      lax.add(amax, lax.mul(inv_ln2, lax.log1p(lax.exp2(lax.neg(
                          lax.abs(delta)))))))


# The custom_jvp equations are named as JAX's (``custom_jvp_call[name=logaddexp ...]``).
_logaddexp.fun.__name__ = "logaddexp"
_logaddexp2.fun.__name__ = "logaddexp2"


@_logaddexp2.defjvp
def _logaddexp2_jvp(primals: tuple, tangents: tuple) -> tuple[Array, Array]:
    x1, x2 = primals
    t1, t2 = tangents
    out = _logaddexp2(x1, x2)
    w1 = lax.exp2(lax.sub(_replace_inf(x1), _replace_inf(out)))
    w2 = lax.exp2(lax.sub(_replace_inf(x2), _replace_inf(out)))
    return out, lax.add(lax.mul(t1, w1), lax.mul(t2, w2))


@jitted
def logaddexp(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.logaddexp``: ``log(exp(x1) + exp(x2))`` without overflow."""
    x1, x2 = promote_args_inexact("logaddexp", x1, x2)
    return _logaddexp(*map(asarray, _same_shape("logaddexp", x1, x2)))


@jitted
def logaddexp2(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``jnp.logaddexp2``: ``log2(2**x1 + 2**x2)`` without overflow."""
    x1, x2 = promote_args_inexact("logaddexp2", x1, x2)
    return _logaddexp2(*map(asarray, _same_shape("logaddexp2", x1, x2)))


@jitted
def log2(x: ArrayLike, /) -> Array:
    """``jnp.log2``: base-2 logarithm."""
    x, = promote_args_inexact("log2", x)
    if dtypes.issubdtype(_dtype(x), np.complexfloating):
        r = lax.log(x)
        re, im = lax.real(r), lax.imag(r)
        ln2 = lax.log(_strong(re, 2))
        return lax.complex(lax.div(re, ln2), lax.div(im, ln2))
    return lax.div(lax.log(x), lax.log(_strong(x, 2)))


@jitted
def log10(x: ArrayLike, /) -> Array:
    """``jnp.log10``: base-10 logarithm."""
    x, = promote_args_inexact("log10", x)
    inv_ln10 = np.asarray(0.4342944819032518, dtypes.finfo(_dtype(x)).dtype)[()]
    if dtypes.issubdtype(_dtype(x), np.complexfloating):
        r = lax.log(x)
        return lax.complex(lax.mul(lax.real(r), inv_ln10), lax.mul(lax.imag(r), inv_ln10))
    return lax.mul(lax.log(x), inv_ln10)


@jitted
def square(x: ArrayLike, /) -> Array:
    """``jnp.square``: ``x * x``."""
    x = ensure_arraylike("square", x)
    x, = promote_dtypes_numeric(x)
    return lax.square(x)


@jitted
def reciprocal(x: ArrayLike, /) -> Array:
    """``jnp.reciprocal``: ``1 / x`` in an inexact dtype."""
    x = ensure_arraylike("reciprocal", x)
    x, = promote_dtypes_inexact(x)
    return lax.integer_pow(x, -1)


@jitted
def deg2rad(x: ArrayLike, /) -> Array:
    """``jnp.deg2rad``: degrees to radians."""
    x, = promote_args_inexact("deg2rad", x)
    return lax.mul(x, _const(x, np.pi / 180))


@jitted
def rad2deg(x: ArrayLike, /) -> Array:
    """``jnp.rad2deg``: radians to degrees."""
    x, = promote_args_inexact("rad2deg", x)
    return lax.mul(x, _const(x, 180 / np.pi))


degrees, radians = rad2deg, deg2rad


@jitted
def conjugate(x: ArrayLike, /) -> Array:
    """``jnp.conjugate``: the complex conjugate (real inputs are returned unchanged)."""
    x = ensure_arraylike("conjugate", x)
    return lax.conj(x) if dtypes.issubdtype(x.dtype, np.complexfloating) else x


conj = conjugate


@jitted
def real(val: ArrayLike, /) -> Array:
    """``jnp.real``: the real part."""
    val = ensure_arraylike("real", val)
    return lax.real(val) if dtypes.issubdtype(val.dtype, np.complexfloating) else val


@jitted
def imag(val: ArrayLike, /) -> Array:
    """``jnp.imag``: the imaginary part (zeros for real inputs)."""
    val = ensure_arraylike("imag", val)
    if dtypes.issubdtype(val.dtype, np.complexfloating):
        return lax.imag(val)
    return lax.full_like(val, 0)


@jitted(static_argnames=("out",), inline=False)
def modf(x: ArrayLike, /, out: None = None) -> tuple[Array, Array]:
    """``jnp.modf``: the fractional and integral parts."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
    x = ensure_arraylike("modf", x)
    x, = promote_dtypes_inexact(x)
    whole = where3(lax.ge(x, _const(x, 0)), floor(x), ceil(x))
    return lax.sub(x, whole), whole


@jitted
def isfinite(x: ArrayLike, /) -> Array:
    """``jnp.isfinite``: neither infinite nor NaN."""
    x = ensure_arraylike("isfinite", x)
    dt = x.dtype
    if dtypes.issubdtype(dt, np.floating):
        return lax.is_finite(x)
    if dtypes.issubdtype(dt, np.complexfloating):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.full_like(x, True, dtype=np.bool_)


@jitted(inline=False)
def isinf(x: ArrayLike, /) -> Array:
    """``jnp.isinf``: plus or minus infinity."""
    x = ensure_arraylike("isinf", x)
    dt = x.dtype
    if dtypes.issubdtype(dt, np.floating):
        return lax.eq(lax.abs(x), _const(x, np.inf))
    if dtypes.issubdtype(dt, np.complexfloating):
        re, im = lax.real(x), lax.imag(x)
        return lax.bitwise_or(lax.eq(lax.abs(re), _const(re, np.inf)),
                              lax.eq(lax.abs(im), _const(im, np.inf)))
    return lax.full_like(x, False, dtype=np.bool_)


def _isposneginf(infinity: float, x: Array, out: None) -> Array:
    if out is not None:
        raise NotImplementedError("The 'out' argument to isneginf/isposinf is not supported.")
    dt = x.dtype
    if dtypes.issubdtype(dt, np.floating):
        return lax.eq(x, _const(x, infinity))
    if dtypes.issubdtype(dt, np.complexfloating):
        raise ValueError("isposinf/isneginf are not well defined for complex types")
    return lax.full_like(x, False, dtype=np.bool_)


@jitted(static_argnames=("out",), converts_first=True)
def isposinf(x: ArrayLike, /, out: None = None) -> Array:
    """``jnp.isposinf``: plus infinity."""
    return _isposneginf(np.inf, ensure_arraylike("isposinf", x), out)


@jitted(static_argnames=("out",), converts_first=True)
def isneginf(x: ArrayLike, /, out: None = None) -> Array:
    """``jnp.isneginf``: minus infinity."""
    return _isposneginf(-np.inf, ensure_arraylike("isneginf", x), out)


@jitted
def isnan(x: ArrayLike, /) -> Array:
    """``jnp.isnan``: not a number (``x != x``)."""
    x = ensure_arraylike("isnan", x)
    return lax.ne(x, x)
