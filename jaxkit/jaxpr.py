"""The jaxpr IR: variables, literals, equations and programs, their effects, and how they print.

A ``Jaxpr`` is the typed, first-order program tracing produces: constvars and invars in,
equations, outvars out. ``ClosedJaxpr`` pairs it with the values of its constvars.
``eval_jaxpr`` interprets one by binding each equation again, so it runs under any trace.

Printing is JAX's: ``{ lambda consts ; args. let eqns in (outs) }``, laid out in 80 columns,
nested jaxprs used more than once printed once at the top (``let name = ... in``), binders'
types and keywords coloured where a terminal or a notebook shows colour (``pretty_print``).
"""
from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxkit import _pretty as pp
from jaxkit import effects as effects_mod
from jaxkit import source_info as source_info_util
from jaxkit._config import config
from jaxkit._pretty import pp_literal
from jaxkit.avals import ShapedArray


class Var:
    """A variable of a jaxpr. Identity is the variable; names are given when printing."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        # JAX's: the object's id, then the type with long dtype names (``int32[]``)
        aval = self.aval
        text = aval.str_short(short_dtypes=False) if type(aval) is ShapedArray else \
            aval.str_short()
        return f"Var(id={id(self)}):{text}"

    def pretty_print(self, context: Namer, *, print_dtype: bool = True) -> str:
        """The variable's name in ``context`` (naming it now if it has none yet)."""
        return context(self)


class DropVar(Var):
    """An output of an equation that nothing reads (printed as ``_``)."""

    __slots__ = ()

    def pretty_print(self, context: Namer, *, print_dtype: bool = True) -> str:
        return "_"


class Literal:
    """A scalar constant written inline in a jaxpr (``2.0:f32[]``)."""

    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        # JAX's: the value's str; its weak Python ints and complexes are typed scalars whose
        # str names the dtype (``Literal(TypedInt(1, dtype=int32))``).
        val = self.val
        if type(val) in (int, complex) and getattr(self.aval, "weak_type", False):
            kind = "TypedInt" if type(val) is int else "TypedComplex"
            val = f"{kind}({val}, dtype={self.aval.dtype.name})"
        return f"Literal({val})"

    def pretty_print(self, context: Namer | None = None, *, print_dtype: bool = True) -> str:
        """``2.0:f32[]``, or ``2.0`` without ``print_dtype``."""
        text = pp_literal(self)
        return text if print_dtype else text.rsplit(":", 1)[0]


Atom = Var | Literal


class JaxprEqn:
    """One equation: ``outvars = primitive[params] invars``. ``source_info`` is the user's
    line that produced it (``source_info.SourceInfo``, None when unknown); it is carried
    through transformations and lowered to MLIR locations, and printed when asked
    (``pretty_print(source_info=True)``). The arguments are in JAX's order; ``effs`` and
    ``ctx`` are accepted for JAX's callers, and derived (``effects`` from the primitive's
    rules, ``ctx`` from the source info's name stack) rather than stored."""

    __slots__ = ("primitive", "invars", "outvars", "params", "source_info")

    def __init__(self, invars: list[Atom], outvars: list[Var], primitive: Any, params: dict,
                 effs: Any = None, source_info: source_info_util.SourceInfo | None = None,
                 ctx: Any = None):
        self.primitive = primitive
        self.invars = invars
        self.outvars = outvars
        self.params = params
        self.source_info = source_info

    def replace(self, **kw) -> JaxprEqn:
        fields = dict(primitive=self.primitive, invars=self.invars, outvars=self.outvars,
                      params=self.params, source_info=self.source_info)
        fields.update(kw)
        return JaxprEqn(**fields)

    @property
    def ctx(self) -> source_info_util.EqnContext:
        """The compute type and XLA metadata the equation was traced under."""
        names = self.source_info.name_stack if self.source_info else source_info_util.NameStack()
        return source_info_util.EqnContext.of(names)

    @property
    def effects(self) -> Any:
        """The equation's side effects (``jaxkit.effects``); effects on a ``Ref`` name the
        operand that holds it."""
        return eqn_effects(self)

    def __repr__(self):
        return pp_eqn(self, Namer(), 0)


