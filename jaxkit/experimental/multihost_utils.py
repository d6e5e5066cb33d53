"""``jax.experimental.multihost_utils``: moving data between the processes of one program.

Every function here is collective: all processes must call it, in the same order, with
values of the same shape. They are built from jaxkit's own pieces: a mesh of
``(processes, local_devices)`` over ``jaxkit.devices()``, global arrays made from each
process's data, and a ``jit`` whose output is replicated, which XLA's partitioner turns into
an all-gather or all-reduce over gloo. Results come back as NumPy arrays.

``host_local_array_to_global_array`` / ``global_array_to_host_local_array`` are primitives
(as in JAX): identity on values inside a program (their lowering passes the operand
through), a change of view between the process's part and the global array when evaluated.
"""
from __future__ import annotations

import contextlib
import functools
import math
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from jaxkit import api, core, distributed, dtypes
from jaxkit import tree_util
from jaxkit import numpy as jnp
from jaxkit import _util
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.runtime import global_arrays
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import Mesh, NamedSharding, PartitionSpec
from jaxkit.transforms.jit import jit

__all__ = [
    "ProcessFailureError", "assert_equal", "broadcast_one_to_all",
    "global_array_to_host_local_array", "global_array_to_host_local_array_p", "gtl_abstract_eval",
    "host_local_array_to_global_array", "host_local_array_to_global_array_p", "live_devices",
    "ltg_abstract_eval",
    "process_allgather", "reached_preemption_sync_point", "sync_global_devices",
]

P = PartitionSpec

# Names JAX's module has in its namespace (its own imports), which code reaches through it.
safe_zip = _util.safe_zip
tree_flatten = tree_util.tree_flatten
tree_unflatten = tree_util.tree_unflatten
xla_client = mlir.jaxlib_module("jaxlib.xla_client")


def _process_mesh() -> Mesh:
    """Every device, one row per process: axes ``('processes', 'local_devices')``."""
    devices = np.array(api.devices(), dtype=object).reshape(
        api.process_count(), api.local_device_count())
    return Mesh(devices, ("processes", "local_devices"))


def _identity(x):
    return x


def _psum(xs: Any) -> Any:
    return tree_util.tree_map(lambda x: jnp.sum(x, dtype=x.dtype, axis=0), xs)


def _not_fully_addressable(x: Any) -> bool:
    return isinstance(x, ShardedArray) and not x.is_fully_addressable


# ---- gathering and broadcasting ----------------------------------------------------------------


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """Every process gets the source process's value of each leaf of ``in_tree`` (process
    0 unless ``is_source`` says otherwise); leaves must have the same shape everywhere."""
    if api.process_count() == 1:
        return tree_util.tree_map(np.asarray, in_tree)
    if is_source is None:
        is_source = api.process_index() == 0
    mesh = _process_mesh()

    def pre(x):
        value = np.asarray(x) if is_source else np.zeros_like(np.asarray(x))
        return host_local_array_to_global_array(np.expand_dims(value, 0), mesh,
                                                P("processes"))

    global_tree = tree_util.tree_map(pre, in_tree)
    out = jit(_psum, out_shardings=NamedSharding(mesh, P()))(global_tree)
    return tree_util.tree_map(lambda x: api.device_get(x.addressable_data(0)), out)


