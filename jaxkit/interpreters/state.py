"""Mutable array references: their type (``AbstractRef``), their eager value (``Ref``), and the
*discharge* pass that turns a jaxpr using refs into a pure one.

A ref in a jaxpr is a variable of type ``Ref{f32[3]}``; the primitives that read and write it
(``get``, ``swap``, ``addupdate``, ``new_ref``, ``freeze``, defined in ``jaxkit.ref``) are state
effects. XLA has no mutable values, so before a jaxpr with refs is lowered (or transposed) it is
discharged: each ref becomes the value it currently holds, threaded through the equations, and
each ref input of the jaxpr becomes a value input plus an extra output holding its final value.
How an equation is discharged is its primitive's ``discharge_rules`` entry; primitives that carry
a jaxpr (``jit``) discharge their body the same way. One mechanism serves eager execution, jit,
lowering and autodiff.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any


from jaxkit import core
from jaxkit.core import ClosedJaxpr, Jaxpr, ShapedArray
from jaxkit.interpreters import partial_eval as pe


class AbstractRef:
    """The type of a mutable array reference: ``Ref{f32[3]}`` holding an ``f32[3]`` array.
    A ref in a Pallas kernel also has a memory space, printed as JAX does: ``Ref<any>{...}``."""

    __slots__ = ("inner_aval", "memory_space", "__weakref__")

    def __init__(self, inner_aval: ShapedArray, memory_space: Any = None):
        self.inner_aval = inner_aval
        self.memory_space = memory_space

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    weak_type = property(lambda self: self.inner_aval.weak_type)
    ndim = property(lambda self: self.inner_aval.ndim)
    size = property(lambda self: self.inner_aval.size)

    def __eq__(self, other):
        return (type(other) is AbstractRef and other.inner_aval == self.inner_aval
                and other.memory_space == self.memory_space)

    def __hash__(self):
        return hash((AbstractRef, self.inner_aval, self.memory_space))

    def _with(self, inner_aval: ShapedArray) -> AbstractRef:
        return AbstractRef(inner_aval, self.memory_space)

    def update(self, shape=None, dtype=None, weak_type=None) -> AbstractRef:
        return self._with(self.inner_aval.update(shape, dtype, weak_type))

    # vmap types a batched ref by its array's type less (or plus) the batch dimension
    def delete_dim(self, axis: int) -> AbstractRef:
        return self._with(self.inner_aval.delete_dim(axis))

    def insert_dim(self, axis: int, size: int, split: Any = None) -> AbstractRef:
        return self._with(self.inner_aval.insert_dim(axis, size, split))

    def to_tangent_aval(self) -> AbstractRef:
        return self._with(self.inner_aval.to_tangent_aval())

    def strip_weak_type(self) -> AbstractRef:
        return self._with(self.inner_aval.strip_weak_type())

    def _space(self) -> str:
        return "" if self.memory_space is None else f"<{self.memory_space}>"

    def str_short(self) -> str:
        return f"Ref{self._space()}{{{self.inner_aval.str_short()}}}"

    def __str__(self):
        return (f"Ref{self._space()}{{{self.inner_aval.dtype.name}"
                f"[{','.join(map(str, self.shape))}]}}")

    __repr__ = __str__


def is_ref_aval(aval: Any) -> bool:
    return type(aval) is AbstractRef


class Ref:
    """A mutable array: ``ref[idx]`` reads, ``ref[idx] = v`` writes in place. Made by
    ``jax.new_ref``; usable eagerly, closed over or passed into ``jit``, and in pure functions
    under ``grad`` and ``vmap``. Its current value is the array ``_buf``, replaced on writes."""

    __slots__ = ("_aval", "_buf", "__weakref__")

    def __init__(self, aval: AbstractRef, buf):
        self._aval = aval
        self._buf = buf

    aval = property(lambda self: self._aval)
    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: self._aval.ndim)
    size = property(lambda self: self._aval.size)
    sharding = property(lambda self: self._buf.sharding)
    committed = property(lambda self: True)

    # Reading and writing are the ref primitives; ``jaxkit.ref`` installs them (they need
    # NumPy-style indexing, which lives above this layer).
    def __getitem__(self, idx):
        return ref_methods["getitem"](self, idx)

    def __setitem__(self, idx, value):
        ref_methods["setitem"](self, idx, value)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def addupdate(self, x, idx=()) -> None:
        ref_methods["addupdate"](self, idx, x)

    def unsafe_buffer_pointer(self) -> int:
        """The device address of the ref's current buffer. jaxkit writes a new buffer when a
        jitted function updates the ref (JAX updates it in place), so the address changes."""
        return self._buf._buf.unsafe_buffer_pointer()

    def block_until_ready(self) -> Ref:
        self._buf.block_until_ready()
        return self

    def __repr__(self):
        return "Ref" + repr(self._buf)[5:]  # "Array(...)" -> "Ref(...)"

    __str__ = __repr__

    @property
    def at(self):
        raise NotImplementedError("Ref.at is not supported (as in JAX 0.10.2): read the value "
                                  "with ref[...] and use .at on the array.")


ref_methods: dict[str, Callable] = {}
core.pytype_aval_mappings[Ref] = lambda r: r._aval


# --------------------------------------------------------------------------------------------
# Discharge
# --------------------------------------------------------------------------------------------

# primitive -> rule(in_avals, *vals, **params) -> (new_vals, outs): ``vals`` are the operands
# with each ref replaced by its current value; ``new_vals`` has one entry per operand (the
# ref's new value, or None where it is unchanged, always None for non-refs); ``outs`` are the
# results (a ref result is given as its initial value).
discharge_rules: dict[core.Primitive, Callable] = {}


def defdischarge(prim: core.Primitive, rule: Callable) -> None:
    discharge_rules[prim] = rule


def _eqn_has_refs(eqn: core.JaxprEqn) -> bool:
    return any(is_ref_aval(a.aval) for a in eqn.invars) or any(
        is_ref_aval(v.aval) for v in eqn.outvars)


_has_refs_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

# Primitives whose nested jaxprs take refs that live only inside the primitive (a Pallas
# kernel's refs to blocks): the primitive's own rules handle them, so an equation of one is
# pure to its enclosing jaxpr and is not discharged.
self_contained_ref_primitives: set[core.Primitive] = set()


def jaxpr_has_refs(jaxpr: Jaxpr) -> bool:
    """Whether any variable of ``jaxpr`` (or of a jaxpr nested in it) is a ref."""
    found = _has_refs_cache.get(jaxpr)
    if found is None:
        found = any(is_ref_aval(v.aval) for v in jaxpr.constvars + jaxpr.invars) or any(
            _eqn_has_refs(e) or e.primitive not in self_contained_ref_primitives
            and any(jaxpr_has_refs(s) for s in core.subjaxprs(e.params)) for e in jaxpr.eqns)
        _has_refs_cache[jaxpr] = found
    return found


class InAvals(list):
    """The operand types a discharge rule receives; ``aliases[i]`` is the position of the
    first operand that is the same variable as operand ``i`` (a ref passed twice, as
    ``cond`` passes a ref closed over by two branches), else ``i``."""

    aliases: tuple[int, ...] = ()


def _in_avals(eqn: core.JaxprEqn) -> InAvals:
    avals = InAvals(a.aval for a in eqn.invars)
    first: dict = {}
    avals.aliases = tuple(first.setdefault(a, i) if type(a) is core.Var else i
                          for i, a in enumerate(eqn.invars))
    return avals


def run_discharged(jaxpr: Jaxpr, consts: Sequence, args: Sequence) -> tuple[list, list]:
    """Evaluate ``jaxpr`` under the current trace with refs as values: ``consts`` and
    ``args`` give ref inputs as their current values. Returns the outputs and the final
    values of the ref inputs (constvars first, then invars, in order)."""
    env: dict[core.Var, Any] = {}

    def read(a):
        return a.val if type(a) is core.Literal else env[a]

    for v, x in zip(jaxpr.constvars + jaxpr.invars, list(consts) + list(args)):
        env[v] = x
    for eqn in jaxpr.eqns:
        vals = [read(a) for a in eqn.invars]
        if not (_eqn_has_refs(eqn) or eqn.primitive in discharge_rules and any(
                jaxpr_has_refs(s) for s in core.subjaxprs(eqn.params))):
            outs = eqn.primitive.bind(*vals, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
        else:
            rule = discharge_rules.get(eqn.primitive)
            if rule is None:
                raise NotImplementedError(f"discharge rule for '{eqn.primitive.name}' is not "
                                          "implemented: it cannot take or make refs")
            new_vals, outs = rule(_in_avals(eqn), *vals, **eqn.params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            for a, nv in zip(eqn.invars, new_vals):
                if nv is not None:
                    env[a] = nv
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    refs = [v for v in jaxpr.constvars + jaxpr.invars if is_ref_aval(v.aval)]
    return [read(v) for v in jaxpr.outvars], [env[v] for v in refs]


def _value_aval(aval):
    return aval.inner_aval if is_ref_aval(aval) else aval


_discharged: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def discharge_jaxpr(jaxpr: Jaxpr) -> tuple[Jaxpr, list]:
    """The pure jaxpr computing what ``jaxpr`` does: its inputs are ``jaxpr``'s constvars then
    invars (each ref as the value it holds), its outputs ``jaxpr``'s outputs then the final
    value of each ref input. Returns it with the values of its own constvars."""
    found = _discharged.get(jaxpr)
    if found is None:
        n_consts = len(jaxpr.constvars)
        in_avals = [_value_aval(v.aval) for v in jaxpr.constvars + jaxpr.invars]

        def fun(*args):
            outs, finals = run_discharged(jaxpr, args[:n_consts], args[n_consts:])
            for v, o in zip(jaxpr.outvars, outs):
                if is_ref_aval(core.get_aval(o)):
                    raise ValueError("a mutable array reference cannot be returned "
                                     f"(output of type {v.aval.str_short()})")
            return [*outs, *finals]

        found = _discharged[jaxpr] = pe.trace_to_jaxpr(fun, in_avals)
    return found


def discharge_closed(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``discharge_jaxpr`` of a closed jaxpr: the same inputs (refs as values), its outputs
    then the final values of its ref inputs."""
    jaxpr, consts = discharge_jaxpr(pe.convert_constvars_jaxpr(closed.jaxpr))
    k = len(closed.consts)
    return ClosedJaxpr(Jaxpr(jaxpr.constvars + jaxpr.invars[:k], jaxpr.invars[k:],
                             jaxpr.outvars, jaxpr.eqns, debug_info=jaxpr.debug_info),
                       list(consts) + list(closed.consts))


