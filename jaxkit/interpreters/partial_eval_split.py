"""Partial evaluation: split a computation into a *known* part, run now, and an *unknown* part,
staged into a jaxpr to run later.

This is what ``linearize``/``vjp``/``grad`` are built on (JAX's classic design): a JVP trace
runs on top of a ``JaxprTrace``; primal values are known, so primal operations are bound under
the parent trace (they execute eagerly when the parent is the eval trace, which is why Python
control flow on primal values works under ``grad``), while tangent values are unknown, so
tangent operations are recorded into a linear jaxpr whose constants are the *residuals*.

Stackless representation: a ``JaxprTrace`` boxes only unknown values (``JaxprTracer``). Every
other value (a concrete array, a tracer of an enclosing trace) is *known* to it, and stays as it
is. An operation whose inputs are all known is bound under the parent trace; an operation with an
unknown input is recorded (its known inputs become residuals), unless its primitive has a rule in
``partial_eval_rules`` (primitives carrying jaxprs, so that their known part runs now).

``partial_eval_jaxpr`` does the same at the level of jaxprs, for the rules of such primitives.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit.core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, ShapedArray, Var
from jaxkit.interpreters import partial_eval as pe

# rule(trace, *args, **params) -> outputs (values for known outputs, tracers for unknown ones).
# ``args`` mixes known values and the trace's ``JaxprTracer``s; at least one is unknown.
partial_eval_rules: dict[core.Primitive, Callable] = {}


class PartialVal:
    """A value that is either known (``value``) or unknown (only its abstract value)."""

    __slots__ = ("aval", "is_known", "value")

    def __init__(self, aval: ShapedArray, value: Any, is_known: bool):
        self.aval = aval
        self.value = value
        self.is_known = is_known

    @classmethod
    def known(cls, value) -> PartialVal:
        return cls(core.get_aval(value), value, True)

    @classmethod
    def unknown(cls, aval: ShapedArray) -> PartialVal:
        return cls(aval, None, False)

    def get_known(self):
        assert self.is_known
        return self.value

    def __repr__(self):
        what = f"known({self.value!r})" if self.is_known else f"unknown({self.aval.str_short()})"
        return f"PartialVal.{what}"


class JaxprTracer(core.Tracer):
    """An unknown value: a variable of the jaxpr its ``JaxprTrace`` is recording."""

    __slots__ = ("_aval", "_var")

    def __init__(self, trace: JaxprTrace, aval: ShapedArray, var: Var):
        self._trace = trace
        self._aval = aval
        self._var = var

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def __repr__(self):
        return f"Traced<{self._aval.str_short()}>with<JaxprTrace(unknown)>"


_literalable_types = (bool, int, float, complex, np.bool_, np.number)


class JaxprTrace(core.Trace):
    """Runs known operations under its parent and records the others (see module docstring)."""

    __slots__ = ("_const_ids", "constvals", "constvars", "eqns", "invars")

    def __init__(self, parent: core.Trace | None = None):
        super().__init__(parent)
        self.eqns: list[JaxprEqn] = []
        self.invars: list[Var] = []
        self.constvars: list[Var] = []
        self.constvals: list[Any] = []
        self._const_ids: dict[int, Var] = {}

    # ---- known / unknown ----
    def is_known(self, x) -> bool:
        return not (isinstance(x, JaxprTracer) and x._trace is self)

    def new_arg(self, aval: ShapedArray) -> JaxprTracer:
        """A new unknown input of the recorded jaxpr."""
        var = Var(aval)
        self.invars.append(var)
        return JaxprTracer(self, aval, var)

    def to_atom(self, x) -> Var | Literal:
        """The jaxpr atom for ``x``: its variable if unknown, else a literal (Python scalars)
        or a residual (a constvar of the recorded jaxpr whose value is ``x``)."""
        if isinstance(x, JaxprTracer) and x._trace is self:
            return x._var
        if isinstance(x, core.Tracer):
            core.check_tracer_live(x)
        elif isinstance(x, _literalable_types) and np.ndim(x) == 0:
            return Literal(x, core.get_aval(x))
        var = self._const_ids.get(id(x))
        if var is None:
            var = self._const_ids[id(x)] = Var(core.get_aval(x))
            self.constvars.append(var)
            self.constvals.append(x)
        return var

    # ---- primitives ----
    def process_primitive(self, primitive, args, params):
        if all(self.is_known(x) for x in args):
            with core.set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        rule = partial_eval_rules.get(primitive)
        if rule is not None:
            return rule(self, *args, **params)
        return self.default_process_primitive(primitive, args, params)

    def default_process_primitive(self, primitive, args, params):
        """Record the equation; its known inputs become residuals."""
        avals = [core.get_aval(x) for x in args]
        out = primitive.abstract_eval(*avals, **params)
        out_avals = list(out) if primitive.multiple_results else [out]
        tracers = self.stage(primitive, args, out_avals, params)
        return tracers if primitive.multiple_results else tracers[0]

    def stage(self, primitive: core.Primitive, args: Sequence, out_avals: Sequence[ShapedArray],
              params: dict) -> list[JaxprTracer]:
        """Record ``primitive`` applied to ``args`` (known or unknown) as an equation with
        outputs of ``out_avals``; return the unknown output tracers (for rules)."""
        invars = [self.to_atom(x) for x in args]
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(JaxprEqn(primitive, invars, outvars, dict(params)))
        return [JaxprTracer(self, a, v) for a, v in zip(out_avals, outvars)]

    def to_jaxpr(self, outs: Sequence) -> tuple[Jaxpr, list]:
        """The recorded jaxpr with outputs ``outs`` (known ones become residual outputs), and
        the residual values (one per constvar)."""
        outvars = [self.to_atom(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        jaxpr, _ = pe.dce_jaxpr(jaxpr)
        used = _used_vars(jaxpr)
        keep = [i for i, v in enumerate(self.constvars) if v in used]
        jaxpr = Jaxpr([self.constvars[i] for i in keep], jaxpr.invars, jaxpr.outvars, jaxpr.eqns)
        return jaxpr, [self.constvals[i] for i in keep]


def _used_vars(jaxpr: Jaxpr) -> set:
    used = {a for e in jaxpr.eqns for a in e.invars if type(a) is Var}
    used.update(a for a in jaxpr.outvars if type(a) is Var)
    return used


def trace_to_subjaxpr(fun: Callable, in_pvals: Sequence[PartialVal],
                      instantiate: bool | Sequence[bool] = False
                      ) -> tuple[Jaxpr, list[PartialVal], list]:
    """Partially evaluate ``fun`` (flat values in, flat sequence out) under the current trace.

    Known inputs are passed as they are; unknown ones become inputs of the returned jaxpr.
    Returns the jaxpr of the unknown part (constvars: residuals, invars: the unknown inputs,
    outvars: the unknown outputs), the outputs as ``PartialVal``s, and the residual values.
    Outputs marked in ``instantiate`` are made unknown even if they are known."""
    trace = JaxprTrace()
    try:
        args = [p.value if p.is_known else trace.new_arg(p.aval) for p in in_pvals]
        with core.set_current_trace(trace):
            outs = fun(*args)
        if isinstance(instantiate, bool):
            instantiate = [instantiate] * len(outs)
        out_pvals, unknown_outs = [], []
        for o, inst in zip(outs, instantiate):
            if trace.is_known(o) and not inst:
                out_pvals.append(PartialVal.known(o))
            else:
                out_pvals.append(PartialVal.unknown(core.get_aval(o)))
                unknown_outs.append(o)
        jaxpr, residuals = trace.to_jaxpr(unknown_outs)
    finally:
        trace.invalidate()
    return jaxpr, out_pvals, residuals


# ClosedJaxpr -> {(unknowns, instantiate): result}: the same jaxpr object partially evaluated
# the same way gives the same jaxpr objects, so executables compiled for them are reused.
_pe_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def partial_eval_jaxpr(closed: ClosedJaxpr, unknowns: Sequence[bool],
                       instantiate: bool | Sequence[bool]
                       ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """Split a jaxpr by data dependence on its unknown inputs (JAX's
    ``partial_eval_jaxpr_nounits``).

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` maps the known inputs to
    ``[*known outputs, *residuals]``; ``unknown`` maps ``[*residuals, *unknown inputs]`` to the
    unknown outputs; ``out_unknowns[i]`` says whether output ``i`` is unknown (data-dependent on
    an unknown input, or forced by ``instantiate``). Primitives with a rule in
    ``partial_eval_rules`` are split recursively. The constants of ``closed`` must be concrete.
    """
    n_out = len(closed.out_avals)
    inst = (instantiate,) * n_out if isinstance(instantiate, bool) else tuple(instantiate)
    key = (tuple(bool(u) for u in unknowns), inst)
    cacheable = not any(isinstance(c, core.Tracer) for c in closed.consts)
    per = _pe_cache.setdefault(closed, {}) if cacheable else {}
    hit = per.get(key)
    if hit is not None:
        return hit
    cell = []

    def known_fun(*known_vals):
        it = iter(known_vals)
        pvals = [PartialVal.unknown(a) if uk else PartialVal.known(next(it))
                 for a, uk in zip(closed.in_avals, unknowns)]
        jaxpr_uk, out_pvals, residuals = trace_to_subjaxpr(
            core.jaxpr_as_fun(closed), pvals, list(inst))
        cell.append((jaxpr_uk, [not p.is_known for p in out_pvals], len(residuals)))
        return [p.value for p in out_pvals if p.is_known] + list(residuals)

    known_avals = [a for a, uk in zip(closed.in_avals, unknowns) if not uk]
    jaxpr_known, consts_known = pe.trace_to_jaxpr(known_fun, known_avals,
                                                  closed.jaxpr.debug_info)
    jaxpr_uk, out_unknowns, num_res = cell[0]
    known = ClosedJaxpr(jaxpr_known, consts_known)
    unknown = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr_uk), [])
    result = (known, unknown, out_unknowns, num_res)
    per[key] = result
    return result