def _allgather_leaf(x: Any, tiled: bool) -> np.ndarray:
    if _not_fully_addressable(x):
        if not tiled:
            raise ValueError("Gathering global non-fully-addressable arrays only supports "
                             "tiled=True")
        out = jit(_identity, out_shardings=x.sharding.update(spec=P()))(x)
        return np.asarray(out.addressable_data(0))
    host = np.asarray(x)
    if api.process_count() == 1:
        return host if tiled else np.expand_dims(host, 0)
    mesh = _process_mesh()
    if host.ndim == 0 or not tiled:
        host = np.expand_dims(host, 0)
    shape = (host.shape[0] * api.process_count(),) + host.shape[1:]
    pieces = [api.device_put(host, d) for d in api.local_devices()]
    global_x = global_arrays.from_single_device_arrays(
        shape, NamedSharding(mesh, P("processes")), pieces)
    out = jit(_identity, out_shardings=NamedSharding(mesh, P()))(global_x)
    return np.asarray(out.addressable_data(0))


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Every process's value of each leaf, on every process, as NumPy arrays: stacked on a
    new leading axis (concatenated when ``tiled``; scalars are always stacked). A global
    array spanning several processes is gathered whole (needs ``tiled=True``)."""
    return tree_util.tree_map(lambda x: _allgather_leaf(x, tiled), in_tree)


def sync_global_devices(name: str) -> None:
    """A barrier: returns once every process has called it with the same ``name``."""
    h = np.uint32(zlib.crc32(name.encode()))
    assert_equal(h, f"sync_global_devices name mismatch ('{name}')")


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """Raise ``AssertionError`` (with ``fail_message``) unless every process holds the same
    values in ``in_tree``."""
    def expected(x):
        if _not_fully_addressable(x):
            return np.asarray(x.addressable_data(0))
        x = np.asarray(x)
        if x.ndim == 0:
            x = np.expand_dims(x, 0)
        return np.concatenate([x] * api.process_count())

    out = process_allgather(in_tree, tiled=True)
    want = tree_util.tree_map(expected, in_tree)
    if not all(tree_util.tree_leaves(tree_util.tree_map(
            lambda a, b: bool(np.all(np.equal(a, b))), want, out))):
        raise AssertionError(f"{fail_message}. Expected: {out}; got: {in_tree}.")


# ---- preemption and liveness -------------------------------------------------------------------


def reached_preemption_sync_point(step_id: int) -> bool:
    """Whether every process has reached the step at which to checkpoint after a preemption
    notice (SIGTERM) reached one of them; always False without ``distributed.initialize``.
    All processes must call it at every step, starting from the same step."""
    manager = distributed.preemption_sync_manager()
    if manager is None:
        return False
    return manager.reached_sync_point(step_id)


class ProcessFailureError(Exception):
    """Raised by ``live_devices`` when processes hosting some of its devices failed;
    ``failed_devices`` holds those devices."""

    def __init__(self, failed_devices: set):
        self.failed_devices = failed_devices
        super().__init__(f"Devices failed: {failed_devices}")


def _live(devices: list) -> dict:
    """The devices whose processes are alive, each with its process's incarnation id."""
    processes = {d.process_index for d in devices}
    if api.process_index() not in processes:
        raise ValueError("Provided devices do not have any local devices.")
    alive = distributed.live_processes(sorted(processes))
    return {d: alive[d.process_index] for d in devices if d.process_index in alive}


class _LiveDevices:
    """``with live_devices(devices) as alive:`` runs the block on the devices whose processes
    are alive (a barrier among them); on leaving, raises ``ProcessFailureError`` if one of
    those processes failed or restarted meanwhile, so every live process sees the same
    outcome."""

    def __init__(self):
        self.devices: dict | None = None

    @contextlib.contextmanager
    def __call__(self, devices: list) -> Iterator[list]:
        if not distributed.is_initialized():
            raise RuntimeError("Distributed JAX not initialized.")
        if not devices:
            raise ValueError("No devices provided.")
        if self.devices is None:
            self.devices = _live(devices)
        error = None
        try:
            yield sorted(self.devices, key=lambda d: d.id)
        except Exception as e:  # re-raised below, after the liveness check
            error = e
        finally:
            before, self.devices = self.devices, _live(devices)
            failed = {d for d in before
                      if d not in self.devices or self.devices[d] != before[d]}
            if failed:
                raise ProcessFailureError(failed) from error
            if error is not None:
                raise error


live_devices = _LiveDevices()


# ---- host-local <-> global arrays: two primitives ------------------------------------------


