"""Automatic batching (vmap): the batch trace, batching of jaxprs, and the per-primitive rules.

A ``BatchTracer`` stands for one example of a batch: it holds the whole batch ``val`` and the
axis ``batch_dim`` along which ``val`` is batched. A ``BatchTrace`` unboxes only its own tracers
(anything else, including tracers of other traces, is *unbatched* for it: ``not_mapped``), and
runs each primitive's batching rule with its parent trace current, so the rule's own operations
are handled further out (stackless tracing, as in ``core``).

Rule table (filled by each primitive's block in ``jaxkit.lax`` through ``defrule`` and the
``def*`` helpers below), one signature for every primitive:

* ``batch_rules[p](axis_data, batched_args, batch_dims, **params) -> (out, out_dim)``;
  ``axis_data`` is the mapped axis (its ``size`` and ``name``); ``batch_dims`` holds, per
  argument, an int (its batched axis) or ``not_mapped`` (None). For multiple-result primitives
  ``out`` and ``out_dim`` are lists. A rule is only called when at least one argument is
  batched (otherwise the primitive is simply bound again), except for the primitives in
  ``named_axis_rules``: those carrying jaxprs (``jit``, ``cond``, ``scan``, ...) and
  collectives, whose rule also runs on all-``not_mapped`` arguments when the vmap names its
  axis, since a collective inside may refer to that name.

Helpers for writing rules: ``defvectorized`` (unary elementwise), ``defbroadcasting`` (n-ary
elementwise), ``defreducer`` (reductions over ``axes``), ``defaxes`` (ops with axis-valued
params whose output keeps the batch axis), ``defleading`` (ops that accept leading batch axes),
and the array operations ``moveaxis``, ``broadcast``, ``bdim_at_front``, ``matchaxis``. For
primitives carrying jaxprs: ``batch_jaxpr`` (batched inputs and outputs at axis 0),
``batch_jaxpr_axes`` (arbitrary axes, output axes inferred) and ``batch_subtrace`` (batch a
Python function). ``find_axis(name)`` gives collectives the vmapped axis called ``name``.
"""
from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxkit._deprecations import deprecation_getattr, removed
from jaxkit import core, source_info
from jaxkit.core import ClosedJaxpr, ShapedArray
from jaxkit.interpreters import partial_eval as pe
from jaxkit.runtime.sharding import typed_sharding

batch_rules: dict[core.Primitive, Callable] = {}
named_axis_rules: set[core.Primitive] = set()
not_mapped = None


class _BatchRulesView:
    """A view of ``batch_rules`` in one of the forms JAX's users register batching rules in;
    a rule set through it is stored behind an adapter (``_adapt``) that calls it as JAX does,
    with the batched values and dims as tuples. Reading gives the stored rule."""

    def _adapt(self, rule: Callable) -> Callable:
        def adapted(axis_data, vals, dims, **params):
            return rule(axis_data, tuple(vals), tuple(dims), **params)
        return adapted

    def __setitem__(self, prim: core.Primitive, rule: Callable) -> None:
        batch_rules[prim] = self._adapt(rule)

    def __getitem__(self, prim: core.Primitive) -> Callable:
        return batch_rules[prim]

    def get(self, prim: core.Primitive, default=None):
        return batch_rules.get(prim, default)

    def __delitem__(self, prim: core.Primitive) -> None:
        del batch_rules[prim]

    def __contains__(self, prim: core.Primitive) -> bool:
        return prim in batch_rules


class _AxisFreeBatchers(_BatchRulesView):
    """``primitive_batchers[prim] = rule``: ``rule(batched_args, batch_dims, **params)``,
    without the axis data."""

    def _adapt(self, rule: Callable) -> Callable:
        def adapted(axis_data, vals, dims, **params):
            del axis_data
            return rule(tuple(vals), tuple(dims), **params)
        return adapted


