"""High-level values staged into jaxprs, for the APIs that show or lower a jaxpr of a function
taking them (``make_jaxpr``, ``jit(f).trace``, ``jit(f).lower``), as JAX's do.

Everywhere else jaxkit lowers high-level values where they meet a transformation (see
``hijax``). A jaxpr shown to the user must hold them, though: JAX's ``make_jaxpr`` of a function
taking a box prints ``a:BoxTy`` inputs and ``box_get``/``box_set`` equations. Here each
high-level argument is an input variable of its type, held by a ``HiJaxprTracer`` that carries
the value's current QDD and forwards the type's ``aval_method``/``aval_property`` members (the
way user code calls ``box.get()`` on a traced box); a ``HiPrimitive`` applied to such tracers is
staged as an equation, its ``abstract_eval`` given a mutable operand's QDD to update. A ``jit``
call (``stage_call``) or a ``cond`` (``trace_branch``/``stage_eqn``) taking them is staged as JAX
stages it: an equation whose jaxprs take them as values of their types (traced by a nested
``HiJaxprTrace``), after which they hold the QDDs the body left them with. Other
transformations of them (scan, grad, vmap) raise NotImplementedError.

``lower_jaxpr`` turns such a jaxpr into one of arrays (JAX's ``lower_jaxpr``): the high-level
inputs become their array leaves, each equation runs with high-level values raised from them
(so a ``HiPrimitive`` runs its ``to_lojax``, and a staged jit or cond its ``lower_rules``
entry: the same construct over the leaves, its jaxprs lowered in turn), and the mutable values'
final leaves are leading results, as JAX orders them.
"""
from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Sequence

from jaxkit import core, source_info, tree_util
from jaxkit.interpreters import hijax
from jaxkit.interpreters import partial_eval as pe

__all__ = ["HiJaxprTrace", "HiJaxprTracer", "lower_jaxpr", "lower_operands", "lower_rules",
           "stage_call", "stage_eqn", "trace_branch", "trace_to_jaxpr", "write_finals"]


class HiJaxprTracer(pe.DynamicJaxprTracer):
    """A high-level value being staged: a jaxpr variable of its type, with its current QDD
    (None for an immutable type)."""

    __slots__ = ("qdd",)
    staged_hi = True  # what ``HiPrimitive.bind`` looks for

    def cur_qdd(self) -> Any:
        return self.qdd

    def __getattr__(self, name: str) -> Any:
        # As JAX's tracers: the type's members, an aval_method bound to the traced value, an
        # aval_property read from it (Flax's variables forward their attributes so).
        try:
            member = getattr(self._aval, name)
        except AttributeError as err:
            raise AttributeError(f"DynamicJaxprTracer has no attribute {name}") from err
        if type(member) is hijax.aval_method:
            return types.MethodType(member.fun, self)
        if type(member) is hijax.aval_property:
            return member.fget(self)
        return member

    def __repr__(self):
        return f"JitTracer({self._aval.str_short()})"


def _forward_to_type(name: str) -> Callable:
    """As JAX's tracers, operator ``__name__`` of a staged value is its type's ``_name``."""
    def op(self, *args):
        return getattr(self._aval, f"_{name}")(self, *args)
    op.__name__ = f"__{name}__"
    return op


for _name in ("getitem", "setitem", "len", "iter", "bool", "int", "float", "complex", "index",
              "neg", "pos", "abs", "invert", "add", "sub", "mul", "matmul", "truediv",
              "floordiv", "mod", "divmod", "pow", "lshift", "rshift", "and", "xor", "or", "radd",
              "rsub", "rmul", "rmatmul", "rtruediv", "rfloordiv", "rmod", "rdivmod", "rpow",
              "rlshift", "rrshift", "rand", "rxor", "ror"):
    setattr(HiJaxprTracer, f"__{_name}__", _forward_to_type(_name))
HiJaxprTracer.__iter__ = lambda self: iter(self._aval._iter(self))


