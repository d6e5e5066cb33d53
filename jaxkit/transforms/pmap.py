"""``pmap``: run a function on several devices at once, one slice of the mapped axis each.

``pmap(f)(xs)`` traces ``f`` once per argument signature with the per-device types (the mapped
axis removed) while the axis name is bound in the axis environment, so collectives
(``lax.psum`` & co.) inside it know the axis size. The traced body is bound as the ``xla_pmap``
primitive, which carries the jaxpr like ``jit`` does:

* eagerly, the body is lowered with ``num_replicas = n`` and compiled for ``n`` devices; every
  argument becomes one global array with one shard per device, and every result comes back as a
  ``ShardedArray`` of logical shape ``(n, ...)`` whose per-device pieces are its
  ``addressable_shards``;
* under ``grad``/``jvp`` its rules build the JVP, the known/unknown split and the transpose of
  the *body* (``ad.jvp_jaxpr``, ``partial_eval_jaxpr``, ``ad.transpose_jaxpr``) and bind
  ``xla_pmap`` again;
* under ``vmap`` the body is batched; inside ``jit`` (or another pmap) the body is lowered as a
  vmap over the axis on the enclosing program's device, which gives the same numbers.

Closed-over values become leading, broadcast (``in_axes=None``) operands, so enclosing
transformations see them. Keyword arguments are mapped along axis 0, as in JAX.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit._tree_prefix import prefix_mismatch_error
from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.runtime import pjrt
from jaxkit.runtime import multi_device
from jaxkit.runtime.array import Array, device_put_value
from jaxkit.runtime.sharded_array import Shard, ShardedArray
from jaxkit.runtime.sharding import Mesh, NamedSharding, PartitionSpec
from jaxkit.transforms.argnums import hashable_static, infer_argnums_and_argnames
from jaxkit.transforms.jit import jit
from jaxkit.transforms.shard_map import shard_map
from jaxkit.core import ClosedJaxpr, ShapedArray
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax import parallel
from jaxkit.lax.structural import expand_dims, reshape, squeeze

__all__ = ["Shard", "ShardedArray", "pmap", "pmap_p"]


# --------------------------------------------------------------------------------------------
# The xla_pmap primitive
# --------------------------------------------------------------------------------------------

pmap_p = core.Primitive("xla_pmap")
pmap_p.multiple_results = True


def _insert_axis(shape: Sequence[int], axis: int | None, size: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(shape)
    shape = list(shape)
    shape.insert(axis, size)
    return tuple(shape)


def _remove_axis(shape: Sequence[int], axis: int | None) -> tuple[int, ...]:
    if axis is None:
        return tuple(shape)
    return tuple(shape[:axis]) + tuple(shape[axis + 1:])


def _pmap_abstract_eval(*avals, jaxpr: ClosedJaxpr, axis_size: int, out_axes: tuple,
                        **params):
    return [a.update(shape=_insert_axis(a.shape, o, axis_size))
            for a, o in zip(jaxpr.out_avals, out_axes)]


pmap_p.def_abstract_eval(_pmap_abstract_eval)


def resolve_devices(global_axis_size: int, devices: Sequence | None,
                    backend: str | None) -> tuple:
    """The devices the replicas run on: the given ones, or the first devices of the backend
    (all global devices when several processes take part)."""
    if devices is not None:
        devs = tuple(devices)
        if len(devs) != global_axis_size:
            raise ValueError(f"pmap got {len(devs)} devices for a mapped axis of size "
                             f"{global_axis_size}; pass as many devices as the axis has "
                             "elements.")
        return devs
    b = pjrt.get_backend(backend)
    if len(b.devices) != len(b.local_devices):  # several processes: every global device
        if global_axis_size != len(b.devices):
            raise ValueError(
                f"pmap over {len(b.devices)} devices in {_process_count(b)} processes needs "
                f"each process to map an axis of size {len(b.local_devices)} (its local "
                f"device count); the mapped axis spans {global_axis_size} devices.")
        return tuple(sorted(b.devices, key=lambda d: (d.process_index, d.id)))
    if global_axis_size > len(b.local_devices):
        raise ValueError(
            f"compiling computation that requires {global_axis_size} logical devices, but only "
            f"{len(b.local_devices)} XLA devices are available (num_replicas="
            f"{global_axis_size}). Set JAXKIT_NUM_CPU_DEVICES={global_axis_size} before jaxkit "
            "first uses a device to get more CPU devices.")
    return tuple(b.local_devices[:global_axis_size])


def _process_count(backend: pjrt.Backend) -> int:
    return len({d.process_index for d in backend.devices})


class _ArgSpec:
    __slots__ = ("aval", "axis", "global_aval", "sharding")

    def __init__(self, axis, aval, global_aval, sharding):
        self.axis = axis
        self.aval = aval
        self.global_aval = global_aval
        self.sharding = sharding


class PmapProgram:
    """The body of an ``xla_pmap`` compiled for its devices, with argument placement."""

    def __init__(self, jaxpr: ClosedJaxpr, axis_name, axis_size: int, global_axis_size: int,
                 in_axes: tuple, out_axes: tuple, devices: tuple, name: str,
                 donated_invars: tuple):
        self.devices = devices
        self.local_devices = multi_device.addressable_devices(devices)
        self.n_local = axis_size
        if len(self.local_devices) != axis_size:
            raise ValueError(f"pmap: this process owns {len(self.local_devices)} of the "
                             f"{len(devices)} devices but maps an axis of size {axis_size}")
        self.in_specs = [self._spec(a, ax, global_axis_size)
                         for a, ax in zip(jaxpr.in_avals, in_axes)]
        self.out_specs = [self._spec(a, ax, global_axis_size)
                          for a, ax in zip(jaxpr.out_avals, out_axes)]
        # (logical: keys are wrapped around their data's buffers in ``run``)
        self.out_local_avals = [a.update(shape=_insert_axis(a.shape, ax, axis_size))
                                for a, ax in zip(jaxpr.out_avals, out_axes)]
        self.out_presented = [presented_sharding(s.sharding, axis_name)
                              for s in self.out_specs]
        module = lower_pmap_body(name, jaxpr, axis_name, global_axis_size, in_axes, out_axes,
                                 donated_invars)
        self.module = module
        self.executable = multi_device.compile_replicated(
            module, devices, [s.global_aval for s in self.out_specs],
            [s.sharding for s in self.out_specs])
        self._replicated: dict[int, tuple] = {}  # id(value) -> (weakref, global buffer)

    def _spec(self, aval: ShapedArray, axis, global_size: int) -> _ArgSpec:
        # Keys cross the program's boundary as their data: its trailing physical axes come
        # after the mapped one, and are never split.
        aval = core.physical_aval(aval)
        global_aval = aval.update(shape=_insert_axis(aval.shape, axis, global_size))
        sharding = multi_device.axis_sharding(self.devices, len(global_aval.shape), axis)
        return _ArgSpec(axis, aval, global_aval, sharding)

    def place(self, spec: _ArgSpec, x) -> multi_device.ArrayImpl:
        """The global device array for one argument."""
        if dtypes.is_extended(getattr(x, "dtype", None)) and not isinstance(x, core.Tracer):
            x = x.dtype.to_physical(x)  # a key array: its data
        if type(x) is ShardedArray:
            buf = x._buf
            if buf.aval.shape == spec.global_aval.shape and buf.aval.dtype == spec.aval.dtype \
                    and (buf._sharding is spec.sharding or spec.sharding.is_equivalent_to(
                        buf._sharding, len(spec.global_aval.shape))):
                x._check_alive()
                return buf
        if spec.axis is None and isinstance(x, Array):  # immutable: one copy per program
            hit = self._replicated.get(id(x))
            if hit is not None and hit[0]() is x:
                return hit[1]
        host = x._value if isinstance(x, Array) else x
        host = np.asarray(host, dtype=spec.aval.dtype)
        pieces = multi_device.split_host(host, spec.axis, range(self.n_local), self.n_local)
        buf = multi_device.put_pieces(pieces, spec.global_aval, spec.sharding,
                                        self.local_devices)
        if spec.axis is None and isinstance(x, Array):
            key = id(x)
            self._replicated[key] = (weakref.ref(x, lambda _, k=key: self._replicated.pop(k,
                                                                                           None)),
                                     buf)
        return buf

    def run(self, args: Sequence) -> list[ShardedArray]:
        bufs = [self.place(s, x) for s, x in zip(self.in_specs, args)]
        outs = self.executable(bufs)
        return [_result(b, a, s) for b, a, s in zip(outs, self.out_local_avals,
                                                    self.out_presented)]


def _result(buf, aval: ShapedArray, sharding) -> Any:
    """A result of a pmap program: an array, or keys over their data."""
    if dtypes.is_extended(aval.dtype):
        return aval.dtype.from_physical(ShardedArray(buf, core.physical_aval(aval), sharding))
    return ShardedArray(buf, aval, sharding)


_PMAP_AXIS = "_internal_pmap_axis_name"
_pmap_meshes: dict = {}


def presented_sharding(sharding: multi_device.AxisSharding, axis_name) -> Any:
    """How a pmap result presents its layout, as JAX's (which runs pmap as a ``shard_map``):
    a ``NamedSharding`` over a mesh of the mapped devices whose one axis is the pmap's
    ``axis_name`` (``_internal_pmap_axis_name`` when it has none), split on the mapped axis
    (``P()`` for an unmapped result). Its buffers keep the program's own sharding, which the
    partitioned programs computing on it take as equivalent. A result spanning other
    processes' devices presents itself as before (``ShardedArray._view``)."""
    devices = sharding.devices
    if len(multi_device.addressable_devices(devices)) != len(devices):
        return sharding
    name = axis_name if isinstance(axis_name, str) else _PMAP_AXIS
    mesh = _pmap_meshes.get((devices, name))
    if mesh is None:
        mesh = _pmap_meshes[(devices, name)] = Mesh(np.array(devices, dtype=object), (name,))
    axis = sharding.axis
    return NamedSharding(mesh, PartitionSpec() if axis is None else
                         PartitionSpec(*[None] * axis, name))


