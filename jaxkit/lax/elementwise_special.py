"""Elementwise special functions: the error function and its inverse, log-gamma, digamma,
polygamma, Hurwitz zeta, exponentially scaled Bessel functions, and the regularized incomplete
gamma functions with their derivatives.

The ones XLA knows are lowered to CHLO ops (expanded by XLA when it compiles); the others are
written in jaxkit operations and lowered through ``mlir.lower_fun``: ``bessel_i0e`` (Cephes'
Chebyshev series) and the incomplete gamma family (XLA's series and continued fractions, as
``while`` loops), ported from JAX so that they give the same numbers. ``random_gamma_grad`` is
a function, not a primitive, as in JAX.
"""
from __future__ import annotations

import enum
import functools

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import chlo
from jaxkit.lax.standard import _float, standard_naryop, standard_unop
from jaxkit.lax.loops import while_loop
from jaxkit.lax.elementwise import (
    _bcast_rule,
    _const,
    _full,
    _out_shape,
    abs,
    add,
    div,
    eq,
    ge,
    gt,
    le,
    lt,
    mul,
    ne,
    neg,
    reciprocal,
    select,
    sign,
    square,
    sub,
)
from jaxkit.lax.elementwise_bits import bitwise_and, bitwise_not, bitwise_or
from jaxkit.lax.elementwise_math import exp, log, sqrt
from jaxkit.lax.reductions import reduce_or
from jaxkit.lax.structural import broadcast_in_dim, convert_element_type
from jaxkit.typing import Array, ArrayLike


def _unop(name: str) -> core.Primitive:
    prim = standard_unop(name, _float)
    batching.defvectorized(prim)
    return prim


def _binop(name: str) -> core.Primitive:
    prim = standard_naryop(name, [_float, _float])
    batching.defbroadcasting(prim)
    return prim


# ---- erf / erfc / erf_inv ------------------------------------------------------------------
def erf(x: ArrayLike) -> Array:
    """Elementwise error function. Lowers to ``chlo.erf``."""
    return erf_p.bind(x)


erf_p = _unop("erf")
ad.defjvp(erf_p, lambda g, x: mul(_const(x, 2 / np.sqrt(np.pi)), mul(g, exp(neg(square(x))))))
mlir.register_lowering(erf_p, mlir.nary_lowering(chlo.ErfOp))


def erfc(x: ArrayLike) -> Array:
    """Elementwise complementary error function ``1 - erf(x)``. Lowers to ``chlo.erfc``."""
    return erfc_p.bind(x)


erfc_p = _unop("erfc")
ad.defjvp(erfc_p, lambda g, x: mul(_const(x, -2 / np.sqrt(np.pi)), mul(g, exp(neg(square(x))))))
mlir.register_lowering(erfc_p, mlir.nary_lowering(chlo.ErfcOp))


def erf_inv(x: ArrayLike) -> Array:
    """Elementwise inverse error function. Lowers to ``chlo.erf_inv``."""
    return erf_inv_p.bind(x)


erf_inv_p = _unop("erf_inv")
ad.defjvp2(erf_inv_p, lambda g, ans, x: mul(_const(x, np.sqrt(np.pi) / 2),
                                            mul(g, exp(square(ans)))))
mlir.register_lowering(erf_inv_p, mlir.nary_lowering(chlo.ErfInvOp))


# ---- lgamma / digamma / polygamma / zeta ---------------------------------------------------
def lgamma(x: ArrayLike) -> Array:
    """Elementwise log of the absolute value of the gamma function. Lowers to
    ``chlo.lgamma``."""
    return lgamma_p.bind(x)


lgamma_p = _unop("lgamma")
ad.defjvp(lgamma_p, lambda g, x: mul(g, digamma(x)))
mlir.register_lowering(lgamma_p, mlir.nary_lowering(chlo.LgammaOp))


def digamma(x: ArrayLike) -> Array:
    """Elementwise digamma function (the derivative of lgamma). Lowers to
    ``chlo.digamma``."""
    return digamma_p.bind(x)


digamma_p = _unop("digamma")
ad.defjvp(digamma_p, lambda g, x: mul(g, polygamma(_const(x, 1), x)))
mlir.register_lowering(digamma_p, mlir.nary_lowering(chlo.DigammaOp))