class _AxisSizeNameBatchers(_BatchRulesView):
    """``axis_primitive_batchers[prim] = rule``: JAX's older form, which takes the axis's size
    and name first, ``rule(size, name, spmd_name, batched_args, batch_dims, **params)``
    (``spmd_name`` is always None, as in JAX)."""

    def _adapt(self, rule: Callable) -> Callable:
        def adapted(axis_data, vals, dims, **params):
            return rule(axis_data.size, axis_data.name, None, tuple(vals), tuple(dims),
                        **params)
        return adapted


# JAX's names: ``fancy_primitive_batchers`` takes jaxkit's own form (the axis data first).
fancy_primitive_batchers = _BatchRulesView()
primitive_batchers = _AxisFreeBatchers()
axis_primitive_batchers = _AxisSizeNameBatchers()


# --------------------------------------------------------------------------------------------
# Vmappable types: a library's own container that vmap maps as a whole (JAX's typeclass)
# --------------------------------------------------------------------------------------------

# data type -> (spec type, axis size type); the spec types an in_axes/out_axes leaf may be.
vmappables: dict[type, tuple[type, type]] = {}
spec_types: set[type] = set()
to_elt_handlers: dict[type, Callable] = {}
from_elt_handlers: dict[type, Callable] = {}
make_iota_handlers: dict[type, Callable] = {}


def register_vmappable(data_type: type, spec_type: type, axis_size_type: type,
                       to_elt: Callable, from_elt: Callable, make_iota: Callable | None) -> None:
    """Make vmap map values of ``data_type`` as one (not as a pytree of arrays), with specs of
    ``spec_type`` in ``in_axes``/``out_axes``. ``to_elt(cont, get_idx, x, spec)`` gives the
    value standing for one example (``cont(y, spec)`` maps a component: an array with an int
    spec becomes a batch tracer; ``get_idx()`` is the example's index); ``from_elt(cont,
    axis_size, elt, spec)`` rebuilds the batched value from an example's result
    (``cont(axis_size, y, spec)`` for a component). ``make_iota(axis_size)``, for an
    ``axis_size_type`` of its own, gives the indices."""
    vmappables[data_type] = (spec_type, axis_size_type)
    spec_types.add(spec_type)
    to_elt_handlers[data_type] = to_elt
    from_elt_handlers[data_type] = from_elt
    if make_iota is not None:
        make_iota_handlers[axis_size_type] = make_iota


def unregister_vmappable(data_type: type) -> None:
    """Kept for compatibility: as in JAX 0.10.2 it does nothing (a registration stays)."""
    del data_type


def is_vmappable(x: Any) -> bool:
    return type(x) in vmappables


def to_elt(trace: BatchTrace, get_idx: Callable, x: Any, spec: Any) -> Any:
    """The value standing for one example of ``x`` mapped along ``spec`` (vmap's inputs)."""
    handler = to_elt_handlers.get(type(x))
    if handler is not None:
        return handler(lambda y, s: to_elt(trace, get_idx, y, s), get_idx, x, spec)
    if spec is None:
        return x
    if not isinstance(spec, int):
        raise TypeError(f"vmap in_axes leaf {spec!r} of type {type(spec).__name__} maps a "
                        f"value of type {type(x).__name__}, which is not a vmappable type "
                        "registered for it (batching.register_vmappable)")
    return BatchTracer(trace, x, spec % core.get_aval(x).ndim, source_info.current(2))


def from_elt(trace: BatchTrace, axis_size: Any, x: Any, spec: Any,
             sum_match: bool = False) -> Any:
    """The batched value, batch axis at ``spec``, of one example's result ``x`` (with
    ``sum_match`` and ``spec`` None: summed over the batch axis)."""
    handler = from_elt_handlers.get(type(x))
    if handler is not None:
        return handler(lambda size, y, s: from_elt(trace, size, y, s, sum_match), axis_size, x,
                       spec)
    val, bdim = trace.to_batch_info(x)
    if spec is None:
        if bdim is not not_mapped and sum_match:
            return val.sum(bdim)
        if bdim is not not_mapped:
            raise ValueError(f"vmap has mapped output but out_axes is None (the output was "
                             f"batched on axis {bdim})")
        return val
    ndim = core.get_aval(val).ndim + (1 if bdim is not_mapped else 0)
    return matchaxis(bdim, spec % ndim, val, axis_size)


