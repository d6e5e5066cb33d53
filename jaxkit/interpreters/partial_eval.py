"""Tracing Python functions to jaxprs, partial evaluation, and jaxpr passes (DCE).

Two traces record equations into a jaxpr, sharing one tracer class and one recorder:

* ``DynamicJaxprTrace`` stages every primitive it sees (``jit``, ``make_jaxpr``, the bodies of
  control flow). Values from outside (concrete arrays, tracers of enclosing traces) become
  constvars; Python scalars become inline literals. The trace remembers what it is tracing
  (``DebugInfo``) so that a concretization error can name the function and the arguments the
  offending value depends on.
* ``JaxprTrace`` *partially evaluates*: it splits a computation into a known part, run now, and
  an unknown part, staged into a jaxpr to run later. This is what ``linearize``/``vjp``/``grad``
  are built on (JAX's classic design): a JVP trace runs on top of it; primal values are known,
  so primal operations are bound under the parent trace (they execute eagerly when the parent
  is the eval trace, which is why Python control flow on primal values works under ``grad``),
  while tangent values are unknown, so tangent operations are recorded into a linear jaxpr
  whose constants are the *residuals*. Stackless: a ``JaxprTrace`` boxes only unknown values;
  every other value (a concrete array, a tracer of an enclosing trace) is known to it. An
  operation with an unknown input is recorded (its known inputs become residuals), unless its
  primitive has a rule in ``partial_eval_rules`` (primitives carrying jaxprs, so that their
  known part runs now). ``partial_eval_jaxpr`` does the same at the level of jaxprs.
"""
from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxkit import core, dtypes, literals, source_info
from jaxkit import effects, tree_util
from jaxkit.jaxpr import Namer, effect_rules, pp_eqn
from jaxkit.core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, ShapedArray, Var

Val = Any  # a known value (JAX's alias)

# rule(trace, *args, **params) -> outputs (values for known outputs, tracers for unknown ones).
# ``args`` mixes known values and the trace's ``JaxprTracer``s; at least one is unknown.
partial_eval_rules: dict[core.Primitive, Callable] = {}


# JAX's name for the table: a user's primitive registers its rule there the same way.
custom_partial_eval_rules = partial_eval_rules

# JAX's rules for splitting one equation of a rematerialized jaxpr:
# ``rule(saveable, unks_in, inst_in, eqn) -> (eqn_known, eqn_staged, unks_out, inst_out,
# residual_vars)``. ``checkpoint``'s split consults them (``partial_eval_jaxpr(...,
# jaxpr_custom_rules=True)``) for an equation with some unknown input, as JAX's remat does.
partial_eval_jaxpr_custom_rules: dict[core.Primitive, Callable] = {}


def defpartial_eval(prim: core.Primitive, rule: Callable) -> None:
    """``rule(trace, *args, **params)``: how a ``JaxprTrace`` splits ``prim`` when some of
    its inputs are unknown (primitives carrying jaxprs run their known part now)."""
    partial_eval_rules[prim] = rule


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


def flat_outputs(debug: DebugInfo | None, out: Any) -> tuple[list, Any]:
    """The leaves and tree of a traced function's output, each leaf checked to be a value a
    program can return (JAX's error otherwise)."""
    pairs, out_tree = tree_util.tree_flatten_with_path(out)
    for path, leaf in pairs:
        if debug is not None and not (isinstance(leaf, core.Tracer) or
                                      core.is_array_like(leaf)):
            raise invalid_output_error(debug, leaf, tree_util.keystr(path),
                                       tree_util.treedef_is_leaf(out_tree))
    return [leaf for _, leaf in pairs], out_tree


def invalid_output_error(debug: DebugInfo, leaf: Any, path: str,
                         one_output: bool) -> TypeError:
    """JAX's error for a traced function that returned something that is no array: which
    function, for what, the value's type and (among several outputs) its path."""
    src = f"{debug.func_name} at {debug.func_src_info}" if debug.func_src_info else \
        debug.func_name
    where = "" if one_output else f" at output component {path}"
    return TypeError(f"function {src} traced for {debug.traced_for} returned a value of type "
                     f"{type(leaf)}{where}, which is not a valid JAX type")