def polygamma(m: ArrayLike, x: ArrayLike) -> Array:
    """Elementwise polygamma function of order ``m`` (a float holding an integer). Lowers to
    ``chlo.polygamma``."""
    return polygamma_p.bind(m, x)


def _polygamma_grad_m(g, m, x):
    raise ValueError("polygamma gradient with respect to m is not supported")


polygamma_p = _binop("polygamma")
ad.defjvp(polygamma_p, _polygamma_grad_m,
          _bcast_rule(lambda g, m, x: mul(g, polygamma(add(m, _const(m, 1)), x))))
mlir.register_lowering(polygamma_p, mlir.nary_lowering(chlo.PolygammaOp))


def zeta(x: ArrayLike, q: ArrayLike) -> Array:
    """Elementwise Hurwitz zeta function. Lowers to ``chlo.zeta``. Not differentiable (as in
    JAX)."""
    return zeta_p.bind(x, q)


zeta_p = _binop("zeta")
mlir.register_lowering(zeta_p, mlir.nary_lowering(chlo.ZetaOp))


# ---- bessel_i0e / bessel_i1e ---------------------------------------------------------------
def bessel_i0e(x: ArrayLike) -> Array:
    """Elementwise exponentially scaled modified Bessel function of order 0,
    ``exp(-|x|) i0(x)``. Lowers to Cephes' Chebyshev expansion."""
    return bessel_i0e_p.bind(x)


def _chebyshev(x, coefficients):
    b0, b1, b2 = _full(x, 0), _full(x, 0), _full(x, 0)
    for c in coefficients:
        b2, b1 = b1, b0
        b0 = add(sub(mul(x, b1), b2), _full(x, c))
    return mul(_const(b0, 0.5), sub(b0, b2))


# Cephes' coefficients for |x| <= 8 (A) and |x| > 8 (B); the float32 versions are the tails.
_I0E_A = np.array([
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
    1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
    1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
    1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1])
_I0E_B = np.array([
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
    7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
    3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
    2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
    8.04490411014108831608E-1])
_I0E_COEFFS = {np.dtype(np.float64): (_I0E_A, _I0E_B),
               np.dtype(np.float32): (_I0E_A[-18:], _I0E_B[-7:])}


def _bessel_i0e_impl(x):
    dtype = core.get_aval(x).dtype
    if dtype not in _I0E_COEFFS:  # too few bits for Cephes' coefficients: go through float32
        return convert_element_type(_bessel_i0e_impl(convert_element_type(x, np.float32)),
                                    dtype)
    coeffs_a, coeffs_b = _I0E_COEFFS[dtype]
    x = abs(x)
    le_8 = _chebyshev(sub(mul(_full(x, 0.5), x), _full(x, 2.0)), coeffs_a)
    gt_8 = div(_chebyshev(sub(div(_full(x, 32.0), x), _full(x, 2.0)), coeffs_b), sqrt(x))
    return select(le(x, _const(x, 8.0)), le_8, gt_8)


bessel_i0e_p = _unop("bessel_i0e")
ad.defjvp2(bessel_i0e_p, lambda g, y, x: mul(g, sub(bessel_i1e(x), mul(sign(x), y))))
mlir.register_lowering(bessel_i0e_p, mlir.lower_fun(_bessel_i0e_impl))


def bessel_i1e(x: ArrayLike) -> Array:
    """Elementwise exponentially scaled modified Bessel function of order 1,
    ``exp(-|x|) i1(x)``. Lowers to ``chlo.bessel_i1e``."""
    return bessel_i1e_p.bind(x)


def _bessel_i1e_jvp(g, y, x):
    # i1e'(x) = i0e(x) - y (sign(x) + 1/x), which tends to 1/2 at 0.
    eps = dtypes.finfo(core.get_aval(x).dtype).eps
    x_is_not_tiny = gt(abs(x), _const(x, eps))
    safe_x = select(x_is_not_tiny, x, _full(x, eps))
    dy_dx = sub(bessel_i0e(safe_x), mul(y, add(sign(safe_x), reciprocal(safe_x))))
    return mul(g, select(x_is_not_tiny, dy_dx, _full(x, 0.5)))


bessel_i1e_p = _unop("bessel_i1e")
ad.defjvp2(bessel_i1e_p, _bessel_i1e_jvp)
mlir.register_lowering(bessel_i1e_p, mlir.nary_lowering(chlo.BesselI1eOp))


