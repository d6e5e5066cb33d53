"""``jax.extend.core``: jaxkit's primitives and jaxpr IR under the names JAX 0.10.2 exports.

A library defines a ``Primitive``, binds it, reads and evaluates ``ClosedJaxpr``s with these;
they are the very classes jaxkit's own transformations use, not copies.
"""
from __future__ import annotations

import weakref

import numpy as np

from jaxkit.core import (ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, JaxprTypeError, Literal,
                         Primitive, ShapedArray, Trace, Tracer, Var, concrete_or_error,
                         current_trace, get_aval, jaxpr_as_fun, set_current_trace, subjaxprs)
from jaxkit.interpreters.typecheck import check_jaxpr
from jaxkit.runtime.array import Array
from jaxkit.source_info import SourceInfo

__all__ = ["ClosedJaxpr", "DropVar", "Effect", "Effects", "Jaxpr", "JaxprEqn", "JaxprTypeError",
           "Literal", "Primitive", "Token", "Var", "array_types", "check_jaxpr",
           "concrete_or_error", "find_top_trace", "get_opaque_trace_state", "jaxpr_as_fun",
           "jaxprs_in_params", "mapped_aval", "new_jaxpr_eqn", "no_effects",
           "set_current_trace", "subjaxprs", "take_current_trace", "unmapped_aval",
           "valid_jaxtype"]


class Effect:
    """Base class of side effects an equation may carry (JAX's ``core.Effect``).

    jaxkit orders effectful callbacks through its own effect tokens; subclasses of this class
    exist so that libraries can declare their effect types (as Flax does for its variables)."""


Effects = frozenset
no_effects: frozenset = frozenset()


class Token:
    """The value type of ordering tokens (JAX's ``core.Token``)."""


def array_types() -> tuple:
    """The concrete types that are JAX arrays' values."""
    return (np.ndarray, np.generic, Array)


def valid_jaxtype(x) -> bool:
    """Whether ``x`` can be an argument of a jaxkit transformation (has an abstract value)."""
    try:
        get_aval(x)
    except TypeError:
        return False
    return True


def new_jaxpr_eqn(invars, outvars, primitive, params, effects=None, source_info=None,
                  ctx=None) -> JaxprEqn:
    """An equation ``outvars = primitive[params] invars`` (effects are kept by jaxkit's
    tracer, not the equation; ``source_info`` is kept when it is a jaxkit ``SourceInfo``)."""
    return JaxprEqn(primitive, list(invars), list(outvars), dict(params),
                    source_info if isinstance(source_info, SourceInfo) else None)


def jaxprs_in_params(params: dict):
    """The jaxprs among an equation's parameters (as ``subjaxprs``)."""
    return list(subjaxprs(params))


def mapped_aval(size: int, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """``aval`` with the mapped ``axis`` (of length ``size``) removed."""
    if axis is None:
        return aval
    if aval.shape[axis] != size:
        raise ValueError(f"mapped axis {axis} of {aval.str_short()} has size "
                         f"{aval.shape[axis]}, expected {size}")
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def unmapped_aval(size: int, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """``aval`` with an axis of length ``size`` inserted at ``axis``."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


def find_top_trace(xs) -> Trace:
    """The current trace (jaxkit's traces are stackless: the current one is the innermost)."""
    return current_trace()


def take_current_trace():
    """Context manager making the current trace's parent current while the block runs, and
    yielding the current trace (as JAX's ``take_current_trace``)."""
    return _TakeCurrentTrace()


class _TakeCurrentTrace:
    def __enter__(self):
        self._trace = current_trace()
        self._cm = set_current_trace(self._trace.parent or self._trace)
        self._cm.__enter__()
        return self._trace

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


class OpaqueTraceState:
    """Identifies the trace current when it was made; equal only to a state of the same trace.
    Libraries (Flax) use it to refuse mutating state created under another transformation."""

    __slots__ = ("_trace_ref", "convention")

    def __init__(self, trace: Trace, convention):
        self._trace_ref = weakref.ref(trace)
        self.convention = convention

    def __eq__(self, other):
        return (isinstance(other, OpaqueTraceState)
                and self._trace_ref() is not None and self._trace_ref() is other._trace_ref())

    def __hash__(self):
        return hash(id(self._trace_ref()))

    def __repr__(self):
        return f"OpaqueTraceState({self._trace_ref()!r})"


def get_opaque_trace_state(convention=None) -> OpaqueTraceState:
    """An opaque token for the current trace (see ``OpaqueTraceState``)."""
    return OpaqueTraceState(current_trace(), convention)


__all__ += ["OpaqueTraceState", "ShapedArray", "Tracer"]
