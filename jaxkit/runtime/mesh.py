"""Meshes: n-d grids of devices with a name and a type per axis (``jax.sharding.Mesh``),
their device-free ``AbstractMesh`` (what array types carry), and the meshes in context (``with
mesh:``, ``use_abstract_mesh``). Shardings over them are ``jaxkit.runtime.sharding``'s."""
from __future__ import annotations

import collections
import contextlib
import enum
import math
from collections.abc import Sequence

import numpy as np

from jaxkit import avals
from jaxkit.runtime import multi_device, pjrt

# --------------------------------------------------------------------------------------------
# Meshes
# --------------------------------------------------------------------------------------------


class AxisType(enum.Enum):
    """How the axes of a mesh take part in typing (jaxkit lets XLA partition all of them as
    ``Auto`` axes; the names are JAX's)."""

    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name


class Mesh(contextlib.ContextDecorator):
    """An n-d array of devices with a name per axis; a context manager that makes it the
    mesh bare ``PartitionSpec``s refer to (and, as JAX's, a decorator: ``@mesh`` runs the
    function inside ``with mesh:``)."""

    def __init__(self, devices, axis_names, axis_types=None):
        devices = np.asarray(devices, dtype=object)
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        if devices.ndim != len(axis_names):
            raise ValueError(f"Mesh requires the ndim of its first argument (`devices`) to "
                             f"equal the length of its second argument (`axis_names`), but got "
                             f"devices.ndim == {devices.ndim} and len(axis_names) == "
                             f"{len(axis_names)}.")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh axis names must be unique, got {axis_names}")
        # As JAX's: no axes over the one ``None`` (``Mesh(np.empty((), object), ())``) is the
        # empty mesh, of size 0 (a ``jit`` equation's ``ctx_mesh`` when none is in context).
        flat = [] if not axis_names and devices.item() is None else list(devices.flat)
        if len(set(flat)) != len(flat):
            raise ValueError("Mesh devices must be distinct")
        if axis_types is None:
            axis_types = (AxisType.Auto,) * len(axis_names)
        elif isinstance(axis_types, AxisType):
            axis_types = (axis_types,) * len(axis_names)
        axis_types = tuple(axis_types)
        if len(axis_types) != len(axis_names):
            raise ValueError(f"Mesh got {len(axis_types)} axis_types for {len(axis_names)} "
                             "axes")
        self.devices = devices
        self.axis_names = axis_names
        self.axis_types = axis_types
        self._flat = tuple(flat)
        _note_axis_types(axis_types)

    @property
    def shape(self) -> collections.OrderedDict:
        return collections.OrderedDict(zip(self.axis_names, self.devices.shape))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return len(self._flat)

    @property
    def empty(self) -> bool:
        return not self._flat

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def local_devices(self) -> list:
        return multi_device.addressable_devices(self._flat)

    @property
    def local_mesh(self) -> Mesh:
        """The sub-mesh of this process's devices (they must form a contiguous block of the
        mesh: host-local data is laid out over it). Computed once per mesh."""
        try:
            return self._local_mesh
        except AttributeError:
            self._local_mesh = local = self._find_local_mesh()
        return local

    def _find_local_mesh(self) -> Mesh:
        mine = np.vectorize(lambda d: d.process_index == _process_of(self._flat),
                            otypes=[bool])(self.devices)
        block = []
        for axis in range(self.devices.ndim):
            others = tuple(a for a in range(self.devices.ndim) if a != axis)
            hit = np.flatnonzero(mine.any(axis=others))
            block.append(slice(int(hit.min()), int(hit.max()) + 1))
        if not mine[tuple(block)].all():
            raise ValueError("When passing host local inputs to pjit, devices connected to a "
                             "single host must form a contiguous subcube of the global device "
                             "mesh")
        return Mesh(self.devices[tuple(block)], self.axis_names)

    are_all_axes_auto = property(lambda self: _all_of_type(self.axis_types, AxisType.Auto))
    are_all_axes_explicit = property(
        lambda self: _all_of_type(self.axis_types, AxisType.Explicit))
    are_all_axes_manual = property(lambda self: _all_of_type(self.axis_types, AxisType.Manual))
    # The names of the axes of each type, in the mesh's order.
    auto_axes = property(lambda self: _axes_of_type(self, AxisType.Auto))
    explicit_axes = property(lambda self: _axes_of_type(self, AxisType.Explicit))
    manual_axes = property(lambda self: _axes_of_type(self, AxisType.Manual))

    @property
    def is_scalar(self) -> bool:
        """Whether the mesh is one device with no axes."""
        return self.size == 1 and not self.axis_names

    def update(self, devices=None, axis_names=None, axis_types=None) -> Mesh:
        """This mesh with the given parts replaced."""
        return Mesh(self.devices if devices is None else devices,
                    self.axis_names if axis_names is None else axis_names,
                    self.axis_types if axis_types is None else axis_types)

    @property
    def is_multi_process(self) -> bool:
        return len(self.local_devices) != len(self._flat)

    def __enter__(self) -> Mesh:
        _mesh_stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _mesh_stack.pop()

    def __eq__(self, other) -> bool:
        return (isinstance(other, Mesh) and self.axis_names == other.axis_names
                and self.devices.shape == other.devices.shape and self._flat == other._flat
                and self.axis_types == other.axis_types)

    def __hash__(self) -> int:
        return hash((self.axis_names, self.devices.shape, self._flat, self.axis_types))

    @property
    def abstract_mesh(self) -> AbstractMesh:
        """The mesh without its devices: axis names, sizes and types, and the devices' kind."""
        if self.empty:
            return empty_abstract_mesh
        first = self._flat[0]
        return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types,
                            abstract_device=AbstractDevice(first.device_kind, None,
                                                           first.platform))

    def _types_str(self) -> str:
        return "(" + ", ".join(t.name for t in self.axis_types) + \
            ("," if len(self.axis_types) == 1 else "") + ")"

    def __repr__(self) -> str:
        if self.empty:
            return "Mesh(axis_sizes=(), axis_names=())"
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, "
                f"axis_types={self._types_str()})")

    def __str__(self) -> str:
        if self.empty:
            return "Mesh()"
        axes = ", ".join(f"{n!r}: {s}" for n, s in self.shape_tuple)
        return f"Mesh({axes}, axis_types={self._types_str()})"


