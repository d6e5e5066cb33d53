"""Taylor-mode automatic differentiation: the jet trace, the ``jet`` entry point and the helpers
that fill the ``jet_rules`` table (the rules themselves are in ``jaxkit.experimental.jet``).

A ``JetTracer`` carries a primal value and its truncated Taylor series: ``terms[k-1]`` is the
``k``-th coefficient (or the symbolic ``zero_series`` when every coefficient is zero, as for
a constant). Like the other traces of jaxkit (``ad.JVPTrace``, ``batching.BatchTrace``) the
``JetTrace`` is stackless: it unboxes only its own tracers, treats everything else as a constant
with a zero series, and runs each rule with its parent trace current, so nested ``jet``s, and
``jet`` under ``jit``/``grad``/``vmap`` (or the other way round), never confuse their values.

Rule signature (one for every primitive):
``jet_rules[p](primals_in, series_in, **params) -> (primal_out, series_out)``, where
``series_in[i]`` is the list of ``order`` coefficients of argument ``i`` (zero coefficients are
instantiated as zero arrays first, as JAX does) and ``series_out`` is a list of coefficients
(per output, for multiple-result primitives) or ``zero_series``. Coefficients inside the rules
are *not* factorial-scaled: ``x(t) = x0 + x1 t + x2 t**2 + ...``.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from jaxkit import core
from jaxkit import tree_util
from jaxkit import lax
from jaxkit import numpy as jnp
from jaxkit.core import ClosedJaxpr, ShapedArray
from jaxkit.interpreters import partial_eval as pe

jet_rules: dict[core.Primitive, Callable] = {}


class ZeroTerm:
    """The symbolic zero coefficient of one order (a pytree with no leaves)."""


zero_term = ZeroTerm()
tree_util.register_pytree_node(ZeroTerm, lambda z: ((), None), lambda _, xs: zero_term)


class ZeroSeries:
    """The symbolic all-zero series of a value that does not depend on the jet's inputs."""


zero_series = ZeroSeries()
tree_util.register_pytree_node(ZeroSeries, lambda z: ((), None), lambda _, xs: zero_series)


def fact(n):
    """``n!`` computed as ``exp(lgamma(n + 1))`` (so it is a float32 array, a little
    inexact, exactly as the scaling of JAX's ``jet``)."""
    return lax.exp(lax.lgamma(n + 1.))


# --------------------------------------------------------------------------------------------
# The jet trace
# --------------------------------------------------------------------------------------------


class JetTracer(core.Tracer):
    """A primal value (of the parent trace) with its Taylor coefficients (a list, or
    ``zero_series``)."""

    __slots__ = ("primal", "terms")

    def __init__(self, trace: JetTrace, primal, terms):
        if not (terms is zero_series or isinstance(terms, (list, tuple))):
            raise TypeError(f"internal: jet terms must be a list or zero_series, got {terms!r}")
        self._trace = trace
        self.primal = primal
        self.terms = terms

    @property
    def aval(self) -> ShapedArray:
        return core.get_aval(self.primal)

    def __repr__(self):
        return f"JetTracer<{self.aval}>"


class JetTrace(core.Trace):
    """Propagates truncated Taylor series of ``order`` coefficients through each primitive."""

    __slots__ = ("order",)

    def __init__(self, order: int, parent: core.Trace | None = None):
        super().__init__(parent)
        self.order = order

    def to_primal_terms_pair(self, val) -> tuple[Any, Any]:
        """``(primal, terms)`` of ``val`` as this trace sees it: anything that is not one of
        its own tracers is a constant (``zero_series``)."""
        if isinstance(val, JetTracer) and val._trace is self:
            return val.primal, val.terms
        if isinstance(val, core.Tracer) and val._trace._invalid:
            core.check_tracer_live(val)
        return val, zero_series

    def process_primitive(self, primitive, args, params):
        primals_in, series_in = [], []
        for x in args:
            p, s = self.to_primal_terms_pair(x)
            primals_in.append(p)
            series_in.append(s)
        if all(s is zero_series for s in series_in):
            with core.set_current_trace(self.parent):
                out = primitive.bind(*primals_in, **params)
            if primitive.multiple_results:
                return [JetTracer(self, p, zero_series) for p in out]
            return JetTracer(self, out, zero_series)
        rule = jet_rules.get(primitive)
        if rule is None:
            raise NotImplementedError(
                f"jet rule for '{primitive.name}' is not implemented: jet (Taylor-mode "
                f"differentiation) cannot propagate a series through '{primitive.name}'. "
                "Register one in jaxkit.experimental.jet.jet_rules (deflinear, defzero, "
                "def_deriv and def_comp write the common kinds).")
        with core.set_current_trace(self.parent):
            # Zero coefficients are instantiated, as JAX does, so every rule sees arrays.
            series_in = [_instantiate(x, s, self.order) for x, s in zip(primals_in, series_in)]
            primal_out, terms_out = rule(primals_in, series_in, **params)
        if primitive.multiple_results:
            if terms_out is zero_series:
                terms_out = [zero_series] * len(primal_out)
            return [JetTracer(self, p, _as_terms(ts)) for p, ts in zip(primal_out, terms_out)]
        return JetTracer(self, primal_out, _as_terms(terms_out))


