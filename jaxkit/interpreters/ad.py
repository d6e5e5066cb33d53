"""Forward- and reverse-mode automatic differentiation: JVP trace, linearize, transpose.

Rule tables (filled by each primitive's block in ``jaxkit.lax``):

* ``jvp_rules[p](primals, tangents, **params) -> (primal_out, tangent_out)``; tangents may
  be symbolic ``Zero``s. For multiple-result primitives both outputs are lists.
* ``transpose_rules[p](cts, *args, **params) -> list of cotangents``, one per arg; ``args``
  are ``UndefinedPrimal`` for the linear inputs, the concrete/traced value otherwise; ``cts`` is
  the output cotangent (a list for multiple-result primitives), possibly a ``Zero``.

Interpreters (stackless, as JAX's core):

* ``JVPTrace``/``JVPTracer``: forward mode. A tracer carries a primal and a tangent (a value of
  the parent trace, or a symbolic ``Zero``); rules run with the parent trace current, so nested
  ``jvp``s of closures never confuse their perturbations.
* ``linearize_flat``: a JVP trace over a ``JaxprTrace`` (``partial_eval``): primal work
  runs now, tangent work is staged into a *linear jaxpr* whose constants are the residuals.
* ``backward_pass``: transposes a linear jaxpr (non-linear equations on residuals are
  evaluated forward first), accumulating cotangents with ``add_tangents``.
* ``jvp_jaxpr`` / ``transpose_jaxpr``: the same at the jaxpr level, for the rules of
  primitives that carry jaxprs (``jit``, ``cond``, ``scan``, ``checkpoint``, ...); cached per
  jaxpr object so that the resulting programs compile once.
"""
from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any


from jaxkit._deprecations import deprecation_getattr, removed
from jaxkit import core, dtypes, source_info
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr, Jaxpr, Literal, ShapedArray, Var
from jaxkit.interpreters import batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import state
from jaxkit.literals import canonicalize_value, float0_zeros

jvp_rules: dict[core.Primitive, Callable] = {}
transpose_rules: dict[core.Primitive, Callable] = {}
# The names JAX gives these tables (users register their own primitives' rules in them).
primitive_jvps = jvp_rules
primitive_transposes = transpose_rules
# Primitives declared linear (or bilinear) through the helpers below: they need a transpose.
linear_primitives: set[core.Primitive] = set()


