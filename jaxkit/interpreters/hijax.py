"""High-level ("hijax") types and primitives: JAX's extension point for values other than arrays
(Flax NNX's ``HijaxVariable``, JAX's ``Box``), as ``jax.experimental.hijax`` defines it.

A high-level type (``HiType``, immutable, or ``MutableHiType``, whose *quasi-dynamic data*
(QDD: for a box, the tree structure and types of what it holds) may change as it is mutated)
says how its values lower to arrays (``lo_ty``/``lower_val``/``raise_val``, or
``lo_ty_qdd``/``read_loval``/``new_from_loval``/``update_from_loval``). A ``HiPrimitive``
operates on such values and says how it runs on their lowered form (``to_lojax``).

jaxkit's interpreters carry arrays only, so high-level values are lowered where they meet a
transformation rather than staged (only the jaxprs shown by ``make_jaxpr`` and
``jit(f).trace``/``.lower`` of high-level arguments stage them: ``hijax_staging``): a
``HiPrimitive`` runs its ``to_lojax`` rule on the current trace at once (under ``jit`` the
values it touches hold that trace's tracers), except on a JVP trace with a nonzero tangent
flowing in, which uses the primitive's ``jvp``, and under ``vmap`` with a batched operand, which
has no rule. ``jit`` lowers high-level arguments on entry (``lower_args``): each distinct value
becomes its array leaves, the traced function gets a fresh value raised from the traced leaves,
and a mutable value's final leaves are extra results written back into the caller's value
(``write_back``); its QDD is part of the cache key, and the QDD it ends with is recorded with
the trace.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import weakref
from typing import Any, Callable

import numpy as np

from jaxkit import core, tree_util
from jaxkit.interpreters import ad, batching
from jaxkit.interpreters import partial_eval as pe

__all__ = ["AvalMutableQDD", "AvalQDD", "HiPrimitive", "HiType", "MutableHiType",
           "QuasiDynamicData", "aval_method", "aval_property", "cur_qdd", "has_hi", "hitypes",
           "is_hi", "is_staged", "lower_args", "lowered_branches", "register_hitype", "write_back"]

# Markers for a method or property of a high-level type that its traced values forward to
# (JAX's names and fields: libraries build them with ``aval_property(fget=...)``).
aval_property = collections.namedtuple("aval_property", ["fget"])
aval_method = collections.namedtuple("aval_method", ["fun"])

# The Python types registered with ``register_hitype`` and the function giving a value's type.
hitypes: dict[type, Callable[[Any], Any]] = {}


def register_hitype(val_cls: type, typeof_fn: Callable[[Any], Any]) -> None:
    """Make ``typeof_fn(x)`` the type of every ``val_cls`` value ``x`` (``jax.typeof``)."""
    hitypes[val_cls] = typeof_fn
    core.pytype_aval_mappings[val_cls] = typeof_fn


def is_hi(x: Any) -> bool:
    return type(x) in hitypes


def cur_qdd(x: Any) -> Any:
    """The current quasi-dynamic data of mutable high-level value ``x`` (a box's contents'
    structure and types). jaxkit's high-level values are always Python objects (under a
    transformation they hold tracers), so this is the value's own answer."""
    return x.cur_qdd()


class QuasiDynamicData:
    """Base of a mutable type's quasi-dynamic data."""


@dataclasses.dataclass(frozen=True)
class AvalQDD:
    """A mutable type with its quasi-dynamic data: what a primitive making such a value
    returns from ``abstract_eval``."""
    aval: Any
    qdd: Any
    is_high = True
    has_qdd = True

    def lo_ty(self) -> list:
        return self.aval.lo_ty_qdd(self.qdd)

    def read_loval(self, val: Any) -> list:
        return self.aval.read_loval(self.qdd, val)

    def new_from_loval(self, *lo_vals: Any) -> Any:
        return self.aval.new_from_loval(self.qdd, *lo_vals)

    def to_tangent_aval(self) -> AvalQDD:
        return AvalQDD(self.aval.to_tangent_aval(), self.qdd and self.qdd.to_tangent_qdd())


class MutableQuasiDynamicData:
    """The QDD of a mutable value as an operation updates it (``update``)."""

    def __init__(self, val: Any):
        self.init_val = self.cur_val = val

    def update(self, val: Any) -> None:
        self.cur_val = val