# --------------------------------------------------------------------------------------------
# The batch trace
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AxisData:
    """The axis a ``BatchTrace`` maps over: its name (or None), size, SPMD mesh axis
    name(s) (accepted for API compatibility; jaxkit runs a vmap on one device), and the
    Explicit mesh axis the mapped dimension is split over in the arguments' types (which
    the rules that set a layout keep for the batch dimension)."""

    name: Any
    size: int
    spmd_name: Any = None
    explicit_mesh_axis: Any = None
    explicit_mesh: Any = None  # the (abstract) mesh of ``explicit_mesh_axis``


class BatchTracer(core.Tracer):
    """One example of a batch: ``val`` holds the whole batch, batched along ``batch_dim``;
    ``source_info``, the user's line that made it (for errors), where known."""

    __slots__ = ("_aval", "batch_dim", "val", "source_info")

    def __init__(self, trace: BatchTrace, val, batch_dim: int, source_info=None):
        aval = core.get_aval(val)
        if not 0 <= batch_dim < aval.ndim:
            raise ValueError(f"internal: batch dimension {batch_dim} out of range for a value "
                             f"of type {aval.str_short()}")
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim
        self.source_info = source_info
        self._aval = aval.delete_dim(batch_dim)

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def __repr__(self):
        return f"VmapTracer(aval={self._aval}, batched={core.get_aval(self.val)})"


class BatchTrace(core.Trace):
    """Batches every primitive applied to its tracers along one axis (``axis_data``)."""

    __slots__ = ("axis_data", "debug")

    def __init__(self, axis_data: AxisData, debug: str | None = None):
        super().__init__()
        self.axis_data = axis_data
        self.debug = debug

    axis_size = property(lambda self: self.axis_data.size)
    axis_name = property(lambda self: self.axis_data.name)

    def to_batch_info(self, x) -> tuple[Any, int | None]:
        """``(val, batch_dim)`` of ``x`` as seen by this trace."""
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.val, x.batch_dim
        if isinstance(x, core.Tracer) and x._trace._invalid:
            core.check_tracer_live(x)
        return x, not_mapped

    def process_primitive(self, primitive, args, params):
        vals, dims = [], []
        for x in args:
            v, d = self.to_batch_info(x)
            vals.append(v)
            dims.append(d)
        if all(d is not_mapped for d in dims) and (
                self.axis_data.name is None or primitive not in named_axis_rules):
            with core.set_current_trace(self.parent):
                return primitive.bind(*vals, **params)
        rule = batch_rules.get(primitive)
        if rule is None:
            raise NotImplementedError(
                f"batching rule for '{primitive.name}' is not implemented (vmap of "
                f"{primitive.name} with arguments batched along axes {tuple(dims)})")
        with core.set_current_trace(self.parent):
            out, out_dim = rule(self.axis_data, vals, dims, **params)
            if _check_rules:
                _check_rule_output(primitive, vals, dims, params, out, out_dim)
        src = source_info.current(2)
        if primitive.multiple_results:
            return [o if d is not_mapped else BatchTracer(self, o, d, src)
                    for o, d in zip(out, out_dim)]
        return out if out_dim is not_mapped else BatchTracer(self, out, out_dim, src)

    def origin_message(self, tracer: core.Tracer) -> str:
        """The line that made ``tracer``, as JAX says it."""
        src = getattr(tracer, "source_info", None)
        if src is None:
            return ""
        return (f"\nThis BatchTracer with object id {id(tracer)} was created on line:"
                f"\n  {src}")


