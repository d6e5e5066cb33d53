"""``pl.estimate_cost``: a kernel's ``CostEstimate`` from its function, by summing a cost
rule per primitive of its jaxpr (elementwise ops: one flop or one transcendental per
element; ``integer_pow``: repeated squaring; ``dot_general``: two flops per multiply-add;
calls: their bodies), plus the bytes of its inputs and outputs. Primitives without a rule
cost nothing, as in JAX."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, lax, tree_util
from jaxkit.experimental.pallas.core import CostEstimate
from jaxkit.interpreters import partial_eval as pe
from jaxkit.transforms import custom_vjp, jit_primitive

__all__ = ["cost_rules", "estimate_cost"]

# primitive -> (avals_in, avals_out, **params) -> (flops, transcendentals, bytes_accessed)
cost_rules: dict[core.Primitive, Callable] = {}


def _size(aval) -> int:
    return math.prod(aval.shape)


def _jaxpr_cost(jaxpr: core.Jaxpr) -> tuple[int, int, int]:
    total = (0, 0, 0)
    for eqn in jaxpr.eqns:
        rule = cost_rules.get(eqn.primitive)
        if rule is not None:
            c = rule([a.aval for a in eqn.invars], [v.aval for v in eqn.outvars],
                     **eqn.params)
            total = tuple(a + b for a, b in zip(total, c))
    return total


def estimate_cost(fun: Callable, *args: Any, **kwargs: Any) -> CostEstimate:
    """The cost of ``fun`` at ``args`` (arrays or ``ShapeDtypeStruct``s; ``kwargs`` are
    passed as they are)."""
    flat, in_tree = tree_util.tree_flatten(args)
    avals = [core.ShapedArray(tuple(a.shape), np.dtype(a.dtype)) for a in flat]
    jaxpr, _, _ = pe.trace_tree_to_jaxpr(lambda a: fun(*a, **kwargs), in_tree, avals,
                                         pe.debug_info("cost_estimate", fun, ()))
    flops, transcendentals, accessed = _jaxpr_cost(jaxpr)
    in_bytes = sum(_size(a) * a.dtype.itemsize for a in avals)
    out_bytes = sum(_size(v.aval) * v.aval.dtype.itemsize for v in jaxpr.outvars)
    return CostEstimate(flops=int(flops), transcendentals=int(transcendentals),
                        bytes_accessed=int(accessed + in_bytes + out_bytes))


def _elementwise(transcendental: bool, on_output: bool = False) -> Callable:
    def rule(avals_in, avals_out, **_):
        n = _size(avals_out[0] if on_output else avals_in[0])
        return (0, n, 0) if transcendental else (n, 0, 0)
    return rule


for _p in (lax.add_p, lax.mul_p, lax.sub_p, lax.div_p, lax.min_p, lax.max_p, lax.or_p,
           lax.and_p, lax.xor_p):
    cost_rules[_p] = _elementwise(False, on_output=True)
for _p in (lax.neg_p, lax.floor_p, lax.ceil_p, lax.round_p, lax.not_p):
    cost_rules[_p] = _elementwise(False)
for _p in (lax.cos_p, lax.sin_p, lax.tan_p, lax.sinh_p, lax.cosh_p, lax.tanh_p, lax.acos_p,
           lax.asin_p, lax.atan_p, lax.exp_p, lax.log_p, lax.logistic_p, lax.sqrt_p):
    cost_rules[_p] = _elementwise(True)


def _integer_pow_cost(avals_in, avals_out, *, y: int):
    # repeated squaring: log2(y) squarings and one multiply per set bit
    per = 0 if y in (0, 1) else math.floor(math.log(y, 2)) + bin(y).count("1")
    return (_size(avals_in[0]) * per, 0, 0)


def _dot_general_cost(avals_in, avals_out, *, dimension_numbers, **_):
    (lc, rc), (_, rb) = dimension_numbers
    x, y = avals_in[0].shape, avals_in[1].shape
    flops = 2 * math.prod(x[d] for d in lc)
    flops *= math.prod(d for i, d in enumerate(x) if i not in lc)
    flops *= math.prod(d for i, d in enumerate(y) if i not in rc and i not in rb)
    return (flops, 0, 0)


def _call_cost(avals_in, avals_out, **params):
    body = params["jaxpr"] if "jaxpr" in params else params["call_jaxpr"]
    return _jaxpr_cost(body.jaxpr)


cost_rules[lax.integer_pow_p] = _integer_pow_cost
cost_rules[lax.dot_general_p] = _dot_general_cost
cost_rules[jit_primitive.jit_p] = _call_cost
cost_rules[custom_vjp.custom_vjp_call_p] = _call_cost
del _p
