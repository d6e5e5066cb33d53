"""``clamp``: elementwise clipping to bounds that may be scalars, as ``jax.lax.clamp``. Same
conventions as ``elementwise.py``; the result is weakly typed only if every operand is."""
from __future__ import annotations

import numpy as np

from jaxkit import core
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.standard import _any, check_dtype, standard_primitive
from jaxkit.lax.elementwise import _broadcast_to, _zeros, gt, lt, select
from jaxkit.lax.elementwise_bits import bitwise_and
from jaxkit.lax.structural import broadcast_in_dim
from jaxkit.typing import Array, ArrayLike


def clamp(min: ArrayLike, x: ArrayLike, max: ArrayLike) -> Array:
    """Elementwise ``min <= x <= max`` clipping; ``min``/``max`` may be scalars. Lowers to
    ``stablehlo.clamp``."""
    return clamp_p.bind(min, x, max)


def _clamp_shape_rule(min, operand, max):
    if min.shape and min.shape != operand.shape:
        raise TypeError("clamp requires min.shape == operand.shape or min.shape == (), got "
                        f"min.shape={min.shape}, operand.shape={operand.shape}.")
    if max.shape and max.shape != operand.shape:
        raise TypeError("clamp requires max.shape == operand.shape or max.shape == (), got "
                        f"max.shape={max.shape}, operand.shape={operand.shape}.")
    return operand.shape


def _clamp_dtype_rule(min, operand, max):
    for i, a in enumerate((min, operand, max)):
        check_dtype("clamp", a, _any, i)
    if not min.dtype == operand.dtype == max.dtype:
        raise TypeError("lax.clamp requires arguments to have the same dtypes, got "
                        f"{min.dtype.name}, {operand.dtype.name}, {max.dtype.name}.")
    return operand.dtype


def _clamp_jvp_rule(which):
    """The tangent of ``min``/``operand``/``max`` passes where that argument is the result
    (JAX's conventions at ties); a scalar bound's tangent is broadcast first."""

    def rule(g, min, operand, max):
        g = _broadcast_to(g, core.get_aval(operand).shape)
        if which == 0:
            pred = bitwise_and(gt(min, operand), lt(min, max))
        elif which == 1:
            pred = bitwise_and(gt(operand, min), lt(operand, max))
        else:
            pred = lt(max, operand)
        return select(pred, g, _zeros(g))

    return rule


def _clamp_batch(axis_data, args, dims):
    min, x, max = args
    min_d, x_d, max_d = dims
    size = batching.batch_size(args, dims)
    if min_d == x_d == max_d and np.shape(min) == np.shape(x) == np.shape(max):
        return clamp_p.bind(min, x, max), x_d
    if np.ndim(min) == 0 and np.ndim(max) == 0 and x_d is not batching.not_mapped:
        return clamp_p.bind(min, x, max), x_d
    # General case: batch axes to the front, then every bound to the operand's shape.
    x = batching.bdim_at_front(x, x_d, size)
    shape = np.shape(x)
    bounds = []
    for b, d in ((min, min_d), (max, max_d)):
        if d is batching.not_mapped:
            b = broadcast_in_dim(b, shape, tuple(range(1, len(shape))) if np.ndim(b) else ())
        else:
            b = batching.moveaxis(b, d, 0)
            b = broadcast_in_dim(b, shape, tuple(range(np.ndim(b))))
        bounds.append(b)
    return clamp_p.bind(bounds[0], x, bounds[1]), 0


clamp_p = standard_primitive(_clamp_shape_rule, _clamp_dtype_rule, "clamp",
                             lambda *avals: all(a.weak_type for a in avals))
ad.defjvp(clamp_p, _clamp_jvp_rule(0), _clamp_jvp_rule(1), _clamp_jvp_rule(2))
batching.defrule(clamp_p, _clamp_batch)
shr.defsharding(clamp_p, shr.clamp_rule)
mlir.register_lowering(clamp_p, lambda ctx, lo, x, hi: hlo.ClampOp(lo, x, hi).result)


__all__ = ["clamp", "clamp_p"]