class Zero:
    """A symbolic zero tangent/cotangent of abstract value ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval})"


class UndefinedPrimal:
    """Stands for a linear input during transposition."""

    __slots__ = ("aval",)

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval})"


def is_undefined_primal(x) -> bool:
    return type(x) is UndefinedPrimal


# --------------------------------------------------------------------------------------------
# Tangent arithmetic. ``add_jaxvals_p`` sums tangents/cotangents (its block of rules, with
# lowering and batching, is in ``jaxkit.lax.elementwise``); zeros come from the hook below,
# installed by ``jaxkit.lax`` which owns broadcasting.
# --------------------------------------------------------------------------------------------

add_jaxvals_p = core.Primitive("add_any")
# Like the elementwise add it lowers to, a rank-0 operand broadcasts against the other.
add_jaxvals_p.def_abstract_eval(lambda x, y: (y if x.ndim < y.ndim else x).update(
    weak_type=x.weak_type and y.weak_type))

_zeros_like_aval: Callable[[core.ShapedArray], object] | None = None


def register_zeros_like_aval(fn: Callable[[core.ShapedArray], object]) -> None:
    global _zeros_like_aval
    _zeros_like_aval = fn


def zeros_like_aval(aval: core.ShapedArray):
    """A concrete (or traced, under the current trace) array of zeros of ``aval``.

    ``float0`` zeros (tangents of integer and boolean values) are host arrays
    (``TypedNdArray``), as in JAX: they carry no data and are never given to a primitive."""
    if aval.dtype == dtypes.float0:
        return float0_zeros(aval.shape)
    return _zeros_like_aval(aval)


def instantiate_zeros(t):
    return zeros_like_aval(t.aval) if type(t) is Zero else t


def add_tangents(x, y):
    if type(x) is Zero:
        return y
    if type(y) is Zero:
        return x
    return add_jaxvals_p.bind(x, y)


def add_jaxvals(x, y):
    """The sum of two tangents (or cotangents): ``add_any``, the sum autodiff accumulates."""
    return add_jaxvals_p.bind(x, y)


# --------------------------------------------------------------------------------------------
# Helpers that fill ``jvp_rules`` / ``transpose_rules`` from one-line rules
# --------------------------------------------------------------------------------------------


# Primitives whose JVP rule runs even when every tangent is zero (the ref primitives: a ref
# made from a constant still needs a tangent ref, which later writes may make nonzero).
jvp_always_rules: set[core.Primitive] = set()


def defjvp_rule(prim: core.Primitive, rule: Callable) -> None:
    """The whole JVP rule: ``rule(primals, tangents, **params) -> (primal_out, tangent_out)``;
    tangents may be symbolic ``Zero``s."""
    jvp_rules[prim] = rule


# Primitives whose transpose runs even when all their cotangents are zero, as every one does
# in JAX: custom_vjp's bwd is user code, free to return nonzero cotangents for zero ones (Flax's
# fp8 ops pass their updated scale and amax history out that way). The transpose of any other
# linear primitive gives zeros for zeros, so it is skipped.
transpose_zero_cotangents: set[core.Primitive] = set()


def deftranspose(prim: core.Primitive, rule: Callable) -> None:
    """The transpose rule of a primitive linear in some arguments:
    ``rule(cts, *args, **params)`` returns one cotangent (or None) per argument; the linear
    arguments are ``UndefinedPrimal``s."""
    transpose_rules[prim] = rule


def defjvp(prim: core.Primitive, *arg_rules: Callable | None) -> None:
    """One rule per argument: ``rule(tangent_i, *primals, **params)`` gives that argument's
    contribution to the output tangent; ``None`` marks a non-differentiable argument."""

    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        return ans, _sum_contributions(ans, primals, tangents, arg_rules, params, False)

    jvp_rules[prim] = jvp


def defjvp2(prim: core.Primitive, *arg_rules: Callable | None) -> None:
    """Like ``defjvp`` but each rule also receives the primal output:
    ``rule(tangent_i, ans, *primals, **params)``."""

    def jvp(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        return ans, _sum_contributions(ans, primals, tangents, arg_rules, params, True)

    jvp_rules[prim] = jvp


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

    jvp_rules[prim] = jvp


def deflinear(prim: core.Primitive, transpose_rule: Callable) -> None:
    """A primitive linear in all its arguments: the JVP applies it to the tangents.
    ``transpose_rule(ct, **params)`` returns one cotangent per argument."""
    jvp_rules[prim] = partial(_linear_jvp, prim)
    transpose_rules[prim] = partial(_linear_transpose, transpose_rule)
    linear_primitives.add(prim)


def deflinear2(prim: core.Primitive, transpose_rule: Callable) -> None:
    """Like ``deflinear`` but ``transpose_rule(ct, *args, **params)`` also sees the arguments
    (``UndefinedPrimal``s carrying avals)."""
    jvp_rules[prim] = partial(_linear_jvp, prim)
    transpose_rules[prim] = partial(_linear_transpose2, transpose_rule)
    linear_primitives.add(prim)


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

    transpose_rules[prim] = transpose
    linear_primitives.add(prim)


def is_zero(t) -> bool:
    """A symbolic zero, or a ``float0`` value (the tangent of an integer: always zero)."""
    return type(t) is Zero or (not isinstance(t, core.Tracer) and
                               getattr(t, "dtype", None) == dtypes.float0)


def _zero_of(x) -> Zero:
    return Zero(core.get_aval(x).to_tangent_aval())


def _missing_jvp(prim: core.Primitive):
    raise NotImplementedError(
        f"JVP rule for '{prim.name}' is not implemented, so '{prim.name}' cannot be "
        "differentiated (jvp, grad, vjp, jacfwd, jacrev, ...). Register one with ad.defjvp "
        "or ad.defjvp_rule.")


# --------------------------------------------------------------------------------------------
# Forward mode: the JVP trace
# --------------------------------------------------------------------------------------------


class JVPTracer(core.Tracer):
    """A primal value (of the parent trace) with its tangent (same, or a symbolic ``Zero``)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, trace: JVPTrace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent

    @property
    def aval(self) -> ShapedArray:
        return core.get_aval(self.primal)

    # As in JAX, a JVP tracer is as concrete as its primal: Python control flow on primal
    # values works under jvp/grad when the primal is concrete (float() and complex() do not).
    def __bool__(self):
        return bool(self.primal)

    def __int__(self):
        return int(self.primal)

    def __index__(self):
        return operator.index(self.primal)

    def __repr__(self):
        return f"JVPTracer(primal={self.primal}, tangent={self.tangent})"


