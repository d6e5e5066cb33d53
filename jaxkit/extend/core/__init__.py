"""``jax.extend.core``: jaxkit's primitives and jaxpr IR under the names JAX 0.10.2 exports.

A library defines a ``Primitive``, binds it, reads and evaluates ``ClosedJaxpr``s with these;
they are the very classes jaxkit's own transformations use, not copies. ``primitives`` holds
jaxkit's primitives under JAX's names; ``CallPrimitive`` and ``call_impl`` come from
``calls``, ``DebugInfo`` from ``debug_info``.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.core import (AbstractToken, ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, JaxprTypeError,
                         Literal, Primitive, ShapedArray, Trace, Tracer, Var, current_trace,
                         eval_jaxpr, get_aval, set_current_trace)
from jaxkit.core import subjaxprs as _jaxprs_of_params
from jaxkit.effects import Effect, Effects, no_effects
from jaxkit.errors import InconclusiveDimensionOperation
from jaxkit.extend.core import primitives
from jaxkit.extend.core.calls import CallPrimitive, call_impl
from jaxkit.extend.core.debug_info import DebugInfo
from jaxkit.interpreters import batching, partial_eval
from jaxkit.interpreters.typecheck import check_jaxpr
from jaxkit.lax import parallel
from jaxkit.runtime.array import Array
from jaxkit.source_info import SourceInfo

__all__ = ["ClosedJaxpr", "DropVar", "Effect", "Effects", "Jaxpr", "JaxprEqn", "JaxprTypeError",
           "Literal", "Primitive", "Token", "Var", "array_types", "check_jaxpr",
           "concrete_or_error", "find_top_trace", "get_opaque_trace_state", "jaxpr_as_fun",
           "jaxprs_in_params", "mapped_aval", "new_jaxpr_eqn", "no_effects",
           "set_current_trace", "subjaxprs", "take_current_trace", "unmapped_aval",
           "valid_jaxtype"]


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
    return JaxprEqn(list(invars), list(outvars), primitive, dict(params), effects,
                    source_info if isinstance(source_info, SourceInfo) else None)


def jaxprs_in_params(params: dict):
    """The jaxprs among an equation's parameters (a generator, as JAX's)."""
    yield from _jaxprs_of_params(params)


def subjaxprs(jaxpr: Jaxpr):
    """The jaxprs in the parameters of ``jaxpr``'s equations (not those nested in them)."""
    for eqn in jaxpr.eqns:
        yield from _jaxprs_of_params(eqn.params)


def _evaluate(closed_jaxpr: ClosedJaxpr, *args) -> list:
    return eval_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args)


_evaluate.__name__ = _evaluate.__qualname__ = "jaxpr_as_fun"


def jaxpr_as_fun(closed_jaxpr: ClosedJaxpr, *args) -> Callable:
    """``jaxpr_as_fun(closed)(*args)``: the jaxpr's outputs at ``args``. Curried, as JAX's:
    arguments given here are bound, and the result is called with the rest."""
    return functools.partial(_evaluate, closed_jaxpr, *args)


def concrete_or_error(force: Any, val: Any, context: str = "") -> Any:
    """``force(val)`` (``val`` itself for ``force=None``) of a concrete value; a traced one
    raises ConcretizationTypeError naming ``context``."""
    val = core.concrete_or_error(val, context)
    return val if force is None else force(val)


def mapped_aval(size: int, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """``aval`` with the mapped ``axis`` (of length ``size``) removed."""
    if axis is None:
        return aval
    if aval.shape[axis] != size:
        raise ValueError(f"mapped axis {axis} of {aval.str_short()} has size "
                         f"{aval.shape[axis]}, expected {size}")
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def unmapped_aval(size: int, axis: int | None, aval: ShapedArray,
                  explicit_mesh_axis: Any = None) -> ShapedArray:
    """``aval`` with an axis of length ``size`` inserted at ``axis`` (split over the mesh axis
    ``explicit_mesh_axis``, when given, in its type's sharding)."""
    if axis is None:
        return aval
    out = aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])
    sharding = getattr(aval, "_sharding", None)
    if explicit_mesh_axis is not None and sharding is not None:
        spec = list(sharding.spec) + [None] * (aval.ndim - len(sharding.spec))
        spec.insert(axis, explicit_mesh_axis)
        out = out.update(sharding=type(sharding)(sharding.mesh, type(sharding.spec)(*spec)))
    return out


def find_top_trace(_) -> Trace:
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


class TraceTag:
    """Identifies the transformation a trace belongs to (JAX's ``core.TraceTag``).

    As in JAX, every tag hashes and compares equal to every other: tags key caches of
    transformed functions, where a function defined in an outer scope cannot close over the
    tracers a tag distinguishes."""

    def __hash__(self):
        return hash(TraceTag)

    def __eq__(self, other):
        return isinstance(other, TraceTag)


def gensym(suffix: str = "") -> Callable[[Any], Var]:
    """A factory of fresh jaxpr variables: ``gensym()(aval)`` is a new ``Var`` of ``aval``
    (variables are named when a jaxpr is printed, so ``suffix`` names nothing)."""
    del suffix
    return Var


def primal_dtype_to_tangent_dtype(primal_dtype):
    """The dtype of tangents of ``primal_dtype``: itself if inexact, else ``float0``."""
    if dtypes.issubdtype(primal_dtype, np.inexact):
        return primal_dtype
    return dtypes.float0


def _trace_chain() -> list[Trace]:
    out, t = [], current_trace()
    while t is not None:
        out.append(t)
        t = t.parent
    return out


def unsafe_am_i_under_a_jit() -> bool:
    """Whether the caller runs while a function is staged out (jit, make_jaxpr, pmap, control
    flow bodies): some enclosing trace records a jaxpr."""
    return any(isinstance(t, partial_eval.DynamicJaxprTrace) for t in _trace_chain())


def unsafe_am_i_under_a_vmap() -> bool:
    """Whether some enclosing trace is a ``vmap``."""
    return any(isinstance(t, batching.BatchTrace) for t in _trace_chain())


def unsafe_get_axis_names() -> list:
    """The named axes in scope, outermost first: those of enclosing ``pmap``s (and
    ``shard_map`` meshes), then those of enclosing named ``vmap``s."""
    # The pmap frames are the axis environment's own list; jaxkit.lax.parallel keeps it.
    pmapped = [name for name, _ in parallel._axis_env.frames]
    return pmapped + batching.axis_names_in_scope()[::-1]


def nonempty_axis_env() -> bool:
    """Whether any named axis is in scope."""
    return bool(unsafe_get_axis_names())


# JAX exports these under names that say not to rely on them.
unsafe_am_i_under_a_jit_DO_NOT_USE = unsafe_am_i_under_a_jit
unsafe_am_i_under_a_vmap_DO_NOT_USE = unsafe_am_i_under_a_vmap
unsafe_get_axis_names_DO_NOT_USE = unsafe_get_axis_names
nonempty_axis_env_DO_NOT_USE = nonempty_axis_env

__all__ += ["AbstractToken", "CallPrimitive", "DebugInfo", "InconclusiveDimensionOperation",
            "OpaqueTraceState", "ShapedArray", "TraceTag", "Tracer", "call_impl", "gensym",
            "nonempty_axis_env_DO_NOT_USE", "primal_dtype_to_tangent_dtype", "primitives",
            "unsafe_am_i_under_a_jit_DO_NOT_USE", "unsafe_am_i_under_a_vmap_DO_NOT_USE",
            "unsafe_get_axis_names_DO_NOT_USE"]