def _as_terms(terms):
    return terms if terms is zero_series else list(terms)


def _instantiate(x, terms, order: int) -> list:
    if terms is zero_series:
        terms = [zero_term] * order
    return [jnp.zeros(jnp.shape(x), jnp.result_type(x)) if t is zero_term else t
            for t in terms]


def jet_flat(fun: Callable, primals: Sequence, series: Sequence[Sequence], order: int
             ) -> tuple[list, list]:
    """Taylor mode on a flat function (flat values in, flat sequence out), with unscaled
    coefficients. Returns the primal outputs and, per output, its coefficients or
    ``zero_series`` (for an output that does not depend on the inputs)."""
    trace = JetTrace(order)
    with core.new_trace(trace):
        ins = [JetTracer(trace, p, list(s)) for p, s in zip(primals, series)]
        outs = fun(*ins)
        pairs = [trace.to_primal_terms_pair(o) for o in outs]
    trace_ref = weakref.ref(trace)
    del trace, ins, outs
    core.check_no_leaks(trace_ref)
    return [p for p, _ in pairs], [s for _, s in pairs]


# --------------------------------------------------------------------------------------------
# The public entry point
# --------------------------------------------------------------------------------------------


def jet(fun: Callable, primals: Sequence, series: Sequence[Sequence], factorial_scaled=True,
        **_) -> tuple[Any, Any]:
    r"""Taylor-mode higher-order automatic differentiation.

    ``primals`` holds one array per positional argument of ``fun`` and ``series`` one list of
    coefficients per argument, all of the same length (the degree of the truncated Taylor
    polynomial). Returns ``(primals_out, series_out)``: ``fun(*primals)`` and, per output leaf,
    the list of coefficients of ``fun`` composed with the input polynomial. With
    ``factorial_scaled`` (the default) the ``k``-th coefficient in and out is the ``k``-th
    derivative (it is divided and multiplied by ``k!``); otherwise coefficients are the plain
    Taylor coefficients.

    >>> import jaxkit.numpy as jnp
    >>> f0, (f1, f2) = jet(jnp.sin, (0.5 ** 3,), ((3 * 0.5 ** 2, 6 * 0.5),))
    """
    try:
        order, = set(map(len, series))
    except ValueError:
        raise ValueError("jet terms have inconsistent lengths for different arguments") from None
    for i, (x, terms) in enumerate(zip(primals, series)):
        if not tree_util.treedef_is_leaf(tree_util.tree_structure(x)):
            raise ValueError(f"primal value at position {i} is not an array")
        for j, t in enumerate(terms):
            if not tree_util.treedef_is_leaf(tree_util.tree_structure(t)):
                raise ValueError(f"term {j} for argument {i} is not an array")
    if factorial_scaled:
        series = [[t / fact(k + 1) for k, t in enumerate(terms)] for terms in series]
    out_tree_cell = []

    def flat_fun(*args):
        out, out_tree = tree_util.tree_flatten(fun(*args))
        out_tree_cell.append(out_tree)
        return out

    out_primals, out_terms = jet_flat(flat_fun, primals, series, order)
    out_terms = [[jnp.zeros_like(p)] * order if s is zero_series else s
                 for p, s in zip(out_primals, out_terms)]
    if factorial_scaled:
        out_terms = [[t * fact(k + 1) for k, t in enumerate(terms)] for terms in out_terms]
    out_tree = out_tree_cell[0]
    return (tree_util.tree_unflatten(out_tree, out_primals),
            tree_util.tree_unflatten(out_tree, out_terms))


jet2 = partial(jet, factorial_scaled=False)