class LinearizeTracer(JVPTracer):
    """A JVP tracer whose tangent is being recorded (grad, vjp, linearize): a class of its own,
    named as JAX's, because user code tells tracers apart by their type's name."""

    __slots__ = ()

    def __repr__(self):
        # As JAX 0.10.2: the tangent's type is shown, not the tangent.
        return f"GradTracer(primal={self.primal}, typeof(tangent)={self.tangent.aval.str_short()})"


def _jvp_tracer(trace: JVPTrace, primal, tangent) -> JVPTracer:
    """A ``LinearizeTracer`` when the tangent is recorded into a linear jaxpr (a tracer of a
    ``JaxprTrace``), else a ``JVPTracer``."""
    if isinstance(tangent, pe.JaxprTracer) and type(tangent._trace) is pe.JaxprTrace:
        return LinearizeTracer(trace, primal, tangent)
    return JVPTracer(trace, primal, tangent)


class JVPTrace(core.Trace):
    """Forward-mode differentiation of every primitive applied to its tracers."""

    __slots__ = ()

    def to_primal_tangent_pair(self, x) -> tuple[Any, Any]:
        """``(primal, tangent)`` of ``x`` as this trace sees it: anything that is not one of
        its own tracers is a constant (symbolic zero tangent)."""
        if isinstance(x, JVPTracer) and x._trace is self:
            return x.primal, x.tangent
        if isinstance(x, core.Tracer) and x._trace._invalid:
            core.check_tracer_live(x)
        return x, _zero_of(x)

    def process_primitive(self, primitive, args, params):
        primals, tangents = [], []
        for x in args:
            p, t = self.to_primal_tangent_pair(x)
            primals.append(p)
            tangents.append(t)
        if all(type(t) is Zero for t in tangents) and primitive not in jvp_always_rules:
            with core.set_current_trace(self.parent):
                return primitive.bind(*primals, **params)
        rule = jvp_rules.get(primitive)
        if rule is None:
            _missing_jvp(primitive)
        with core.set_current_trace(self.parent):
            # Tuples, as JAX passes them (user rules may print or compare them).
            primal_out, tangent_out = rule(tuple(primals), tuple(tangents), **params)
        if primitive.multiple_results:
            return [self.box(p, t) for p, t in zip(primal_out, tangent_out)]
        return self.box(primal_out, tangent_out)

    def box(self, primal, tangent):
        """A tracer of this trace, or the bare primal when the tangent is zero (symbolic, or
        a ``float0`` value)."""
        if tangent is None or is_zero(tangent):
            return primal
        return _jvp_tracer(self, primal, tangent)


def jvp_flat(fun: Callable, primals: Sequence, tangents: Sequence, *, has_aux: bool = False,
             transform_stack: bool = True) -> tuple[list, list, Any]:
    """Forward mode on a flat function (flat values in, flat sequence out).

    ``tangents`` may hold symbolic ``Zero``s (and ``float0`` values, taken as zeros). Returns
    ``(primals_out, tangents_out, aux)`` with symbolic ``Zero``s among the output tangents.
    With ``has_aux``, ``fun`` returns ``(outs, aux)``; ``aux`` comes back with this trace's
    tracers replaced by their primals. With ``transform_stack`` (not for a jaxpr's JVP,
    whose names stay relative to it) the scopes opened inside are named ``jvp(...)``."""
    trace = JVPTrace()
    with core.new_trace(trace):
        ins = [p if is_zero(t) else JVPTracer(trace, p, t) for p, t in zip(primals, tangents)]
        with _transform_names("jvp" if transform_stack else None):
            outs = fun(*ins)
        aux_flat, aux_tree = [], None
        if has_aux:
            outs, aux = outs
            aux_flat, aux_tree = _strip(trace, aux)
        pairs = [trace.to_primal_tangent_pair(o) for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs], _rebuild(aux_flat, aux_tree)