def _axes_of_type(mesh: Mesh | AbstractMesh, axis_type: AxisType) -> tuple:
    return tuple(n for n, t in zip(mesh.axis_names, mesh.axis_types) if t == axis_type)


def _all_of_type(axis_types: tuple, axis_type: AxisType) -> bool:
    """Whether a mesh has axes and all are of ``axis_type`` (a mesh with no axes is of no
    type, as in JAX: Flax's variable sharding tells Explicit from Auto meshes this way)."""
    return bool(axis_types) and all(t == axis_type for t in axis_types)


def _note_axis_types(axis_types: tuple) -> None:
    # Shape rules start looking for shardings in types once a mesh with Explicit axes exists
    # (``reshard`` onto one types its result).
    if AxisType.Explicit in axis_types:
        avals.explicit_shardings_seen = True


def _process_of(devices: Sequence) -> int:
    """This process's index in the backend that owns ``devices``."""
    return multi_device.backend_of_devices(devices).client.process_index()


class AbstractMesh:
    """A mesh without devices (axis names, sizes and types), as JAX's array types carry one.
    jaxkit's types carry no mesh axes (XLA propagates layouts), so the sharding of every type
    is on the empty abstract mesh, replicated (see ``type_sharding``)."""

    def __init__(self, axis_sizes: tuple = (), axis_names: tuple = (), axis_types=None, *,
                 abstract_device: AbstractDevice | None = None):
        axis_sizes, axis_names = tuple(axis_sizes), tuple(axis_names)
        if len(axis_sizes) != len(axis_names):
            raise ValueError(f"AbstractMesh got {len(axis_sizes)} axis sizes for "
                             f"{len(axis_names)} axis names")
        if axis_types is None:
            axis_types = (AxisType.Auto,) * len(axis_names)
        elif isinstance(axis_types, AxisType):
            axis_types = (axis_types,) * len(axis_names)
        self.axis_sizes = tuple(int(n) for n in axis_sizes)
        self.axis_names = axis_names
        self.axis_types = tuple(axis_types)
        _note_axis_types(self.axis_types)
        self.abstract_device = abstract_device

    shape = property(lambda self: collections.OrderedDict(zip(self.axis_names,
                                                              self.axis_sizes)))
    shape_tuple = property(lambda self: tuple(zip(self.axis_names, self.axis_sizes)))
    size = property(lambda self: math.prod(self.axis_sizes) if self.axis_sizes else 0)
    empty = property(lambda self: self.size == 0)
    abstract_mesh = property(lambda self: self)
    are_all_axes_auto = Mesh.are_all_axes_auto
    are_all_axes_explicit = Mesh.are_all_axes_explicit
    are_all_axes_manual = Mesh.are_all_axes_manual
    auto_axes, explicit_axes, manual_axes = Mesh.auto_axes, Mesh.explicit_axes, Mesh.manual_axes

    # What only a mesh of devices has.
    devices = property(lambda self: _no_devices("devices"))
    device_ids = property(lambda self: _no_devices("device_ids"))
    local_devices = property(lambda self: _no_devices("local_devices"))
    local_mesh = property(lambda self: _no_devices("local_mesh"))
    is_multi_process = property(lambda self: _no_devices("is_multi_process"))

    def __enter__(self):  # (a context of abstract axes is ``jax.sharding.use_abstract_mesh``)
        _no_devices("__enter__")

    def __exit__(self, *exc):
        _no_devices("__exit__")

    def update(self, axis_sizes=None, axis_names=None, axis_types=None,
               **kwargs) -> AbstractMesh:
        """This abstract mesh with the given parts replaced (``abstract_device=`` too)."""
        kwargs.setdefault("abstract_device", self.abstract_device)
        return AbstractMesh(self.axis_sizes if axis_sizes is None else axis_sizes,
                            self.axis_names if axis_names is None else axis_names,
                            self.axis_types if axis_types is None else axis_types, **kwargs)

    def update_axis_types(self, name_to_type: dict) -> AbstractMesh:
        """This abstract mesh with the types of the axes named in ``name_to_type`` changed."""
        return self.update(axis_types=tuple(name_to_type.get(n, t) for n, t in
                                            zip(self.axis_names, self.axis_types)))

    def __eq__(self, other) -> bool:
        return isinstance(other, AbstractMesh) and self.shape_tuple == other.shape_tuple \
            and self.axis_types == other.axis_types \
            and self.abstract_device == other.abstract_device

    def __hash__(self) -> int:
        return hash((self.shape_tuple, self.axis_types, self.abstract_device))

    def __repr__(self) -> str:
        axes = ", ".join(f"{n!r}: {s}" for n, s in self.shape_tuple) or "()"
        types = "(" + ", ".join(t.name for t in self.axis_types) + \
            ("," if len(self.axis_types) == 1 else "") + ")"
        d = self.abstract_device
        device = "" if d is None else (f", device_kind={d.device_kind}, "
                                       f"num_cores={d.num_cores}, platform={d.platform}")
        return f"AbstractMesh({axes}, axis_types={types}{device})"