def find_axis(axis_name) -> BatchTrace:
    """The innermost live ``BatchTrace`` mapping over ``axis_name``, found by walking the
    parents of the current trace. Collective primitives (``psum`` & co.) use it to learn the
    size of a vmapped axis; their batching rules (in ``named_axis_rules``) receive
    the ``AxisData`` of the trace that batches them directly. Raises ``NameError`` (as JAX
    does) when no enclosing vmap has that name."""
    t = core.current_trace()
    while t is not None:
        if isinstance(t, BatchTrace) and t.axis_data.name == axis_name:
            return t
        t = t.parent
    names = axis_names_in_scope()
    raise NameError(f"unbound axis name: {axis_name}. The following axis names (e.g. defined "
                    f"by vmap) are available to collective operations: {names}")


def axis_names_in_scope() -> list:
    """Names of the vmapped axes enclosing the current trace, innermost first."""
    return [name for name, _ in named_axes_in_scope()]


def named_axes_in_scope() -> list[tuple[Any, int]]:
    """``(name, size)`` of the named vmapped axes enclosing the current trace, innermost
    first."""
    axes, t = [], core.current_trace()
    while t is not None:
        if isinstance(t, BatchTrace) and t.axis_data.name is not None:
            axes.append((t.axis_data.name, t.axis_data.size))
        t = t.parent
    return axes


# --------------------------------------------------------------------------------------------
# Batching Python functions and jaxprs (for primitives that carry jaxprs)
# --------------------------------------------------------------------------------------------


def _as_axis_data(axis, axis_name=None, spmd_axis_name=None) -> AxisData:
    if isinstance(axis, AxisData):
        return axis
    return AxisData(axis_name, int(axis), spmd_axis_name)


def batch_subtrace(fun: Callable, axis_data: AxisData, in_dims: Sequence[int | None],
                   out_dims: Sequence[int | None] | None = None) -> Callable:
    """``fun`` (flat values in, flat sequence out) applied to batches.

    The returned function takes the batched values (argument ``i`` batched along
    ``in_dims[i]``, or unbatched if None) and returns ``(out_vals, out_dims)``. Outputs keep
    the batch axis the body gave them, unless ``out_dims`` asks for a position (an int moves
    the axis there, broadcasting an unbatched output; None leaves that output as it is)."""

    def batched(*vals):
        trace = BatchTrace(axis_data)
        with core.new_trace(trace):
            args = [v if d is not_mapped else BatchTracer(trace, v, d)
                    for v, d in zip(vals, in_dims)]
            outs = fun(*args)
        res_vals, res_dims = [], []
        for i in range(len(outs)):
            v, d = trace.to_batch_info(outs[i])
            dst = None if out_dims is None else out_dims[i]
            if dst is not None:
                v, d = matchaxis(d, dst, v, axis_data.size), dst
            res_vals.append(v)
            res_dims.append(d)
        trace_ref = weakref.ref(trace)
        del trace, args, outs
        core.check_no_leaks(trace_ref)
        return res_vals, res_dims

    return batched


def mapped_aval(size: int, dim: int | None, aval: ShapedArray) -> ShapedArray:
    """The aval of a batch of ``size`` examples of ``aval`` stacked along ``dim``."""
    if dim is not_mapped:
        return aval
    return aval.insert_dim(dim, size)


def unmapped_aval(dim: int | None, aval: ShapedArray) -> ShapedArray:
    """The aval of one example of a batch ``aval`` batched along ``dim``."""
    if dim is not_mapped:
        return aval
    return aval.delete_dim(dim)


def _batched_aval(axis_data: AxisData, dim: int | None, aval: ShapedArray) -> ShapedArray:
    """``mapped_aval``, the batch dimension split over the Explicit mesh axis the vmapped
    arguments are split over (as JAX types a batched jaxpr's inputs: ``f32[8@X,2]``)."""
    if dim is not_mapped or axis_data.explicit_mesh_axis is None:
        return mapped_aval(axis_data.size, dim, aval)
    parts = list(aval.sharding.spec) if aval._sharding is not None else [None] * aval.ndim
    parts.insert(dim, axis_data.explicit_mesh_axis)
    shape = aval.shape[:dim] + (axis_data.size,) + aval.shape[dim:]
    s = aval._sharding
    return ShapedArray(shape, aval.dtype, aval.weak_type, typed_sharding(
        axis_data.explicit_mesh, parts, *((s.spec.unreduced, s.spec.reduced) if s else ())),
        aval.vma)