def _strip(trace: core.Trace, tree) -> tuple[list, Any]:
    """The leaves of ``tree``, with the tracers of ``trace`` (JVP tracers) replaced by their
    primals, and its treedef: the caller rebuilds it with :func:`_rebuild` once the trace is
    left, as JAX does, so that pytree nodes are built outside it (Flax's Variables record the
    trace they were made under, and may be updated only there)."""
    leaves, treedef = tree_util.tree_flatten(tree)
    out = []
    for x in leaves:
        while isinstance(x, JVPTracer) and x._trace is trace:
            x = x.primal
        out.append(x)
    return out, treedef


def _rebuild(leaves: list, treedef: Any) -> Any:
    """The auxiliary output from :func:`_strip`'s leaves (None where there was none)."""
    return None if treedef is None else tree_util.tree_unflatten(treedef, leaves)


# --------------------------------------------------------------------------------------------
# Linearization: JVP over partial evaluation
# --------------------------------------------------------------------------------------------


class Linearized:
    """The linear map ``tangents -> output tangents`` of a function at a point.

    ``jaxpr`` has the residuals as constvars (values in ``consts``), one invar per nonzero
    input tangent and one outvar per nonzero output tangent."""

    __slots__ = ("consts", "in_avals", "in_nonzero", "jaxpr", "out_avals", "out_nonzero")

    def __init__(self, jaxpr: Jaxpr, consts: list, in_avals, in_nonzero, out_avals, out_nonzero):
        self.jaxpr = jaxpr
        self.consts = consts
        self.in_avals = list(in_avals)        # tangent avals of all inputs
        self.in_nonzero = list(in_nonzero)
        self.out_avals = list(out_avals)      # tangent avals of all outputs
        self.out_nonzero = list(out_nonzero)

    def jvp(self, tangents: Sequence, consts: Sequence | None = None) -> list:
        """Output tangents (zeros instantiated) for input tangents (one per input)."""
        consts = self.consts if consts is None else consts
        ins = [instantiate_zeros(t) if type(t) is Zero else t
               for t, nz in zip(tangents, self.in_nonzero) if nz]
        outs = iter(core.eval_jaxpr(self.jaxpr, consts, *ins))
        return [next(outs) if nz else zeros_like_aval(a)
                for a, nz in zip(self.out_avals, self.out_nonzero)]

    def vjp(self, cts: Sequence, consts: Sequence | None = None) -> list:
        """Input cotangents (``Zero`` where nothing flows) for output cotangents."""
        consts = self.consts if consts is None else consts
        cts_nz = [ct for ct, nz in zip(cts, self.out_nonzero) if nz]
        args = [UndefinedPrimal(a) for a, nz in zip(self.in_avals, self.in_nonzero) if nz]
        cts_in = iter(backward_pass(self.jaxpr, consts, args, cts_nz))
        return [next(cts_in) if nz else Zero(a) for a, nz in zip(self.in_avals, self.in_nonzero)]


