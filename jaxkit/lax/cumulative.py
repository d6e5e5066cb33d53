"""Cumulative reductions along an axis: ``cumsum``, ``cumprod``, ``cummax``, ``cummin`` and
``cumlogsumexp`` (``axis``, ``reverse``), as in ``jax.lax``.

Each lowers to a ``stablehlo.reduce_window`` whose window spans the whole axis (XLA rewrites
it into an efficient scan). ``cumsum`` is linear (its transpose is the reversed cumsum); the
others differentiate through a parallel prefix scan (``associative_scan``) of (value, tangent)
pairs with the JVP of their combining function, as JAX does.
"""
from __future__ import annotations

import functools

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import elementwise as ew
from jaxkit.lax import elementwise_math as ewm
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.standard import standard_primitive
from jaxkit.lax.loops import associative_scan
from jaxkit.lax.reductions import _get_max_identity, _get_min_identity
from jaxkit.lax.structural import full_like
from jaxkit.typing import Array, ArrayLike


def _cumred_shape_rule(x, *, axis, reverse):
    if axis < 0:
        raise ValueError("XLA operations do not allow negative axes")
    if axis >= x.ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of shape {x.shape}")
    return x.shape


def _cumred_dtype_rule(name):
    def rule(x, **params):
        if not dtypes.issubdtype(x.dtype, np.number):
            raise TypeError(f"{name} does not accept dtype {x.dtype.name}. Accepted dtypes are "
                            "subtypes of number.")
        return x.dtype
    return rule


def _cumred_batch(prim, axis_data, args, dims, *, axis, reverse):
    (x,), (d,) = args, dims
    return prim.bind(x, axis=axis + 1 if axis >= d else axis, reverse=reverse), d


def _cumred_lowering(body, identity):
    """``stablehlo.reduce_window`` over the whole axis, padded in front (behind if
    ``reverse``) so that output i reduces inputs [0, i] ([i, n) if ``reverse``)."""

    def rule(ctx, x, *, axis, reverse):
        aval = ctx.avals_in[0]
        n = aval.shape[axis]
        if n == 0:
            return x
        ndim = aval.ndim
        window = [1] * ndim
        window[axis] = n
        padding = np.zeros((ndim, 2), np.int64)
        padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
        init = mlir.ir_constant(np.asarray(identity(aval.dtype), aval.dtype))
        op = hlo.ReduceWindowOp(
            [mlir.aval_to_ir_type(aval)], [x], [init], mlir.i64_attr(window),
            window_strides=mlir.i64_attr([1] * ndim),
            padding=ir.DenseIntElementsAttr.get(padding, shape=[ndim, 2]))
        scalar = mlir.aval_to_ir_type(core.ShapedArray((), aval.dtype))
        block = op.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            hlo.ReturnOp([body(ctx, aval.dtype, *block.arguments)])
        return op.results[0]

    return rule


def _binary_body(op):
    return lambda ctx, dtype, a, b: op(a, b).result


def _cumulative_primitive(name, body, identity) -> core.Primitive:
    prim = standard_primitive(_cumred_shape_rule, _cumred_dtype_rule(name), name,
                              lambda x, **_: x.weak_type)
    batching.defrule(prim, functools.partial(_cumred_batch, prim))
    shr.defsharding(prim, shr.cumulative_rule)
    mlir.register_lowering(prim, _cumred_lowering(body, identity))
    return prim


def _cumulative_jvp(prim, combine_jvp, primals, tangents, *, axis, reverse):
    """Scan (value, tangent) pairs with ``combine_jvp``, the JVP of the combining function."""
    (x,), (t,) = primals, tangents
    out = prim.bind(x, axis=axis, reverse=reverse)
    if type(t) is ad.Zero:
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    _, t_out = associative_scan(combine_jvp, (x, t), reverse=reverse, axis=axis)
    return out, t_out


def _bind(prim, operand, axis, reverse):
    return prim.bind(operand, axis=int(axis), reverse=bool(reverse))