# ---- the regularized incomplete gamma functions --------------------------------------------
class _IgammaMode(enum.Enum):
    VALUE = 1  # the function itself
    DERIVATIVE = 2  # its derivative with respect to a
    SAMPLE_DERIVATIVE = 3  # the derivative of a Gamma(a, 1) sample with respect to a


def _any(pred):
    return reduce_or(pred, tuple(range(core.get_aval(pred).ndim)))


def _isnan(x):
    return ne(x, x)


def _any_of(*preds):
    return functools.reduce(bitwise_or, preds)


def _igamma_series(ax, x, a, enabled, dtype, mode):
    """The power series of P(a, x), run while any enabled element has not converged."""
    eps = _const(x, dtypes.finfo(dtype).eps)

    def body(vals):
        enabled, r, c, ans, x, dc_da, dans_da = vals
        r = add(r, _const(r, 1))
        dc_da = sub(mul(dc_da, div(x, r)), div(mul(c, x), mul(r, r)))
        dans_da = add(dans_da, dc_da)
        c = mul(c, div(x, r))
        ans = add(ans, c)
        if mode == _IgammaMode.VALUE:
            conditional = bitwise_and(enabled, gt(div(c, ans), eps))
        else:
            conditional = bitwise_and(enabled, gt(abs(div(dc_da, dans_da)), eps))
        new = (r, c, ans, x, dc_da, dans_da)
        return (conditional, *(select(enabled, v, old) for v, old in zip(new, vals[1:])))

    init = (enabled, a, _full(a, 1), _full(a, 1), x, _full(a, 0), _full(a, 0))
    vals = while_loop(lambda vals: _any(vals[0]), body, init)
    ans, dans_da = vals[3], vals[6]
    if mode == _IgammaMode.VALUE:
        return div(mul(ans, ax), a)
    dlogax_da = sub(log(x), digamma(add(a, _const(a, 1))))
    if mode == _IgammaMode.DERIVATIVE:
        return div(mul(ax, add(mul(ans, dlogax_da), dans_da)), a)
    return div(mul(neg(add(dans_da, mul(ans, dlogax_da))), x), a)