class HiJaxprTrace(pe.DynamicJaxprTrace):
    """A ``DynamicJaxprTrace`` whose high-level arguments stay high-level values."""

    __slots__ = ()
    stages_hi = True  # what ``HiPrimitive.bind`` looks for

    def process_primitive(self, primitive, args, params):
        for x in args:
            if isinstance(x, HiJaxprTracer) and x._trace is self:
                raise NotImplementedError(
                    f"'{primitive.name}' applied to a traced {x.aval.str_short()} value: in "
                    "make_jaxpr and jit(...).trace/lower jaxkit stages high-level arguments "
                    "for HiPrimitives, jit calls and cond only (not for other control flow or "
                    "array operations). Call the jitted function instead.")
        return super().process_primitive(primitive, args, params)

    def process_hi_primitive(self, primitive, args: Sequence, params: dict) -> Any:
        """Stage ``primitive`` as an equation if one of ``args`` is a staged high-level
        value; else ``NotImplemented`` (the value was made eagerly: it is closed over)."""
        if not any(isinstance(x, HiJaxprTracer) and x._trace is self for x in args):
            return NotImplemented
        in_avals, updates = [], []
        for x in args:
            if isinstance(x, HiJaxprTracer) and x.aval.has_qdd:
                mutable = hijax.MutableQuasiDynamicData(x.qdd)
                updates.append((x, mutable))
                in_avals.append(hijax.AvalMutableQDD(x.aval, mutable))
            else:
                in_avals.append(core.get_aval(x))
        out, _effects = primitive.abstract_eval(*in_avals, **params)
        outs = list(out) if primitive.multiple_results else [out]
        lo_avals = [a.aval if isinstance(a, hijax.AvalQDD) else a for a in outs]
        tracers = self.stage(primitive, args, lo_avals, params)
        for x, mutable in updates:
            x.qdd = mutable.cur_val
        tracers = [_hi_tracer(self, a, t._var, a.qdd) if isinstance(a, hijax.AvalQDD) else
                   _hi_tracer(self, a, t._var, None) if getattr(a, "is_high", False) else t
                   for a, t in zip(outs, tracers)]
        return tracers if primitive.multiple_results else tracers[0]


def _hi_tracer(trace: HiJaxprTrace, aval: Any, var: core.Var, qdd: Any) -> HiJaxprTracer:
    t = HiJaxprTracer(trace, aval, var)
    t.qdd = qdd
    return t


_active = [0]  # how many stagings are under way


@contextlib.contextmanager
def _staging():
    """While staging, a staged value is a high-level value to the transformations it meets
    (``hijax.has_hi``: ``jit`` says it does not take one rather than tracing it as an array);
    registered only meanwhile, so that ``has_hi`` stays free when no type is registered."""
    _active[0] += 1
    hijax.hitypes[HiJaxprTracer] = _staged_type
    try:
        yield
    finally:
        _active[0] -= 1
        if not _active[0]:
            del hijax.hitypes[HiJaxprTracer]


def _staged_type(t: HiJaxprTracer) -> Any:
    return t.aval


def trace_to_jaxpr(fun: Callable, flat_args: Sequence, debug: pe.DebugInfo | None = None
                   ) -> tuple[core.Jaxpr, list]:
    """``pe.trace_to_jaxpr`` at the types of ``flat_args``, whose high-level values are
    staged (their QDDs read now: the values themselves are not touched)."""
    jaxpr, consts, _ = _trace(fun, flat_args, debug)
    return jaxpr, consts


def _trace(fun: Callable, flat_args: Sequence, debug: pe.DebugInfo | None
           ) -> tuple[core.Jaxpr, list, list]:
    """``trace_to_jaxpr``, and the traced arguments (holding the QDDs they ended with)."""
    with source_info.name_stack_context(pe._NO_NAMES):
        trace = HiJaxprTrace(debug)
    with core.new_trace(trace), source_info.name_stack_context(pe._NO_NAMES), _staging():
        args = []
        for x in flat_args:
            aval = core.get_aval(x)
            arg = trace.new_arg(aval)
            if hijax.is_hi(x):
                arg = _hi_tracer(trace, aval, arg._var,
                                 hijax.cur_qdd(x) if aval.has_qdd else None)
            args.append(arg)
        outs = fun(*args)
        jaxpr, consts = trace.to_jaxpr(outs)
        return jaxpr, consts, args


