"""``jax.sharding``: meshes, partition specs and the shardings that lay arrays out over them.

``jaxkit.device_put(x, NamedSharding(mesh, P('x')))`` splits an array over a mesh; ``jit``
partitions any call on such arrays (or with ``in_shardings``/``out_shardings``) with XLA's
SPMD partitioner, and ``jaxkit.lax.with_sharding_constraint`` pins layouts inside.
"""
from __future__ import annotations

from jaxkit import lax as _lax
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

    def __enter__(self) -> Mesh:
        return self._mesh

    def __exit__(self, *exc) -> None:
        stack = _runtime._mesh_stack
        if stack and stack[-1] is self._mesh:
            stack.pop()


use_mesh = set_mesh


def get_mesh() -> Mesh | None:
    """The mesh set by ``set_mesh`` or ``with mesh:`` (None when there is none)."""
    return _runtime.current_mesh()


class use_abstract_mesh:  # noqa: N801  (a context manager, as in JAX)
    """Make ``mesh`` (an ``AbstractMesh``) the abstract mesh ``get_abstract_mesh`` returns
    within the block: what tracing sees when no concrete mesh is at hand."""

    def __init__(self, mesh: AbstractMesh):
        if not isinstance(mesh, AbstractMesh):
            raise ValueError("Expected mesh of type `jax.sharding.AbstractMesh`. Got type: "
                             f"{type(mesh)}")
        self._mesh = mesh

    def __enter__(self) -> AbstractMesh:
        _runtime._abstract_mesh_stack.append(self._mesh)
        return self._mesh

    def __exit__(self, *exc) -> None:
        _runtime._abstract_mesh_stack.pop()


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh in context: from ``use_abstract_mesh``, else that of the mesh set
    with ``set_mesh``/``with mesh:``, else the empty one."""
    return _runtime.current_abstract_mesh()


def make_single_device_sharding(device) -> SingleDeviceSharding:
    """The sharding of an array that lives whole on ``device``."""
    return _pjrt.backend_of(device).shardings[device]


def reshard(xs, out_shardings):
    """``xs`` (a pytree) laid out as ``out_shardings`` (a sharding or ``PartitionSpec`` on the
    mesh in context, one for all leaves or a pytree prefix): inside ``jit`` a constraint on the
    layout, outside it a copy in the new layout."""
    return _lax.with_sharding_constraint(xs, out_shardings)


__all__ = ["AbstractDevice", "AbstractMesh", "AxisType", "DuplicateSpecError",
           "IndivisibleError", "Mesh", "NamedSharding", "P", "PartitionSpec", "Sharding",
           "SingleDeviceSharding", "get_abstract_mesh", "get_mesh", "make_mesh",
           "make_single_device_sharding", "reshard", "set_mesh", "use_abstract_mesh",
           "use_mesh"]