class Jaxpr:
    """A first-order, typed program: constvars and invars in, equations, outvars out."""

    __slots__ = ("constvars", "invars", "outvars", "eqns", "debug_info", "__weakref__")

    def __init__(self, constvars: list[Var], invars: list[Var], outvars: list[Atom],
                 eqns: list[JaxprEqn], effects: Any = None, debug_info: Any = None):
        # (``effects``, JAX's fifth argument, are derived from the equations: ``.effects``)
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)
        self.debug_info = debug_info

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    @property
    def effects(self) -> Any:
        """The side effects of running the program: its equations', less those on refs it
        makes itself (which leave ``InternalMutableArrayEffect``)."""
        return jaxpr_effects(self)

    def replace(self, **kw) -> Jaxpr:
        """A copy with some of ``constvars``, ``invars``, ``outvars``, ``eqns`` and
        ``debug_info`` replaced."""
        fields = dict(constvars=self.constvars, invars=self.invars, outvars=self.outvars,
                      eqns=self.eqns, debug_info=self.debug_info)
        unknown = set(kw) - set(fields) - {"effects"}
        if unknown:
            raise TypeError(f"Jaxpr.replace() got unexpected keyword arguments {sorted(unknown)}")
        kw.pop("effects", None)  # (computed from the equations here)
        fields.update(kw)
        return Jaxpr(**fields)

    def pretty_print(self, *, source_info: bool = False, print_shapes: bool = True,
                     custom_pp_eqn_rules: bool = True, name_stack: bool = False,
                     print_effects: bool = False, width: int = 80,
                     use_color: bool | None = None, annotation_prefix: str = " # ") -> str:
        """The program's text. ``source_info``/``name_stack``: each equation's line and name
        scope as a comment; ``print_shapes=False``: binders without types; ``print_effects``:
        the effect set after the outputs; ``use_color`` (default: where a terminal or a
        notebook shows colour and ``jax_pprint_use_color`` is on)."""
        settings = PpSettings(print_shapes, source_info, name_stack, custom_pp_eqn_rules,
                              print_effects)
        if use_color is None:
            use_color = CAN_USE_COLOR and config.jax_pprint_use_color
        return pp.format(toplevel_jaxpr_doc(self, settings), width, use_color=use_color,
                         annotation_prefix=annotation_prefix)

    def __str__(self):
        return self.pretty_print()

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(self.pretty_print(use_color=True))


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts", "__weakref__")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence):
        assert len(jaxpr.constvars) == len(consts), (len(jaxpr.constvars), len(consts))
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    invars = property(lambda self: self.jaxpr.invars)
    outvars = property(lambda self: self.jaxpr.outvars)
    constvars = property(lambda self: self.jaxpr.constvars)
    eqns = property(lambda self: self.jaxpr.eqns)
    effects = property(lambda self: self.jaxpr.effects)
    debug_info = property(lambda self: self.jaxpr.debug_info)
    literals = property(lambda self: self.consts)  # JAX's other name for the constants

    def map_jaxpr(self, f: Callable[[Jaxpr], Jaxpr]) -> ClosedJaxpr:
        """The same constants closing ``f(self.jaxpr)``."""
        return ClosedJaxpr(f(self.jaxpr), self.consts)

    def replace(self, *, jaxpr: Jaxpr | None = None, consts: Sequence | None = None
                ) -> ClosedJaxpr:
        return ClosedJaxpr(self.jaxpr if jaxpr is None else jaxpr,
                           self.consts if consts is None else consts)

    def pretty_print(self, **kw) -> str:
        """As ``Jaxpr.pretty_print``."""
        return self.jaxpr.pretty_print(**kw)

    def __str__(self):
        return str(self.jaxpr)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(self.pretty_print(use_color=True))


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence, *args) -> list:
    """Interpret a jaxpr by binding each equation under the current trace."""
    env: dict[Var, Any] = {}

    def read(v):
        return v.val if type(v) is Literal else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        with source_info_util.user_context(eqn.source_info):
            outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


