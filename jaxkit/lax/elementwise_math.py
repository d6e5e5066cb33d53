"""Elementwise transcendental primitives: exponentials and logarithms, the logistic function,
trigonometric and hyperbolic functions and their inverses, roots, and ``pow``.

Same conventions as ``elementwise.py`` (one block per primitive; rank-0 operands broadcast;
weak only if every operand is). Each JVP rule is JAX's, written with the output where that is
cheaper (``exp``, ``tanh``, ``logistic``, ``sqrt``, ...). Ops without a StableHLO counterpart
lower to CHLO (expanded by XLA) or to a jaxkit function through ``mlir.lower_fun``.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import chlo, hlo, ir
from jaxkit.lax.standard import _float, _inexact, _int, standard_naryop, standard_unop
from jaxkit.lax.elementwise import (
    _broadcast_to,
    _const,
    _one,
    _ones,
    _out_shape,
    _replace_zero,
    _zeros,
    add,
    complex,
    div,
    eq,
    imag,
    integer_pow,
    mul,
    neg,
    real,
    reciprocal,
    select,
    square,
    sub,
)
from jaxkit.lax.dot_algorithms import AccuracyMode, Tolerance
from jaxkit.lax.structural import convert_element_type
from jaxkit.typing import Array, ArrayLike


def _check_accuracy(name: str, accuracy) -> None:
    """JAX lets transcendental functions ask XLA for an accuracy: the equation's ``accuracy``
    parameter, lowered to the op's ``result_accuracy`` attribute (XLA's GPU backend picks an
    implementation by it; its CPU backend computes the same values whatever is asked)."""
    if accuracy is not None and not isinstance(accuracy, (AccuracyMode, Tolerance)):
        raise NotImplementedError(f"Accuracy {accuracy} not supported")


def _accuracy_attr(accuracy) -> ir.Attribute | None:
    if accuracy is None:
        return None
    if isinstance(accuracy, AccuracyMode):
        return hlo.ResultAccuracyAttr.get(0.0, 0.0, 0, accuracy.name)
    return hlo.ResultAccuracyAttr.get(atol=accuracy.atol, rtol=accuracy.rtol,
                                      ulps=accuracy.ulps, mode="TOLERANCE")


def _accurate_lowering(op) -> Callable:
    """The rule of an op with an ``accuracy`` parameter: ``op`` with ``result_accuracy``."""
    def rule(ctx, x, *, accuracy=None):
        return op(x, result_accuracy=_accuracy_attr(accuracy)).result
    return rule


def _unop(name: str, accepted=_inexact) -> core.Primitive:
    prim = standard_unop(name, accepted)
    batching.defvectorized(prim)
    return prim


def _accuracy_pp(params: dict) -> dict:
    # As JAX: the parameter is shown only when one is asked for.
    return {} if params.get("accuracy") is None else {"accuracy": params["accuracy"]}


def _accurate_unop(name: str, accepted=_inexact) -> core.Primitive:
    prim = _unop(name, accepted)
    core.defpp_params(prim, _accuracy_pp)
    return prim


# ---- exp -----------------------------------------------------------------------------------
def exp(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise natural exponential. Lowers to ``stablehlo.exponential``."""
    _check_accuracy("exp", accuracy)
    return exp_p.bind(x, accuracy=accuracy)


exp_p = _accurate_unop("exp")
ad.defjvp2(exp_p, lambda g, ans, x, **_: mul(g, ans))
mlir.register_lowering(exp_p, _accurate_lowering(hlo.ExpOp))