# ClosedJaxpr -> {key: (batched ClosedJaxpr, out_dims)}. Reusing the same batched jaxpr object
# lets the jit primitive's executable cache (keyed on the jaxpr) hit on every later call.
_batch_jaxpr_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def batch_jaxpr_axes(closed_jaxpr: ClosedJaxpr, axis, in_dims: Sequence[int | None],
                     out_dims: Sequence[int | None] | None = None, *, axis_name=None,
                     spmd_axis_name=None) -> tuple[ClosedJaxpr, list[int | None]]:
    """Batch a jaxpr whose input ``i`` is batched along ``in_dims[i]`` (None: unbatched).

    ``axis`` is the batch size (with ``axis_name``) or an ``AxisData``. Returns the batched
    ClosedJaxpr and the batch axis of each output: as the body produced it, or as requested
    by ``out_dims`` (see ``batch_subtrace``). Results are cached per jaxpr object."""
    axis_data = _as_axis_data(axis, axis_name, spmd_axis_name)
    in_dims = tuple(in_dims)
    key = (axis_data, in_dims, None if out_dims is None else tuple(out_dims))
    cacheable = not any(isinstance(c, core.Tracer) for c in closed_jaxpr.consts)
    per_jaxpr = _batch_jaxpr_cache.setdefault(closed_jaxpr, {}) if cacheable else {}
    hit = per_jaxpr.get(key)
    if hit is not None:
        return hit
    in_avals = [_batched_aval(axis_data, d, a) for d, a in zip(in_dims, closed_jaxpr.in_avals)]
    fun = batch_subtrace(core.jaxpr_as_fun(closed_jaxpr), axis_data, in_dims, out_dims)
    out_dims_box = []

    def flat_fun(*args):
        vals, dims = fun(*args)
        out_dims_box.append(dims)
        return vals

    jaxpr, consts = pe.trace_to_jaxpr(flat_fun, in_avals, closed_jaxpr.jaxpr.debug_info)
    result = (ClosedJaxpr(jaxpr, consts), out_dims_box[0])
    if cacheable and not any(isinstance(c, core.Tracer) for c in consts):
        per_jaxpr[key] = result
    return result


def batch_jaxpr(closed_jaxpr: ClosedJaxpr, axis, in_batched: Sequence[bool],
                instantiate: bool | Sequence[bool], *, axis_name=None,
                spmd_axis_name=None) -> tuple[ClosedJaxpr, list[bool]]:
    """Batch a jaxpr with batched inputs and outputs at axis 0 (JAX's ``batch_jaxpr``).

    ``in_batched[i]`` says whether input ``i`` is batched; ``instantiate`` (one bool, or one
    per output) forces outputs to be batched (broadcasting them). Returns the batched
    ClosedJaxpr and which outputs are batched. ``axis`` is the batch size or an ``AxisData``."""
    n_out = len(closed_jaxpr.out_avals)
    if isinstance(instantiate, bool):
        instantiate = (instantiate,) * n_out
    in_dims = [0 if b else not_mapped for b in in_batched]
    # Two passes: the first finds which outputs come out batched; the second moves those
    # (and the instantiated ones) to axis 0.
    _, dims = batch_jaxpr_axes(closed_jaxpr, axis, in_dims, axis_name=axis_name,
                               spmd_axis_name=spmd_axis_name)
    out_batched = [d is not not_mapped or bool(inst) for d, inst in zip(dims, instantiate)]
    out_dims = [0 if b else None for b in out_batched]
    closed, _ = batch_jaxpr_axes(closed_jaxpr, axis, in_dims, out_dims, axis_name=axis_name,
                                 spmd_axis_name=spmd_axis_name)
    return closed, out_batched