def call_with_refs(name: str, closed: ClosedJaxpr, args: Sequence, run: Callable) -> list:
    """Eagerly call a program taking ``Ref`` values: ``run(name, closed, donated, values)`` the
    discharged program on the refs' values, then store their final values back (the refs
    are, in effect, donated)."""
    discharged = discharge_closed(closed)
    vals = [a._buf if type(a) is Ref else a for a in args]
    outs = run(name, discharged, (False,) * len(vals), vals)
    n = len(closed.out_avals)
    for ref, new in zip((a for a in args if type(a) is Ref), outs[n:]):
        ref._buf = new
    return outs[:n]


def defcall_discharge(prim: core.Primitive) -> None:
    """The discharge rule of a call-like primitive (its ``jaxpr`` parameter applied to all its
    operands): call the discharged body, whose extra outputs are the refs' final values."""
    def rule(in_avals, *vals, jaxpr: ClosedJaxpr, **params):
        outs = prim.bind(*vals, jaxpr=discharge_closed(jaxpr), **params)
        n = len(jaxpr.out_avals)
        finals = iter(outs[n:])
        return [next(finals) if is_ref_aval(a) else None for a in in_avals], outs[:n]

    discharge_rules[prim] = rule


def check_jit_ref_aliasing(where: str, flat: Sequence, names: Sequence[str],
                           consts: Sequence) -> None:
    """JAX's rule against aliasing: each ref reaches a jitted function at most once (as one
    argument, or closed over)."""
    seen: dict[int, int] = {}
    closed = {id(c) for c in consts if type(c) is Ref}
    for i, x in enumerate(flat):
        if type(x) is not Ref:
            continue
        if id(x) in seen:
            raise ValueError(
                "only one reference to a mutable array may be passed as an argument to a "
                f"function, but when tracing {where} for jit the mutable array reference "
                f"of type {x.aval} appeared at both {names[seen[id(x)]]} and {names[i]}.")
        if id(x) in closed:
            raise ValueError(
                f"when tracing {where} for jit, a mutable array reference of type "
                f"{x.aval} was both closed over and passed as the argument {names[i]}")
        seen[id(x)] = i