def _axes(pspec: PartitionSpec, ndim: int) -> tuple:
    return pspec._normalized(ndim)


def _rescale(shape: tuple, pspec: PartitionSpec, num: dict, den: dict) -> tuple:
    """``shape`` with each split dimension scaled by its axes' sizes in ``num`` over
    ``den`` (mesh shapes): local extents to global ones or back."""
    out = []
    for n, axes in zip(shape, _axes(pspec, len(shape))):
        out.append(n * math.prod(num[a] for a in axes) // math.prod(den[a] for a in axes))
    return tuple(out)


def _check_pspec(pspec: Any) -> None:
    if pspec is None:
        raise ValueError("`None` is not a valid input to the pspecs argument. Please use "
                         "jax.sharding.PartitionSpec() if you wanted to replicate your input.")


def _host(x: Any) -> np.ndarray:
    """A host value of a canonical dtype (float0 becomes bool zeros, as JAX lays it out)."""
    value = x._value if isinstance(x, Array) else np.asarray(x)
    if value.dtype == dtypes.float0:
        return np.zeros(value.shape, bool)
    return np.asarray(value, dtypes.canonicalize_dtype(value.dtype))


def host_local_array_to_global_array_impl(arr: Any, *, global_mesh: Mesh,
                                          pspec: PartitionSpec) -> ShardedArray:
    """Evaluate ``host_local_array_to_global_array_p``: this process's value becomes its
    devices' pieces of the global array (an array already spanning processes is kept)."""
    _check_pspec(pspec)
    if _not_fully_addressable(arr):  # already global
        return arr
    value = _host(arr)
    shape, sharding, indices = _ltg_plan(global_mesh, pspec, value.shape)
    return global_arrays.from_host_pieces(shape, value.dtype, sharding,
                                          {d: value[i] for d, i in indices})


@functools.lru_cache(maxsize=256)
def _ltg_plan(global_mesh: Mesh, pspec: PartitionSpec, local_shape: tuple) -> tuple:
    """The global shape, global sharding and each local device's slices of the local value
    (computed once per mesh, spec and local shape: the call is on every training step)."""
    local = NamedSharding(global_mesh.local_mesh, pspec)
    shape = _rescale(local_shape, pspec, global_mesh.shape, global_mesh.local_mesh.shape)
    return shape, NamedSharding(global_mesh, pspec), \
        tuple(local.devices_indices_map(local_shape).items())


def global_array_to_host_local_array_impl(arr: Any, *, global_mesh: Mesh,
                                          pspec: PartitionSpec) -> Any:
    """Evaluate ``global_array_to_host_local_array_p``: this process's pieces of the global
    array, as an array over ``global_mesh.local_mesh`` (laid out first if need be)."""
    _check_pspec(pspec)
    if isinstance(arr, Array) and not _not_fully_addressable(arr):  # already host-local
        return arr
    global_sharding = NamedSharding(global_mesh, pspec)
    local = NamedSharding(global_mesh.local_mesh, pspec)
    if not isinstance(arr, ShardedArray):  # a NumPy value (as AD can pass): lay it out
        value = _host(arr)
        shape = _rescale(value.shape, pspec, global_mesh.local_mesh.shape, global_mesh.shape)
        return global_arrays.from_callback(shape, local, lambda i: value[i], value.dtype)
    if arr.sharding != global_sharding:
        arr = jit(_identity, out_shardings=global_sharding)(arr)
    shape = _rescale(arr.shape, pspec, global_mesh.local_mesh.shape, global_mesh.shape)
    shards = {s.device: s._buf for s in arr.addressable_shards}
    return global_arrays.from_device_buffers(shape, arr.dtype, local, shards)


def ltg_abstract_eval(arr: Any, *, global_mesh: Mesh, pspec: PartitionSpec) -> core.ShapedArray:
    """The type of the global array whose process-local part has the type of ``arr``: each
    dimension split by ``pspec`` grows by the ratio of the global mesh axes to the local."""
    return core.ShapedArray(_rescale(arr.shape, pspec, global_mesh.shape,
                                     global_mesh.local_mesh.shape), arr.dtype)


def gtl_abstract_eval(arr: Any, *, global_mesh: Mesh, pspec: PartitionSpec) -> core.ShapedArray:
    """The type of this process's part of a global array of the type of ``arr`` (the inverse
    of ``ltg_abstract_eval``)."""
    return core.ShapedArray(_rescale(arr.shape, pspec, global_mesh.local_mesh.shape,
                                     global_mesh.shape), arr.dtype)


def _make_view_primitive(name: str, impl, abstract_eval) -> core.Primitive:
    """One of the two primitives: ``impl`` when evaluated, the operand itself when lowered
    (the program already works on the global array), linear with itself as transpose (as
    JAX defines them)."""
    prim = core.Primitive(name)
    prim.def_impl(impl)
    prim.def_abstract_eval(abstract_eval)
    ad.deflinear(prim, lambda ct, **params: [prim.bind(ct, **params)])
    mlir.register_lowering(prim, lambda ctx, x, **params: x)
    return prim


host_local_array_to_global_array_p = _make_view_primitive(
    "host_local_array_to_global_array", host_local_array_to_global_array_impl, ltg_abstract_eval)
global_array_to_host_local_array_p = _make_view_primitive(
    "global_array_to_host_local_array", global_array_to_host_local_array_impl,
    gtl_abstract_eval)


def ltg_batcher(axis_data, args, dims, *, global_mesh: Mesh, pspec: PartitionSpec):
    """The batch axis is not split (or split over the vmap's SPMD axis name, if any)."""
    (x,), (d,) = args, dims
    parts = list(pspec)
    if d is not batching.not_mapped:
        parts.insert(d, axis_data.spmd_name)
    return host_local_array_to_global_array_p.bind(
        x, global_mesh=global_mesh, pspec=P(*parts)), d


batching.defrule(host_local_array_to_global_array_p, ltg_batcher)
batching.defvectorized(global_array_to_host_local_array_p)


def _per_leaf_specs(pspecs: Any, tree: Any) -> list:
    is_leaf = lambda s: s is None or isinstance(s, PartitionSpec)  # noqa: E731
    leaves = tree_util.tree_leaves(tree)
    if is_leaf(pspecs):
        return [pspecs] * len(leaves)
    specs, prefix_def = tree_util.tree_flatten(pspecs, is_leaf=is_leaf)
    subtrees = prefix_def.flatten_up_to(tree)
    return [s for s, sub in zip(specs, subtrees) for _ in tree_util.tree_leaves(sub)]


def host_local_array_to_global_array(local_inputs: Any, global_mesh: Mesh,
                                     pspecs: Any) -> Any:
    """The global arrays of which each process's ``local_inputs`` are its parts: along a
    dimension split by ``pspecs`` over mesh axes, the global extent is the local one times
    the number of processes along those axes. This process's devices must form a
    contiguous block of ``global_mesh``."""
    leaves, treedef = tree_util.tree_flatten(local_inputs)
    specs = _per_leaf_specs(pspecs, local_inputs)
    return tree_util.tree_unflatten(treedef, [
        host_local_array_to_global_array_p.bind(x, global_mesh=global_mesh, pspec=s)
        for x, s in zip(leaves, specs)])


def global_array_to_host_local_array(global_inputs: Any, global_mesh: Mesh,
                                     pspecs: Any) -> Any:
    """This process's part of each global array (laid out over ``global_mesh.local_mesh``),
    the inverse of ``host_local_array_to_global_array``."""
    leaves, treedef = tree_util.tree_flatten(global_inputs)
    specs = _per_leaf_specs(pspecs, global_inputs)
    return tree_util.tree_unflatten(treedef, [
        global_array_to_host_local_array_p.bind(x, global_mesh=global_mesh, pspec=s)
        for x, s in zip(leaves, specs)])