def positional_labels(fun: Callable) -> tuple[list[str], str | None]:
    """``fun``'s positional parameter names and its ``*args`` name (None without one)."""
    try:
        params = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return [], None
    return ([p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)],
            next((p.name for p in params if p.kind == p.VAR_POSITIONAL), None))


def arg_label(labels: tuple[list[str], str | None], i: int) -> str:
    """The name JAX gives the ``i``-th positional argument: its parameter, ``args[k]`` for
    the ``k``-th one caught by ``*args``."""
    params, varargs = labels
    if i < len(params):
        return params[i]
    return f"{varargs or 'args'}[{i - len(params) if varargs else i}]"


def flat_arg_names(fun: Callable, args: Sequence, kwargs: dict | None = None) -> list[str]:
    """One name per leaf of ``fun``'s arguments, as JAX's debug info names them: the
    positional parameter's name (``args[i]`` past them) or the keyword, then the leaf's key
    path (``c[0]``, ``params['w']``)."""
    labels = positional_labels(fun)
    names = []
    for i, a in enumerate(args):
        label = arg_label(labels, i)
        names += [label + tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(a)[0]]
    for k, v in (kwargs or {}).items():
        names += [k + tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(v)[0]]
    return names


class JaxprTracer(core.Tracer):
    """A value being recorded: a variable of the jaxpr its trace is building (for a
    ``JaxprTrace``, an unknown value)."""

    __slots__ = ("_aval", "_var")

    def __init__(self, trace: _RecordingTrace, aval: ShapedArray, var: Var):
        self._trace = trace
        self._aval = aval
        self._var = var

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def __repr__(self):
        # JAX 0.10.2's form for the tracers of partial evaluation (linearize's tangents).
        return f"Traced<{self._aval}:{type(self._trace).__name__}>"


class DynamicJaxprTracer(JaxprTracer):
    """A tracer of a ``DynamicJaxprTrace`` (jit, make_jaxpr, control-flow bodies): a class of
    its own, named as JAX's, because user code tells tracers apart by their type's name."""

    __slots__ = ()

    def __repr__(self):
        # JAX 0.10.2 prints the tracers of jit/make_jaxpr tracing as ``JitTracer(~float32[])``.
        return f"JitTracer({self._aval})"


_literalable_types = (bool, int, float, complex, np.bool_, np.number,
                      *dtypes.extra_scalar_types())


# Rank-0 arrays of these types are literals (a typed one keeps its aval: a float64 under
# x64 off stays float64, as JAX's constants in rules).
_literal_array_types = (np.ndarray, literals.TypedNdArray)