def linearize_flat(fun: Callable, primals: Sequence, nonzero: Sequence[bool] | None = None, *,
                   has_aux: bool = False) -> tuple[list, Linearized, Any]:
    """Linearize a flat function at ``primals``: ``(primals_out, Linearized, aux)``.

    ``nonzero[i]`` False marks an input that is not differentiated (integer inputs never
    are). The primal computation runs under the current trace; the tangent computation is
    staged (see ``partial_eval``)."""
    if nonzero is None:
        nonzero = [True] * len(primals)
    in_avals = [core.get_aval(p).to_tangent_aval() for p in primals]
    nonzero = [bool(nz) and a.dtype != dtypes.float0 for nz, a in zip(nonzero, in_avals)]
    ptrace = pe.JaxprTrace()
    jtrace = JVPTrace(ptrace)
    try:
        tangents = [ptrace.new_arg(a) if nz else Zero(a) for a, nz in zip(in_avals, nonzero)]
        with core.new_trace(jtrace):
            ins = [_jvp_tracer(jtrace, p, t) if nz else p
                   for p, t, nz in zip(primals, tangents, nonzero)]
            with _transform_names("jvp"):
                outs = fun(*ins)
            aux_flat, aux_tree = [], None
            if has_aux:
                outs, aux = outs
                aux_flat, aux_tree = _strip(jtrace, aux)
            pairs = [jtrace.to_primal_tangent_pair(o) for o in outs]
        primals_out = [p for p, _ in pairs]
        for p in primals_out:
            if not ptrace.is_known(p):
                # JAX's error: a primitive whose JVP mixes primals and tangents in one
                # equation (pallas_call) leaves its primal output unknown
                raise ValueError("Linearization failed to produce known values for all output "
                                 "primals. This is typically caused by attempting to "
                                 "differentiate a function uses an operation that does not "
                                 "support reverse-mode autodiff.")
        out_avals = [core.get_aval(p).to_tangent_aval() for p in primals_out]
        out_nonzero = [not is_zero(t) for _, t in pairs]
        jaxpr, consts = ptrace.to_jaxpr([t for _, t in pairs if not is_zero(t)])
        if any(isinstance(x, pe.JaxprTracer) and x._trace is ptrace for x in aux_flat):
            raise TypeError("the auxiliary output (has_aux=True) depends on tangents")
    finally:
        ptrace.invalidate()
    return primals_out, Linearized(jaxpr, consts, in_avals, nonzero, out_avals,
                                   out_nonzero), _rebuild(aux_flat, aux_tree)


def _flat_call(fun: Callable, args_tree, has_aux: bool, trees: list) -> Callable:
    """``fun`` of the arguments ``args_tree`` (a ``FlatTree`` of JAX's, or a flat sequence)
    as a flat function: flat values in, the output's leaves out (their treedef into
    ``trees``), as ``(leaves, aux)`` with ``has_aux``."""
    def flat(*xs):
        args = args_tree.update(xs).unflatten() if hasattr(args_tree, "update") else xs
        out = fun(*args)
        if has_aux:
            if not isinstance(out, (list, tuple)) or len(out) != 2:
                raise TypeError("expected function with aux output to return a two-element "
                                f"tuple, but got type {type(out)} with value {out!r}")
            out, aux = out
        leaves, tree = tree_util.tree_flatten(out)
        trees.append(tree)
        return (leaves, aux) if has_aux else leaves
    return flat


def _like(args_tree, tree, vals: Sequence):
    """``vals`` as a ``FlatTree`` of structure ``tree`` when the arguments came as one
    (``args_tree``'s own class builds it), else as a list."""
    if hasattr(args_tree, "update"):
        return type(args_tree).flatten(tree_util.tree_unflatten(tree, list(vals)))
    return list(vals)


def jvp(fun: Callable, primals, tangents, has_aux: bool = False,
        instantiate: bool | Sequence[bool] = True, transform_stack: bool = True) -> tuple:
    """JAX's ``ad.jvp``: ``fun`` applied to ``primals`` (a ``FlatTree`` of its positional
    arguments, or a flat sequence) pushed forward along ``tangents`` (same structure;
    ``Zero``s and ``float0`` values are zeros). Returns ``(out_primals, out_tangents)``
    (``FlatTree``s of the output's structure, or lists), and the auxiliary output with
    ``has_aux``; output tangents marked in ``instantiate`` are never symbolic zeros."""
    trees: list = []
    t_vals = list(tangents.vals) if hasattr(tangents, "vals") else list(tangents)
    p_vals = list(primals.vals) if hasattr(primals, "vals") else list(primals)
    p_out, t_out, aux = jvp_flat(_flat_call(fun, primals, has_aux, trees), p_vals, t_vals,
                                 has_aux=has_aux, transform_stack=transform_stack)
    inst = [instantiate] * len(t_out) if isinstance(instantiate, bool) else instantiate
    t_out = [instantiate_zeros(t) if i and type(t) is Zero else t for t, i in zip(t_out, inst)]
    outs = (_like(primals, trees[0], p_out), _like(primals, trees[0], t_out))
    return (*outs, aux) if has_aux else outs