def _igammac_continued_fraction(ax, x, a, enabled, dtype, mode):
    """The continued fraction of Q(a, x) (at most 2000 steps), with its derivative in a."""
    eps = dtypes.finfo(dtype).eps

    def cond(vals):
        return bitwise_and(lt(vals[5], _const(vals[5], 2000)), _any(vals[0]))

    def body(vals):
        (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c = add(c, _const(c, 1))
        y = add(y, _const(y, 1))
        z = add(z, _const(z, 2))
        yc = mul(y, c)
        pk = sub(mul(pkm1, z), mul(pkm2, yc))
        qk = sub(mul(qkm1, z), mul(qkm2, yc))
        qk_is_nonzero = ne(qk, _const(qk, 0))
        r = div(pk, qk)
        t = select(qk_is_nonzero, abs(div(sub(ans, r), r)), _full(r, 1))
        ans = select(qk_is_nonzero, r, ans)
        dpk_da = add(sub(sub(mul(dpkm1_da, z), pkm1), mul(dpkm2_da, yc)), mul(pkm2, c))
        dqk_da = add(sub(sub(mul(dqkm1_da, z), qkm1), mul(dqkm2_da, yc)), mul(qkm2, c))
        dans_da_new = select(qk_is_nonzero, div(sub(dpk_da, mul(ans, dqk_da)), qk), dans_da)
        grad_conditional = select(qk_is_nonzero, abs(sub(dans_da_new, dans_da)),
                                  _full(dans_da, 1))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        # Keep the convergents in range: rescale all of them by eps together.
        rescale = gt(abs(pk), reciprocal(_const(pk, eps)))
        pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = (
            select(rescale, mul(v, _const(v, eps)), v)
            for v in (pkm2, pkm1, qkm2, qkm1, dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da))
        if mode == _IgammaMode.VALUE:
            conditional = bitwise_and(enabled, gt(t, _const(t, eps)))
        else:
            conditional = bitwise_and(enabled, gt(grad_conditional, _const(t, eps)))
        new = (ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2_da, dqkm2_da, dpkm1_da,
               dqkm1_da, dans_da_new)
        return (conditional, *(v if i == 4 else select(enabled, v, old)
                               for i, (v, old) in enumerate(zip(new, vals[1:]))))

    y = sub(_const(a, 1), a)
    z = add(add(x, y), _const(x, 1))
    c = _const(x, 0)
    pkm2, qkm2 = _full(x, 1), x
    pkm1 = add(x, _const(x, 1))
    qkm1 = mul(z, x)
    ans = div(pkm1, qkm1)
    dpkm1_da = _full(x, 0)
    dqkm1_da = neg(x)
    dans_da = div(sub(dpkm1_da, mul(ans, dqkm1_da)), qkm1)
    init = (enabled, ans, _full(x, 1), y, z, c, pkm1, qkm1, pkm2, qkm2, _full(x, 0),
            _full(x, 0), dpkm1_da, dqkm1_da, dans_da)
    vals = while_loop(cond, body, init)
    ans = vals[1]
    if mode == _IgammaMode.VALUE:
        return mul(ans, ax)
    dans_da = vals[14]
    dlogax_da = sub(log(x), digamma(a))
    if mode == _IgammaMode.DERIVATIVE:
        return mul(ax, add(mul(ans, dlogax_da), dans_da))
    return neg(mul(add(dans_da, mul(ans, dlogax_da)), x))


def _log_ax(a, x, dtype):
    """``a log x - x - lgamma(a)``, and whether its exponential underflows."""
    ax = sub(sub(mul(a, log(x)), x), lgamma(a))
    return ax, lt(ax, neg(log(_const(ax, dtypes.finfo(dtype).max))))


def _igamma_impl(a, x, *, dtype):
    is_nan = bitwise_or(_isnan(a), _isnan(x))
    x_is_infinity = eq(x, _const(x, np.inf))
    a_is_zero, x_is_zero = eq(a, _const(a, 0)), eq(x, _const(x, 0))
    domain_error = _any_of(lt(x, _const(x, 0)), lt(a, _const(a, 0)),
                           bitwise_and(a_is_zero, x_is_zero), is_nan)
    use_igammac = bitwise_and(ge(x, _const(x, 1)), gt(x, a))
    ax, underflow = _log_ax(a, x, dtype)
    ax = exp(ax)
    enabled = bitwise_not(_any_of(x_is_zero, domain_error, underflow, x_is_infinity))
    output = select(
        use_igammac,
        sub(_const(a, 1), _igammac_continued_fraction(
            ax, x, a, bitwise_and(enabled, use_igammac), dtype, _IgammaMode.VALUE)),
        _igamma_series(ax, x, a, bitwise_and(enabled, bitwise_not(use_igammac)), dtype,
                       _IgammaMode.VALUE))
    output = select(x_is_zero, _full(a, 0), output)
    output = select(x_is_infinity, _full(a, 1), output)
    return select(domain_error, _full(a, np.nan), output)


def _igammac_impl(a, x, *, dtype):
    is_nan = bitwise_or(_isnan(a), _isnan(x))
    a_is_zero, x_is_zero = eq(a, _const(a, 0)), eq(x, _const(x, 0))
    x_is_infinity = eq(x, _const(x, np.inf))
    domain_error = _any_of(lt(x, _const(x, 0)), lt(a, _const(a, 0)),
                           bitwise_and(a_is_zero, x_is_zero), is_nan)
    use_igamma = bitwise_or(lt(x, _const(x, 1)), lt(x, a))
    ax, underflow = _log_ax(a, x, dtype)
    enabled = bitwise_not(_any_of(domain_error, underflow, x_is_infinity, a_is_zero))
    ax = exp(ax)
    igamma_call = _igamma_series(ax, x, a, bitwise_and(enabled, use_igamma), dtype,
                                 _IgammaMode.VALUE)
    igammac_cf_call = _igammac_continued_fraction(
        ax, x, a, bitwise_and(enabled, bitwise_not(use_igamma)), dtype, _IgammaMode.VALUE)
    output = select(use_igamma, sub(_const(a, 1), igamma_call), igammac_cf_call)
    output = select(bitwise_or(x_is_infinity, a_is_zero), _full(output, 0), output)
    return select(domain_error, _full(a, np.nan), output)


def _igamma_derivative_impl(a, x, *, dtype, mode):
    """The derivative of igamma in ``a`` (``mode`` DERIVATIVE) or that of a gamma sample
    (SAMPLE_DERIVATIVE)."""
    is_nan = bitwise_or(_isnan(a), _isnan(x))
    x_is_zero = eq(x, _full(x, 0))
    domain_error = bitwise_or(lt(x, _full(x, 0)), le(a, _full(a, 0)))
    use_igammac = bitwise_and(gt(x, _full(x, 1)), gt(x, a))
    ax, underflow = _log_ax(a, x, dtype)
    ax = exp(ax)
    enabled = bitwise_not(_any_of(x_is_zero, domain_error, underflow, is_nan))
    output = select(
        use_igammac,
        neg(_igammac_continued_fraction(ax, x, a, bitwise_and(enabled, use_igammac), dtype,
                                        mode)),
        _igamma_series(ax, x, a, bitwise_and(enabled, bitwise_not(use_igammac)), dtype, mode))
    output = select(x_is_zero, _full(output, 0), output)
    return select(bitwise_or(domain_error, is_nan), _full(a, np.nan), output)


def _up_and_broadcast(impl):
    """Run ``impl`` on operands broadcast to one shape, in float32 for 16-bit floats (the
    series need the precision), as JAX does."""

    def fun(*args, **params):
        shape = _out_shape(*args)
        args = [broadcast_in_dim(a, shape, tuple(range(np.ndim(a)))) for a in args]
        dtype = core.get_aval(args[0]).dtype
        upcast = dtype in (np.dtype(np.float16), np.dtype(dtypes.bfloat16))
        if upcast:
            args = [convert_element_type(a, np.float32) for a in args]
        out = impl(*args, dtype=np.dtype(np.float32) if upcast else dtype, **params)
        return convert_element_type(out, dtype) if upcast else out

    return fun


def igamma(a: ArrayLike, x: ArrayLike) -> Array:
    """Elementwise regularized lower incomplete gamma function P(a, x). Lowers to a series or
    a continued fraction (``stablehlo.while`` loops)."""
    return igamma_p.bind(a, x)


def _igamma_grad_x(g, a, x):
    return mul(g, exp(sub(add(neg(x), mul(sub(a, _const(a, 1)), log(x))), lgamma(a))))


igamma_p = _binop("igamma")
ad.defjvp(igamma_p, _bcast_rule(lambda g, a, x: mul(g, igamma_grad_a(a, x))),
          _bcast_rule(_igamma_grad_x))
mlir.register_lowering(igamma_p, mlir.lower_fun(_up_and_broadcast(_igamma_impl)))


def igammac(a: ArrayLike, x: ArrayLike) -> Array:
    """Elementwise regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return igammac_p.bind(a, x)


igammac_p = _binop("igammac")
ad.defjvp(igammac_p, _bcast_rule(lambda g, a, x: neg(mul(g, igamma_grad_a(a, x)))),
          _bcast_rule(lambda g, a, x: neg(_igamma_grad_x(g, a, x))))
mlir.register_lowering(igammac_p, mlir.lower_fun(_up_and_broadcast(_igammac_impl)))


def igamma_grad_a(a: ArrayLike, x: ArrayLike) -> Array:
    """Elementwise derivative of ``igamma(a, x)`` with respect to ``a``. Not differentiable
    itself (as in JAX)."""
    return igamma_grad_a_p.bind(a, x)


igamma_grad_a_p = _binop("igamma_grad_a")
mlir.register_lowering(igamma_grad_a_p, mlir.lower_fun(_up_and_broadcast(
    functools.partial(_igamma_derivative_impl, mode=_IgammaMode.DERIVATIVE))))


_random_gamma_grad = _up_and_broadcast(
    functools.partial(_igamma_derivative_impl, mode=_IgammaMode.SAMPLE_DERIVATIVE))


def random_gamma_grad(a: ArrayLike, x: ArrayLike) -> Array:
    """The derivative of a sample ``x`` of Gamma(a, 1) with respect to ``a`` (implicit
    reparameterization). A function of lax operations, not a primitive (as in JAX)."""
    return _random_gamma_grad(a, x)


__all__ = [
    "bessel_i0e", "bessel_i0e_p", "bessel_i1e", "bessel_i1e_p", "digamma", "digamma_p", "erf",
    "erf_inv", "erf_inv_p", "erf_p", "erfc", "erfc_p", "igamma", "igamma_grad_a",
    "igamma_grad_a_p", "igamma_p", "igammac", "igammac_p", "lgamma", "lgamma_p", "polygamma",
    "polygamma_p", "random_gamma_grad", "zeta", "zeta_p",
]