def jaxpr_as_fun(closed: ClosedJaxpr) -> Callable:
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)


def subjaxprs(params: dict) -> Iterator[Jaxpr]:
    """The jaxprs found among an equation's parameters (directly or in tuples)."""
    for v in params.values():
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(item, ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, Jaxpr):
                yield item


class JaxprTypeError(TypeError):
    """A jaxpr is not well typed (raised by ``interpreters.typecheck.check_jaxpr``)."""


# --------------------------------------------------------------------------------------------
# Effects
# --------------------------------------------------------------------------------------------

# primitive -> eqn -> the equation's effects, for primitives with effects of their own
# (callbacks, ref reads and writes). Equations holding jaxprs have their bodies' effects.
effect_rules: dict[Any, Callable[[JaxprEqn], Any]] = {}

# Primitives a library declared with effects of its own (``def_effectful_abstract_eval``):
# while there are none, nothing needs to ask a jaxpr for its effects before lowering it.
declared_effect_primitives: set = set()


# primitive -> eqn -> per nested jaxpr, the operand position each of its invars stands for
# (None where it stands for none): how an effect on a body's ref names the equation's
# operand. Without a rule, a body's invars stand for the equation's last operands.
operand_map_rules: dict[Any, Callable[[JaxprEqn], list[tuple[Jaxpr, list]]]] = {}


def _default_operand_map(eqn: JaxprEqn) -> list[tuple[Jaxpr, list]]:
    n = len(eqn.invars)
    out = []
    for sub in subjaxprs(eqn.params):
        k = len(sub.invars)
        out.append((sub, [n - k + i if n - k + i >= 0 else None for i in range(k)]))
    return out


def _effect_set(found) -> Any:
    # As JAX's print: a set of the effects, the empty frozenset when there are none.
    return set(found) if found else effects_mod.no_effects


def eqn_effects(eqn: JaxprEqn) -> Any:
    rule = effect_rules.get(eqn.primitive)
    if rule is not None:
        return _effect_set(rule(eqn))
    found: set = set()
    for sub, positions in operand_map_rules.get(eqn.primitive, _default_operand_map)(eqn):
        index = {v: p for v, p in zip(sub.invars, positions)}
        for eff in jaxpr_effects(sub):
            if isinstance(eff, effects_mod.JaxprInputEffect):
                pos = index.get(eff.input)
                operand = eqn.invars[pos] if pos is not None else None
                # an effect on a ref the body makes or takes as a value stays inside
                if type(operand) is Var and _is_ref(operand.aval):
                    found.add(eff.replace(operand))
            elif not isinstance(eff, effects_mod.InternalMutableArrayEffect):
                found.add(eff)
    return _effect_set(found)


def _is_ref(aval) -> bool:
    return hasattr(aval, "inner_aval")


def jaxpr_effects(jaxpr: Jaxpr) -> Any:
    inputs = set(jaxpr.invars) | set(jaxpr.constvars)
    found: set = set()
    for eqn in jaxpr.eqns:
        for eff in eqn_effects(eqn):
            if isinstance(eff, effects_mod.JaxprInputEffect) and eff.input not in inputs:
                found.add(effects_mod.internal_mutable_array_effect)
            else:
                found.add(eff)
    return _effect_set(found)


# --------------------------------------------------------------------------------------------
# Pretty-printing, in the style of JAX
# --------------------------------------------------------------------------------------------

_WIDTH = 80