def linearize(traceable: Callable, primals, has_aux: bool = False, is_vjp: bool = False
              ) -> tuple:
    """JAX's ``ad.linearize``: ``(out_primals, out_zeros, jaxpr, consts)`` (and the auxiliary
    output with ``has_aux``). ``jaxpr`` maps one tangent per input to the output tangents
    that are not symbolic zeros (``out_zeros[i]`` marks the others); its constvars are the
    residuals, whose values are ``consts``."""
    del is_vjp  # jaxkit's linearization serves jvp and vjp alike
    trees: list = []
    p_vals = list(primals.vals) if hasattr(primals, "vals") else list(primals)
    p_out, lin, aux = linearize_flat(_flat_call(traceable, primals, has_aux, trees), p_vals,
                                     has_aux=has_aux)
    it = iter(lin.jaxpr.invars)
    invars = [next(it) if nz else Var(a) for a, nz in zip(lin.in_avals, lin.in_nonzero)]
    jaxpr = Jaxpr(lin.jaxpr.constvars, invars, lin.jaxpr.outvars, lin.jaxpr.eqns,
                  debug_info=lin.jaxpr.debug_info)
    outs = (_like(primals, trees[0], p_out), [not nz for nz in lin.out_nonzero], jaxpr,
            list(lin.consts))
    return (*outs, aux) if has_aux else outs


# --------------------------------------------------------------------------------------------
# Reverse mode: transposing linear jaxprs
# --------------------------------------------------------------------------------------------


def get_primitive_transpose(p: core.Primitive) -> Callable:
    """The transpose rule registered for ``p`` (JAX's lookup, with its error)."""
    try:
        return transpose_rules[p]
    except KeyError as err:
        raise NotImplementedError("Transpose rule (for reverse-mode differentiation) for "
                                  f"'{p}' not implemented") from err


def _missing_transpose(prim: core.Primitive):
    raise NotImplementedError(
        f"transpose rule for '{prim.name}' is not implemented, so reverse-mode "
        f"differentiation (grad, vjp, jacrev) through '{prim.name}' is not possible. Register "
        "one in ad.transpose_rules (or declare the primitive with ad.deflinear2).")


def _transform_names(name: str | None) -> source_info.name_stack_context:
    """The name stack wrapped in the transformation ``name`` (left as it is for None)."""
    stack = source_info.current_name_stack()
    return source_info.name_stack_context(stack if name is None else stack.transform(name))


def backward_pass(jaxpr: Jaxpr, consts: Sequence, args: Sequence, cts_out: Sequence,
                  transform_stack: bool = True) -> list:
    """Transpose ``jaxpr`` with respect to its ``UndefinedPrimal`` arguments.

    ``args`` holds one entry per invar: an ``UndefinedPrimal`` for a linear input, a value
    otherwise; ``cts_out`` one cotangent (or ``Zero``) per outvar. Equations that read no
    linear variable are evaluated forward first (residual computations, e.g. recomputation
    inside ``checkpoint``); the others are transposed in reverse order. Returns one entry per
    argument: its cotangent (possibly ``Zero``) if it was undefined, else None. With
    ``transform_stack`` the transposed equations' names are wrapped in ``transpose(...)``."""
    if state.jaxpr_has_refs(jaxpr):
        # Refs made inside a linear program (tangent refs): transpose its pure equivalent.
        pure, pure_consts = state.discharge_jaxpr(pe.convert_constvars_jaxpr(jaxpr))
        return backward_pass(pure, pure_consts, [*consts, *args], cts_out,
                             transform_stack=transform_stack)[len(consts):]
    primal_env: dict[Var, Any] = {}
    linear: set[Var] = set()

    def read_primal(a):
        return a.val if type(a) is Literal else primal_env[a]

    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v] = c
    for v, a in zip(jaxpr.invars, args):
        if is_undefined_primal(a):
            linear.add(v)
        else:
            primal_env[v] = a
    linear_eqns = []
    for eqn in jaxpr.eqns:
        if any(type(a) is Var and a in linear for a in eqn.invars):
            linear_eqns.append(eqn)
            linear.update(eqn.outvars)
            continue
        with source_info.user_context(eqn.source_info):
            outs = eqn.primitive.bind(*map(read_primal, eqn.invars), **eqn.params)
        for v, x in zip(eqn.outvars, outs if eqn.primitive.multiple_results else (outs,)):
            primal_env[v] = x

    ct_env: dict[Var, Any] = {}

    def write_ct(v, ct):
        if ct is None or type(ct) is Zero or type(v) is not Var or v not in linear:
            return
        ct_env[v] = add_tangents(ct_env[v], ct) if v in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        write_ct(v, ct)
    with _transform_names("transpose" if transform_stack else None):
        _transpose_eqns(linear_eqns, ct_env, linear, read_primal, write_ct)
    return [(ct_env.get(v) if v in ct_env else Zero(v.aval.to_tangent_aval()))
            if is_undefined_primal(a) else None for v, a in zip(jaxpr.invars, args)]