# ---- exp2 ----------------------------------------------------------------------------------
def exp2(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise base-2 exponential. Lowers to ``stablehlo.exponential`` of ``x log 2``."""
    _check_accuracy("exp2", accuracy)
    return exp2_p.bind(x, accuracy=accuracy)


def _exp2_lowering(ctx, x, *, accuracy=None):
    log2 = mlir.full_like_aval(np.log(2), ctx.avals_in[0])
    return hlo.ExpOp(hlo.MulOp(log2, x).result, result_accuracy=_accuracy_attr(accuracy)).result


exp2_p = _accurate_unop("exp2")
ad.defjvp2(exp2_p, lambda g, ans, x, **_: mul(log(_const(x, 2)), mul(g, ans)))
mlir.register_lowering(exp2_p, _exp2_lowering)


# ---- log -----------------------------------------------------------------------------------
def log(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise natural logarithm. Lowers to ``stablehlo.log``."""
    _check_accuracy("log", accuracy)
    return log_p.bind(x, accuracy=accuracy)


log_p = _accurate_unop("log")
ad.defjvp(log_p, lambda g, x, **_: div(g, x))
mlir.register_lowering(log_p, _accurate_lowering(hlo.LogOp))


# ---- expm1 ---------------------------------------------------------------------------------
def expm1(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise ``exp(x) - 1``, accurate near 0. Lowers to
    ``stablehlo.exponential_minus_one``."""
    _check_accuracy("expm1", accuracy)
    return expm1_p.bind(x, accuracy=accuracy)


expm1_p = _accurate_unop("expm1")
# (with the highest accuracy asked for, JAX's derivative is exp itself)
ad.defjvp2(expm1_p, lambda g, ans, x, accuracy=None: (
    mul(g, exp(x, accuracy=accuracy)) if accuracy is AccuracyMode.HIGHEST
    else mul(g, add(ans, _one(ans)))))
mlir.register_lowering(expm1_p, _accurate_lowering(hlo.Expm1Op))


# ---- log1p ---------------------------------------------------------------------------------
def log1p(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise ``log(1 + x)``, accurate near 0. Lowers to ``stablehlo.log_plus_one``."""
    _check_accuracy("log1p", accuracy)
    return log1p_p.bind(x, accuracy=accuracy)


log1p_p = _accurate_unop("log1p")
ad.defjvp(log1p_p, lambda g, x, **_: div(g, add(x, _one(x))))
mlir.register_lowering(log1p_p, _accurate_lowering(hlo.Log1pOp))


# ---- tanh ----------------------------------------------------------------------------------
def tanh(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise hyperbolic tangent. Lowers to ``stablehlo.tanh``."""
    _check_accuracy("tanh", accuracy)
    return tanh_p.bind(x, accuracy=accuracy)


tanh_p = _accurate_unop("tanh")
# (g + g ans)(1 - ans) = g (1 - ans^2), in JAX's order of operations; with the highest
# accuracy, JAX's 4 g logistic(2x) logistic(-2x).
ad.defjvp2(tanh_p, lambda g, ans, x, accuracy=None: (
    mul(g, mul(_const(x, 4), mul(logistic(mul(_const(x, 2), x), accuracy=accuracy),
                                 logistic(mul(_const(x, -2), x), accuracy=accuracy))))
    if accuracy is AccuracyMode.HIGHEST
    else mul(add(g, mul(g, ans)), sub(_one(x), ans))))
mlir.register_lowering(tanh_p, _accurate_lowering(hlo.TanhOp))


# ---- logistic ------------------------------------------------------------------------------
def logistic(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise sigmoid ``1 / (1 + exp(-x))``. Lowers to that expression (as JAX does)."""
    # No check of ``accuracy``: JAX's lowering of this expression never reads it, so any
    # value is accepted there.
    return logistic_p.bind(x, accuracy=accuracy)


def _logistic_impl(x, accuracy=None):
    one = _const(x, 1)
    return div(one, add(one, exp(neg(x))))


logistic_p = _accurate_unop("logistic")
ad.defjvp2(logistic_p, lambda g, ans, x, accuracy=None: (
    mul(g, mul(ans, logistic(neg(x)))) if accuracy is AccuracyMode.HIGHEST
    else mul(g, mul(ans, sub(_one(ans), ans)))))
mlir.register_lowering(logistic_p, mlir.lower_fun(_logistic_impl))


# ---- sin / cos -----------------------------------------------------------------------------
def sin(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise sine. Lowers to ``stablehlo.sine`` (for complex input, to JAX's formula
    in terms of real sin, cos and expm1)."""
    _check_accuracy("sin", accuracy)
    return sin_p.bind(x, accuracy=accuracy)


def _sinh_cosh_parts(b):
    """``sinh(b)`` and ``cosh(b)`` through ``expm1``, which avoids cancellation near 0."""
    two = _const(b, 2)
    e1m, e2m = expm1(b), expm1(neg(b))
    return div(sub(e1m, e2m), two), div(add(add(e1m, e2m), two), two)


def _sin_complex(x):
    # sin(a + ib) = sin a cosh b + i cos a sinh b
    a, b = real(x), imag(x)
    snh, csh = _sinh_cosh_parts(b)
    re, im = mul(sin(a), csh), mul(cos(a), snh)
    # With a == 0 the real part is exactly 0 (not 0 * inf = nan for huge b).
    return select(eq(a, _const(a, 0)), complex(_const(a, 0), im), complex(re, im))


def _cos_complex(x):
    # cos(a + ib) = cos a cosh b - i sin a sinh b
    a, b = real(x), imag(x)
    snh, csh = _sinh_cosh_parts(b)
    re, im = mul(cos(a), csh), mul(neg(sin(a)), snh)
    return select(eq(a, _const(a, 0)), complex(re, _const(a, 0)), complex(re, im))


def _trig_lowering(op, complex_impl):
    complex_rule = mlir.lower_fun(complex_impl)

    def rule(ctx, x, *, accuracy=None):
        if dtypes.issubdtype(ctx.avals_in[0].dtype, np.complexfloating):
            return complex_rule(ctx, x)
        return op(x, result_accuracy=_accuracy_attr(accuracy)).result

    return rule


sin_p = _accurate_unop("sin")
# (cos without the accuracy: what JAX's grad and linearize of sin compute)
ad.defjvp(sin_p, lambda g, x, **_: mul(g, cos(x)))
mlir.register_lowering(sin_p, _trig_lowering(hlo.SineOp, _sin_complex))


def cos(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise cosine. Lowers to ``stablehlo.cosine`` (for complex input, to JAX's
    formula in terms of real sin, cos and expm1)."""
    _check_accuracy("cos", accuracy)
    return cos_p.bind(x, accuracy=accuracy)


cos_p = _accurate_unop("cos")
ad.defjvp(cos_p, lambda g, x, accuracy=None: neg(mul(g, sin(x, accuracy=accuracy))))
mlir.register_lowering(cos_p, _trig_lowering(hlo.CosineOp, _cos_complex))


# ---- tan -----------------------------------------------------------------------------------
def tan(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise tangent. Lowers to ``stablehlo.tan``."""
    _check_accuracy("tan", accuracy)
    return tan_p.bind(x, accuracy=accuracy)


tan_p = _accurate_unop("tan")
ad.defjvp2(tan_p, lambda g, ans, x, **_: mul(g, add(_const(x, 1), square(ans))))
mlir.register_lowering(tan_p, _accurate_lowering(hlo.TanOp))


# ---- asin / acos / atan --------------------------------------------------------------------
def asin(x: ArrayLike) -> Array:
    """Elementwise arc sine. Lowers to ``chlo.asin``."""
    return asin_p.bind(x)


asin_p = _unop("asin")
ad.defjvp(asin_p, lambda g, x: mul(g, rsqrt(sub(_const(x, 1), square(x)))))
mlir.register_lowering(asin_p, mlir.nary_lowering(chlo.AsinOp))


def acos(x: ArrayLike) -> Array:
    """Elementwise arc cosine. Lowers to ``chlo.acos``."""
    return acos_p.bind(x)


acos_p = _unop("acos")
ad.defjvp(acos_p, lambda g, x: mul(g, neg(rsqrt(sub(_const(x, 1), square(x))))))
mlir.register_lowering(acos_p, mlir.nary_lowering(chlo.AcosOp))


def atan(x: ArrayLike) -> Array:
    """Elementwise arc tangent. Lowers to ``chlo.atan``."""
    return atan_p.bind(x)


atan_p = _unop("atan")
ad.defjvp(atan_p, lambda g, x: div(g, add(_const(x, 1), square(x))))
mlir.register_lowering(atan_p, mlir.nary_lowering(chlo.AtanOp))


# ---- atan2 ---------------------------------------------------------------------------------
def atan2(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise arc tangent of ``x / y`` in the quadrant of ``(y, x)``. Lowers to
    ``stablehlo.atan2``."""
    return atan2_p.bind(x, y)


atan2_p = standard_naryop("atan2", [_inexact, _inexact])
ad.defjvp(atan2_p, lambda g, x, y: mul(g, div(y, add(square(x), square(y)))),
          lambda g, x, y: mul(g, div(neg(x), add(square(x), square(y)))))
batching.defbroadcasting(atan2_p)
mlir.register_lowering(atan2_p, mlir.nary_lowering(hlo.Atan2Op))


# ---- sinh / cosh ---------------------------------------------------------------------------
def sinh(x: ArrayLike) -> Array:
    """Elementwise hyperbolic sine. Lowers to ``chlo.sinh``."""
    return sinh_p.bind(x)


sinh_p = _unop("sinh")
ad.defjvp(sinh_p, lambda g, x: mul(g, cosh(x)))
mlir.register_lowering(sinh_p, mlir.nary_lowering(chlo.SinhOp))


def cosh(x: ArrayLike) -> Array:
    """Elementwise hyperbolic cosine. Lowers to ``chlo.cosh``."""
    return cosh_p.bind(x)


cosh_p = _unop("cosh")
ad.defjvp(cosh_p, lambda g, x: mul(g, sinh(x)))
mlir.register_lowering(cosh_p, mlir.nary_lowering(chlo.CoshOp))


# ---- asinh / acosh / atanh -----------------------------------------------------------------
def asinh(x: ArrayLike) -> Array:
    """Elementwise inverse hyperbolic sine. Lowers to ``chlo.asinh``."""
    return asinh_p.bind(x)


asinh_p = _unop("asinh")
ad.defjvp(asinh_p, lambda g, x: mul(g, rsqrt(add(square(x), _one(x)))))
mlir.register_lowering(asinh_p, mlir.nary_lowering(chlo.AsinhOp))


def acosh(x: ArrayLike) -> Array:
    """Elementwise inverse hyperbolic cosine. Lowers to ``chlo.acosh``."""
    return acosh_p.bind(x)


acosh_p = _unop("acosh")
# x^2 - 1 rather than (x + 1)(x - 1), as JAX: the domain is x >= 1.
ad.defjvp(acosh_p, lambda g, x: mul(g, rsqrt(sub(square(x), _one(x)))))
mlir.register_lowering(acosh_p, mlir.nary_lowering(chlo.AcoshOp))


def atanh(x: ArrayLike) -> Array:
    """Elementwise inverse hyperbolic tangent. Lowers to ``chlo.atanh``."""
    return atanh_p.bind(x)


atanh_p = _unop("atanh")
ad.defjvp(atanh_p, lambda g, x: mul(reciprocal(add(_one(x), x)),
                                    div(g, sub(_one(x), x))))
mlir.register_lowering(atanh_p, mlir.nary_lowering(chlo.AtanhOp))


# ---- sqrt / rsqrt / cbrt -------------------------------------------------------------------
def sqrt(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise square root. Lowers to ``stablehlo.sqrt``."""
    _check_accuracy("sqrt", accuracy)
    return sqrt_p.bind(x, accuracy=accuracy)


sqrt_p = _accurate_unop("sqrt")
ad.defjvp2(sqrt_p, lambda g, ans, x, **_: mul(g, div(_const(x, 0.5), ans)))
mlir.register_lowering(sqrt_p, _accurate_lowering(hlo.SqrtOp))


def rsqrt(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise reciprocal square root. Lowers to ``stablehlo.rsqrt``."""
    _check_accuracy("rsqrt", accuracy)
    return rsqrt_p.bind(x, accuracy=accuracy)


rsqrt_p = _accurate_unop("rsqrt")
ad.defjvp2(rsqrt_p, lambda g, ans, x, **_: mul(g, mul(_const(x, -0.5), div(ans, x))))
mlir.register_lowering(rsqrt_p, _accurate_lowering(hlo.RsqrtOp))


def cbrt(x: ArrayLike, *, accuracy=None) -> Array:
    """Elementwise real cube root. Lowers to ``stablehlo.cbrt``."""
    _check_accuracy("cbrt", accuracy)
    return cbrt_p.bind(x, accuracy=accuracy)


cbrt_p = _accurate_unop("cbrt", _float)
ad.defjvp2(cbrt_p, lambda g, ans, x, **_: mul(g, mul(_const(x, 1 / 3), integer_pow(ans, -2))))
mlir.register_lowering(cbrt_p, _accurate_lowering(hlo.CbrtOp))


# ---- pow -----------------------------------------------------------------------------------
def pow(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x ** y`` for a float or complex ``x`` and an exponent of the same dtype
    or of an integer dtype. Lowers to ``stablehlo.power``."""
    return pow_p.bind(x, y)


def _pow_dtype(x_dtype, y_dtype) -> np.dtype:
    if dtypes.issubdtype(y_dtype, np.integer) or x_dtype == y_dtype:
        return x_dtype
    raise TypeError("the first argument to pow must have an inexact dtype (float or complex), "
                    "and the second argument must have an inexact or integer dtype, and two "
                    f"inexact dtypes must match, but got {x_dtype.name} and {y_dtype.name} "
                    "respectively.")


def _pow_jvp_lhs(g, ans, x, y):
    dt = core.get_aval(ans).dtype
    y_is_int = dtypes.issubdtype(core.get_aval(y).dtype, np.integer)
    x, y = convert_element_type(x, dt), convert_element_type(y, dt)
    if y_is_int:
        # d/dx x^n = n x^(n-1), taken as 0 for n == 0 (also at x == 0, where x^-1 is inf).
        shape = _out_shape(x, y)
        x, y = _broadcast_to(x, shape), _broadcast_to(y, shape)
        jac = select(eq(y, _zeros(y)), _zeros(y),
                     mul(_replace_zero(y), pow(x, sub(y, _ones(y)))))
    else:
        jac = mul(y, pow(x, sub(y, _ones(y))))
    return mul(g, jac)


def _pow_jvp_rhs(g, ans, x, y):
    # d/dy x^y = log(x) x^y, with log(0) replaced by log(1) = 0 (JAX's convention).
    return convert_element_type(mul(g, mul(log(_replace_zero(x)), ans)),
                                core.get_aval(y).dtype)


def _pow_lowering(ctx, x, y):
    x, y = mlir.broadcast_operands_to_output(ctx, (x, y))
    aval_out = ctx.avals_out[0]
    if ctx.avals_in[1].dtype != aval_out.dtype:  # an integer exponent
        y = mlir.convert(y, aval_out)
    return hlo.PowOp(x, y).result


pow_p = standard_naryop("pow", [_inexact, _int + _inexact], _pow_dtype, same_dtypes=False)
ad.defjvp2(pow_p, _pow_jvp_lhs, _pow_jvp_rhs)
batching.defbroadcasting(pow_p)
mlir.register_lowering(pow_p, _pow_lowering)


__all__ = [
    "acos", "acos_p", "acosh", "acosh_p", "asin", "asin_p", "asinh", "asinh_p", "atan", "atan2",
    "atan2_p", "atan_p", "atanh", "atanh_p", "cbrt", "cbrt_p", "cos", "cos_p", "cosh", "cosh_p",
    "exp", "exp2", "exp2_p", "exp_p", "expm1", "expm1_p", "log", "log1p", "log1p_p", "log_p",
    "logistic", "logistic_p", "pow", "pow_p", "rsqrt", "rsqrt_p", "sin", "sin_p", "sinh",
    "sinh_p", "sqrt", "sqrt_p", "tan", "tan_p", "tanh", "tanh_p",
]