class _RecordingTrace(core.Trace):
    """What both traces share: the jaxpr being recorded (inputs, constants, equations)."""

    __slots__ = ("_const_ids", "_names_prefix", "constvals", "constvars", "eqns", "invars")
    tracer_type: type[JaxprTracer] = JaxprTracer

    def __init__(self, parent: core.Trace | None = None):
        super().__init__(parent)
        # Equations record name stacks relative to the one this trace started under.
        self._names_prefix = len(source_info.current_name_stack())
        self.eqns: list[JaxprEqn] = []
        self.invars: list[Var] = []
        self.constvars: list[Var] = []
        self.constvals: list[Any] = []
        self._const_ids: dict[int, Var] = {}

    def new_arg(self, aval: ShapedArray) -> JaxprTracer:
        """A new input of the recorded jaxpr."""
        var = Var(aval)
        self.invars.append(var)
        return self.tracer_type(self, aval, var)

    def to_atom(self, x) -> Var | Literal:
        """The jaxpr atom for ``x``: its variable if it is this trace's tracer, a literal for
        scalars, else a constvar whose value is ``x`` (a constant, or a residual)."""
        if isinstance(x, JaxprTracer) and x._trace is self:
            return x._var
        if isinstance(x, core.Tracer):
            core.check_tracer_live(x)
        elif isinstance(x, _literalable_types) and np.ndim(x) == 0 or (
                type(x) in _literal_array_types and x.ndim == 0 and x.dtype.kind != "V"):
            # Scalars, rank-0 NumPy arrays among them (rules write constants that way), are
            # inlined as literals, as in JAX: no constant input for XLA to carry.
            return Literal(x, core.get_aval(x))
        var = self._const_ids.get(id(x))
        if var is None:
            var = self._const_ids[id(x)] = Var(core.get_aval(x))
            self.constvars.append(var)
            self.constvals.append(x)
        return var

    def record(self, primitive: core.Primitive, args: Sequence, params: dict):
        """Record ``primitive`` applied to ``args`` as an equation; return its output
        tracer(s)."""
        invars = [self.to_atom(x) for x in args]
        out = primitive.abstract_eval(*[v.aval for v in invars], **params)
        out_avals = list(out) if primitive.multiple_results else [out]
        outvars = [Var(a) for a in out_avals]
        # Where the user asked for it: above this method and its caller (a trace's
        # process_primitive or a rule), both jaxkit's.
        self.eqns.append(JaxprEqn(invars, outvars, primitive, params, None,
                                  source_info.current(3, self._names_prefix)))
        tracers = [self.tracer_type(self, a, v) for a, v in zip(out_avals, outvars)]
        return tracers if primitive.multiple_results else tracers[0]

    def stage(self, primitive: core.Primitive, args: Sequence, out_avals: Sequence[ShapedArray],
              params: dict) -> list[JaxprTracer]:
        """Record ``primitive`` applied to ``args`` as an equation with outputs of
        ``out_avals`` (for rules that know them); return the output tracers."""
        invars = [self.to_atom(x) for x in args]
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(JaxprEqn(invars, outvars, primitive, dict(params), None,
                                  source_info.current(3, self._names_prefix)))
        return [self.tracer_type(self, a, v) for a, v in zip(out_avals, outvars)]


# --------------------------------------------------------------------------------------------
# Staging everything: DynamicJaxprTrace
# --------------------------------------------------------------------------------------------


# Constant folding while staging, as JAX's: ``primitive -> rule(*args, **params)`` giving
# ``(value, aval)`` of a scalar literal that replaces the equation, or None to stage it.
const_fold_rules: dict[core.Primitive, Callable] = {}

# Forwarding while staging, as JAX's: ``primitive -> rule(*args, **params)`` giving the index
# of the argument the equation would only copy (an identity ``broadcast_in_dim``), which is
# then used in its place, or None to stage it. Only staging forwards: a ``JaxprTrace``
# records the equation, so a transposed linear function sees it (JAX's ``reduce_sum``).
forwarding_rules: dict[core.Primitive, Callable] = {}


