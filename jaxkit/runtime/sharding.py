"""Shardings: how a global array is laid out over devices (``jax.sharding``).

A ``Mesh`` names the axes of an n-d grid of devices; a ``NamedSharding(mesh, PartitionSpec)``
says which mesh axes split each array dimension (the rest replicate). Everything XLA needs is
derived from that pair, in two forms:

* an ``HloSharding`` (the tile assignment over the devices' positions in ``mesh.devices.flat``),
  which labels device buffers: each global array is one jaxlib ``ArrayImpl`` holding its
  shards, made by ``batched_device_put`` or returned by a partitioned executable;
* a Shardy attribute (``#sdy.sharding<@mesh, [{"x"}, {}]>``), which annotates programs that
  XLA's SPMD partitioner then splits (``jaxkit.transforms.spmd``).

Going back, ``named_from_hlo`` finds the ``PartitionSpec`` whose layout equals the one XLA chose
for an output.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc
from jaxlib.mlir import passmanager

from jaxkit import avals, core, dtypes
from jaxkit._config import config
from jaxkit.runtime import compile_cache, multi_device, pjrt
from jaxkit.runtime.mesh import (  # noqa: F401  (the meshes live there; named here too)
    AbstractDevice, AbstractMesh, AxisType, Mesh, _abstract_mesh_stack, _mesh_stack,
    current_abstract_mesh, current_mesh, empty_abstract_mesh, make_mesh)
from jaxkit.runtime.partition_spec import PartitionSpec

SingleDeviceSharding = pjrt.Sharding


class DuplicateSpecError(Exception):
    """A mesh axis is used by more than one dimension of a ``PartitionSpec``."""


class IndivisibleError(ValueError):
    """An array dimension is not divisible by the number of pieces it is split into."""


P = PartitionSpec


# --------------------------------------------------------------------------------------------
# NamedSharding
# --------------------------------------------------------------------------------------------


class UnspecifiedValue:
    """No sharding given: what a ``jit`` equation's ``in_shardings``/``out_shardings`` hold
    for an input or output whose layout the program chooses (JAX's ``UNSPECIFIED``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UnspecifiedValue"

    def __reduce__(self):
        return "UNSPECIFIED"


UNSPECIFIED = UnspecifiedValue()


class GlobalSharding(_jax.GSPMDSharding):
    """The label of a global device buffer: jaxlib's C++ sharding over a device list (in one
    memory space of its devices), with the two members jax normally adds."""

    memory_kind = property(lambda self: self._memory_kind)

    def _to_xla_hlo_sharding(self, ndim):
        return self._hlo_sharding


class GSPMDSharding(GlobalSharding):
    """A layout as XLA states it (an ``HloSharding`` over a device list), printed as JAX
    prints one: what JAX reports where no sharding a user gave names it (a parameter whose
    layout XLA chose; what ``custom_partitioning`` callbacks see undecoded)."""

    @staticmethod
    def on(devices: Sequence, hlo: xc.HloSharding, named: NamedSharding | None = None
           ) -> GSPMDSharding:
        """``hlo`` over ``devices``; ``named``: the same layout as a ``NamedSharding``,
        which ``device_put`` to this sharding lays a value out by."""
        s = GSPMDSharding(multi_device.device_list(devices), hlo, memory_kind="device")
        s.named = named
        return s

    def __repr__(self) -> str:
        mem = "" if self._memory_kind is None else f", memory_kind={self._memory_kind}"
        return f"GSPMDSharding({self._hlo_sharding!r}{mem})"


_global_shardings: dict[tuple, GlobalSharding] = {}


class NamedSharding:
    """An array laid out over ``mesh`` as ``spec`` says."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec = PartitionSpec(), *,
                 memory_kind: str | None = None):
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"NamedSharding expects a Mesh, got {type(mesh).__name__}")
        if not isinstance(spec, PartitionSpec):
            if isinstance(spec, (tuple, list)) or spec is None:
                spec = PartitionSpec(*(spec or ()))
            else:
                raise TypeError(f"NamedSharding expects a PartitionSpec, got {spec!r}")
        if isinstance(mesh, Mesh):
            pjrt.check_memory_kind(mesh._flat[:1], memory_kind)
        self.mesh = mesh
        self.spec = spec
        seen: set[str] = set()
        for axes in spec._normalized(0):
            for a in axes:
                if a not in mesh.axis_names:
                    raise ValueError(f"Resource axis: {a} of {spec} is not found in mesh: "
                                     f"{mesh.axis_names}.")
                if a in seen:
                    raise DuplicateSpecError(
                        "A single NamedSharding spec specification can map every mesh axis "
                        f"to at most one positional dimension, but {spec} has duplicate "
                        f"entries for `{a}`")
                seen.add(a)
        _check_unreduced_axes(mesh, spec)
        # As JAX's: None means the devices' default memory ("device"); over an abstract mesh
        # (a type's sharding) it stays None.
        if memory_kind is None and isinstance(mesh, Mesh):
            memory_kind = mesh._flat[0].default_memory().kind
        self._memory_kind = memory_kind

    @property
    def memory_kind(self) -> str | None:
        """The memory space of the devices that holds the array: "device", "pinned_host" or
        "unpinned_host"."""
        return self._memory_kind

    def _devices(self, what: str) -> tuple:
        if isinstance(self.mesh, AbstractMesh):
            raise ValueError(f"{what} is not implemented for `jax.sharding.AbstractMesh`.")
        return self.mesh._flat

    # ---- what JAX's Sharding interface offers ----
    @property
    def device_set(self) -> set:
        return set(self._devices("device_set"))

    @property
    def num_devices(self) -> int:
        return len(self._devices("num_devices"))

    @property
    def addressable_devices(self) -> set:
        self._devices("addressable_devices")
        return set(self.mesh.local_devices)

    @property
    def is_fully_addressable(self) -> bool:
        return not self.mesh.is_multi_process

    @property
    def has_addressable_devices(self) -> bool:
        """Whether this process holds a part of the array."""
        return bool(self.mesh.local_devices)

    @functools.cached_property
    def replicated_axes(self) -> frozenset:
        """The mesh axes the spec does not split (nor holds unreduced or reduced)."""
        used = {a for axes in self.spec._normalized(0) for a in axes}
        return frozenset(self.mesh.axis_names) - used - set(self.spec.unreduced) \
            - set(self.spec.reduced)

    def check_compatible_aval(self, aval_shape: Sequence[int]) -> None:
        """Raise JAX's ValueError unless a value of shape ``aval_shape`` has the rank the spec
        needs."""
        if len(aval_shape) < len(self.spec):
            scalar = " For scalars the PartitionSpec should be P()" if not aval_shape else ""
            raise ValueError(f"Sharding {self!r} is only valid for values of rank at least "
                             f"{len(self.spec)}, but was applied to a value of rank "
                             f"{len(aval_shape)}.{scalar}")

    @property
    def is_fully_replicated(self) -> bool:
        if self.spec.unreduced:  # each device holds a summand, not the value
            return False
        sizes = self.mesh.shape
        return all(sizes[a] == 1 for axes in self.spec._normalized(0) for a in axes)

    @property
    def _device_assignment(self) -> tuple:
        return self.mesh._flat

    @property
    def _addressable_device_assignment(self) -> tuple:
        """This process's devices, in the mesh's order (JAX's private name; Orbax reads it
        when it restores an array)."""
        if self.is_fully_addressable:
            return self.mesh._flat
        local = set(self.mesh.local_devices)
        return tuple(d for d in self.mesh._flat if d in local)

    def with_memory_kind(self, kind: str) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    def update(self, **kw) -> NamedSharding:
        return NamedSharding(kw.get("mesh", self.mesh), kw.get("spec", self.spec),
                             memory_kind=kw.get("memory_kind", self.memory_kind))

    def _tiling(self, ndim: int) -> list[int]:
        sizes = self.mesh.shape
        return [math.prod(sizes[a] for a in axes) for axes in self.spec._normalized(ndim)]

    def check_shape(self, shape: Sequence[int]) -> None:
        """Raise unless ``shape`` can be laid out this way (rank and divisibility)."""
        self.check_compatible_aval(shape)
        tiling = self._tiling(len(shape))
        for d, (n, t) in enumerate(zip(shape, tiling)):
            if n % t:
                raise IndivisibleError(
                    f"Sharding {self!r} implies that array axis {d} is partitioned {t} times, "
                    f"but the dimension size is {n} (full shape: {tuple(shape)}, "
                    f"per-dimension tiling factors: {tiling} should evenly divide the shape)")

    def shard_shape(self, global_shape: Sequence[int]) -> tuple[int, ...]:
        self.check_shape(global_shape)
        return tuple(n // t for n, t in zip(global_shape, self._tiling(len(global_shape))))

    def devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        """For every device, the slices of the global array it holds."""
        if self.spec.unreduced:  # JAX's error: no device holds a slice of the value
            raise NotImplementedError("device_indices_map doesn't work with unreduced. Please "
                                      "file a bug at https://github.com/jax-ml/jax/issues")
        shape = tuple(global_shape)
        self.check_shape(shape)
        norm = self.spec._normalized(len(shape))
        names = self.mesh.axis_names
        sizes = self.mesh.shape
        out = {}
        for pos, device in zip(np.ndindex(*self.mesh.axis_sizes), self.mesh._flat):
            coord = dict(zip(names, pos))
            index = []
            for n, axes in zip(shape, norm):
                if math.prod(sizes[a] for a in axes) == 1:  # whole (JAX's slice(None))
                    index.append(slice(None))
                    continue
                k = 0
                for a in axes:  # the first axis is the major one
                    k = k * sizes[a] + coord[a]
                size = n // math.prod(sizes[a] for a in axes)
                index.append(slice(k * size, (k + 1) * size))
            out[device] = tuple(index)
        return out

    def addressable_devices_indices_map(self, global_shape: Sequence[int]) -> dict:
        local = set(self.mesh.local_devices)
        return {d: i for d, i in self.devices_indices_map(global_shape).items() if d in local}

    # ---- what XLA needs ----
    def _to_xla_hlo_sharding(self, ndim: int) -> xc.HloSharding:
        return hlo_sharding(self.mesh, self.spec, ndim)

    def runtime_sharding(self, ndim: int) -> GlobalSharding:
        """The C++ sharding that labels this layout's rank-``ndim`` device buffers (one object
        per layout: jaxlib compares them by identity)."""
        hlo = self._to_xla_hlo_sharding(ndim)
        key = (self.mesh._flat, repr(hlo), self.memory_kind)
        shd = _global_shardings.get(key)
        if shd is None:
            shd = _global_shardings[key] = GlobalSharding(
                multi_device.device_list(self.mesh._flat), hlo, memory_kind=self.memory_kind)
        return shd

    def sdy_attr(self, ndim: int, mesh_name: str = "mesh",
                 modify_wrt_axis_types: bool = False) -> str:
        """The Shardy attribute text of this layout for a rank-``ndim`` value. With
        ``modify_wrt_axis_types`` (a type's layout, as JAX lowers one) over a mesh with Auto
        axes, every dimension is left open to them (``{"y", ?}``) and the Explicit axes the
        spec does not name are kept replicated."""
        types = self.mesh.axis_types
        is_open = modify_wrt_axis_types and AxisType.Auto in types
        dims = ", ".join("{" + ", ".join([f'"{a}"' for a in axes] + ["?"] * is_open) + "}"
                         for axes in self.spec._normalized(ndim))
        replicated = ""
        if is_open:
            named = {a for axes in self.spec._normalized(0) for a in axes}
            kept = [n for n, t in zip(self.mesh.axis_names, types)
                    if t is AxisType.Explicit and n not in named and
                    n not in self.spec.unreduced and n not in self.spec.reduced]
            if kept:
                replicated = ", replicated={" + ", ".join(f'"{a}"' for a in kept) + "}"
        unreduced = ""
        if self.spec.unreduced:  # in mesh order, as Shardy wants them
            unreduced = ", unreduced={" + ", ".join(
                f'"{a}"' for a in self.mesh.axis_names if a in self.spec.unreduced) + "}"
        return f"#sdy.sharding<@{mesh_name}, [{dims}]{replicated}{unreduced}>"

    def is_equivalent_to(self, other: Any, ndim: int) -> bool:
        """Whether ``other`` places the same pieces of a rank-``ndim`` array on the same
        devices (over two abstract meshes: the same pieces, devices unknown)."""
        both_abstract = isinstance(self.mesh, AbstractMesh) and \
            isinstance(getattr(other, "mesh", None), AbstractMesh)
        return shardings_equivalent(self, other, ndim, check_devices=not both_abstract)

    def __eq__(self, other) -> bool:
        if not isinstance(other, NamedSharding):
            return NotImplemented
        if self.mesh != other.mesh:
            return False
        n = max(len(self.spec), len(other.spec))
        return (self.spec._normalized(n) == other.spec._normalized(n)
                and self.spec.unreduced == other.spec.unreduced
                and self.spec.reduced == other.spec.reduced
                and self.memory_kind == other.memory_kind)

    def __hash__(self) -> int:
        return hash((self.mesh, tuple(a for a in self.spec._normalized(0)),
                     self.spec.unreduced, self.spec.reduced, self.memory_kind))

    def __repr__(self) -> str:
        if self.memory_kind is None:  # a type's sharding: in no memory yet
            return f"NamedSharding(mesh={self.mesh}, spec={self.spec})"
        return (f"NamedSharding(mesh={self.mesh}, spec={self.spec}, "
                f"memory_kind={self.memory_kind})")


def _device_list(s: Any) -> tuple:
    """The devices of a sharding, in its device assignment's order."""
    if isinstance(s, NamedSharding):
        return s.mesh._flat
    if isinstance(s, pjrt.Sharding):
        return (s._device,)
    return tuple(s._devices)


def shardings_equivalent(s1: Any, s2: Any, ndim: int, check_devices: bool = True) -> bool:
    """JAX's ``Sharding.is_equivalent_to``: the same tiling of a rank-``ndim`` array (any two
    replicated ones are the same), in the same memory, over the same device list."""
    h1, h2 = s1._to_xla_hlo_sharding(ndim), s2._to_xla_hlo_sharding(ndim)
    same = h1 == h2 or (h1.is_replicated() and h2.is_replicated())
    # None: a sharding over no concrete devices, or one of jaxlib's that names no memory
    same = same and (s1.memory_kind or "device") == (s2.memory_kind or "device")
    return same and (not check_devices or _device_list(s1) == _device_list(s2))


def _is_equivalent_to(self: Any, other: Any, ndim: int) -> bool:
    """Whether ``other`` places the same pieces of a rank-``ndim`` array on the same
    devices."""
    return shardings_equivalent(self, other, ndim)


# The single-device and per-axis shardings are jaxlib classes subclassed in pjrt and
# multi_device, below NamedSharding; the comparison that spans all three lives here.
pjrt.Sharding.is_equivalent_to = _is_equivalent_to
multi_device.AxisSharding.is_equivalent_to = _is_equivalent_to


def _check_unreduced_axes(mesh: Mesh | AbstractMesh, spec: PartitionSpec) -> None:
    """JAX's checks (and words): unreduced and reduced axes are Explicit axes of the mesh."""
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    for name, axes in (("Unreduced", spec.unreduced), ("Reduced", spec.reduced)):
        for a in axes:
            if a not in kinds:
                raise ValueError(f"{name} axes {a} is not found in mesh.axis_names="
                                 f"{mesh.axis_names}. Got pspec={spec}")
            if kinds[a] is not AxisType.Explicit:
                raise ValueError(f"{name} axes can only refer to mesh axes that is of type "
                                 f"`Explicit`. Got {name.lower()} axes: {axes} and mesh: "
                                 f"{mesh}")


def type_sharding(aval: core.ShapedArray) -> NamedSharding:
    """The sharding in a type (``jax.typeof(x).sharding``): every dimension replicated over
    the empty abstract mesh, as JAX gives unsharded values."""
    return NamedSharding(empty_abstract_mesh, PartitionSpec(*[None] * aval.ndim))


avals.aval_sharding_rule = type_sharding


def _type_entry(p: Any) -> Any:
    """One spec entry as a type keeps it: None, an axis name, or a tuple of two or more."""
    if p is None or p is PartitionSpec.UNCONSTRAINED or p == ():
        return None
    if isinstance(p, tuple) and len(p) == 1:
        return p[0]
    return p


def typed_sharding(mesh: Mesh | AbstractMesh, spec: Sequence,
                   unreduced: frozenset = frozenset(),
                   reduced: frozenset = frozenset()) -> NamedSharding | None:
    """The sharding a type carries for ``spec`` (one entry per dimension), ``unreduced`` and
    ``reduced`` axes over ``mesh``: its Explicit axes only, over the abstract mesh; None when
    that leaves no axis."""
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    if config.jax_remove_size_one_mesh_axis_from_type:
        kinds = {a: t for a, t, n in zip(mesh.axis_names, mesh.axis_types, mesh.axis_sizes)
                 if n != 1}
    out = []
    for p in spec:
        axes = () if _type_entry(p) is None else (p,) if isinstance(p, str) else tuple(p)
        out.append(_type_entry(tuple(a for a in axes if kinds.get(a) is AxisType.Explicit)))
    unreduced = frozenset(a for a in unreduced if kinds.get(a) is AxisType.Explicit)
    reduced = frozenset(a for a in reduced if kinds.get(a) is AxisType.Explicit)
    if all(p is None for p in out) and not unreduced and not reduced:
        return None
    return NamedSharding(mesh.abstract_mesh, PartitionSpec(*out, unreduced=unreduced,
                                                           reduced=reduced))


_typed_avals: dict[tuple, core.ShapedArray] = {}


def physical_sharding(sharding: Any, aval: core.ShapedArray) -> Any:
    """The layout of the data of keys of type ``aval`` laid out as ``sharding``: as JAX's,
    a ``None`` added for the data's word axis (``P('x')`` keys: ``P('x', None)`` data;
    ``P()``: ``P(None,)``). Any other sharding, or value, is its own."""
    if type(sharding) is not NamedSharding or not dtypes.is_extended(aval.dtype):
        return sharding
    spec = sharding.spec
    return NamedSharding(sharding.mesh, PartitionSpec(
        *spec, *[None] * len(aval.dtype.physical_shape), unreduced=spec.unreduced,
        reduced=spec.reduced), memory_kind=sharding.memory_kind)


def typed_aval(aval: core.ShapedArray, sharding: Any) -> core.ShapedArray:
    """``aval`` typed with the Explicit axes of the layout ``sharding`` (unchanged for any
    other sharding, or when its mesh has no Explicit axis in use), in the memory space the
    sharding's memory kind names."""
    space = core.mem_kind_to_space(getattr(sharding, "memory_kind", None))
    if aval.memory_space is not space and type(aval) is core.ShapedArray:
        aval = aval.update(memory_space=space)
    if type(sharding) is not NamedSharding or AxisType.Explicit not in sharding.mesh.axis_types:
        return aval
    key = (aval, sharding, config.jax_remove_size_one_mesh_axis_from_type)
    out = _typed_avals.get(key)
    if out is None:
        ndim = len(aval.shape)
        spec = (sharding.spec.partitions + (None,) * ndim)[:ndim]
        out = _typed_avals[key] = core.ShapedArray(
            aval.shape, aval.dtype, aval.weak_type,
            typed_sharding(sharding.mesh, spec, sharding.spec.unreduced,
                           sharding.spec.reduced), memory_space=aval.memory_space)
    return out


def hlo_sharding(mesh: Mesh, spec: PartitionSpec, ndim: int) -> xc.HloSharding:
    """The tile assignment of ``spec`` on ``mesh``: devices are numbered by their position in
    ``mesh.devices.flat`` (the executable's device assignment)."""
    norm = spec._normalized(ndim)
    names = list(mesh.axis_names)
    sizes = mesh.shape
    used = [a for axes in norm for a in axes]
    # Unreduced axes (size > 1) form a subgroup of their own; subgroups go in the order of
    # their OpSharding type's value (replicated first), the layout XLA gives back.
    unreduced = [a for a in names if a in spec.unreduced and sizes[a] > 1]
    unused = [a for a in names if a not in used and a not in unreduced]
    tiles = [math.prod(sizes[a] for a in axes) for axes in norm]
    replicas = math.prod(sizes[a] for a in unused)
    if math.prod(tiles) == 1 and not unreduced:
        return xc.HloSharding.replicate()
    ids = np.arange(mesh.size).reshape(mesh.axis_sizes)
    op = xc.OpSharding()
    op.type = xc.OpSharding.Type.OTHER
    op.tile_assignment_dimensions = tiles
    if not unreduced:
        order = ids.transpose([names.index(a) for a in used + unused])
        op.tile_assignment_dimensions = tiles + ([replicas] if replicas > 1 else [])
        op.replicate_on_last_tile_dim = replicas > 1
    else:
        groups = [(xc.OpSharding.Type.REPLICATED, unused), (xc.OpSharding.Type.UNREDUCED,
                                                             unreduced)]
        groups = sorted((g for g in groups if math.prod(sizes[a] for a in g[1]) > 1),
                        key=lambda g: g[0].value)
        order = ids.transpose([names.index(a) for a in used + [a for _, g in groups
                                                               for a in g]])
        op.tile_assignment_dimensions = tiles + [math.prod(sizes[a] for a in g)
                                                 for _, g in groups]
        op.last_tile_dims = [t for t, _ in groups]
    op.tile_assignment_devices = [int(i) for i in order.flat]
    return xc.HloSharding.from_proto(op)


def named_from_hlo(mesh: Mesh, hlo: xc.HloSharding, ndim: int) -> NamedSharding | None:
    """The ``NamedSharding`` on ``mesh`` whose layout is ``hlo`` (the simplest spec: fewest
    split dimensions, mesh order within a dimension), or None when there is none."""
    if hlo.is_replicated():
        return NamedSharding(mesh, PartitionSpec())
    names = mesh.axis_names
    for placement in itertools.product(range(-1, ndim), repeat=len(names)):
        dims: list[list[str]] = [[] for _ in range(ndim)]
        for axis, d in zip(names, placement):
            if d >= 0:
                dims[d].append(axis)
        for orders in itertools.product(*[itertools.permutations(d) for d in dims]):
            parts = [None if not o else o[0] if len(o) == 1 else tuple(o) for o in orders]
            while parts and parts[-1] is None:
                parts.pop()
            spec = PartitionSpec(*parts)
            if hlo_sharding(mesh, spec, ndim) == hlo:
                return NamedSharding(mesh, spec)
    return None


def put_global(value: np.ndarray, aval, sharding: NamedSharding) -> Any:
    """One global device array of ``aval`` laid out as ``sharding`` from the host ``value``
    (each addressable device gets its slice).

    A layout fully replicated or split with no replica is put in one ``batched_device_put``
    call (an eager op's scalar operand under ``set_mesh`` is put so on every call); other
    shards are put one by one and assembled: jaxlib's ``batched_device_put`` fails
    (``bad_function_call``) on partially replicated layouts unless jax is imported."""
    indices = sharding.addressable_devices_indices_map(value.shape)
    if sharding.memory_kind in (None, "device") and value.dtype.kind != "V":
        replicated = all(t == 1 for t in sharding._tiling(value.ndim))
        distinct = {tuple((i.start, i.stop) for i in index) for index in indices.values()}
        if replicated or len(distinct) == len(indices) == sharding.mesh.size:
            pieces = [value] * len(indices) if replicated else \
                [np.ascontiguousarray(value[index]) for index in indices.values()]
            return multi_device.put_pieces(pieces, aval, sharding.runtime_sharding(value.ndim),
                                           list(indices))
    shard_aval = aval.update(shape=sharding.shard_shape(value.shape))
    shards = [pjrt.put(np.ascontiguousarray(value[index]), shard_aval, device,
                       memory_kind=sharding.memory_kind)
              for device, index in indices.items()]
    return multi_device.ArrayImpl(aval, sharding.runtime_sharding(value.ndim), shards, True,
                                  True)


# --------------------------------------------------------------------------------------------
# Programs partitioned over a mesh
# --------------------------------------------------------------------------------------------


def compile_partitioned(module: Any, devices: Sequence, open_params: Sequence[bool] = ()
                        ) -> tuple[Any, str]:
    """Compile a Shardy-annotated module as ``len(devices)`` SPMD partitions (partition ``i``
    on ``devices[i]``); XLA's partitioner splits it, choosing the layouts of the parameters
    marked in ``open_params`` (as of the results with none). Returns the executable and
    where it came from (compiled, memory, persistent cache)."""
    backend = multi_device.backend_of_devices(devices)
    opts = _jax.CompileOptions()
    opts.num_replicas = 1
    opts.num_partitions = len(devices)
    opts.device_assignment = _jax.DeviceAssignment.create(
        np.array([[d.id for d in devices]], dtype=np.int32))
    build = opts.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    if any(open_params):
        build.allow_spmd_sharding_propagation_to_parameters = list(open_params)
    devs = multi_device.device_list(devices)
    return pjrt.compile_with_host_callbacks(backend.client, module, devs, opts) or \
        compile_cache.compile_and_load(backend.client, module, devs, devices, opts)


def lift_inlined_meshes(module: Any) -> None:
    """Run Shardy's ``sdy-lift-inlined-meshes`` pass on a lowered ``module``, as JAX does at
    the end of every lowering with Shardy: each ``sdy.mesh`` symbol gets its
    ``stablehlo.mesh`` attribute (the axes as StableHLO names them), as JAX prints it."""
    with module.context:
        passmanager.PassManager.parse("builtin.module(sdy-lift-inlined-meshes)").run(
            module.operation)


def parameter_hlo_shardings(executable: Any, num_params: int) -> list[xc.HloSharding]:
    """The layouts of a partitioned executable's parameters (XLA's choice where the module
    left one open; replicated when it was partitioned over one device)."""
    protos = executable.get_parameter_shardings()
    if protos is None:
        return [xc.HloSharding.replicate()] * num_params
    return [xc.HloSharding.from_proto(op) for op in protos]


def output_hlo_shardings(executable: Any, num_outputs: int) -> list[xc.HloSharding]:
    """The layouts XLA chose for a partitioned executable's outputs (replicated when it was
    partitioned over one device: XLA then reports no shardings)."""
    protos = executable.get_output_shardings()
    if protos is None:
        return [xc.HloSharding.replicate()] * num_outputs
    return [xc.HloSharding.from_proto(op) for op in protos]
