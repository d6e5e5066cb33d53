"""The body of a ``shard_map`` called eagerly: values that print, per device, as JAX's do.

JAX runs an eager shard_map's body one primitive at a time on every device, so a value printed
inside it shows each device's block (``On cpu:0 at mesh coordinates (i,) = (0,):``) and a
replicated value can steer Python control flow. jaxkit traces the body once into the jaxpr it
runs as one program (as under ``jit``), with a trace of its own: a value printed or made
concrete while it traces is computed then, by running the equations recorded so far (the
snapshot that leads to it) as a shard_map whose result stacks every device's block. Bodies
that print nothing cost nothing more.

The running of a snapshot is the caller's (``ShardMapTrace.compute``): this module knows the
trace and its tracers, ``jaxkit.transforms.shard_map`` knows how to run a body over a mesh.
"""
from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from jaxkit import core, source_info
from jaxkit.core import Jaxpr, ShapedArray
from jaxkit.interpreters import partial_eval as pe

__all__ = ["ShardMapTrace", "ShardMapTracer", "nested_blocks", "trace_body"]


class ShardMapTracer(pe.DynamicJaxprTracer):
    """A value of an eager shard_map's body: a jaxpr variable whose value, on demand, is
    computed on every device (named as JAX's tracer of eager shard_map bodies)."""

    __slots__ = ()

    def _blocks(self) -> np.ndarray:
        """Every device's block, stacked in the mesh's device order."""
        return self._trace.blocks(self)

    def __str__(self) -> str:
        mesh = self._trace.mesh
        unbound = [a for a in mesh.axis_names if a not in self._trace.manual]
        if unbound:
            # JAX makes the value vary over every mesh axis first: over an axis left to XLA
            # that fails, with its pvary's error.
            raise NameError(f"Found an unbound axis name: {unbound[0]}. To fix this, please "
                            "call pvary under `jax.shard_map`.")
        blocks = self._blocks()
        names = f"({', '.join(map(str, mesh.axis_names))},)"
        return "\n".join(f"On {device} at mesh coordinates {names} = {idx}:\n{block}\n"
                         for (idx, device), block in zip(np.ndenumerate(mesh.devices), blocks))

    __repr__ = __str__  # as JAX's, for debuggers (``p x``) and a cell's last expression

    def _concrete(self):
        """The value when it is the same on every device and the body's types say so (JAX
        makes only such values concrete: ``check_vma`` and no varying manual axis)."""
        if not self._trace.check_vma or self._aval.vma:
            return None
        return self._blocks()[0]

    # As JAX's tracers, bool(), int() and indexing use a concrete value; float() and
    # complex() never do.
    def _concretized(self, convert: Callable, fallback: Callable):
        value = self._concrete()
        return fallback(self) if value is None else convert(value)

    def __bool__(self):
        return self._concretized(bool, pe.DynamicJaxprTracer.__bool__)

    def __int__(self):
        return self._concretized(int, pe.DynamicJaxprTracer.__int__)

    def __index__(self):
        return self._concretized(operator.index, pe.DynamicJaxprTracer.__index__)


class ShardMapTrace(pe.DynamicJaxprTrace):
    """Records an eager shard_map's body (as ``DynamicJaxprTrace``); ``compute(jaxpr,
    consts)`` runs a one-output snapshot of it on the call's arguments and gives the stacked
    blocks of its output."""

    __slots__ = ("check_vma", "compute", "manual", "mesh")
    tracer_type = ShardMapTracer

    def __init__(self, debug: pe.DebugInfo | None, mesh, manual: tuple, check_vma: bool,
                 compute: Callable[[Jaxpr, list], np.ndarray]):
        super().__init__(debug)
        self.mesh, self.manual, self.check_vma, self.compute = mesh, manual, check_vma, compute

    def blocks(self, tracer: ShardMapTracer) -> np.ndarray:
        """The blocks of ``tracer``'s value: the equations so far, with it as the output."""
        if tracer._trace is not self or self._invalid:
            raise core.UnexpectedTracerError(core.leaked_tracer_message(tracer))
        snapshot = Jaxpr(list(self.constvars), list(self.invars), [self.to_atom(tracer)],
                         list(self.eqns), debug_info=None)
        return self.compute(snapshot, list(self.constvals))


def trace_body(fun: Callable, in_avals: Sequence[ShapedArray], debug: pe.DebugInfo | None,
               mesh, manual: tuple, check_vma: bool,
               compute: Callable) -> tuple[Jaxpr, list]:
    """``pe.trace_to_jaxpr`` of an eager shard_map's body, under a ``ShardMapTrace``."""
    no_names = source_info.NameStack()
    with source_info.name_stack_context(no_names):
        trace = ShardMapTrace(debug, mesh, manual, check_vma, compute)
    with core.new_trace(trace), source_info.name_stack_context(no_names):
        args = [trace.new_arg(a) for a in in_avals]
        outs = fun(*args)
        result = trace.to_jaxpr(outs)
    trace_ref = weakref.ref(trace)
    del trace, args, outs
    core.check_no_leaks(trace_ref)
    return result


def nested_blocks(outer: ShardMapTrace, run: Callable, args: Sequence, manual: tuple,
                  enclosing: Callable, snapshot: Jaxpr, consts: list) -> np.ndarray:
    """The blocks of a value of a shard_map body (manual over ``manual``) called in an eager
    body (``outer``'s): the enclosing body's equations so far give the nested call's
    arguments (and the constants it closed over), ``run(snapshot, consts)`` gives the function
    of their values that stacks ``snapshot``'s output over ``manual`` (traced in the enclosing
    body's context, ``enclosing()``), and ``outer``
    computes that stack on every device of its own manual axes. The blocks come back in the
    mesh's device order."""
    sources = [*consts, *args]
    traced = [isinstance(v, core.Tracer) and v._trace is outer for v in sources]
    wanted = Jaxpr(list(outer.constvars), list(outer.invars),
                   [outer.to_atom(v) for v, t in zip(sources, traced) if t], list(outer.eqns),
                   debug_info=None)
    k = len(outer.constvars)
    stacked = run(snapshot, consts)

    def composed(*vals):
        got = iter(core.eval_jaxpr(wanted, vals[:k], *vals[k:]))
        return [stacked([next(got) if t else v for v, t in zip(sources, traced)])]

    with enclosing():
        jaxpr, extra = pe.trace_to_jaxpr(composed, [v.aval for v in (*outer.constvars,
                                                                     *outer.invars)])
    snap = Jaxpr([*jaxpr.constvars, *jaxpr.invars[:k]], list(jaxpr.invars[k:]),
                 list(jaxpr.outvars), list(jaxpr.eqns), debug_info=None)
    blocks = outer.compute(snap, [*extra, *outer.constvals])  # (outer devices, inner, ...)
    # from (enclosing manual axes..., nested manual axes..., block) to mesh order
    sizes = dict(zip(outer.mesh.axis_names, outer.mesh.devices.shape))
    order = [*outer.manual, *manual]
    blocks = np.reshape(blocks, (*[sizes[a] for a in order], *blocks.shape[2:]))
    perm = sorted(range(len(order)), key=lambda i: outer.mesh.axis_names.index(order[i]))
    blocks = np.transpose(blocks, (*perm, *range(len(order), blocks.ndim)))
    return np.reshape(blocks, (-1, *blocks.shape[len(order):]))