def returned_ref_message(where: str, leaf, flat_args: Sequence, arg_names: Sequence[str]
                         ) -> str:
    """JAX's error for a jitted function returning a ref."""
    passed = ""
    for i, a in enumerate(flat_args):
        if a is leaf and i < len(arg_names):
            passed = ("\n\nThe returned mutable array was passed in as the argument "
                      f"{arg_names[i]}.")
    return (f"function {where} traced for jit returned a mutable array reference of type "
            f"{leaf.aval}, but mutable array references cannot be returned.{passed}")


def impl_via_discharge(prim: core.Primitive) -> None:
    """Make ``prim``'s eager rule its discharge rule applied to the refs' current values:
    new values are stored into the ``Ref`` objects, new refs are made for ref results."""
    def impl(*args, **params):
        in_avals = [core.get_aval(a) for a in args]
        vals = [a._buf if type(a) is Ref else a for a in args]
        new_vals, outs = discharge_rules[prim](in_avals, *vals, **params)
        for a, nv in zip(args, new_vals):
            if nv is not None:
                a._buf = nv
        out_avals = prim.abstract_eval(*in_avals, **params)
        if not prim.multiple_results:
            return Ref(out_avals, outs) if is_ref_aval(out_avals) else outs
        return [Ref(a, o) if is_ref_aval(a) else o for a, o in zip(out_avals, outs)]

    prim.def_impl(impl)