class DynamicJaxprTrace(_RecordingTrace):
    """Records every primitive applied to its tracers as a jaxpr equation."""

    __slots__ = ("debug",)
    tracer_type = DynamicJaxprTracer

    def __init__(self, debug: DebugInfo | None = None):
        super().__init__()
        self.debug = debug

    def process_primitive(self, primitive, args, params):
        forward = forwarding_rules.get(primitive)
        if forward is not None:
            index = forward(*args, **params)
            if index is not None:
                x = args[index]
                if isinstance(x, DynamicJaxprTracer) and x._trace is self:
                    return x
                return self.tracer_type(self, core.get_aval(x), self.to_atom(x))
        fold = const_fold_rules.get(primitive)
        if fold is not None:
            # The rule sees the values of literal tracers (``jnp.zeros((), u32).astype(i32)``
            # folds again), as JAX's rules see known constants.
            folded = fold(*[x._var.val if isinstance(x, DynamicJaxprTracer) and x._trace is self
                            and type(x._var) is Literal else x for x in args], **params)
            if folded is not None:
                return self.new_literal(*folded)
        return self.record(primitive, args, params)

    def new_literal(self, value, aval: ShapedArray) -> DynamicJaxprTracer:
        """A tracer standing for the constant ``value``: no equation, a literal wherever it is
        used (a constant input of the jaxpr for an array that is not a scalar). It is a tracer
        rather than the bare value so that it has ``dtype``, ``shape`` and ``astype`` as any
        traced value."""
        if aval.shape or not isinstance(value, _literalable_types):
            return self.tracer_type(self, aval, self.to_atom(value))  # an array constant
        return self.tracer_type(self, aval, Literal(value, aval))

    def to_jaxpr(self, outs: Sequence) -> tuple[Jaxpr, list]:
        outvars = [self.to_atom(x) for x in outs]
        constvars, constvals = self.constvars, list(self.constvals)
        if constvars:
            # Constants nothing used (a ``jnp.array`` of host data left unused) are dropped:
            # JAX makes a constant input only where an equation reads it.
            used = {id(v) for e in self.eqns for v in e.invars} | {id(v) for v in outvars}
            kept = [i for i, v in enumerate(constvars) if id(v) in used]
            if len(kept) < len(constvars):
                constvars = [constvars[i] for i in kept]
                constvals = [constvals[i] for i in kept]
        jaxpr = Jaxpr(constvars, self.invars, outvars, self.eqns, debug_info=self.debug)
        return jaxpr, constvals

    def creation_line(self, tracer: core.Tracer) -> str:
        """The user's line whose operation made ``tracer`` ("" for an input or constant)."""
        var = getattr(tracer, "_var", None)
        for eqn in self.eqns:
            if any(v is var for v in eqn.outvars):
                return str(eqn.source_info) if eqn.source_info is not None else ""
        return ""

    def origin_message(self, tracer: core.Tracer) -> str:
        """Where ``tracer``'s value comes from, as JAX says it: which function is traced
        and which of its arguments the value depends on, or else the (at most five)
        equations that bring in the constants it is computed from. A tracer of a trace that
        has ended leaked: that is the error then."""
        if self._invalid:
            raise core.UnexpectedTracerError(core.leaked_tracer_message(tracer))
        if self.debug is None:
            return ""
        d = self.debug
        src = f"{d.func_name} at {d.func_src_info}" if d.func_src_info else d.func_name
        text = f"The error occurred while tracing the function {src} for {d.traced_for}. "
        if isinstance(tracer, JaxprTracer) and tracer._trace is self and \
                type(tracer._var) is Var:
            args, const_eqns = _progenitors(self, tracer._var)
            names = [d.arg_names[i] if i < len(d.arg_names) else "unknown" for i in args]
            if names:
                if len(names) == 1:
                    which = f"the argument {names[0]}"
                elif len(names) == 2:
                    which = f"the arguments {names[0]} and {names[1]}"
                else:
                    which = f"the arguments {', '.join(names[:-1])}, and {names[-1]}"
                text += ("This concrete value was not available in Python because it depends "
                         f"on the value{'s' if len(names) > 1 else ''} of {which}.")
            elif const_eqns:
                lines = [f"  operation {pp_eqn(e, Namer(), 0)}\n    from line {e.source_info}"
                         for e in const_eqns[:5]]
                text += ("This value became a tracer due to JAX operations on these lines:"
                         "\n\n" + "\n\n".join(lines))
                if len(const_eqns) > 5:
                    text += "\n\n(Additional originating lines are not shown.)"
        return "\n" + text


def _progenitors(trace: _RecordingTrace, var: Var) -> tuple[list[int], list]:
    """The positions of the trace's inputs that ``var`` is computed from, and, as JAX picks
    them, the equations that bring in constants: those reading a constant ``var`` depends
    on, or any literal."""
    needed, const_ids = {var}, {id(v) for v in trace.constvars}
    for eqn in reversed(trace.eqns):
        if needed.intersection(eqn.outvars):
            needed.difference_update(eqn.outvars)
            needed.update(v for v in eqn.invars if type(v) is not Literal)
    args = [i for i, v in enumerate(trace.invars) if v in needed]
    consts = {id(v) for v in needed if id(v) in const_ids}
    return args, [e for e in trace.eqns if any(
        type(v) is Literal or id(v) in consts for v in e.invars)]


_NO_NAMES = source_info.NameStack()


