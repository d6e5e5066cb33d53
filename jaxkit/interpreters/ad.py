"""Forward- and reverse-mode automatic differentiation: JVP trace, linearize, transpose.

Rule tables (filled by each primitive's block in ``jaxkit.lax``):

* ``primitive_jvps[p](primals, tangents, **params) -> (primal_out, tangent_out)``; tangents may
  be symbolic ``Zero``s. For multiple-result primitives both outputs are lists.
* ``primitive_transposes[p](cts, *args, **params) -> list of cotangents``, one per arg; ``args``
  are ``UndefinedPrimal`` for the linear inputs, the concrete/traced value otherwise; ``cts`` is
  the output cotangent (a list for multiple-result primitives), possibly a ``Zero``.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from jaxkit import core

primitive_jvps: dict[core.Primitive, Callable] = {}
primitive_transposes: dict[core.Primitive, Callable] = {}


class Zero:
    """A symbolic zero tangent/cotangent of abstract value ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    @staticmethod
    def from_primal_value(x) -> Zero:
        return Zero(core.get_aval(x).to_tangent_aval())

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


class UndefinedPrimal:
    """Stands for a linear input during transposition."""

    __slots__ = ("aval",)

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x) -> bool:
    return type(x) is UndefinedPrimal


# --------------------------------------------------------------------------------------------
# Tangent arithmetic. ``add_jaxvals_p`` sums tangents/cotangents (its block of rules, with
# lowering and batching, is in ``jaxkit.lax.elementwise``); zeros come from the hook below,
# installed by ``jaxkit.lax`` which owns broadcasting.
# --------------------------------------------------------------------------------------------

add_jaxvals_p = core.Primitive("add_any")
add_jaxvals_p.def_abstract_eval(lambda x, y: x.update(weak_type=x.weak_type and y.weak_type))

_zeros_like_aval: Callable[[core.ShapedArray], object] | None = None


def register_zeros_like_aval(fn: Callable[[core.ShapedArray], object]) -> None:
    global _zeros_like_aval
    _zeros_like_aval = fn


def zeros_like_aval(aval: core.ShapedArray):
    """A concrete (or traced, under the current trace) array of zeros of ``aval``."""
    return _zeros_like_aval(aval)


def instantiate_zeros(t):
    return zeros_like_aval(t.aval) if type(t) is Zero else t


def add_tangents(x, y):
    if type(x) is Zero:
        return y
    if type(y) is Zero:
        return x
    return add_jaxvals_p.bind(x, y)


# --------------------------------------------------------------------------------------------
# Helpers that fill ``primitive_jvps`` / ``primitive_transposes`` from one-line rules
# --------------------------------------------------------------------------------------------


def defjvp(prim: core.Primitive, *jvp_rules: Callable | None) -> None:
    """One rule per argument: ``rule(tangent_i, *primals, **params)`` gives that argument's
    contribution to the output tangent; ``None`` marks a non-differentiable argument."""

    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        return ans, _sum_contributions(ans, primals, tangents, jvp_rules, params, False)

    primitive_jvps[prim] = jvp


def defjvp2(prim: core.Primitive, *jvp_rules: Callable | None) -> None:
    """Like ``defjvp`` but each rule also receives the primal output:
    ``rule(tangent_i, ans, *primals, **params)``."""

    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        return ans, _sum_contributions(ans, primals, tangents, jvp_rules, params, True)

    primitive_jvps[prim] = jvp


def _sum_contributions(ans, primals, tangents, rules, params, with_ans):
    out = None
    for rule, t in zip(rules, tangents):
        if rule is None or type(t) is Zero:
            continue
        c = rule(t, ans, *primals, **params) if with_ans else rule(t, *primals, **params)
        out = c if out is None else add_tangents(out, c)
    if out is None:
        return Zero(core.get_aval(ans).to_tangent_aval())
    return out


def defjvp_zero(prim: core.Primitive) -> None:
    """The output does not depend differentiably on any input (e.g. comparisons)."""

    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        if prim.multiple_results:
            return ans, [Zero(core.get_aval(a).to_tangent_aval()) for a in ans]
        return ans, Zero(core.get_aval(ans).to_tangent_aval())

    primitive_jvps[prim] = jvp


def deflinear(prim: core.Primitive, transpose_rule: Callable) -> None:
    """A primitive linear in all its arguments: the JVP applies it to the tangents.
    ``transpose_rule(ct, **params)`` returns one cotangent per argument."""
    primitive_jvps[prim] = partial(_linear_jvp, prim)
    primitive_transposes[prim] = partial(_linear_transpose, transpose_rule)


def deflinear2(prim: core.Primitive, transpose_rule: Callable) -> None:
    """Like ``deflinear`` but ``transpose_rule(ct, *args, **params)`` also sees the arguments
    (``UndefinedPrimal``s carrying avals)."""
    primitive_jvps[prim] = partial(_linear_jvp, prim)
    primitive_transposes[prim] = partial(_linear_transpose2, transpose_rule)


def _linear_jvp(prim, primals, tangents, **params):
    ans = prim.bind(*primals, **params)
    if all(type(t) is Zero for t in tangents):
        if prim.multiple_results:
            return ans, [Zero(core.get_aval(a).to_tangent_aval()) for a in ans]
        return ans, Zero(core.get_aval(ans).to_tangent_aval())
    return ans, prim.bind(*map(instantiate_zeros, tangents), **params)


def _linear_transpose(transpose_rule, cts, *args, **params):
    if type(cts) is Zero:
        return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
    return transpose_rule(cts, **params)


def _linear_transpose2(transpose_rule, cts, *args, **params):
    if type(cts) is Zero:
        return [Zero(a.aval) if is_undefined_primal(a) else None for a in args]
    return transpose_rule(cts, *args, **params)


def defbilinear(prim: core.Primitive, lhs_rule: Callable, rhs_rule: Callable) -> None:
    """A primitive linear in each argument separately (mul, dot_general).
    ``lhs_rule(ct, x, y, **params)`` is the cotangent of ``x`` (an ``UndefinedPrimal``), and
    likewise ``rhs_rule`` for ``y``; the JVP follows from them by the product rule."""
    defjvp(prim, lambda g, x, y, **p: prim.bind(g, y, **p),
           lambda g, x, y, **p: prim.bind(x, g, **p))

    def transpose(ct, x, y, **params):
        if type(ct) is Zero:
            return [Zero(x.aval) if is_undefined_primal(x) else None,
                    Zero(y.aval) if is_undefined_primal(y) else None]
        return [lhs_rule(ct, x, y, **params) if is_undefined_primal(x) else None,
                rhs_rule(ct, x, y, **params) if is_undefined_primal(y) else None]

    primitive_transposes[prim] = transpose