def _transpose_eqns(linear_eqns, ct_env, linear, read_primal, write_ct) -> None:
    """Run the transpose rules of ``linear_eqns``, last first (``backward_pass``)."""
    for eqn in reversed(linear_eqns):
        cts_in = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(ct is None for ct in cts_in) and eqn.primitive not in transpose_zero_cotangents:
            continue
        cts_in = [Zero(v.aval.to_tangent_aval()) if ct is None else ct
                  for v, ct in zip(eqn.outvars, cts_in)]
        invals = [UndefinedPrimal(a.aval) if type(a) is Var and a in linear else read_primal(a)
                  for a in eqn.invars]
        rule = transpose_rules.get(eqn.primitive)
        if rule is None:
            _missing_transpose(eqn.primitive)
        ct = cts_in if eqn.primitive.multiple_results else cts_in[0]
        with source_info.user_context(eqn.source_info):  # the transpose keeps the line
            cts = rule(ct, *invals, **eqn.params)
        for a, c in zip(eqn.invars, cts):
            write_ct(a, c)


# --------------------------------------------------------------------------------------------
# Jaxpr-level transformations, for primitives that carry jaxprs
# --------------------------------------------------------------------------------------------

# ClosedJaxpr -> {key: result}; reusing the resulting jaxpr objects lets executables compiled
# for them (keyed on the jaxpr) be reused on every later call.
_jvp_jaxpr_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_transpose_jaxpr_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cache_for(cache: weakref.WeakKeyDictionary, closed: ClosedJaxpr) -> dict:
    if any(isinstance(c, core.Tracer) for c in closed.consts):
        return {}
    return cache.setdefault(closed, {})


def jvp_jaxpr(closed: ClosedJaxpr, nonzeros: Sequence[bool],
              instantiate: bool | Sequence[bool]) -> tuple[ClosedJaxpr, list[bool]]:
    """The JVP of a jaxpr: it maps ``[*primals, *nonzero tangents]`` to
    ``[*primal outputs, *nonzero output tangents]``. Returns it and which output tangents are
    nonzero (``instantiate`` forces some, or all, to be). Cached per jaxpr object."""
    n_out = len(closed.out_avals)
    inst = (instantiate,) * n_out if isinstance(instantiate, bool) else tuple(instantiate)
    nonzeros = tuple(bool(nz) and a.to_tangent_aval().dtype != dtypes.float0
                     for nz, a in zip(nonzeros, closed.in_avals))
    per = _cache_for(_jvp_jaxpr_cache, closed)
    hit = per.get((nonzeros, inst))
    if hit is not None:
        return hit
    n_in = len(closed.in_avals)
    tangent_avals = [a.to_tangent_aval() for a, nz in zip(closed.in_avals, nonzeros) if nz]
    out_nz_cell = []

    def fun(*args):
        primals, nz_tangents = args[:n_in], iter(args[n_in:])
        tangents = [next(nz_tangents) if nz else Zero(a.to_tangent_aval())
                    for a, nz in zip(closed.in_avals, nonzeros)]
        p_out, t_out, _ = jvp_flat(core.jaxpr_as_fun(closed), primals, tangents,
                                  transform_stack=False)
        t_out = [instantiate_zeros(t) if i and is_zero(t) and
                 core.get_aval(p).to_tangent_aval().dtype != dtypes.float0 else t
                 for p, t, i in zip(p_out, t_out, inst)]
        out_nz = [not is_zero(t) for t in t_out]
        out_nz_cell.append(out_nz)
        return list(p_out) + [t for t, nz in zip(t_out, out_nz) if nz]

    jaxpr, consts = pe.trace_to_jaxpr(fun, list(closed.in_avals) + tangent_avals,
                                      closed.jaxpr.debug_info)
    result = (ClosedJaxpr(jaxpr, consts), out_nz_cell[0])
    per[(nonzeros, inst)] = result
    return result