def trace_to_jaxpr(fun: Callable, in_avals: Sequence[ShapedArray],
                   debug: DebugInfo | None = None) -> tuple[Jaxpr, list]:
    """Trace ``fun`` (flat arguments in, flat sequence out) at ``in_avals``.

    Returns the jaxpr and the values of its constvars (concrete arrays or tracers of enclosing
    traces, which the caller must pass back in under its own trace). As in JAX, the jaxpr's
    name stacks start empty: they are relative to the equation that holds it."""
    with source_info.name_stack_context(_NO_NAMES):
        trace = DynamicJaxprTrace(debug)
    with core.new_trace(trace), source_info.name_stack_context(source_info.trace_names()):
        args = [trace.new_arg(a) for a in in_avals]
        outs = fun(*args)
        if not isinstance(outs, (list, tuple)):
            raise TypeError(f"internal: traced function must return a sequence, got {outs!r}")
        result = trace.to_jaxpr(outs)
    trace_ref = weakref.ref(trace)
    del trace, args, outs
    core.check_no_leaks(trace_ref)
    return result


def trace_tree_to_jaxpr(fun: Callable, in_tree, in_avals: Sequence[ShapedArray],
                        debug: DebugInfo | None = None) -> tuple[Jaxpr, list, Any]:
    """Trace ``fun`` (one pytree of structure ``in_tree`` in, any pytree out) at ``in_avals``,
    the avals of the input's leaves: the jaxpr, its constvar values (as ``trace_to_jaxpr``)
    and the output's tree structure."""
    out_trees = []

    def flat_fun(*leaves):
        out_flat, out_tree = flat_outputs(debug, fun(tree_util.tree_unflatten(in_tree, leaves)))
        out_trees.append(out_tree)
        return out_flat

    jaxpr, consts = trace_to_jaxpr(flat_fun, in_avals, debug)
    return jaxpr, consts, out_trees[0]


def _wrapped_call(fun) -> Callable:
    """A ``linear_util.WrappedFun`` (what JAX's tracing entry points take) as a callable."""
    return fun.call_wrapped if hasattr(fun, "call_wrapped") else fun


def trace_to_jaxpr_dynamic(fun, in_avals: Sequence[ShapedArray], *,
                           keep_inputs: Sequence[bool] | None = None, lower: bool = False,
                           auto_dce: bool = False) -> tuple[Jaxpr, list[ShapedArray], list]:
    """JAX's entry point over ``trace_to_jaxpr``: trace ``fun`` (a ``WrappedFun`` of flat
    arguments returning a flat sequence) at ``in_avals``; returns the jaxpr, its output
    avals and its constvars' values. Inputs not marked in ``keep_inputs`` are invars of the
    jaxpr that ``fun`` does not receive. ``lower``/``auto_dce`` concern JAX's own tracer."""
    del lower, auto_dce
    keep = [True] * len(in_avals) if keep_inputs is None else list(keep_inputs)
    dbg = getattr(fun, "debug_info", None)
    call = _wrapped_call(fun)
    jaxpr, consts = trace_to_jaxpr(
        lambda *xs: list(call(*[x for x, k in zip(xs, keep) if k])), in_avals,
        dbg if isinstance(dbg, DebugInfo) else None)
    return jaxpr, [v.aval for v in jaxpr.outvars], consts


# --------------------------------------------------------------------------------------------
# Partial evaluation: JaxprTrace
# --------------------------------------------------------------------------------------------


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


class JaxprTrace(_RecordingTrace):
    """Runs known operations under its parent and records the others (see module docstring)."""

    # ---- known / unknown ----
    def is_known(self, x) -> bool:
        return not (isinstance(x, JaxprTracer) and x._trace is self)

    # ---- primitives ----
    def process_primitive(self, primitive, args, params):
        subst = self.__dict__.get("ref_subst")
        if subst:  # known refs that unknown writes have made unknown (see ``jaxkit.ref``)
            args = [subst[id(x)][1] if id(x) in subst else x for x in args]
        if all(self.is_known(x) for x in args):
            with core.set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        rule = partial_eval_rules.get(primitive)
        if rule is not None:
            return rule(self, *args, **params)
        if self.__dict__.get("jaxpr_custom_rules") and primitive in partial_eval_jaxpr_custom_rules:
            return _split_by_jaxpr_custom_rule(self, primitive, args, params)
        return self.record(primitive, args, params)  # known inputs become residuals

    def to_jaxpr(self, outs: Sequence) -> tuple[Jaxpr, list]:
        """The recorded jaxpr with outputs ``outs`` (known ones become residual outputs), and
        the residual values (one per constvar)."""
        outvars = [self.to_atom(x) for x in outs]
        jaxpr = Jaxpr(self.constvars, self.invars, outvars, self.eqns)
        jaxpr, _ = dce_jaxpr(jaxpr)
        used = _used_vars(jaxpr)
        keep = [i for i, v in enumerate(self.constvars) if v in used]
        jaxpr = Jaxpr([self.constvars[i] for i in keep], jaxpr.invars, jaxpr.outvars, jaxpr.eqns)
        return jaxpr, [self.constvals[i] for i in keep]