# ---- cumsum --------------------------------------------------------------------------------
def cumsum(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    """Cumulative sum along ``axis`` (from the end if ``reverse``). Lowers to
    ``stablehlo.reduce_window``."""
    return _bind(cumsum_p, operand, axis, reverse)


cumsum_p = _cumulative_primitive("cumsum", _binary_body(hlo.AddOp), lambda dt: 0)
ad.deflinear2(cumsum_p, lambda ct, x, *, axis, reverse:
              [cumsum_p.bind(ct, axis=axis, reverse=not reverse)])


# ---- cumprod -------------------------------------------------------------------------------
def cumprod(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    """Cumulative product along ``axis``. Lowers to ``stablehlo.reduce_window``."""
    return _bind(cumprod_p, operand, axis, reverse)


def _mul_jvp(a, b):
    (x1, t1), (x2, t2) = a, b
    return ew.mul(x1, x2), ew.add(ew.mul(t1, x2), ew.mul(x1, t2))


cumprod_p = _cumulative_primitive("cumprod", _binary_body(hlo.MulOp), lambda dt: 1)
ad.defjvp_rule(cumprod_p, functools.partial(_cumulative_jvp, cumprod_p, _mul_jvp))


# ---- cummax / cummin -----------------------------------------------------------------------
def cummin(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    """Cumulative minimum along ``axis``. Lowers to ``stablehlo.reduce_window``."""
    return _bind(cummin_p, operand, axis, reverse)


def cummax(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    """Cumulative maximum along ``axis``. Lowers to ``stablehlo.reduce_window``."""
    return _bind(cummax_p, operand, axis, reverse)


def _balanced_eq(x, z, y):
    """1 where x alone attains z, 1/2 where x and y both do, else 0 (JAX's max/min JVP)."""
    one, two, zero = (full_like(z, v) for v in (1, 2, 0))
    return ew.div(ew.select_n(ew.eq(x, z), zero, one), ew.select_n(ew.eq(y, z), one, two))


def _extremum_jvp(op):
    def combine(a, b):
        (x1, t1), (x2, t2) = a, b
        z = op(x1, x2)
        return z, ew.add(ew.mul(t1, _balanced_eq(x1, z, x2)), ew.mul(t2, _balanced_eq(x2, z, x1)))
    return combine


cummax_p = _cumulative_primitive("cummax", _binary_body(hlo.MaxOp), _get_max_identity)
ad.defjvp_rule(cummax_p, functools.partial(_cumulative_jvp, cummax_p,
                                                _extremum_jvp(ew.max)))
cummin_p = _cumulative_primitive("cummin", _binary_body(hlo.MinOp), _get_min_identity)
ad.defjvp_rule(cummin_p, functools.partial(_cumulative_jvp, cummin_p,
                                                _extremum_jvp(ew.min)))


# ---- cumlogsumexp --------------------------------------------------------------------------
def cumlogsumexp(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    """Cumulative log-sum-exp along ``axis``. Lowers to
    ``stablehlo.reduce_window``."""
    return _bind(cumlogsumexp_p, operand, axis, reverse)


def _logaddexp(x, y):
    """log(exp(x) + exp(y)) without overflow (real floating point)."""
    amax = ew.max(x, y)
    delta = ew.sub(x, y)
    return ew.select_n(ew.ne(delta, delta),
                       ew.add(amax, ewm.log1p(ewm.exp(ew.neg(ew.abs(delta))))),
                       ew.add(x, y))  # NaNs, or infinities of the same sign


def _replace_inf(x):
    return ew.select_n(ew.eq(x, full_like(x, np.inf)), x, full_like(x, 0))


def _logaddexp_jvp(a, b):
    (x1, t1), (x2, t2) = a, b
    z = _logaddexp(x1, x2)
    return z, ew.add(ew.mul(t1, ewm.exp(ew.sub(_replace_inf(x1), _replace_inf(z)))),
                     ew.mul(t2, ewm.exp(ew.sub(_replace_inf(x2), _replace_inf(z)))))


@functools.cache
def _logaddexp_jaxpr(dtype: np.dtype) -> core.ClosedJaxpr:
    scalar = core.ShapedArray((), dtype)
    jaxpr, consts = pe.trace_to_jaxpr(lambda x, y: [_logaddexp(x, y)], [scalar, scalar])
    return core.ClosedJaxpr(jaxpr, consts)


def _logaddexp_body(ctx, dtype, a, b):
    return mlir.closed_subcomp(ctx.module_context, _logaddexp_jaxpr(np.dtype(dtype)), a, b)[0]


def _cumlogsumexp_dtype_rule(x, **params):
    if not dtypes.issubdtype(x.dtype, np.floating):
        raise TypeError(f"cumlogsumexp does not accept dtype {x.dtype.name}. Accepted dtypes "
                        "are subtypes of floating.")
    return x.dtype


cumlogsumexp_p = _cumulative_primitive("cumlogsumexp", _logaddexp_body, _get_max_identity)
cumlogsumexp_p.def_abstract_eval(lambda x, **params: core.ShapedArray(
    _cumred_shape_rule(x, **params), _cumlogsumexp_dtype_rule(x), x.weak_type))
ad.defjvp_rule(cumlogsumexp_p, functools.partial(_cumulative_jvp, cumlogsumexp_p,
                                                      _logaddexp_jvp))

__all__ = ["cumlogsumexp", "cumlogsumexp_p", "cummax", "cummax_p", "cummin", "cummin_p",
           "cumprod", "cumprod_p", "cumsum", "cumsum_p"]