_programs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def get_program(jaxpr: ClosedJaxpr, *, axis_name, axis_size, global_axis_size, in_axes,
                out_axes, devices, backend, name, donated_invars) -> PmapProgram:
    """The compiled program for one ``xla_pmap`` equation (cached per jaxpr and params)."""
    per_jaxpr = _programs.setdefault(jaxpr, {})
    key = (axis_name, axis_size, global_axis_size, in_axes, out_axes, devices, backend,
           donated_invars)
    program = per_jaxpr.get(key)
    if program is None:
        devs = resolve_devices(global_axis_size, devices, backend)
        program = per_jaxpr[key] = PmapProgram(jaxpr, axis_name, axis_size, global_axis_size,
                                               in_axes, out_axes, devs, name, donated_invars)
    return program


def _pmap_impl(*args, jaxpr: ClosedJaxpr, **params):
    return get_program(jaxpr, **params).run(args)


pmap_p.def_impl(_pmap_impl)


def lower_pmap_body(name: str, jaxpr: ClosedJaxpr, axis_name, global_axis_size: int,
                    in_axes: Sequence, out_axes: Sequence, donated_invars: Sequence[bool]):
    """A StableHLO module for one replica: its parameters and results keep the mapped axis
    with size 1 (the shard shape of the global arrays); the body sees it removed."""
    outer_avals = [a.update(shape=_insert_axis(a.shape, ax, 1))
                   for a, ax in zip(jaxpr.in_avals, in_axes)]
    body_avals = jaxpr.in_avals

    def per_replica(*xs):
        inner = [x if ax is None else reshape(x, a.shape)
                 for x, a, ax in zip(xs, body_avals, in_axes)]
        outs = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *inner)
        return [o if ax is None else reshape(o, _insert_axis(np.shape(o), ax, 1))
                for o, ax in zip(outs, out_axes)]

    wrapped, consts = pe.trace_to_jaxpr(per_replica, outer_avals)
    if consts:
        raise AssertionError("internal: a pmap body must not close over constants here")
    axis_env = () if axis_name is None else ((axis_name, global_axis_size),)
    return mlir.lower_jaxpr(name, wrapped, donated_invars=donated_invars,
                            num_replicas=global_axis_size, axis_env=axis_env, api="pmap")