def _used_vars(jaxpr: Jaxpr) -> set:
    used = {a for e in jaxpr.eqns for a in e.invars if type(a) is Var}
    used.update(a for a in jaxpr.outvars if type(a) is Var)
    return used


def _split_by_jaxpr_custom_rule(trace: JaxprTrace, primitive: core.Primitive, args: Sequence,
                                params: dict) -> Any:
    """Apply ``primitive`` through its rule in ``partial_eval_jaxpr_custom_rules``: its known
    equation runs now (under the parent trace), its staged one is recorded, reading the
    residuals the known one made (every value is saveable: known values are computed now)."""
    unks_in = [not trace.is_known(x) for x in args]
    invars = [Var(core.get_aval(x)) for x in args]
    out = primitive.abstract_eval(*[v.aval for v in invars], **params)
    outvars = [Var(a) for a in (list(out) if primitive.multiple_results else [out])]
    eqn = JaxprEqn(invars, outvars, primitive, dict(params))
    eqn_known, eqn_staged, unks_out, _, _ = partial_eval_jaxpr_custom_rules[primitive](
        lambda *_, **__: True, unks_in, [not u for u in unks_in], eqn)
    env = dict(zip(invars, args))

    def read(a):
        return a.val if type(a) is Literal else env[a]

    known_env, staged_env = {}, {}
    for e, is_known in ((eqn_known, True), (eqn_staged, False)):
        if e is None:
            continue
        ins = [read(a) for a in e.invars]
        if is_known:
            with core.set_current_trace(trace.parent):
                outs = e.primitive.bind(*ins, **e.params)
            outs = outs if e.primitive.multiple_results else [outs]
        else:
            outs = trace.stage(e.primitive, ins, [v.aval for v in e.outvars], e.params)
        (known_env if is_known else staged_env).update(zip(e.outvars, outs))
        env.update(zip(e.outvars, outs))
    results = [(staged_env if uk else known_env).get(v, staged_env.get(v))
               for v, uk in zip(outvars, unks_out)]
    if any(r is None for r in results):
        raise ValueError(f"the partial_eval_jaxpr_custom_rules rule of '{primitive}' left an "
                         "output neither computed by its known equation nor staged: return the "
                         "equation's outvars from eqn_known or eqn_staged")
    return results if primitive.multiple_results else results[0]


def trace_to_subjaxpr(fun: Callable, in_pvals: Sequence[PartialVal],
                      instantiate: bool | Sequence[bool] = False, *,
                      jaxpr_custom_rules: bool = False
                      ) -> tuple[Jaxpr, list[PartialVal], list]:
    """Partially evaluate ``fun`` (flat values in, flat sequence out) under the current trace.

    Known inputs are passed as they are; unknown ones become inputs of the returned jaxpr.
    Returns the jaxpr of the unknown part (constvars: residuals, invars: the unknown inputs,
    outvars: the unknown outputs), the outputs as ``PartialVal``s, and the residual values.
    Outputs marked in ``instantiate`` are made unknown even if they are known. With
    ``jaxpr_custom_rules``, primitives are split by ``partial_eval_jaxpr_custom_rules``."""
    trace = JaxprTrace()
    if jaxpr_custom_rules:
        trace.jaxpr_custom_rules = True
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


def trace_to_jaxpr_nounits(fun, pvals: Sequence[PartialVal],
                           instantiate: bool | Sequence[bool] = False
                           ) -> tuple[Jaxpr, list[PartialVal], tuple]:
    """JAX's entry point over ``trace_to_subjaxpr``, for ``fun`` a ``WrappedFun``: the
    residuals come as a tuple, as JAX gives them."""
    jaxpr, out_pvals, residuals = trace_to_subjaxpr(_wrapped_call(fun), pvals, instantiate)
    return jaxpr, out_pvals, tuple(residuals)