def accept_refs_eagerly(prim: core.Primitive) -> None:
    """Let ``prim`` (a primitive carrying a jaxpr, with a discharge rule) take ``Ref`` values
    eagerly: such a call runs the discharge rule on the refs' values and stores their new
    values back; calls without refs keep the primitive's own eager rule."""
    plain_impl = prim.impl

    def impl(*args, **params):
        if not any(type(a) is Ref for a in args):
            return plain_impl(*args, **params)
        in_avals = InAvals(core.get_aval(a) for a in args)
        first: dict = {}
        in_avals.aliases = tuple(first.setdefault(id(a), i) if type(a) is Ref else i
                                 for i, a in enumerate(args))
        vals = [a._buf if type(a) is Ref else a for a in args]
        new_vals, outs = discharge_rules[prim](in_avals, *vals, **params)
        for a, nv in zip(args, new_vals):
            if nv is not None:
                a._buf = nv
        return outs

    prim.def_impl(impl)


_refs_last_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def closed_over_refs_last(closed: ClosedJaxpr, consts: list) -> tuple[ClosedJaxpr, list, list]:
    """As JAX orders a jit equation's operands: closed-over refs after the arguments (other
    closed-over values before them). Returns the reordered jaxpr, the other constants and
    the refs."""
    is_ref = [is_ref_aval(core.get_aval(c)) for c in consts]
    reordered = _refs_last_cache.get(closed)
    if reordered is None:
        jaxpr, k = closed.jaxpr, len(consts)
        const_vars = jaxpr.invars[:k]
        invars = ([v for v, r in zip(const_vars, is_ref) if not r] + jaxpr.invars[k:]
                  + [v for v, r in zip(const_vars, is_ref) if r])
        reordered = _refs_last_cache[closed] = ClosedJaxpr(
            Jaxpr([], invars, jaxpr.outvars, jaxpr.eqns, debug_info=jaxpr.debug_info), [])
    return (reordered, [c for c, r in zip(consts, is_ref) if not r],
            [c for c, r in zip(consts, is_ref) if r])