def _pmap_lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: ClosedJaxpr, axis_name,
                   axis_size: int, in_axes: tuple, out_axes: tuple, **params):
    """Inside another program (jit of pmap, pmap of pmap): compute the body as a vmap over
    the axis on the enclosing program's device; collectives become array operations."""
    batched, _ = batching.batch_jaxpr_axes(jaxpr, batching.AxisData(axis_name, axis_size),
                                           in_axes, out_axes)
    return mlir.closed_subcomp(ctx.module_context, batched, *args)


mlir.register_lowering(pmap_p, _pmap_lowering)


def _pmap_batcher(axis_data, vals, dims, *, jaxpr: ClosedJaxpr, in_axes: tuple,
                  out_axes: tuple, **params):
    """vmap of pmap: batch the body; each output gets the batch axis in front of its
    per-device value, so the mapped axis moves one place right."""
    body_dims, new_in_axes = [], []
    for v, d, ax in zip(vals, dims, in_axes):
        if d is None:
            body_dims.append(None)
            new_in_axes.append(ax)
        elif ax is None:
            body_dims.append(d)
            new_in_axes.append(None)
        else:
            mapped = ax + (d <= ax)  # the pmapped axis in the batched value
            body_dims.append(d if d < mapped else d - 1)
            new_in_axes.append(mapped)
    batched, _ = batching.batch_jaxpr_axes(jaxpr, axis_data, body_dims,
                                           [0] * len(jaxpr.out_avals))
    new_out_axes = tuple(None if o is None else o + 1 for o in out_axes)
    outs = pmap_p.bind(*vals, jaxpr=batched, in_axes=tuple(new_in_axes), out_axes=new_out_axes,
                       **params)
    return outs, [0] * len(outs)