def _no_devices(name: str):
    raise ValueError(f"AbstractMesh does not implement {name}")


class AbstractDevice:
    """What an abstract mesh knows of its devices: their kind, core count and platform."""

    __slots__ = ("device_kind", "num_cores", "platform")

    def __init__(self, device_kind: str, num_cores: int | None, platform: str):
        self.device_kind, self.num_cores, self.platform = device_kind, num_cores, platform

    def __eq__(self, other) -> bool:
        return isinstance(other, AbstractDevice) and (
            self.device_kind, self.num_cores, self.platform) == (
            other.device_kind, other.num_cores, other.platform)

    def __hash__(self) -> int:
        return hash((self.device_kind, self.num_cores, self.platform))

    def __repr__(self) -> str:
        return (f"AbstractDevice(device_kind={self.device_kind}, num_cores={self.num_cores}, "
                f"platform={self.platform})")


empty_abstract_mesh = AbstractMesh()
empty_concrete_mesh = Mesh(np.empty((), dtype=object), ())
_mesh_stack: list[Mesh] = []
_abstract_mesh_stack: list[AbstractMesh] = []


def current_abstract_mesh() -> AbstractMesh:
    """The innermost mesh entered with ``use_abstract_mesh``, else the abstract mesh of the
    concrete mesh in context, else the empty abstract mesh."""
    if _abstract_mesh_stack:
        return _abstract_mesh_stack[-1]
    return _mesh_stack[-1].abstract_mesh if _mesh_stack else empty_abstract_mesh


def current_mesh() -> Mesh | None:
    """The innermost mesh entered with ``with mesh:`` / ``set_mesh`` (None outside)."""
    return _mesh_stack[-1] if _mesh_stack else None


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], axis_types=None, *,
              devices=None) -> Mesh:
    """A mesh of the given shape over ``devices`` (default: every device of the default
    backend, in id order). JAX 0.10.2 makes ``Explicit`` axes by default; the type is kept
    for printing (jaxkit partitions every axis as XLA propagates it)."""
    axis_shapes, axis_names = tuple(axis_shapes), tuple(axis_names)
    if len(axis_shapes) != len(axis_names):
        raise ValueError(f"axis_shapes {axis_shapes} and axis_names {axis_names} must have "
                         "the same length")
    if devices is None:
        devices = pjrt.get_backend().devices
    devices = list(np.asarray(devices, dtype=object).flat)
    need = math.prod(axis_shapes)
    if need > len(devices):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of "
                         f"mesh_shape {axis_shapes}")
    devices = devices[:need]  # as JAX: a smaller mesh takes the first devices
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(axis_names)
    grid = np.empty(len(devices), dtype=object)
    grid[:] = devices
    return Mesh(grid.reshape(axis_shapes), axis_names, axis_types)