# --------------------------------------------------------------------------------------------
# Jaxprs: the jet of a jaxpr, for the rules of primitives that carry one (``jit``)
# --------------------------------------------------------------------------------------------

# ClosedJaxpr -> {(order, input avals): jet ClosedJaxpr}: reusing the same jaxpr object lets
# the jit primitive's executable cache hit on later calls.
_jet_jaxpr_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def jet_jaxpr(closed: ClosedJaxpr, order: int, avals: Sequence[ShapedArray]) -> ClosedJaxpr:
    """The jet of a jaxpr with ``n`` inputs and ``m`` outputs: it maps ``[*primals, *terms]``
    (the ``order`` coefficients of each input in turn, whose types are ``avals[n:]``) to
    ``[*primal outputs, *terms]`` (``order`` coefficients per output, zeros instantiated).
    Cached per jaxpr object."""
    avals = tuple(avals)
    cacheable = not any(isinstance(c, core.Tracer) for c in closed.consts)
    per = _jet_jaxpr_cache.setdefault(closed, {}) if cacheable else {}
    hit = per.get((order, avals))
    if hit is not None:
        return hit
    n_in = len(closed.in_avals)

    def fun(*args):
        primals, flat_terms = args[:n_in], args[n_in:]
        series = [flat_terms[i * order:(i + 1) * order] for i in range(n_in)]
        p_out, s_out = jet_flat(core.jaxpr_as_fun(closed), primals, series, order)
        s_out = [_instantiate(p, s, order) for p, s in zip(p_out, s_out)]
        return [*p_out, *(t for terms in s_out for t in terms)]

    jaxpr, consts = pe.trace_to_jaxpr(fun, list(avals), closed.jaxpr.debug_info)
    result = ClosedJaxpr(jaxpr, consts)
    per[(order, avals)] = result
    return result


# --------------------------------------------------------------------------------------------
# Helpers that fill ``jet_rules`` (names and meaning as in JAX's jet module)
# --------------------------------------------------------------------------------------------


def defzero(prim: core.Primitive) -> None:
    """The output's series is zero whatever the inputs (comparisons, rounding, bit ops)."""
    jet_rules[prim] = partial(zero_prop, prim)


def zero_prop(prim: core.Primitive, primals_in, series_in, **params):
    """The rule ``defzero`` installs: the primal result and ``zero_series``."""
    return prim.bind(*primals_in, **params), zero_series


def deflinear(prim: core.Primitive) -> None:
    """A primitive linear in all its arguments: each coefficient is the primitive applied to
    the arguments' coefficients of that order."""
    jet_rules[prim] = partial(linear_prop, prim)


def linear_prop(prim: core.Primitive, primals_in, series_in, **params):
    """The rule ``deflinear`` installs."""
    primal_out = prim.bind(*primals_in, **params)
    series_out = [prim.bind(*terms_in, **params) for terms_in in zip(*series_in)]
    if prim.multiple_results:
        series_out = [list(ts) for ts in zip(*series_out)]
    return primal_out, series_out


def def_deriv(prim: core.Primitive, deriv: Callable) -> None:
    """A unary primitive ``f`` given by its derivative ``deriv`` (a function of ``x``): the
    coefficients of ``v = f(u)`` follow from ``v' = f'(u) u'``."""
    jet_rules[prim] = partial(deriv_prop, prim, deriv)


def deriv_prop(prim: core.Primitive, deriv: Callable, primals_in, series_in):
    """The rule ``def_deriv`` installs."""
    x, = primals_in
    series, = series_in
    c0, cs = jet2(deriv, primals_in, series_in)
    return chain_from_derivative(prim.bind(x), [c0, *cs], [x, *series])


def chain_from_derivative(primal_out, c: Sequence, u: Sequence) -> tuple[Any, list]:
    """Coefficients of ``v`` with ``v' = c u'``, from those of ``c`` and ``u``:
    ``k v_k = sum_{j=1..k} j u_j c_{k-j}``."""
    v = [primal_out]
    for k in range(1, len(u)):
        v.append(sum(j * c[k - j] * u[j] for j in range(1, k + 1)) / k)
    return v[0], v[1:]


def def_comp(prim: core.Primitive, comp: Callable, **kwargs) -> None:
    """A primitive written as a composition ``comp`` of primitives that have jet rules."""
    # (the equation's own parameters, such as an ``accuracy``, are the composition's business)
    jet_rules[prim] = lambda primals_in, series_in, **_: jet2(comp, primals_in, series_in,
                                                             **kwargs)