@dataclasses.dataclass(frozen=True)
class AvalMutableQDD:
    """What a primitive's ``abstract_eval`` receives for a mutable operand."""
    aval: Any
    mutable_qdd: MutableQuasiDynamicData


class HiType:
    """An immutable high-level type: a subclass says how its values lower to arrays."""
    is_high = True
    has_qdd = False

    def lo_ty(self) -> list:
        raise NotImplementedError(f"{type(self).__name__}.lo_ty must be defined")

    def lower_val(self, hi_val: Any) -> list:
        raise NotImplementedError(f"{type(self).__name__}.lower_val must be defined")

    def raise_val(self, *lo_vals: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.raise_val must be defined")

    def to_tangent_aval(self) -> HiType:
        raise NotImplementedError(f"{type(self).__name__}.to_tangent_aval must be defined")

    def to_ct_aval(self) -> HiType:
        return self.to_tangent_aval()

    def str_short(self, short_dtypes: bool = False, **_) -> str:
        return type(self).__name__


class MutableHiType:
    """A mutable high-level type: how it lowers depends on its value's current QDD."""
    is_high = True
    has_qdd = True
    is_writer = False
    type_state = aval_method(cur_qdd)

    def lo_ty_qdd(self, state: Any, /) -> list:
        raise NotImplementedError(f"{type(self).__name__}.lo_ty_qdd must be defined")

    def lo_ty(self) -> list:
        raise TypeError("a mutable high-level type lowers through lo_ty_qdd, not lo_ty")

    def new_from_loval(self, state: Any, /, *lo_vals: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.new_from_loval must be defined")

    def read_loval(self, state: Any, val: Any, /) -> list:
        raise NotImplementedError(f"{type(self).__name__}.read_loval must be defined")

    def update_from_loval(self, state: Any, val: Any, /, *lo_vals: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__}.update_from_loval must be defined")

    def to_tangent_aval(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.to_tangent_aval must be defined")

    def to_ct_aval(self) -> Any:
        return self.to_tangent_aval()

    def str_short(self, short_dtypes: bool = False, **_) -> str:
        return type(self).__name__


# Traces that pass a high-level primitive on to their parent unless one of their own tracers
# flows in, and then apply its rule: its ``jvp``; for vmap, none (JAX's HiPrimitive has no
# batching interface), so vmap raises the usual missing-rule error.
_RULE_TRACES = (ad.JVPTrace, batching.BatchTrace)


class HiPrimitive(core.Primitive):
    """A primitive over high-level values. A subclass defines ``abstract_eval``, ``to_lojax``
    (what it does to the values' lowered form; eager evaluation runs it too unless the
    subclass defines ``impl``) and, if differentiable, ``jvp`` and ``transpose``."""

    def __init__(self, name: str):
        super().__init__(name)
        ad.jvp_rules[self] = self._jvp_rule

    def _jvp_rule(self, primals, tangents, **params):
        return self.jvp(primals, tangents, **params)

    def bind(self, *args, **params):
        trace = core.current_trace()
        if isinstance(trace, _RULE_TRACES):
            return trace.process_primitive(self, args, params)
        if getattr(trace, "stages_hi", False):  # make_jaxpr of high-level args: hijax_staging
            out = trace.process_hi_primitive(self, args, params)
            if out is not NotImplemented:
                return out
        for a in args:
            if getattr(type(a), "staged_hi", False):
                raise NotImplementedError(
                    f"'{self.name}' of a {a.aval.str_short()} value staged by make_jaxpr or "
                    "jit(...).trace/lower, inside a transformation of the traced function "
                    "(scan, grad, vmap..., or a jit or cond closing over it): jaxkit stages "
                    "such values where they are arguments of the function, or of a jit or "
                    "cond in it. Call the jitted function instead, or close over the value.")
        if _raw[0]:
            return self._run(trace, args, params)
        backed = _backed_args(trace, args)
        for b in backed:
            b.sync(trace)
        out = self._run(trace, args, params)
        for b in backed:
            b.write(trace)
        if trace is not core.eval_trace:
            _record_owned(trace, out if isinstance(out, (list, tuple)) else [out])
        return out

    def _run(self, trace, args, params):
        return self.impl(*args, **params) if trace is core.eval_trace else \
            self.to_lojax(*args, **params)

    def is_high(self, *avals, **params) -> bool:
        return True

    def is_effectful(self, params) -> bool:
        return False

    def impl(self, *args, **params):
        return self.to_lojax(*args, **params)

    def abstract_eval(self, *avals, **params):
        raise NotImplementedError(f"abstract evaluation rule for '{self.name}' is not "
                                  "implemented")

    def to_lojax(self, *args, **params):
        raise NotImplementedError(f"Primitive '{self.name}' has is_high=True but no to_lojax "
                                  "lowering rule.")

    def jvp(self, primals, tangents, **params):
        raise NotImplementedError(f"JVP rule for '{self.name}' is not implemented")

    def transpose(self, *args, **params):
        raise NotImplementedError(f"transpose rule for '{self.name}' is not implemented")


# --------------------------------------------------------------------------------------------
# Lowering high-level arguments of a traced function (jit)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class HiArgs:
    """How a call's flat arguments were lowered, hashable (part of the cache key): for each
    flat argument its index among the high-level values (``-1``: an array), and each value's
    type, QDD and number of array leaves."""
    slots: tuple
    types: tuple
    qdds: tuple
    sizes: tuple


def has_hi(flat: list) -> bool:
    """Whether any of ``flat`` is a high-level value (cheap when no type is registered)."""
    return bool(hitypes) and any(type(x) in hitypes for x in flat)


def lower_args(flat: list) -> tuple[HiArgs, list, list]:
    """``(spec, lowered flat arguments, the high-level values)``. As JAX, a value passed
    twice is two values to the traced function, each written back in turn."""
    his, slots, lo_his, lo_rest = [], [], [], []
    for x in flat:
        if type(x) in hitypes:
            slots.append(len(his))
            his.append(x)
        else:
            slots.append(-1)
            lo_rest.append(x)
    types, qdds, sizes = [], [], []
    for h in his:
        ty = hitypes[type(h)](h)
        if not (ty.has_qdd or isinstance(ty, HiType)):
            # (Flax's ref-backed HijaxVariable: a MutableHiType without QDD; JAX fails too.)
            raise NotImplementedError(
                f"passing a {type(h).__name__} (type {ty.str_short()}, a mutable high-level "
                "type without quasi-dynamic data) to a transformed function is not "
                "supported: its type lowers neither through lo_ty_qdd (has_qdd is False) nor "
                "through HiType's lower_val; close over it instead.")
        qdd = cur_qdd(h) if ty.has_qdd else None
        lo = ty.read_loval(qdd, h) if ty.has_qdd else ty.lower_val(h)
        types.append(ty)
        qdds.append(qdd)
        sizes.append(len(lo))
        lo_his.extend(lo)
    return HiArgs(tuple(slots), tuple(types), tuple(qdds), tuple(sizes)), lo_his + lo_rest, his


def raise_args(spec: HiArgs, lo_flat: list) -> tuple[list, list]:
    """Inside the traced function: ``(flat arguments with fresh high-level values raised from
    their traced leaves, those values)``."""
    n_hi = sum(spec.sizes)
    lo_his, rest = iter(lo_flat[:n_hi]), iter(lo_flat[n_hi:])
    his = []
    for ty, qdd, size in zip(spec.types, spec.qdds, spec.sizes):
        lo = [next(lo_his) for _ in range(size)]
        his.append(ty.new_from_loval(qdd, *lo) if ty.has_qdd else ty.raise_val(*lo))
    _record_owned(core.current_trace(), his)
    return [next(rest) if k < 0 else his[k] for k in spec.slots], his


@tree_util.register_pytree_node_class
class FinalState:
    """The traced function's extra result: the array leaves of its mutable high-level values
    at the end, with their final QDDs as static data (a box may change what it holds)."""

    def __init__(self, leaves: list, qdds: tuple):
        self.leaves, self.qdds = leaves, qdds

    def tree_flatten(self):
        return self.leaves, self.qdds

    @classmethod
    def tree_unflatten(cls, qdds, leaves):
        return cls(list(leaves), qdds)


def final_state(spec: HiArgs, his: list) -> FinalState:
    """The leaves and QDDs of the traced function's mutable high-level values at its end."""
    leaves, qdds = [], []
    for ty, h in zip(spec.types, his):
        if ty.has_qdd:
            qdd = cur_qdd(h)
            lo = ty.read_loval(qdd, h)
            qdds.append((qdd, len(lo)))
            leaves.extend(lo)
    return FinalState(leaves, tuple(qdds))


def lowered_branches(funs: list, flat: list, in_tree: Any) -> tuple[HiArgs, list, list, list]:
    """For a construct calling one of ``funs`` (``cond``'s branches) on flat operands ``flat``
    (structure ``in_tree``), some of them high-level values: ``(spec, array operands, the
    values, functions)``, each function taking the array operands, calling its ``fun`` on
    values raised from them and returning ``(result, final state)``, as a jit body does (the
    caller writes the state back, ``write_back``). Values staged by ``hijax_staging`` are
    not lowered here: the construct stages them (``is_staged``)."""
    spec, lo_flat, his = lower_args(flat)
    ends: list = []  # (function name, final QDDs) of the branches traced so far

    def lowered(fun):
        def call(*lo):
            flat_in, inner = raise_args(spec, list(lo))
            out = fun(*tree_util.tree_unflatten(in_tree, flat_in))
            state = final_state(spec, inner)
            qdds = [q for q, _ in state.qdds]
            if ends and ends[0][1] != qdds:
                # (JAX 0.10.2 fails here with a bare AssertionError.)
                raise TypeError(
                    "the branches of a cond must leave its high-level operands with the same "
                    f"types; {ends[0][0]} left {ends[0][1]} but {call.__name__} left {qdds}.")
            ends.append((call.__name__, qdds))
            return out, state
        call.__name__ = getattr(fun, "__name__", "branch")
        return call

    return spec, lo_flat, his, [lowered(f) for f in funs]


def is_staged(flat: list) -> bool:
    """Whether any of ``flat`` is a high-level value staged by ``make_jaxpr`` or
    ``jit(...).trace``/``.lower`` (``hijax_staging``), which a construct stages as it is."""
    return any(getattr(type(x), "staged_hi", False) for x in flat)


def write_back(spec: HiArgs, his: list, state: FinalState) -> None:
    """Update the caller's mutable high-level values from the call's final state."""
    it = iter(state.leaves)
    muts = [(ty, h) for ty, h in zip(spec.types, his) if ty.has_qdd]
    for (ty, h), (qdd, size) in zip(muts, state.qdds):
        ty.update_from_loval(qdd, h, *[next(it) for _ in range(size)])


# --------------------------------------------------------------------------------------------
# Mutable high-level values closed over by a traced body (scan, cond, while, jit)
# --------------------------------------------------------------------------------------------
#
# A body that mutates a value made outside it must not store its tracers in that value. On the
# first operation on such a value inside a body the value gets a *backing*: one ref per array
# leaf, made where the value was made (eagerly, or in the trace that made it), so that each
# body sees the refs as closed-over state, which jaxkit's ref machinery threads through loops,
# branches and jit calls and writes back. From then on every operation on the value, in any
# trace, first reloads its leaves from the refs (a body, or a cached jit call that traces
# nothing, may have written them) and afterwards stores the leaves it changed into them. The
# refs have fixed types: a backed value's QDD may change eagerly (which ends the backing) or,
# for an eagerly made value, in the body of a jit (which gives it new refs of the new types, see
# "jit bodies" below); elsewhere (a loop or a branch) it must not. Backings of eagerly made
# values live while something besides the backing holds the value (see ``_sweep``); those made
# in a trace, as long as the trace.

# The ref operations (``new_ref``, read, write), filled in by ``jaxkit.ref``, a layer above.
ref_ops: list = []

# Traces whose values must not be stored in a value made outside them.
_LIFTING_TRACES = (pe.DynamicJaxprTrace,)

_raw = [False]  # set while the backing machinery itself operates on values
_owned: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trace -> ids of values
_backings: dict[int, _Backing] = {}  # of eagerly made values
_SWEEP_MIN = 32  # ``_backings`` is swept of dead values when it grows past max(this, 2 * live)
_sweep_at = [_SWEEP_MIN]
_trace_backings: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trace -> {id: ..}


@contextlib.contextmanager
def _raw_ops():
    prev, _raw[0] = _raw[0], True
    try:
        yield
    finally:
        _raw[0] = prev


def _record_owned(trace, values) -> None:
    """Note the high-level values among ``values`` as made inside ``trace``."""
    for x in values:
        if type(x) in hitypes:
            # Ids only (the values hold the trace's tracers: keeping them would keep the trace
            # alive). While the trace lives, a value made outside it was alive when it began,
            # so no value made inside it can have had its id.
            _owned.setdefault(trace, set()).add(id(x))


def _owner(x, ty, trace):
    """The innermost trace from ``trace`` outwards that made ``x``: one a primitive made it in,
    or else the innermost one whose tracers it holds (a value made by its class's own
    constructor); the eval trace when none."""
    with _raw_ops():
        holds = {id(leaf._trace) for leaf in ty.read_loval(cur_qdd(x), x)
                 if isinstance(leaf, core.Tracer)}
    t = trace
    while t is not None and t is not core.eval_trace:
        if id(t) in holds or id(x) in _owned.get(t, ()):
            return t
        t = t.parent
    return core.eval_trace


def _same_qdd(ty, a, b) -> bool:
    """Whether refs made for QDD ``a`` hold a value of QDD ``b``: the same QDD up to weak
    types (the refs keep their dtypes)."""
    if a == b:
        return True
    norm = getattr(a, "normalize", None)
    if norm is not None:
        return norm() == b.normalize()
    sig = lambda q: [(t.shape, t.dtype) for t in ty.lo_ty_qdd(q)]  # noqa: E731
    return sig(a) == sig(b) and getattr(a, "treedef", None) == getattr(b, "treedef", None)


class _Backing:
    """The refs holding mutable value ``value``'s leaves (see above)."""

    def __init__(self, value, ty, owner):
        self.value, self.ty, self.owner = value, ty, owner
        with _raw_ops(), core.set_current_trace(owner):
            self.qdd = cur_qdd(value)
            self.leaves = ty.read_loval(self.qdd, value)
            new_ref = ref_ops[0]
            self.refs = [new_ref(v) for v in self.leaves]

    def sync(self, trace) -> None:
        """Reload the value's leaves from the refs, as ``trace`` sees them: a body or a cached
        jit call (which traces nothing) may have written them since."""
        if _logs and self.owner is core.eval_trace:
            _note_use(self)
        with _raw_ops():
            self.leaves = [ref_ops[1](r) for r in self.refs]
            self.ty.update_from_loval(self.qdd, self.value, *self.leaves)

    def write(self, trace) -> None:
        """Store the leaves an operation in ``trace`` changed into the refs."""
        with _raw_ops():
            qdd = cur_qdd(self.value)
            if not _same_qdd(self.ty, self.qdd, qdd):
                if trace is core.eval_trace:
                    _backings.pop(id(self.value), None)
                    return
                if self.owner is core.eval_trace and _logs and _logs[-1].trace is trace:
                    self._retype(qdd)
                    return
                raise TypeError(
                    f"a mutable {type(self.value).__name__} made outside a transformed "
                    f"function changed type inside it ({self.qdd} to {qdd}); set it to a "
                    "value of the same structure, shapes and dtypes, or pass it in as an "
                    "argument.")
            leaves = self.ty.read_loval(qdd, self.value)
            for r, old, new in zip(self.refs, self.leaves, leaves):
                if new is not old:
                    ref_ops[2](r, new)
        self.leaves = leaves

    def switch(self, qdd, refs) -> None:
        """Hold the value in ``refs`` of type ``qdd`` from now on (a jit's call re-typed it,
        or its tracing is undone). The value itself gets their eager contents at once: user
        code reads its QDD before the next operation reloads it (``sync``)."""
        self.qdd, self.refs = qdd, refs
        with _raw_ops(), core.set_current_trace(core.eval_trace):
            self.ty.update_from_loval(qdd, self.value, *[ref_ops[1](r) for r in refs])

    def _retype(self, qdd) -> None:
        """In a jit body, the value changed QDD: new (eager) refs of the new types, holding
        its leaves from here on; the jit applies the switch at each call (``apply_closure``)."""
        leaves = self.ty.read_loval(qdd, self.value)
        with core.set_current_trace(core.eval_trace):
            refs = [ref_ops[0](np.zeros(a.shape, a.dtype)) for a in self.ty.lo_ty_qdd(qdd)]
        for r, v in zip(refs, leaves):
            ref_ops[2](r, v)
        self.qdd, self.refs, self.leaves = qdd, refs, leaves


def _backed_args(trace, args) -> list:
    """The backings of the mutable high-level values among ``args`` that need one in
    ``trace`` (made for those that get one now)."""
    out = []
    for x in args:
        if type(x) not in hitypes:
            continue
        b = _find_backing(x, trace)
        if b is not None:
            out.append(b)
            continue
        if not isinstance(trace, _LIFTING_TRACES):
            continue
        ty = hitypes[type(x)](x)
        if not ty.has_qdd:
            continue
        owner = _owner(x, ty, trace)
        if owner is trace:
            continue
        b = _Backing(x, ty, owner)
        if owner is core.eval_trace:
            if len(_backings) >= _sweep_at[0]:
                _sweep()
            _backings[id(x)] = b
        else:
            # Its refs are the owner's tracers, so the entry keeps the owner alive: entries of
            # finished traces are dropped here.
            for t in [t for t in _trace_backings if t._invalid]:
                del _trace_backings[t]
            _trace_backings.setdefault(owner, {})[id(x)] = b
        out.append(b)
    return out


def _find_backing(x, trace):
    b = _backings.get(id(x))
    if b is not None and b.value is x:
        return b
    t = trace
    while _trace_backings and t is not None and t is not core.eval_trace:
        b = _trace_backings.get(t, {}).get(id(x))
        if b is not None and b.value is x:
            return b
        t = t.parent
    return None


def _sweep() -> None:
    """Drop the backings of eagerly made values nothing else holds. The values (Flax's
    variables among them) may not support weak references, so the test is their reference
    count: one from the backing, one from ``getrefcount``'s argument. A value held only by a
    reference cycle of its own stays until the cycle is broken."""
    for k in [k for k, b in _backings.items() if sys.getrefcount(b.value) <= 2]:
        del _backings[k]
    _sweep_at[0] = max(_SWEEP_MIN, 2 * len(_backings))


def live_backings() -> int:
    """How many eagerly made values have a backing (after dropping those nothing holds)."""
    _sweep()
    return len(_backings)


# --------------------------------------------------------------------------------------------
# Jit bodies: what a traced jit did to the backings of eagerly made values it closes over
# --------------------------------------------------------------------------------------------
#
# As JAX, a jit whose body sets a closed-over value to one of another type (a box given a new
# structure, a Flax variable re-typed) leaves it with that type after every call, and a later
# call with the value of another type traces anew (JAX's QDD cache index). The trace records,
# for each backing it used, the refs it found (the condition for reusing it) and those it left
# (a type change switched them): tracing itself leaves the backings as they were, and each call
# of the traced program switches them after running it.


class _ClosureLog:
    """The backings a jit body (tracing in ``trace``) used, with the QDD and refs it found."""

    def __init__(self, trace):
        self.trace = trace
        self.uses: dict[int, tuple] = {}
        self.switches: tuple = ()


_logs: list[_ClosureLog] = []
# A traced jit's jaxpr -> (the backings it used as it found them, the switches it made).
_closure_effects: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _note_use(b: _Backing) -> None:
    for log in _logs:
        log.uses.setdefault(id(b), (b, b.qdd, b.refs))


@contextlib.contextmanager
def closure_log():
    """Around a jit body, inside its trace: log the closed-over backings it uses and switches,
    and leave them as they were (the calls switch them, ``apply_closure``)."""
    log = _ClosureLog(core.current_trace())
    _logs.append(log)
    try:
        yield log
    finally:
        _logs.pop()
        log.switches = tuple((b, b.qdd, b.refs) for b, _, refs in log.uses.values()
                             if b.refs is not refs)
        for b, qdd, refs in log.uses.values():
            if b.refs is not refs:
                b.switch(qdd, refs)


def record_closure(closed: Any, log: _ClosureLog) -> None:
    """Keep what the body traced into ``closed`` found and did (when it used any backing)."""
    if log.uses:
        _closure_effects[closed] = (tuple(log.uses.values()), log.switches)


def closure_holds(closed: Any) -> bool:
    """Whether the trace ``closed`` may run now: every closed-over value it used still has the
    backing, and the refs, it found (not so once the value changed type since)."""
    rec = _closure_effects.get(closed) if _closure_effects else None  # (the usual case free)
    if rec is None:
        return True
    for b, _, refs in rec[0]:
        if _backings.get(id(b.value)) is not b or b.refs is not refs:
            return False
    if _logs:  # an enclosing jit body depends on them too
        for b, _, _ in rec[0]:
            _note_use(b)
    return True


def made_here(values: list) -> None:
    """Note the high-level values among ``values`` as made in the current trace (raised from
    its tracers: a value without leaves holds none to tell so)."""
    _record_owned(core.current_trace(), values)


def apply_closure(closed: Any) -> None:
    """After running the trace ``closed``: the type changes it made to closed-over values."""
    rec = _closure_effects.get(closed) if _closure_effects else None
    if rec is not None:
        for b, qdd, refs in rec[1]:
            if _logs:
                _note_use(b)
            b.switch(qdd, refs)