# --------------------------------------------------------------------------------------------
# Array operations for rules. They are primitives of ``jaxkit.lax`` (which registers them
# here), so this module stays below lax.
# --------------------------------------------------------------------------------------------

_axis_ops: dict[str, Callable] = {}


def register_axis_ops(*, moveaxis: Callable, broadcast: Callable,
                      broadcast_in_dim: Callable) -> None:
    """``moveaxis(x, src, dst)``; ``broadcast(x, size, axis)`` inserts a new axis;
    ``broadcast_in_dim(x, shape, dims)`` is the lax primitive."""
    _axis_ops["moveaxis"] = moveaxis
    _axis_ops["broadcast"] = broadcast
    _axis_ops["broadcast_in_dim"] = broadcast_in_dim


def _ndim(x) -> int:
    return core.get_aval(x).ndim


def _shape(x) -> tuple[int, ...]:
    return core.get_aval(x).shape


def moveaxis(x, src: int, dst: int):
    """``x`` with axis ``src`` moved to position ``dst`` (negative counts from the end)."""
    n = _ndim(x)
    src, dst = src % n, dst % n
    if src == dst:
        return x
    return _axis_ops["moveaxis"](x, src, dst)


def broadcast(x, size: int, axis: int):
    """``x`` with a new axis of ``size`` inserted at ``axis`` (negative counts from the end of
    the result)."""
    return _axis_ops["broadcast"](x, size, axis % (_ndim(x) + 1))


def bdim_at_front(x, bdim, size: int):
    """``x`` with its batch axis first, creating one of ``size`` if it has none."""
    if bdim is not_mapped:
        return broadcast(x, size, 0)
    return moveaxis(x, bdim, 0)


def matchaxis(src, dst, x, size: int):
    """Move (or create) ``x``'s batch axis from ``src`` to ``dst``."""
    if src == dst:
        return x
    if src is not_mapped:
        return broadcast(x, size, dst)
    if dst is not_mapped:
        raise ValueError(f"cannot un-batch a value batched along axis {src}")
    return moveaxis(x, src, dst)


def batch_size(args, dims) -> int:
    """The size of the batch axis of the first batched argument."""
    return next(_shape(x)[d] for x, d in zip(args, dims) if d is not not_mapped)


def move_all_to(args, dims, dst: int, size: int) -> list:
    """Every argument batched along ``dst`` (unbatched ones are broadcast)."""
    return [matchaxis(d, dst, x, size) for x, d in zip(args, dims)]


# --------------------------------------------------------------------------------------------
# Registering rules, and generic rules
# --------------------------------------------------------------------------------------------


def defrule(prim: core.Primitive, rule: Callable, *, named_axis: bool = False) -> None:
    """``rule(axis_data, batched_args, batch_dims, **params) -> (out, out_dim)``. With
    ``named_axis``, the rule also runs when nothing is batched but the vmap names its axis
    (primitives carrying jaxprs, and collectives)."""
    batch_rules[prim] = rule
    if named_axis:
        named_axis_rules.add(prim)


def vectorized_batcher(prim: core.Primitive, batched_args, batch_dims, **params):
    """Rule of a unary elementwise primitive: the batch axis passes through."""
    (x,), (d,) = batched_args, batch_dims
    return prim.bind(x, **params), d


def defvectorized(prim: core.Primitive) -> None:
    """A unary elementwise primitive: batching changes nothing."""
    batch_rules[prim] = lambda axis_data, args, dims, **params: vectorized_batcher(
        prim, args, dims, **params)