batching.defrule(pmap_p, _pmap_batcher, named_axis=True)


# --------------------------------------------------------------------------------------------
# Differentiation rules: the body is transformed as a jaxpr and bound as xla_pmap again
# --------------------------------------------------------------------------------------------


def bind_pmap(closed: ClosedJaxpr, args: Sequence, in_axes: Sequence, out_axes: Sequence,
              params: dict) -> list:
    """Bind ``xla_pmap`` on a body that may have constants: they become leading broadcast
    operands (``in_axes=None``), as closed-over values do."""
    consts = list(closed.consts)
    if consts:
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(closed.jaxpr), [])
    n = len(consts) + len(args)
    new = dict(params, jaxpr=closed, in_axes=(None,) * len(consts) + tuple(in_axes),
               out_axes=tuple(out_axes), donated_invars=(False,) * n)
    return pmap_p.bind(*consts, *args, **new)


def _pmap_jvp(primals, tangents, *, jaxpr: ClosedJaxpr, in_axes: tuple, out_axes: tuple,
              **params):
    nonzeros = [not ad.is_zero(t) for t in tangents]
    with parallel.extend_axis_env(params["axis_name"], params["global_axis_size"]):
        jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    tangents_nz = [t for t in tangents if not ad.is_zero(t)]
    t_in_axes = [ax for ax, nz in zip(in_axes, nonzeros) if nz]
    t_out_axes = [ax for ax, nz in zip(out_axes, out_nz) if nz]
    outs = bind_pmap(jvp_closed, [*primals, *tangents_nz], [*in_axes, *t_in_axes],
                     [*out_axes, *t_out_axes], params)
    n_out = len(jaxpr.out_avals)
    tangents_it = iter(outs[n_out:])
    tangent_avals = _pmap_abstract_eval(jaxpr=jaxpr, axis_size=params["axis_size"],
                                        out_axes=out_axes)
    return outs[:n_out], [next(tangents_it) if nz else ad.Zero(a.to_tangent_aval())
                          for a, nz in zip(tangent_avals, out_nz)]


