"""Elementwise primitives: arithmetic, comparisons, logic, transcendental functions.

Operands of an n-ary primitive have equal shapes and dtypes (``jaxkit.numpy`` broadcasts and
promotes before calling these). Each primitive is one block: the wrapper, the primitive with
its shape/dtype rule, then its JVP (or transpose), batching and lowering rules.
"""
from __future__ import annotations

from jaxlib.mlir.dialects import stablehlo as hlo

from jaxkit import core
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax._helpers import _any, _float, _inexact, _num, standard_naryop, standard_unop
from jaxkit.lax.structural import _reduce_sum, broadcast_in_dim
from jaxkit.typing import Array, ArrayLike


def _unbroadcast(aval: core.ShapedArray, ct):
    """The cotangent of an operand that was broadcast from rank 0: sum it back."""
    ct_shape = core.get_aval(ct).shape
    if ct_shape == aval.shape:
        return ct
    return _reduce_sum(ct, tuple(range(len(ct_shape))))


def _broadcast_to(x, shape):
    """A tangent of a rank-0 operand, broadcast to the output shape."""
    if core.get_aval(x).shape == tuple(shape):
        return x
    return broadcast_in_dim(x, shape, ())


def _linear_nary_jvp(prim):
    """JVP of an elementwise primitive linear in all operands (add, sub): apply it to the
    tangents, treating symbolic zeros as zeros of the right shape."""

    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if all(type(t) is ad.Zero for t in tangents):
            return out, ad.Zero(core.get_aval(out).to_tangent_aval())
        ts = [ad.instantiate_zeros(t) for t in tangents]
        return out, _broadcast_to(prim.bind(*ts, **params), core.get_aval(out).shape)

    return jvp



# ---- add -----------------------------------------------------------------------------------
def add(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise addition. Lowers to ``stablehlo.add``."""
    return add_p.bind(x, y)


def _add_transpose(ct, x, y):
    return [_unbroadcast(x.aval, ct) if ad.is_undefined_primal(x) else None,
            _unbroadcast(y.aval, ct) if ad.is_undefined_primal(y) else None]


add_p = standard_naryop("add", [_num, _num])
ad.deflinear2(add_p, _add_transpose)
ad.primitive_jvps[add_p] = _linear_nary_jvp(add_p)
batching.defbroadcasting(add_p)
mlir.register_lowering(add_p, mlir.nary_lowering(hlo.AddOp))

# ---- add_any: the sum of two tangents/cotangents (the primitive lives in ad) ---------------
ad.add_jaxvals_p.def_impl(lambda x, y: add(x, y))
ad.deflinear2(ad.add_jaxvals_p, lambda ct, x, y: [ct, ct])
batching.defbroadcasting(ad.add_jaxvals_p)
mlir.register_lowering(ad.add_jaxvals_p, mlir.nary_lowering(hlo.AddOp))


# ---- sub -----------------------------------------------------------------------------------
def sub(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise subtraction. Lowers to ``stablehlo.subtract``."""
    return sub_p.bind(x, y)


def _sub_transpose(ct, x, y):
    return [_unbroadcast(x.aval, ct) if ad.is_undefined_primal(x) else None,
            _unbroadcast(y.aval, neg(ct)) if ad.is_undefined_primal(y) else None]


sub_p = standard_naryop("sub", [_num, _num])
ad.deflinear2(sub_p, _sub_transpose)
ad.primitive_jvps[sub_p] = _linear_nary_jvp(sub_p)
batching.defbroadcasting(sub_p)
mlir.register_lowering(sub_p, mlir.nary_lowering(hlo.SubtractOp))


# ---- mul -----------------------------------------------------------------------------------
def mul(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise multiplication. Lowers to ``stablehlo.multiply``."""
    return mul_p.bind(x, y)


mul_p = standard_naryop("mul", [_num, _num])
ad.defbilinear(mul_p, lambda ct, x, y: _unbroadcast(x.aval, mul(ct, y)),
               lambda ct, x, y: _unbroadcast(y.aval, mul(x, ct)))
batching.defbroadcasting(mul_p)
mlir.register_lowering(mul_p, mlir.nary_lowering(hlo.MulOp))


# ---- neg -----------------------------------------------------------------------------------
def neg(x: ArrayLike) -> Array:
    """Elementwise negation. Lowers to ``stablehlo.negate``."""
    return neg_p.bind(x)


neg_p = standard_unop("neg", _num)
ad.deflinear2(neg_p, lambda ct, x: [neg(ct)])
batching.defvectorized(neg_p)
mlir.register_lowering(neg_p, mlir.nary_lowering(hlo.NegOp))


# ---- sin -----------------------------------------------------------------------------------
def sin(x: ArrayLike) -> Array:
    """Elementwise sine. Lowers to ``stablehlo.sine``."""
    return sin_p.bind(x)


sin_p = standard_unop("sin", _inexact)
ad.defjvp(sin_p, lambda g, x: mul(g, cos(x)))
batching.defvectorized(sin_p)
mlir.register_lowering(sin_p, mlir.nary_lowering(hlo.SineOp))


# ---- cos -----------------------------------------------------------------------------------
def cos(x: ArrayLike) -> Array:
    """Elementwise cosine. Lowers to ``stablehlo.cosine``."""
    return cos_p.bind(x)


cos_p = standard_unop("cos", _inexact)
ad.defjvp(cos_p, lambda g, x: neg(mul(g, sin(x))))
batching.defvectorized(cos_p)
mlir.register_lowering(cos_p, mlir.nary_lowering(hlo.CosineOp))


# ---- exp -----------------------------------------------------------------------------------
def exp(x: ArrayLike) -> Array:
    """Elementwise natural exponential. Lowers to ``stablehlo.exponential``."""
    return exp_p.bind(x)


exp_p = standard_unop("exp", _inexact)
ad.defjvp2(exp_p, lambda g, ans, x: mul(g, ans))
batching.defvectorized(exp_p)
mlir.register_lowering(exp_p, mlir.nary_lowering(hlo.ExpOp))

__all__ = ["add", "sub", "mul", "neg", "sin", "cos", "exp", "add_p", "sub_p", "mul_p", "neg_p",
           "sin_p", "cos_p", "exp_p"]