def broadcast_batcher(prim: core.Primitive, batched_args, batch_dims, **params):
    """Rule of an n-ary elementwise primitive (rank-0 operands and size-1 dimensions
    broadcast), as JAX's.

    When the batched operands all have one shape and one batch axis (the others being
    rank-0), the primitive applies as it is and the batch axis stays where it is. Otherwise
    every batch axis moves to the front: unbatched arrays get a size-1 axis there (the
    primitive broadcasts it, so nothing is copied) and per-example rank-0 operands size-1
    axes after it; unbatched rank-0 operands broadcast by themselves. (Where the axes go
    decides the layout XLA reduces over later, and so the last bits of sums: JAX's.)"""
    if all(d is not_mapped for d in batch_dims):
        out = prim.bind(*batched_args, **params)
        return (out, [not_mapped] * len(out)) if prim.multiple_results else (out, not_mapped)
    shape, dim = next((_shape(x), d) for x, d in zip(batched_args, batch_dims)
                      if d is not not_mapped)
    if all(_shape(x) == shape and d == dim for x, d in zip(batched_args, batch_dims)
           if _ndim(x)):
        out = prim.bind(*batched_args, **params)
        return (out, [dim] * len(out)) if prim.multiple_results else (out, dim)
    # Two passes in JAX's order: the batch axes to the front first, then the per-example
    # rank-0 operands' size-1 axes.
    args = [x if _ndim(x) == 0 else _insert_unit_axis(x, 0) if d is not_mapped
            else moveaxis(x, d, 0) for x, d in zip(batched_args, batch_dims)]
    rank = max(_ndim(x) for x in args)
    for i, (x, d) in enumerate(zip(args, batch_dims)):
        if d is not not_mapped and _ndim(x) != rank:
            shape = (*_shape(x), *[1] * (rank - _ndim(x)))
            args[i] = _axis_ops["broadcast_in_dim"](x, shape, tuple(range(_ndim(x))))
    out = prim.bind(*args, **params)
    return (out, [0] * len(out)) if prim.multiple_results else (out, 0)


def _insert_unit_axis(x, dim: int):
    """``x`` with a new axis of size 1 at ``dim``."""
    shape = list(core.get_aval(x).shape)
    shape.insert(dim, 1)
    # np.int64 dimensions, as JAX's batching ``broadcast`` makes them.
    return _axis_ops["broadcast_in_dim"](
        x, tuple(shape), tuple(np.delete(np.arange(len(shape)), dim)))


def defbroadcasting(prim: core.Primitive) -> None:
    """An n-ary elementwise primitive (rank-0 operands broadcast): line the batch axes up,
    then apply it once."""
    batch_rules[prim] = lambda axis_data, args, dims, **params: broadcast_batcher(
        prim, args, dims, **params)


def reducer_batcher(prim: core.Primitive, batched_args, batch_dims, *, axes, **params):
    """Rule of a reduction over the operand axes ``axes`` (removed from the result): the
    reduced axes are renumbered around the batch axis, which survives."""
    if len(batched_args) > 1:
        size = batch_size(batched_args, batch_dims)
        dim = next(d for d in batch_dims if d is not not_mapped)
        batched_args, batch_dims = move_all_to(batched_args, batch_dims, dim, size), (
            [dim] * len(batched_args))
    d = next(d for d in batch_dims if d is not not_mapped)
    new_axes = tuple(a + (a >= d) for a in axes)
    out_dim = d - sum(1 for a in new_axes if a < d)
    out = prim.bind(*batched_args, axes=new_axes, **params)
    return (out, [out_dim] * len(out)) if prim.multiple_results else (out, out_dim)


def defreducer(prim: core.Primitive) -> None:
    """A reduction with an ``axes`` parameter (reduce_sum, reduce_max, argmax, ...)."""
    batch_rules[prim] = lambda axis_data, args, dims, **params: reducer_batcher(
        prim, args, dims, **params)


def _shift_axes(value, d: int):
    if isinstance(value, tuple):
        return tuple(a + (a >= d) for a in value)
    return value + (value >= d)