def _pmap_partial_eval(trace: pe.JaxprTrace, *args, jaxpr: ClosedJaxpr, in_axes: tuple,
                       out_axes: tuple, **params):
    """Run the known part of the body now (its residuals come back mapped along axis 0) and
    stage the unknown part as another xla_pmap."""
    unknowns = [not trace.is_known(x) for x in args]
    with parallel.extend_axis_env(params["axis_name"], params["global_axis_size"]):
        known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(jaxpr, unknowns, False)
    known_args = [x for x, uk in zip(args, unknowns) if not uk]
    known_in_axes = [ax for ax, uk in zip(in_axes, unknowns) if not uk]
    known_out_axes = [ax for ax, uk in zip(out_axes, out_uk) if not uk] + [0] * num_res
    with core.set_current_trace(trace.parent):
        known_outs = bind_pmap(known, known_args, known_in_axes, known_out_axes, params)
    n_known = len(known_outs) - num_res
    residuals = known_outs[n_known:]
    unknown_args = [*residuals, *(x for x, uk in zip(args, unknowns) if uk)]
    unknown_in_axes = (0,) * num_res + tuple(ax for ax, uk in zip(in_axes, unknowns) if uk)
    unknown_out_axes = tuple(ax for ax, uk in zip(out_axes, out_uk) if uk)
    new_params = dict(params, jaxpr=unknown, in_axes=unknown_in_axes,
                      out_axes=unknown_out_axes,
                      donated_invars=(False,) * len(unknown_args))
    out_avals = _pmap_abstract_eval(**new_params)
    unknown_outs = iter(trace.stage(pmap_p, unknown_args, out_avals, new_params))
    known_it = iter(known_outs[:n_known])
    return [next(unknown_outs) if uk else next(known_it) for uk in out_uk]


def _pmap_transpose(cts, *args, jaxpr: ClosedJaxpr, in_axes: tuple, out_axes: tuple,
                    **params):
    """The transposed body, mapped the other way round. The cotangent of a broadcast
    (``in_axes=None``) input is the sum over devices of the per-device cotangents."""
    linear = [ad.is_undefined_primal(x) for x in args]
    ct_nonzero = [not ad.is_zero(c) for c in cts]
    name, size = params["axis_name"], params["global_axis_size"]
    with parallel.extend_axis_env(name, size):
        t_closed, cts_nz = ad.transpose_jaxpr(jaxpr, linear, ct_nonzero)
        lin_axes = [ax for ax, lin in zip(in_axes, linear) if lin]
        nz_axes = [ax for ax, nz in zip(lin_axes, cts_nz) if nz]
        if any(ax is None for ax in nz_axes):
            t_closed = _sum_broadcast_cts(t_closed, nz_axes, name)
    ins = [x for x, lin in zip(args, linear) if not lin]
    ins += [c for c, nz in zip(cts, ct_nonzero) if nz]
    ins_axes = [ax for ax, lin in zip(in_axes, linear) if not lin]
    ins_axes += [ax for ax, nz in zip(out_axes, ct_nonzero) if nz]
    outs = iter(bind_pmap(t_closed, ins, ins_axes, nz_axes, params))
    nz_it = iter(cts_nz)
    return [(next(outs) if next(nz_it) else ad.Zero(x.aval)) if lin else None
            for x, lin in zip(args, linear)]


def _sum_broadcast_cts(closed: ClosedJaxpr, out_axes: Sequence, axis_name) -> ClosedJaxpr:
    """``closed`` with the outputs whose ``out_axes`` entry is None summed over the axis."""
    def body(*xs):
        outs = core.eval_jaxpr(closed.jaxpr, closed.consts, *xs)
        return [o if ax is not None else
                parallel.psum_p.bind(o, axes=(axis_name,), axis_index_groups=None)
                for o, ax in zip(outs, out_axes)]

    jaxpr, consts = pe.trace_to_jaxpr(body, closed.in_avals)
    return ClosedJaxpr(jaxpr, consts)


ad.defjvp_rule(pmap_p, _pmap_jvp)
ad.deftranspose(pmap_p, _pmap_transpose)
pe.defpartial_eval(pmap_p, _pmap_partial_eval)


# --------------------------------------------------------------------------------------------
# The user-facing pmap
# --------------------------------------------------------------------------------------------


def _flatten_axes(what: str, spec, tree) -> list:
    """For each leaf of ``tree``, the entry of ``spec`` (a pytree prefix of ``tree`` whose
    leaves are ints or None) that covers it."""
    spec_leaves, spec_def = tree_util.tree_flatten(spec, is_leaf=lambda x: x is None)
    try:
        subtrees = spec_def.flatten_up_to(tree)
    except ValueError as e:
        error = prefix_mismatch_error(what, spec, tree_util.tree_structure(tree),
                                      is_leaf=lambda x: x is None)
        raise error or ValueError(f"{what} specification must be a tree prefix of the "
                                  f"corresponding value, got specification {spec!r}: {e}"
                                  ) from None
    out = []
    for ax, sub in zip(spec_leaves, subtrees):
        if ax is not None and type(ax) is not int:
            raise TypeError(f"{what} must be ints or None, got {ax!r}")
        out.extend([ax] * len(tree_util.tree_leaves(sub)))
    return out