# ClosedJaxpr -> {(unknowns, instantiate): result}: the same jaxpr object partially evaluated
# the same way gives the same jaxpr objects, so executables compiled for them are reused.
_pe_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def partial_eval_jaxpr(closed: ClosedJaxpr, unknowns: Sequence[bool],
                       instantiate: bool | Sequence[bool], *, jaxpr_custom_rules: bool = False
                       ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], int]:
    """Split a jaxpr by data dependence on its unknown inputs (JAX's
    ``partial_eval_jaxpr_nounits``).

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` maps the known inputs to
    ``[*known outputs, *residuals]``; ``unknown`` maps ``[*residuals, *unknown inputs]`` to the
    unknown outputs; ``out_unknowns[i]`` says whether output ``i`` is unknown (data-dependent on
    an unknown input, or forced by ``instantiate``). Primitives with a rule in
    ``partial_eval_rules`` are split recursively (and, with ``jaxpr_custom_rules``, those
    with one in ``partial_eval_jaxpr_custom_rules`` by it, as remat does). The constants of
    ``closed`` must be concrete.
    """
    n_out = len(closed.out_avals)
    inst = (instantiate,) * n_out if isinstance(instantiate, bool) else tuple(instantiate)
    key = (tuple(bool(u) for u in unknowns), inst, jaxpr_custom_rules)
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
            core.jaxpr_as_fun(closed), pvals, list(inst), jaxpr_custom_rules=jaxpr_custom_rules)
        cell.append((jaxpr_uk, [not p.is_known for p in out_pvals], len(residuals)))
        return [p.value for p in out_pvals if p.is_known] + list(residuals)

    known_avals = [a for a, uk in zip(closed.in_avals, unknowns) if not uk]
    jaxpr_known, consts_known = trace_to_jaxpr(known_fun, known_avals,
                                                  closed.jaxpr.debug_info)
    jaxpr_uk, out_unknowns, num_res = cell[0]
    known = ClosedJaxpr(jaxpr_known, consts_known)
    unknown = ClosedJaxpr(convert_constvars_jaxpr(jaxpr_uk), [])
    result = (known, unknown, out_unknowns, num_res)
    per[key] = result
    return result


# --------------------------------------------------------------------------------------------
# Jaxpr passes
# --------------------------------------------------------------------------------------------


def convert_constvars_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    """Turn constvars into leading invars."""
    return Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.outvars, jaxpr.eqns,
                 debug_info=jaxpr.debug_info)


# Primitives whose equations must be kept even when their outputs are unused (side effects).
effectful_primitives: set[core.Primitive] = set()


def defeffectful(prim: core.Primitive) -> None:
    """``prim`` has side effects: its equations are kept even when their outputs are unused."""
    effectful_primitives.add(prim)


# The kind of effect a primitive has where a rule must tell kinds apart (JAX's effect types):
# "io" (``io_callback``: runs on the host in program order) or "state" (reads or writes a
# ``Ref``). Rules refuse what JAX refuses (``vmap`` of a ``cond`` with a batched index runs
# every branch, which these effects cannot allow).
effect_kinds: dict[core.Primitive, str] = {}


def defeffect_kind(prim: core.Primitive, kind: str) -> None:
    """Record that ``prim``'s effect is of ``kind`` ("io" or "state")."""
    effect_kinds[prim] = kind


def jaxpr_effect_kinds(jaxpr: Jaxpr) -> set[str]:
    """The kinds of effect (``effect_kinds``) of the equations of ``jaxpr`` and of the jaxprs
    nested in them."""
    kinds = set()
    for eqn in jaxpr.eqns:
        kind = effect_kinds.get(eqn.primitive)
        if kind is not None:
            kinds.add(kind)
        for sub in core.subjaxprs(eqn.params):
            kinds |= jaxpr_effect_kinds(sub)
    return kinds

# Optional per-primitive DCE rules: rule(used_outputs, eqn) -> (used_inputs, new_eqn or None)
dce_rules: dict[core.Primitive, Callable] = {}


