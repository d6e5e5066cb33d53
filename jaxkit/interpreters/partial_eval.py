"""Tracing Python functions to jaxprs, and jaxpr-to-jaxpr passes (DCE, constvar conversion).

``DynamicJaxprTrace`` stages every primitive it sees into a list of equations. Values from
outside (concrete arrays, tracers of enclosing traces) become constvars; Python scalars become
inline literals. The trace remembers what it is tracing (``DebugInfo``) so that a concretization
error can name the function and the arguments the offending value depends on.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, ShapedArray, Var


@dataclass(frozen=True)
class DebugInfo:
    """What is being traced, for error messages: transformation, function and argument names."""

    traced_for: str
    func_name: str
    func_src_info: str | None
    arg_names: tuple[str, ...]


def debug_info(traced_for: str, fun: Callable, arg_names: Sequence[str]) -> DebugInfo:
    name = getattr(fun, "__name__", type(fun).__name__)
    code = getattr(fun, "__code__", None)
    src = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else None
    return DebugInfo(traced_for, name, src, tuple(arg_names))


class DynamicJaxprTracer(core.Tracer):
    __slots__ = ("_aval", "_var")

    def __init__(self, trace: DynamicJaxprTrace, aval: ShapedArray, var: Var):
        self._trace = trace
        self._aval = aval
        self._var = var

    @property
    def aval(self) -> ShapedArray:
        return self._aval


_literalable_types = (bool, int, float, complex, np.bool_, np.number,
                      *dtypes.extra_scalar_types())


class DynamicJaxprTrace(core.Trace):
    """Records primitives applied to its tracers as jaxpr equations."""

    __slots__ = ("eqns", "invars", "constvars", "constvals", "_const_ids", "debug")

    def __init__(self, debug: DebugInfo | None = None):
        super().__init__()
        self.eqns: list[JaxprEqn] = []
        self.invars: list[Var] = []
        self.constvars: list[Var] = []
        self.constvals: list[Any] = []
        self._const_ids: dict[int, Var] = {}
        self.debug = debug

    def new_arg(self, aval: ShapedArray) -> DynamicJaxprTracer:
        var = Var(aval)
        self.invars.append(var)
        return DynamicJaxprTracer(self, aval, var)

    def to_atom(self, x) -> Var | Literal:
        if isinstance(x, DynamicJaxprTracer) and x._trace is self:
            return x._var
        if isinstance(x, core.Tracer):
            core.check_tracer_live(x)
        elif isinstance(x, _literalable_types) and np.ndim(x) == 0 or (
                type(x) is np.ndarray and x.ndim == 0 and x.dtype.kind != "V"):
            # Scalars, rank-0 NumPy arrays among them (rules write constants that way), are
            # inlined as literals, as in JAX: no constant input for XLA to carry.
            return Literal(x, core.get_aval(x))
        var = self._const_ids.get(id(x))
        if var is None:
            var = self._const_ids[id(x)] = Var(core.get_aval(x))
            self.constvars.append(var)
            self.constvals.append(x)
        return var

    def process_primitive(self, primitive, args, params):
        invars = [self.to_atom(x) for x in args]
        out = primitive.abstract_eval(*[v.aval for v in invars], **params)
        out_avals = list(out) if primitive.multiple_results else [out]
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(JaxprEqn(primitive, invars, outvars, params))
        tracers = [DynamicJaxprTracer(self, a, v) for a, v in zip(out_avals, outvars)]
        return tracers if primitive.multiple_results else tracers[0]

    def to_jaxpr(self, outs: Sequence) -> tuple[Jaxpr, list]:
        outvars = [self.to_atom(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns, self.debug)
        return jaxpr, list(self.constvals)

    def describe_tracer(self, tracer: core.Tracer) -> str:
        """Which function is traced and which of its arguments ``tracer`` depends on."""
        if self.debug is None:
            return ""
        d = self.debug
        where = f" defined at {d.func_src_info}" if d.func_src_info else ""
        text = (f"The problem arose while tracing the function {d.func_name}{where} for "
                f"{d.traced_for}.")
        if isinstance(tracer, DynamicJaxprTracer) and tracer._trace is self:
            deps = _input_dependencies(self, tracer._var)
            names = [d.arg_names[i] for i in deps if i < len(d.arg_names)]
            if names:
                text += (" The value depends on the argument" + ("s " if len(names) > 1 else " ")
                         + ", ".join(names) + ".")
        return text


def _input_dependencies(trace: DynamicJaxprTrace, var: Var) -> list[int]:
    """Indices of the trace's inputs that ``var`` is computed from."""
    producer = {v: e for e in trace.eqns for v in e.outvars}
    index = {v: i for i, v in enumerate(trace.invars)}
    seen, stack, found = set(), [var], set()
    while stack:
        v = stack.pop()
        if v in seen or type(v) is Literal:
            continue
        seen.add(v)
        if v in index:
            found.add(index[v])
        elif v in producer:
            stack.extend(producer[v].invars)
    return sorted(found)