class _TempAxisName:
    """The axis name of a pmap called without ``axis_name``: unique, so no collective in the
    user's code can refer to it."""

    def __init__(self, fun: Callable):
        self.fun_name = getattr(fun, "__name__", type(fun).__name__)

    def __repr__(self):
        return f"<axis of pmap({self.fun_name})>"


def _with_statics(dynamic: Sequence, statics: dict) -> list:
    """The positional arguments: the static ones (position -> value) back in their places."""
    it = iter(dynamic)
    return [statics[i] if i in statics else next(it)
            for i in range(len(dynamic) + len(statics))]


class PmapFunction:
    """A function mapped over devices (see ``pmap``)."""

    def __init__(self, fun: Callable, axis_name, in_axes, out_axes, static_broadcasted_argnums,
                 devices, backend, axis_size, donate_argnums):
        if not callable(fun):
            raise TypeError(f"pmap expects a callable, got {fun!r}")
        functools.update_wrapper(self, fun, updated=())
        self._fun = fun
        self._name = getattr(fun, "__name__", type(fun).__name__)
        self._axis_name = axis_name if axis_name is not None else _TempAxisName(fun)
        self._in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        self._out_axes = out_axes
        self._static, _ = infer_argnums_and_argnames(fun, static_broadcasted_argnums, ())
        self._donate, _ = infer_argnums_and_argnames(fun, donate_argnums, ())
        self._devices = None if devices is None else tuple(devices)
        self._backend = backend
        self._axis_size = axis_size
        self._traces: dict = {}
        self._fast: dict = {}

    def __repr__(self):
        return f"<pmapped function {self._name}>"

    def __call__(self, *args, **kwargs):
        if not kwargs and core.current_trace() is core.eval_trace and not self._static:
            key = tuple([(type(x), x.aval) if isinstance(x, Array) else None for x in args])
            hit = self._fast.get(key)
            if hit is not None:
                program, consts, out_tree = hit
                return tree_util.tree_unflatten(out_tree, program.run(consts + list(args)))
        return self._call(args, kwargs)

    def _prepare(self, args, kwargs):
        """The static arguments, the dynamic ones, their flat leaves, structure, mapped axes
        and avals, and the mapped size."""
        statics = tuple((i, hashable_static(a, f"static_broadcasted_argnums[{i}]"))
                        for i, a in enumerate(args) if i in self._static)
        dyn_args = tuple(a for i, a in enumerate(args) if i not in self._static)
        in_axes = self._in_axes
        if isinstance(in_axes, tuple):
            if len(in_axes) != len(args):
                raise ValueError(f"pmap in_axes must be an int, None, or a tuple with one entry "
                                 f"per positional argument; got {len(in_axes)} entries for "
                                 f"{len(args)} arguments")
            in_axes = tuple(a for i, a in enumerate(in_axes) if i not in self._static)
        flat, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        flat_in_axes = (_flatten_axes("pmap in_axes", in_axes, dyn_args)
                        + [0] * len(tree_util.tree_leaves(kwargs)))
        avals = [core.get_aval(x) for x in flat]
        flat_in_axes = [None if a is None else a % max(v.ndim, 1)
                        for a, v in zip(flat_in_axes, avals)]
        n = self._mapped_size(flat, avals, flat_in_axes)
        return statics, dyn_args, flat, in_tree, flat_in_axes, avals, n

    def lower(self, *args, **kwargs) -> Any:
        """The program as JAX lowers a pmap (which it runs as ``jit`` of ``shard_map``): the
        body on each device's block of a mesh over the mapped devices, whose one axis is
        ``axis_name`` (``_internal_pmap_axis_name`` when unnamed). jaxkit runs pmaps as
        replicated programs; this is the equivalent partitioned program, for inspection and
        ahead-of-time compilation on one process."""
        statics, dyn_args, flat, in_tree, flat_in_axes, _, n = self._prepare(args, kwargs)
        global_size = n * self._process_count() if self._devices is None else len(self._devices)
        axis = ("_internal_pmap_axis_name" if isinstance(self._axis_name, _TempAxisName)
                else self._axis_name)
        mesh = Mesh(np.array(resolve_devices(global_size, self._devices, self._backend)),
                    (axis,))

        def spec(ax):
            return PartitionSpec() if ax is None else PartitionSpec(*[None] * ax, axis)

        static_values, fun, out_axes = dict(statics), self._fun, self._out_axes

        def _fun(*flat_args):
            blocks = [x if ax is None else squeeze(x, [ax])
                      for x, ax in zip(flat_args, flat_in_axes)]
            a, kw = tree_util.tree_unflatten(in_tree, blocks)
            out = fun(*_with_statics(a, static_values), **kw)
            out_flat, out_tree = tree_util.tree_flatten(out)
            axes = _flatten_axes("pmap out_axes", out_axes, out)
            return tree_util.tree_unflatten(out_tree, [
                x if ax is None else expand_dims(x, [ax % (x.ndim + 1)])
                for x, ax in zip(out_flat, axes)])

        out_specs = tree_util.tree_map(spec, out_axes, is_leaf=lambda x: x is None)
        mapped = shard_map(_fun, mesh=mesh, in_specs=tuple(map(spec, flat_in_axes)),
                           out_specs=out_specs, check_vma=False)
        donated = self._donated_flags(dyn_args, kwargs)
        return jit(mapped, donate_argnums=tuple(i for i, d in enumerate(donated) if d),
                   in_shardings=tuple(NamedSharding(mesh, spec(ax)) for ax in flat_in_axes),
                   out_shardings=tree_util.tree_map(
                       lambda ax: NamedSharding(mesh, spec(ax)), out_axes,
                       is_leaf=lambda x: x is None)).trace(*flat).lower()

    def _call(self, args, kwargs):
        statics, dyn_args, flat, in_tree, flat_in_axes, avals, n = self._prepare(args, kwargs)
        global_size = n * self._process_count() if self._devices is None else len(self._devices)
        body_avals = [a.update(shape=_remove_axis(a.shape, ax))
                      for a, ax in zip(avals, flat_in_axes)]
        donated = self._donated_flags(dyn_args, kwargs)
        sig = (in_tree, tuple(body_avals), tuple(flat_in_axes), statics, n, global_size)
        traced = self._traces.get(sig)
        if traced is None:
            traced = self._trace(sig, dyn_args, kwargs, body_avals, global_size, statics)
        body, consts, out_tree, flat_out_axes = traced
        params = {"jaxpr": body, "axis_name": self._axis_name, "axis_size": n,
                  "global_axis_size": global_size,
                  "in_axes": (None,) * len(consts) + tuple(flat_in_axes),
                  "out_axes": tuple(flat_out_axes), "devices": self._devices,
                  "backend": self._backend, "name": self._name,
                  "donated_invars": (False,) * len(consts) + donated}
        if core.current_trace() is core.eval_trace:
            program = get_program(**params)
            outs = program.run(list(consts) + flat)
            if not kwargs and not self._static and all(isinstance(x, Array) for x in args) and \
                    len(flat) == len(args):
                key = tuple([(type(x), x.aval) for x in args])
                self._fast[key] = (program, list(consts), out_tree)
        else:
            outs = pmap_p.bind(*consts, *flat, **params)
        return tree_util.tree_unflatten(out_tree, outs)

    def _process_count(self) -> int:
        return _process_count(pjrt.get_backend(self._backend))

    def _mapped_size(self, flat, avals, in_axes) -> int:
        sizes = {}
        for i, (a, ax) in enumerate(zip(avals, in_axes)):
            if ax is None:
                continue
            if a.ndim == 0:
                raise ValueError(f"pmap was requested to map its argument along axis {ax}, "
                                 f"which implies that its rank should be at least {ax + 1}, "
                                 "but is only 0 (its shape is ())")
            sizes[i] = a.shape[ax]
        distinct = set(sizes.values())
        if len(distinct) > 1:
            lines = "\n".join(f"  argument {i} of shape {avals[i].shape} mapped along axis "
                              f"{in_axes[i]} (size {s})" for i, s in sizes.items())
            raise ValueError(f"pmap got inconsistent sizes for array axes to be mapped:\n{lines}")
        if distinct:
            n = distinct.pop()
            if self._axis_size is not None and self._axis_size != n:
                raise ValueError(f"pmap got axis_size={self._axis_size} but the mapped "
                                 f"arguments have size {n}")
            return n
        if self._axis_size is None:
            raise ValueError("pmap requires at least one argument with a mapped axis, or an "
                             "explicit axis_size")
        return int(self._axis_size)

    def _donated_flags(self, dyn_args, kwargs) -> tuple:
        flags = []
        dyn_positions = [i for i in range(len(dyn_args) + len(self._static))
                         if i not in self._static]
        for pos, a in zip(dyn_positions, dyn_args):
            flags += [pos in self._donate] * len(tree_util.tree_leaves(a))
        flags += [False] * len(tree_util.tree_leaves(kwargs))
        return tuple(flags)

    def _trace(self, sig, dyn_args, kwargs, body_avals, global_size, statics):
        in_tree = sig[0]
        out_box: list = []
        fun = self._fun

        static_values = dict(statics)

        def flat_fun(*flat_args):
            a, kw = tree_util.tree_unflatten(in_tree, flat_args)
            out = fun(*_with_statics(a, static_values), **kw)
            out_flat, out_tree = tree_util.tree_flatten(out)
            for leaf in out_flat:
                if not (isinstance(leaf, core.Tracer) or core.is_array_like(leaf)):
                    raise TypeError(f"pmapped function {self._name} returned a value of type "
                                    f"{type(leaf).__name__}, which is not a valid jaxkit type")
            # The output's structure with avals for leaves: tracers kept past the trace would
            # be leaks (``jax.checking_leaks``).
            out_avals = [core.get_aval(leaf) for leaf in out_flat]
            out_box.append((out_tree, tree_util.tree_unflatten(out_tree, out_avals)))
            return out_flat

        names = [f"args[{i}]" for i in range(len(body_avals))]
        debug = pe.debug_info("pmap", fun, names)
        with parallel.extend_axis_env(self._axis_name, global_size):
            jaxpr, consts = pe.trace_to_jaxpr(flat_fun, body_avals, debug)
        out_tree, out = out_box[0]
        flat_out_axes = _flatten_axes("pmap out_axes", self._out_axes, out)
        flat_out_axes = [None if a is None else a % (v.aval.ndim + 1)
                         for a, v in zip(flat_out_axes, jaxpr.outvars)]
        body = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
        # Closed-over NumPy values are taken at trace time (as JAX bakes them in); as Arrays
        # they are copied to the devices once per program, not on every call.
        consts = [device_put_value(c) if isinstance(c, np.ndarray) else c for c in consts]
        traced = (body, consts, out_tree, flat_out_axes)
        if not any(isinstance(c, core.Tracer) for c in consts):
            self._traces[sig] = traced
        return traced