def stage_call(primitive: core.Primitive, fun: Callable, flat_args: Sequence,
               debug: pe.DebugInfo | None,
               params_for: Callable[[core.ClosedJaxpr], dict]) -> list:
    """Stage a call of ``fun`` (flat arguments in, flat results out) on ``flat_args``, some
    of them high-level values staged by the current ``HiJaxprTrace``, as an equation of
    ``primitive`` (``jit``) whose ``jaxpr`` takes them as values of their types, as JAX's
    does, its parameters ``params_for(that jaxpr)``; the staged values take
    the QDDs the body left them with. ``lower_rules`` says how such an equation runs when its
    jaxpr is lowered."""
    trace = core.current_trace()
    for x in flat_args:
        if isinstance(x, HiJaxprTracer) and x._trace is not trace:
            raise NotImplementedError(
                f"'{primitive.name}' of a {x.aval.str_short()} value staged by make_jaxpr or "
                "jit(...).trace/lower, inside another transformation of the traced function "
                "(scan, grad, vmap...): jaxkit stages such values in jit calls and cond. "
                "Call the jitted function instead, or close over the value.")
    jaxpr, consts, inner_args = _trace(fun, flat_args, debug)
    for out in jaxpr.outvars:
        if getattr(out.aval, "is_high", False):
            raise NotImplementedError(
                f"'{primitive.name}' returning a {out.aval.str_short()} value is not "
                "supported (JAX 0.10.2 does not return high-level values from a jit either); "
                "return its arrays instead.")
    if any(isinstance(c, core.Tracer) for c in consts):
        # Closed-over values of the enclosing trace are operands of the equation.
        closed, operands = core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []), \
            [*consts, *flat_args]
    else:
        closed, operands = core.ClosedJaxpr(jaxpr, consts), list(flat_args)
    outs = trace.stage(primitive, operands, closed.out_avals,
                       params_for(closed))
    for x, arg in zip(flat_args, inner_args):
        if isinstance(x, HiJaxprTracer) and x.aval.has_qdd:
            x.qdd = arg.qdd
    return outs


def trace_branch(fun: Callable, flat_args: Sequence, in_tree: Any, what: str
                 ) -> tuple[core.ClosedJaxpr, list, Any, list]:
    """A branch of a construct (``cond``) taking ``flat_args`` (structure ``in_tree``), some of
    them staged high-level values: ``(jaxpr taking its constants first, the constants, output
    structure, the QDD each argument ends with)``, as ``bodies.trace_function`` for arrays."""
    out_trees: list = []

    def flat_fun(*args):
        out_flat, out_tree = tree_util.tree_flatten(fun(*tree_util.tree_unflatten(in_tree, args)))
        out_trees.append(out_tree)
        return out_flat

    debug = pe.debug_info(what, fun, [f"arg{i}" for i in range(len(flat_args))])
    jaxpr, consts, args = _trace(flat_fun, flat_args, debug)
    closed = core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
    return closed, consts, out_trees[0], [getattr(a, "qdd", None) for a in args]


def stage_eqn(primitive: core.Primitive, operands: Sequence, out_avals: Sequence, params: dict,
              staged: Sequence, qdds: Sequence) -> list:
    """Stage an equation of ``primitive`` whose jaxprs take the staged high-level values among
    ``operands``; ``staged`` of them end with QDDs ``qdds`` (from ``trace_branch``)."""
    outs = core.current_trace().stage(primitive, operands, out_avals, params)
    for x, qdd in zip(staged, qdds):
        if isinstance(x, HiJaxprTracer) and x.aval.has_qdd:
            x.qdd = qdd
    return outs