def trace_to_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray],
                   debug: DebugInfo | None = None) -> tuple[Jaxpr, list]:
    """Trace ``fun`` (flat arguments in, flat sequence out) at ``in_avals``.

    Returns the jaxpr and the values of its constvars (concrete arrays or tracers of enclosing
    traces, which the caller must pass back in under its own trace)."""
    trace = DynamicJaxprTrace(debug)
    with core.new_trace(trace):
        args = [trace.new_arg(a) for a in in_avals]
        outs = fun(*args)
        if not isinstance(outs, (list, tuple)):
            raise TypeError(f"internal: traced function must return a sequence, got {outs!r}")
        return trace.to_jaxpr(outs)


def trace_to_closed_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray],
                          debug: DebugInfo | None = None) -> ClosedJaxpr:
    jaxpr, consts = trace_to_jaxpr(fun, in_avals, debug)
    return ClosedJaxpr(jaxpr, consts)


# --------------------------------------------------------------------------------------------
# Jaxpr passes
# --------------------------------------------------------------------------------------------


def convert_constvars_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    """Turn constvars into leading invars."""
    return Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns,
                 jaxpr.debug_info)


def close_jaxpr(jaxpr: Jaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(jaxpr, [])


# Primitives whose equations must be kept even when their outputs are unused (side effects).
effectful_primitives: set[core.Primitive] = set()

# Optional per-primitive DCE rules: rule(used_outputs, eqn) -> (used_inputs, new_eqn or None)
dce_rules: dict[core.Primitive, Callable] = {}


def eqn_has_effects(eqn: JaxprEqn) -> bool:
    """Whether ``eqn`` is an effectful primitive or carries a jaxpr containing one (a ``jit``
    or control-flow body that prints must be kept even if its outputs are unused)."""
    return eqn.primitive in effectful_primitives or any(
        eqn_has_effects(e) for sub in core.subjaxprs(eqn.params) for e in sub.eqns)


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool] | None = None,
              prune_invars: bool = False) -> tuple[Jaxpr, list[bool]]:
    """Remove equations whose results are not needed. Returns the jaxpr and used inputs."""
    if used_outputs is None:
        used_outputs = [True] * len(jaxpr.outvars)
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    live = {v for v in outvars if type(v) is Var}
    new_eqns = []
    for eqn in reversed(jaxpr.eqns):
        used = [v in live for v in eqn.outvars]
        if not any(used) and not eqn_has_effects(eqn):
            continue
        rule = dce_rules.get(eqn.primitive)
        if rule is not None:
            used_ins, eqn = rule(used, eqn)
            if eqn is None:
                continue
            ins = [a for a, u in zip(eqn.invars, used_ins) if u]
        else:
            ins = eqn.invars
        live.update(a for a in ins if type(a) is Var)
        new_eqns.append(eqn)
    new_eqns.reverse()
    used_invars = [v in live for v in jaxpr.invars]
    invars = [v for v, u in zip(jaxpr.invars, used_invars) if u] if prune_invars else jaxpr.invars
    constvars = [v for v in jaxpr.constvars if v in live] if prune_invars else jaxpr.constvars
    return Jaxpr(constvars, invars, outvars, new_eqns, jaxpr.debug_info), used_invars


def inline_literals_and_dedupe_consts(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Drop constvars that are not used (keeps printed jaxprs and lowered modules small)."""
    jaxpr = closed.jaxpr
    used: set = set()
    for eqn in jaxpr.eqns:
        used.update(a for a in eqn.invars if type(a) is Var)
    used.update(a for a in jaxpr.outvars if type(a) is Var)
    keep = [i for i, v in enumerate(jaxpr.constvars) if v in used]
    if len(keep) == len(jaxpr.constvars):
        return closed
    new = Jaxpr([jaxpr.constvars[i] for i in keep], jaxpr.invars, jaxpr.outvars, jaxpr.eqns,
                jaxpr.debug_info)
    return ClosedJaxpr(new, [closed.consts[i] for i in keep])