def pmap(fun: Callable | None = None, axis_name: Any = None, *, in_axes: Any = 0,
         out_axes: Any = 0, static_broadcasted_argnums: int | Sequence[int] = (),
         devices: Sequence | None = None, backend: str | None = None,
         axis_size: int | None = None, donate_argnums: int | Sequence[int] = (),
         global_arg_shapes: Any = None) -> Callable:
    """Map ``fun`` over the leading axis (``in_axes``) of its arguments, one slice per device.

    ``axis_name`` names the mapped axis for collectives (``lax.psum(x, axis_name)``). Results
    are ``ShardedArray``s of shape ``(n, ...)`` whose pieces stay on their devices
    (``out.addressable_shards``); feeding them to a pmap with the same layout costs no copy.
    ``devices`` picks the devices (default: the first ``n``), ``static_broadcasted_argnums``
    marks hashable arguments passed to every device unchanged, ``donate_argnums`` lets XLA
    reuse argument buffers for results."""
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums,
                                 devices=devices, backend=backend, axis_size=axis_size,
                                 donate_argnums=donate_argnums)
    if global_arg_shapes is not None:
        raise ValueError("global_arg_shapes is not supported (it was removed from JAX)")
    return PmapFunction(fun, axis_name, in_axes, out_axes, static_broadcasted_argnums, devices,
                        backend, axis_size, donate_argnums)