def _ct_aval(aval):
    """A cotangent's type: unreduced/reduced manual axes swap (``ShapedArray.to_ct_aval``)."""
    to_ct = getattr(aval, "to_ct_aval", None)
    return to_ct() if to_ct is not None else aval.to_tangent_aval()


def transpose_jaxpr(closed: ClosedJaxpr, linear: Sequence[bool], ct_nonzero: Sequence[bool]
                    ) -> tuple[ClosedJaxpr, list[bool]]:
    """The transpose of a jaxpr linear in the inputs marked ``linear``: it maps
    ``[*non-linear inputs, *nonzero output cotangents]`` to the nonzero cotangents of the
    linear inputs. Returns it and, per linear input, whether its cotangent is nonzero."""
    key = (tuple(map(bool, linear)), tuple(map(bool, ct_nonzero)))
    per = _cache_for(_transpose_jaxpr_cache, closed)
    hit = per.get(key)
    if hit is not None:
        return hit
    res_avals = [a for a, lin in zip(closed.in_avals, linear) if not lin]
    ct_avals = [_ct_aval(a) for a, nz in zip(closed.out_avals, ct_nonzero) if nz]
    nz_cell = []

    def fun(*args):
        res, cts_nz = iter(args[:len(res_avals)]), iter(args[len(res_avals):])
        primals = [UndefinedPrimal(a) if lin else next(res)
                   for a, lin in zip(closed.in_avals, linear)]
        cts = [next(cts_nz) if nz else Zero(_ct_aval(a))
               for a, nz in zip(closed.out_avals, ct_nonzero)]
        cts_in = backward_pass(closed.jaxpr, closed.consts, primals, cts,
                               transform_stack=False)
        lin_cts = [c for c, lin in zip(cts_in, linear) if lin]
        nz = [not is_zero(c) for c in lin_cts]
        nz_cell.append(nz)
        return [c for c, n in zip(lin_cts, nz) if n]

    jaxpr, consts = pe.trace_to_jaxpr(fun, res_avals + ct_avals, closed.jaxpr.debug_info)
    result = (ClosedJaxpr(jaxpr, consts), nz_cell[0])
    per[key] = result
    return result


# --------------------------------------------------------------------------------------------
# stop_gradient: the identity, with a zero derivative
# --------------------------------------------------------------------------------------------


def stop_gradient(x):
    """The identity on each leaf of ``x`` whose derivative is zero (``lax.stop_gradient``).

    Every leaf but key arrays (extended dtypes) is bound to the ``stop_gradient`` primitive,
    integer and boolean ones too, as JAX 0.10.2 does (so jaxprs print the same)."""
    def stop(leaf):
        if dtypes.issubdtype(core.get_aval(leaf).dtype, dtypes.extended):
            return leaf
        return stop_gradient_p.bind(leaf)
    return tree_util.tree_map(stop, x)


stop_gradient_p = core.Primitive("stop_gradient")
stop_gradient_p.def_impl(canonicalize_value)  # (the operand as JAX's bind makes it)
stop_gradient_p.def_abstract_eval(lambda x: x)
defjvp_zero(stop_gradient_p)
batching.defvectorized(stop_gradient_p)
mlir.register_lowering(stop_gradient_p, lambda ctx, x: x)


# As JAX 0.10.2, which still answers for the name it dropped.
_deprecations = {
    "reducing_transposes": removed(
        "jax.interpreters.ad.reducing_transposes was deprecated in v0.9.0. and removed in "
        "v0.10.0. It has been unused since JAX v0.4.38."),
}
__getattr__ = deprecation_getattr(__name__, _deprecations)
