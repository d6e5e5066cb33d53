"""``jax.sharding`` as libraries import it (Optax and Flax name its classes in annotations and
in their sharding helpers): jaxkit's meshes and shardings, plus the abstract-mesh queries,
which answer "no mesh axes in the types" (jaxkit partitions with XLA's propagation and keeps
no shardings in avals)."""
from __future__ import annotations

from jaxkit.sharding import (AxisType, Mesh, NamedSharding, P, PartitionSpec, Sharding,
                             SingleDeviceSharding, get_mesh, make_mesh, set_mesh, use_mesh)

__all__ = ["AbstractMesh", "AxisType", "Mesh", "NamedSharding", "P", "PartitionSpec",
           "PmapSharding", "Sharding", "SingleDeviceSharding", "get_abstract_mesh",
           "get_mesh", "make_mesh", "set_mesh", "use_mesh"]


class AbstractMesh:
    """A mesh without devices, as JAX types carry it; jaxkit's avals carry none."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("jax.sharding.AbstractMesh: jaxkit keeps no shardings in "
                                  "array types (use Mesh and NamedSharding)")


class PmapSharding:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("jax.sharding.PmapSharding: jaxkit's pmap results carry "
                                  "their own sharding; use NamedSharding for new code")


class _EmptyMesh:
    """The abstract mesh outside any ``use_mesh``: no axes."""

    empty = True
    axis_names: tuple = ()
    shape: dict = {}
    shape_tuple: tuple = ()
    axis_types: tuple = ()

    def __bool__(self):
        return False


_empty_mesh = _EmptyMesh()


def get_abstract_mesh():
    """The abstract mesh of the types: always the empty one (jaxkit's avals carry none)."""
    return _empty_mesh