# primitive -> rule(operands, **params) -> results: how an equation of a call primitive
# staged with high-level operands (``stage_call``) runs while its jaxpr is lowered, the
# operands being high-level values raised from the lowered program's tracers.
lower_rules: dict[core.Primitive, Callable] = {}


def _eval_lowering(jaxpr: core.Jaxpr, consts: Sequence, *args: Any) -> list:
    """``core.eval_jaxpr`` of a jaxpr of high-level values: an equation of a call primitive
    with high-level operands runs its ``lower_rules`` entry (binding it would hand the
    values to rules that carry arrays)."""
    env: dict = {}

    def read(v):
        return v.val if type(v) is core.Literal else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        vals = [read(v) for v in eqn.invars]
        rule = lower_rules.get(eqn.primitive)
        with source_info.user_context(eqn.source_info):
            if rule is not None and any(hijax.is_hi(v) for v in vals):
                outs = rule(vals, **eqn.params)
            else:
                outs = eqn.primitive.bind(*vals, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def lower_operands(specs: Sequence, values: Sequence) -> list:
    """The array leaves of ``values`` (the operands of a jaxpr lowered by ``lower_jaxpr``,
    ``specs`` its first result) in the order the lowered jaxpr takes them."""
    out = []
    for x, spec in zip(values, specs):
        if spec is None:
            out.append(x)
            continue
        aval, qdd, _ = spec
        out.extend(aval.read_loval(qdd, x) if aval.has_qdd else aval.lower_val(x))
    return out


def write_finals(specs: Sequence, finals: Sequence, values: Sequence, state: Sequence) -> None:
    """Update the mutable ones of ``values`` from the final leaves ``state`` (the leading
    results of a program ``lower_jaxpr`` made, ``specs`` and ``finals`` its other results)."""
    it = iter(state)
    muts = [x for x, spec in zip(values, specs) if spec is not None and spec[0].has_qdd]
    for x, (aval, qdd, size) in zip(muts, finals):
        aval.update_from_loval(qdd, x, *[next(it) for _ in range(size)])


def lower_jaxpr(closed: core.ClosedJaxpr, flat_args: Sequence, debug: pe.DebugInfo | None
                ) -> tuple[core.ClosedJaxpr, list, list]:
    """The jaxpr of arrays that ``closed`` (a jaxpr of high-level arguments ``flat_args``)
    lowers to; for each flat argument, None (an array) or ``(type, QDD, number of leaves)``;
    and for each mutable one, ``(type, final QDD, number of final leaves)``: its final leaves
    are the leading results, in that order."""
    specs, lo_avals = [], []
    for x, aval in zip(flat_args, closed.in_avals):
        if hijax.is_hi(x):
            qdd = hijax.cur_qdd(x) if aval.has_qdd else None
            lo_ty = aval.lo_ty_qdd(qdd) if aval.has_qdd else aval.lo_ty()
            specs.append((aval, qdd, len(lo_ty)))
            lo_avals.extend(lo_ty)
        else:
            specs.append(None)
            lo_avals.append(aval)
    finals: list = []

    def lo_fun(*lo_args):
        it, args, muts = iter(lo_args), [], []
        for spec in specs:
            if spec is None:
                args.append(next(it))
                continue
            aval, qdd, size = spec
            leaves = [next(it) for _ in range(size)]
            value = aval.new_from_loval(qdd, *leaves) if aval.has_qdd else \
                aval.raise_val(*leaves)
            hijax.made_here([value])
            args.append(value)
            if aval.has_qdd:
                muts.append((aval, value))
        outs = _eval_lowering(closed.jaxpr, closed.consts, *args)
        state = []
        for aval, value in muts:
            qdd = hijax.cur_qdd(value)
            leaves = aval.read_loval(qdd, value)
            finals.append((aval, qdd, len(leaves)))
            state.extend(leaves)
        return [*state, *outs]

    jaxpr, consts = pe.trace_to_jaxpr(lo_fun, lo_avals, debug)
    return core.ClosedJaxpr(jaxpr, consts), specs, finals