def _can_use_color() -> bool:
    """As JAX decides once, at import: colour in a Jupyter kernel, Colab, or a terminal."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and (type(shell).__name__ == "ZMQInteractiveShell"
                              or "colab" in str(type(shell))):
        return True
    return hasattr(sys.stdout, "isatty") and sys.stdout.isatty()


CAN_USE_COLOR = _can_use_color()


class PpSettings(NamedTuple):
    """What a printed jaxpr shows (JAX's ``JaxprPpSettings``)."""

    print_shapes: bool = True
    source_info: bool = False
    name_stack: bool = False
    custom_pp_eqn_rules: bool = True
    print_effects: bool = False


class Namer:
    """Names variables in order of first appearance: a, b, c, ... skipping the names of the
    jaxprs printed once at the top (``shared``: jaxpr -> name), which print by name. It also
    carries the printing settings (JAX's ``JaxprPpContext``)."""

    def __init__(self, shared: dict[Jaxpr, str] | None = None,
                 settings: PpSettings = PpSettings()):
        self.names: dict[Var, str] = {}
        self.shared = shared or {}
        self.settings = settings
        taken = set(self.shared.values())
        self.counter = (name for name in map(pp.encode_name, itertools.count())
                        if name not in taken)

    var_names = property(lambda self: self.names)  # JAX's name

    def __call__(self, v: Atom) -> str:
        if type(v) is Literal:
            return pp_literal(v)
        if isinstance(v, DropVar):
            return "_"
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = next(self.counter)
        return name

    def suggest_same_names(self, for_vars: Sequence[Atom], like_vars: Sequence[Atom]) -> None:
        """Name each of ``for_vars`` (not yet named) like the var at its position in
        ``like_vars`` (naming that one first if needed), each of those at most once: a nested
        jaxpr's binders then read like the operands and results of its equation, as JAX
        prints ``jit``."""
        if len(for_vars) != len(like_vars):
            return
        taken: set = set()
        for for_v, like_v in zip(for_vars, like_vars):
            if (type(like_v) is Var and like_v not in taken and type(for_v) is Var
                    and for_v not in self.names):
                taken.add(like_v)
                self.names[for_v] = self(like_v)


def _param_doc(value, namer: Namer) -> pp.Doc:
    if isinstance(value, ClosedJaxpr):
        return _jaxpr_ref_doc(value.jaxpr, namer)
    if isinstance(value, Jaxpr):
        return _jaxpr_ref_doc(value, namer)
    if type(value) is tuple and value and all(isinstance(v, (ClosedJaxpr, Jaxpr))
                                              for v in value):
        subs = [_jaxpr_ref_doc(v.jaxpr if isinstance(v, ClosedJaxpr) else v, namer)
                for v in value]
        return pp.group(pp.concat([pp.nest(2, pp.concat([pp.text("("), pp.brk(""),
                                                         pp.join(pp.brk(), subs)])),
                                   pp.brk(""), pp.text(")")]))
    if isinstance(value, np.dtype):
        return pp.text(value.name)
    if isinstance(value, type) and issubclass(value, np.generic):
        return pp.text(np.dtype(value).name)
    if callable(value) and hasattr(value, "__name__") and not isinstance(value, type):
        return pp.text(value.__name__)  # (a class prints as JAX's: <class 'module.Name'>)
    # As JAX: an object's address is masked, so that printed jaxprs are stable.
    return pp.text(_ADDRESS.sub(lambda m: " at 0x" + "X" * len(m.group(1)), str(value)))


_ADDRESS = re.compile(r" at 0x([0-9a-fA-F]+)")


def pp_param_value(value, indent: int, namer: Namer, lead: int = 0) -> str:
    """A parameter's value as an equation prints it (``lead``: the width of what precedes it
    on its first line, ``name=``)."""
    doc = pp.nest(indent, pp.concat([pp.text(" " * (indent + lead)), _param_doc(value, namer)]))
    return pp.format(doc, _WIDTH)[indent + lead:]


# primitive -> params -> the params to print, in order. JAX leaves out what the binder's type
# shows and parameters at their defaults; without a rule, every parameter prints, sorted.
pp_params_rules: dict[Any, Callable[[dict], dict]] = {}


# primitive -> (eqn, namer) -> None: names chosen before an equation prints (see
# ``Namer.suggest_same_names``).
pp_naming_rules: dict[Any, Callable[[JaxprEqn, Namer], None]] = {}


# primitive -> (eqn, namer, binder, top_level) -> text: equations printed in a syntax of their
# own (the ref primitives: ``c:f32[] <- a[1]``); ``binder(v)`` prints an output binder,
# ``top_level`` says whether the equation is in the printed jaxpr itself (not a nested one).
pp_eqn_rules: dict[Any, Callable] = {}


# Primitives whose ``name`` parameter JAX computes when printing (custom_jvp_call's function
# name) rather than holds: it does not name the jaxprs printed once at the top, which JAX
# calls ``jaxpr`` then.
pp_display_only_names: set = set()


def defpp_params(prim: Any, rule: Callable[[dict], dict]) -> None:
    """How an equation of ``prim`` shows its parameters: ``rule(params) -> params to print``
    (as JAX prints them: defaults left out, nested jaxprs with names of their own, ...)."""
    pp_params_rules[prim] = rule


def _vars_doc(items: Sequence[pp.Doc | str], sep: str = "") -> pp.Doc:
    """JAX's ``pp_vars``: each separator a group of its own, so the list fills lines."""
    return pp.nest(2, pp.group(pp.join(pp.concat([pp.text(sep), pp.group(pp.brk())]),
                                       [pp.text(d) if type(d) is str else d for d in items])))


def _binder_doc(name: str, v: Var, namer: Namer) -> pp.Doc:
    if not namer.settings.print_shapes:
        return pp.text(name)
    return pp.concat([pp.text(name), pp.type_annotation(pp.text(f":{v.aval.str_short()}"))])


def _eqn_doc(eqn: JaxprEqn, namer: Namer, used: set | None = None,
             top_level: bool = True) -> pp.Doc:
    def unused(v):
        return isinstance(v, DropVar) or (top_level and used is not None and v not in used)

    def binder(v):
        return f"{'_' if unused(v) else namer(v)}:{v.aval.str_short()}"

    settings = namer.settings
    custom = pp_eqn_rules.get(eqn.primitive) if settings.custom_pp_eqn_rules else None
    if custom is not None:
        return pp.text(custom(eqn, namer, binder, top_level))
    naming = pp_naming_rules.get(eqn.primitive)
    if naming is not None:
        naming(eqn, namer)
    lhs = _vars_doc([_binder_doc("_" if unused(v) else namer(v), v, namer)
                     for v in eqn.outvars])
    rhs_args = _vars_doc([namer(a) for a in eqn.invars])
    rule = pp_params_rules.get(eqn.primitive)
    params = rule(eqn.params) if rule is not None else dict(sorted(eqn.params.items()))
    scope = None
    if settings.name_stack:
        scope = f"[{eqn.source_info.name_stack if eqn.source_info else ''}]"
    rhs = [pp.text(eqn.primitive.name, scope)]
    if params:
        pairs = [pp.concat([pp.text(f"{k}="), _param_doc(v, namer)]) for k, v in params.items()]
        rhs.append(pp.group(pp.concat([
            pp.nest(2, pp.concat([pp.text("["), pp.brk(""), pp.join(pp.brk(), pairs)])),
            pp.brk(""), pp.text("]")])))
    if eqn.invars or eqn.outvars or params:
        # As JAX, a space after the name (or "]") even with no operands (``iota[...] ``).
        rhs += [pp.text(" "), rhs_args]
    if eqn.outvars:
        where = None
        if settings.source_info:
            where = str(eqn.source_info) if eqn.source_info else ""
        return pp.concat([lhs, pp.text(" = ", where), *rhs])
    return pp.concat(rhs)


def pp_eqn(eqn: JaxprEqn, namer: Namer, indent: int, used: set | None = None) -> str:
    """One equation. Outputs not in ``used`` print as ``_`` (and take no name), as in JAX."""
    doc = pp.nest(indent, pp.concat([pp.text(" " * indent), _eqn_doc(eqn, namer, used)]))
    return pp.format(doc, _WIDTH)[indent:]


def toplevel_jaxpr_doc(jaxpr: Jaxpr, settings: PpSettings = PpSettings()) -> pp.Doc:
    """A whole program, as ``str(jaxpr)`` prints it: the shared jaxprs first (``let name =
    { ... } in``), then the program, its equations referring to them by name."""
    shared = pp.shared_names(jaxpr, lambda j: [
        (None if e.primitive in pp_display_only_names else e.params.get("name"),
         list(subjaxprs(e.params))) for e in j.eqns])
    namer = Namer(shared, settings)
    docs = [pp.concat([pp.text(f"let {name} = "), _jaxpr_doc(sub, namer, False),
                       pp.text(" in"), pp.brk()]) for sub, name in shared.items()]
    return pp.concat([*docs, _jaxpr_doc(jaxpr, namer, True)])


def pp_toplevel_jaxpr(jaxpr: Jaxpr) -> str:
    return pp.format(toplevel_jaxpr_doc(jaxpr), _WIDTH)


def pp_jaxpr(jaxpr: Jaxpr, indent: int = 0, namer: Namer | None = None, lead: int = 0) -> str:
    """Print a jaxpr the way JAX does: ``{ lambda consts ; args. let eqns in (outs) }``, or
    the name of a shared jaxpr (see ``pp_toplevel_jaxpr``).

    Jaxprs nested in parameters continue the enclosing names (``namer``), as JAX's do."""
    namer = Namer() if namer is None else namer
    doc = pp.nest(indent, pp.concat([pp.text(" " * (indent + lead)),
                                     _jaxpr_ref_doc(jaxpr, namer)]))
    return pp.format(doc, _WIDTH)[indent + lead:]


def _jaxpr_ref_doc(jaxpr: Jaxpr, namer: Namer) -> pp.Doc:
    name = namer.shared.get(jaxpr)
    return pp.text(name) if name is not None else _jaxpr_doc(jaxpr, namer, False)


def _jaxpr_doc(jaxpr: Jaxpr, namer: Namer, top_level: bool) -> pp.Doc:
    """JAX's jaxpr skeleton: one group, flat when it fits (equations joined by ``; ``)."""
    def binders(vs):
        return _vars_doc([_binder_doc(namer(v), v, namer) for v in vs])

    constvars = binders(jaxpr.constvars)
    invars = binders(jaxpr.invars)
    used = {v for e in jaxpr.eqns for v in e.invars if type(v) is not Literal}
    used.update(v for v in jaxpr.outvars if type(v) is not Literal)
    if top_level:  # an unused output is named ``_``, so a nested binder named like it is too
        namer.names.update({v: "_" for e in jaxpr.eqns for v in e.outvars if v not in used})
    eqns = pp.join(pp.brk("; "), [_eqn_doc(e, namer, used, top_level) for e in jaxpr.eqns])
    outs = pp.concat([pp.text("("), _vars_doc([namer(v) for v in jaxpr.outvars], sep=","),
                      pp.text(")" if len(jaxpr.outvars) != 1 else ",)")])
    effects = []
    if namer.settings.print_effects:
        shown = [getattr(e, "_pretty_print", lambda _: str(e))(namer)
                 for e in jaxpr_effects(jaxpr)]
        effects = [pp.text(" : { " + ", ".join(shown) + " }")]
    return pp.group(pp.concat([pp.nest(2, pp.concat([
        pp.text("{ "), pp.keyword(pp.text("lambda ")), constvars, pp.text("; "), invars,
        pp.text(". "), pp.keyword(pp.text("let")),
        pp.nest(2, pp.concat([pp.brk(), eqns])), pp.brk(), pp.keyword(pp.text("in ")), outs,
        *effects])),
        pp.text(" }")]))