def eqn_has_effects(eqn: JaxprEqn) -> bool:
    """Whether ``eqn`` is an effectful primitive or carries a jaxpr containing one (a ``jit``
    or control-flow body that prints must be kept even if its outputs are unused)."""
    if eqn.primitive in effectful_primitives:
        return True
    if eqn.primitive in effect_rules and any(
            not isinstance(e, _DCEABLE) for e in eqn.effects):
        return True  # (a primitive with declared effects: Primitive.def_effectful_abstract_eval)
    return any(eqn_has_effects(e) for sub in core.subjaxprs(eqn.params) for e in sub.eqns)


# Effects that leave an equation removable when its results are unused (JAX's
# ``dceable_effects``): reading a ref, making one.
_DCEABLE = (effects.ReadEffect, effects.InternalMutableArrayEffect)


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
            # ``used_ins`` is over the equation's operands before the rule pruned any.
            invars = eqn.invars
            used_ins, eqn = rule(used, eqn)
            if eqn is None:
                continue
            ins = [a for a, u in zip(invars, used_ins) if u]
        else:
            ins = eqn.invars
        live.update(a for a in ins if type(a) is Var)
        new_eqns.append(eqn)
    new_eqns.reverse()
    used_invars = [v in live for v in jaxpr.invars]
    invars = [v for v, u in zip(jaxpr.invars, used_invars) if u] if prune_invars else jaxpr.invars
    constvars = [v for v in jaxpr.constvars if v in live] if prune_invars else jaxpr.constvars
    return Jaxpr(constvars, invars, outvars, new_eqns, debug_info=jaxpr.debug_info), used_invars


def dce_jaxpr_consts(jaxpr: Jaxpr, used_outputs: Sequence[bool],
                     instantiate: bool | Sequence[bool] = False
                     ) -> tuple[Jaxpr, list[bool], list[bool]]:
    """DCE that prunes unused constvars and invars too: the jaxpr, and which constvars and
    which invars it kept (``instantiate`` keeps some, or all, constvars+invars anyway)."""
    n = len(jaxpr.constvars)
    new, used = dce_jaxpr(convert_constvars_jaxpr(jaxpr), used_outputs)
    inst = [instantiate] * len(used) if isinstance(instantiate, bool) else list(instantiate)
    used = [u or bool(i) for u, i in zip(used, inst)]
    kept = [v for v, u in zip(new.invars, used) if u]
    n_consts = sum(used[:n])
    return (Jaxpr(kept[:n_consts], kept[n_consts:], new.outvars, new.eqns,
                  debug_info=jaxpr.debug_info),
            used[:n], used[n:])


def _call_dce(used_outputs: Sequence[bool], eqn: JaxprEqn, closed: bool):
    if not any(used_outputs) and not eqn_has_effects(eqn):
        return [False] * len(eqn.invars), None
    body = eqn.params["call_jaxpr"]
    inner = body.jaxpr if closed else body
    new, used_in = dce_jaxpr(inner, used_outputs, prune_invars=True)
    if closed:
        keep = set(new.constvars)
        new = ClosedJaxpr(new, [c for v, c in zip(inner.constvars, body.consts) if v in keep])
    outvars = [v for v, u in zip(eqn.outvars, used_outputs) if u]
    invars = [v for v, u in zip(eqn.invars, used_in) if u]
    return used_in, eqn.replace(invars=invars, outvars=outvars,
                                params=dict(eqn.params, call_jaxpr=new))


def dce_jaxpr_call_rule(used_outputs: Sequence[bool], eqn: JaxprEqn
                        ) -> tuple[list[bool], JaxprEqn | None]:
    """The DCE rule of a call primitive holding an open jaxpr (``call_jaxpr``): its body is
    pruned to the used outputs, and its operands to those the body still reads."""
    return _call_dce(used_outputs, eqn, closed=False)


def dce_jaxpr_closed_call_rule(used_outputs: Sequence[bool], eqn: JaxprEqn
                               ) -> tuple[list[bool], JaxprEqn | None]:
    """``dce_jaxpr_call_rule`` for a call holding a ``ClosedJaxpr`` (``closed_call``)."""
    return _call_dce(used_outputs, eqn, closed=True)
