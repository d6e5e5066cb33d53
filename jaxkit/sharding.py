"""``jax.sharding``: meshes, partition specs and the shardings that lay arrays out over them.

``jaxkit.device_put(x, NamedSharding(mesh, P('x')))`` splits an array over a mesh; ``jit``
partitions any call on such arrays (or with ``in_shardings``/``out_shardings``) with XLA's
SPMD partitioner, and ``jaxkit.lax.with_sharding_constraint`` pins layouts inside.
"""
from __future__ import annotations

from jaxkit.lax.sharding_axes import auto_axes, explicit_axes, reshard, use_abstract_mesh
from jaxkit.runtime import context_mesh as _context_mesh
from jaxkit.runtime import pjrt as _pjrt
from jaxkit.runtime import sharding as _runtime
from jaxkit.runtime.multi_device import AxisSharding as _AxisSharding
from jaxkit.runtime.sharding import (AbstractDevice, AbstractMesh, AxisType,
                                     DuplicateSpecError, IndivisibleError, Mesh, NamedSharding, P,
                                     PartitionSpec, SingleDeviceSharding, make_mesh)


class _ShardingMeta(type):
    def __instancecheck__(cls, x) -> bool:
        return isinstance(x, (NamedSharding, SingleDeviceSharding, _AxisSharding))


class Sharding(metaclass=_ShardingMeta):
    """What every sharding is an instance of: ``isinstance(x.sharding, Sharding)``."""


class set_mesh:  # noqa: N801  (a function in JAX; a class here so it is a context manager)
    """Make ``mesh`` the mesh that bare ``PartitionSpec``s refer to, for good or, used as
    ``with set_mesh(mesh):``, for the block."""

    def __init__(self, mesh: Mesh):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"set_mesh expects a Mesh, got {mesh!r}")
        self._mesh = mesh
        _runtime._mesh_stack.append(mesh)
        _context_mesh.enter(mesh)  # eager results are laid out over it

    def __enter__(self) -> Mesh:
        return self._mesh

    def __exit__(self, *exc) -> None:
        stack = _runtime._mesh_stack
        if stack and stack[-1] is self._mesh:
            stack.pop()
        _context_mesh.exit(self._mesh)


# Its object prints as JAX's does (``<jax._src.sharding_impls.set_mesh object at ...>``), as
# the last expression of a notebook cell that calls ``jax.set_mesh(mesh)``.
set_mesh.__module__ = "jax._src.sharding_impls"
use_mesh = set_mesh


def get_mesh() -> Mesh | None:
    """The mesh set by ``set_mesh`` or ``with mesh:`` (None when there is none)."""
    return _runtime.current_mesh()


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh in context: from ``use_abstract_mesh``, else that of the mesh set
    with ``set_mesh``/``with mesh:``, else the empty one."""
    return _runtime.current_abstract_mesh()


def make_single_device_sharding(device, *, memory_kind: str | None = None
                                ) -> SingleDeviceSharding:
    """The sharding of an array that lives whole on ``device``, in its memory space
    ``memory_kind`` (None: the default one; JAX's ValueError for a kind it cannot address)."""
    _pjrt.check_memory_kind((device,), memory_kind)
    return _pjrt.memory_sharding(device, memory_kind)


class ManualAxisType:
    """How a value inside a ``shard_map`` relates to its manual mesh axes: the axes it varies
    over, and those over which it is an unreduced or a reduced sum. Immutable and interned
    (equal ones are the same object), as JAX's. jaxkit's types do not carry one: its
    ``shard_map`` infers variation from the traced body instead (``check_vma``)."""

    __slots__ = ("varying", "unreduced", "reduced", "__weakref__")
    _interned: dict = {}

    def __new__(cls, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        if set(varying) & set(unreduced):
            raise ValueError("varying and unreduced cannot have common mesh axes. Got "
                             f"varying={varying} and unreduced={unreduced}")
        if set(varying) & set(reduced):
            raise ValueError("varying and reduced cannot have common mesh axes. Got "
                             f"varying={varying} and reduced={reduced}")
        key = (frozenset(varying), frozenset(unreduced), frozenset(reduced))
        self = cls._interned.get(key)
        if self is None:
            self = object.__new__(cls)
            for name, value in zip(cls.__slots__, key):
                object.__setattr__(self, name, value)
            self = cls._interned.setdefault(key, self)
        return self

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field '{name}'")

    def __getnewargs_ex__(self):
        return (), {"varying": self.varying, "unreduced": self.unreduced,
                    "reduced": self.reduced}

    def __getstate__(self):
        return None  # __new__ rebuilds (and interns) it from the fields above

    def __repr__(self) -> str:
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, "
                f"reduced={self.reduced})")

    def update(self, **kwargs) -> ManualAxisType:
        """The same with the fields given replaced."""
        fields = {"varying": self.varying, "unreduced": self.unreduced,
                  "reduced": self.reduced}
        return ManualAxisType(**{**fields, **kwargs})

    def to_ct_mat(self) -> ManualAxisType:
        """The type of the cotangent: unreduced and reduced swap."""
        return self.update(unreduced=self.reduced, reduced=self.unreduced)

    @property
    def empty(self) -> bool:
        return self is _empty_manual_axis_type

    @property
    def vur(self) -> frozenset:
        """Every axis the value varies over or is a partial sum over."""
        return self.varying | self.unreduced | self.reduced

    def invarying(self, mesh) -> frozenset:
        """The manual axes of ``mesh`` the value is the same over."""
        manual = {n for n, t in zip(mesh.axis_names, mesh.axis_types) if t is AxisType.Manual}
        return frozenset(manual) - self.vur


_empty_manual_axis_type = ManualAxisType()


__all__ = ["AbstractDevice", "AbstractMesh", "AxisType", "DuplicateSpecError",
           "IndivisibleError", "ManualAxisType", "Mesh", "NamedSharding", "P", "PartitionSpec",
           "Sharding", "SingleDeviceSharding", "auto_axes", "explicit_axes", "get_abstract_mesh",
           "get_mesh", "make_mesh", "make_single_device_sharding", "reshard", "set_mesh",
           "use_abstract_mesh", "use_mesh"]