def axes_batcher(prim: core.Primitive, param_names: Sequence[str], batched_args, batch_dims,
                 **params):
    """Rule of a primitive whose array operands all have the same rank and whose params
    ``param_names`` name operand axes (an int or a tuple of ints), the result keeping the
    batch axis in place: every operand gets the batch axis where the first batched one has
    it, and the axis params are renumbered around it."""
    size = batch_size(batched_args, batch_dims)
    d = next(d for d in batch_dims if d is not not_mapped)
    args = move_all_to(batched_args, batch_dims, d, size)
    params = dict(params)
    for name in param_names:
        params[name] = _shift_axes(params[name], d)
    out = prim.bind(*args, **params)
    return (out, [d] * len(out)) if prim.multiple_results else (out, d)


def defaxes(prim: core.Primitive, *param_names: str) -> None:
    """A primitive whose params ``param_names`` name operand axes and whose result has the
    operands' rank (cumsum's ``axis``, sort's ``dimension``, rev's ``dimensions``,
    concatenate's ``dimension``)."""
    batch_rules[prim] = lambda axis_data, args, dims, **params: axes_batcher(
        prim, param_names, args, dims, **params)


def leading_batcher(prim: core.Primitive, batched_args, batch_dims, **params):
    """Rule of a primitive that treats leading axes of all its operands as batch axes (as
    linear-algebra primitives do): every operand gets the batch axis in front."""
    size = batch_size(batched_args, batch_dims)
    args = [bdim_at_front(x, d, size) for x, d in zip(batched_args, batch_dims)]
    out = prim.bind(*args, **params)
    return (out, [0] * len(out)) if prim.multiple_results else (out, 0)


def defleading(prim: core.Primitive) -> None:
    """A primitive that accepts any number of leading batch axes on all its operands."""
    batch_rules[prim] = lambda axis_data, args, dims, **params: leading_batcher(
        prim, args, dims, **params)


# --------------------------------------------------------------------------------------------
# Checking rules (used by the test harness): each rule's result must have the shape and dtype
# the primitive gives one example.
# --------------------------------------------------------------------------------------------

_check_rules = False


@contextlib.contextmanager
def checking_rules(enabled: bool = True) -> Iterator[None]:
    """Within the block, compare the per-example type of every batching rule's result with
    the primitive's abstract evaluation, raising ``AssertionError`` naming a wrong rule."""
    global _check_rules
    prev, _check_rules = _check_rules, enabled
    try:
        yield
    finally:
        _check_rules = prev


def _check_rule_output(prim, vals, dims, params, out, out_dim) -> None:
    avals = [unmapped_aval(d, core.get_aval(v)) for v, d in zip(vals, dims)]
    expected = prim.abstract_eval(*avals, **params)
    outs, out_dims = (out, out_dim) if prim.multiple_results else ([out], [out_dim])
    expected = list(expected) if prim.multiple_results else [expected]
    sizes = {core.get_aval(v).shape[d] for v, d in zip(vals, dims) if d is not not_mapped}
    for i, (o, d, e) in enumerate(zip(outs, out_dims, expected)):
        got_batch = core.get_aval(o)
        if d is not not_mapped and not 0 <= d < got_batch.ndim:
            raise AssertionError(f"batching rule for '{prim.name}' returned output {i} with "
                                 f"batch axis {d} for a value of type {got_batch.str_short()}")
        got = unmapped_aval(d, got_batch)
        if got.shape != e.shape or got.dtype != e.dtype:
            raise AssertionError(
                f"batching rule for '{prim.name}' (batch axes {tuple(dims)}, params {params}) "
                f"gave output {i} of per-example type {got.str_short()} (batched along axis "
                f"{d}: {got_batch.str_short()}) but one example has type {e.str_short()}")
        if d is not not_mapped and {got_batch.shape[d]} != sizes and sizes:
            raise AssertionError(f"batching rule for '{prim.name}' gave output {i} a batch axis "
                                 f"of size {got_batch.shape[d]}, expected {sizes}")


# As JAX 0.10.2, which still answers for the name it dropped.
_deprecations = {
    "NotMapped": removed("jax.interpreters.batching.NotMapped is deprecated."),
}
__getattr__ = deprecation_getattr(__name__, _deprecations)
