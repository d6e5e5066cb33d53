"""``jax.sharding`` as libraries import it (Optax and Flax name its classes in annotations and
in their sharding helpers): jaxkit's meshes and shardings, plus the abstract-mesh queries,
which answer "no mesh axes in the types" (jaxkit partitions with XLA's propagation and keeps
no shardings in avals)."""
from __future__ import annotations

from jaxkit.runtime.sharding import AbstractMesh, empty_abstract_mesh
from jaxkit.sharding import (AxisType, Mesh, NamedSharding, P, PartitionSpec, Sharding,
                             SingleDeviceSharding, get_mesh, make_mesh, set_mesh, use_mesh)

__all__ = ["AbstractMesh", "AxisType", "Mesh", "NamedSharding", "P", "PartitionSpec",
           "PmapSharding", "Sharding", "SingleDeviceSharding", "get_abstract_mesh",
           "get_mesh", "make_mesh", "set_mesh", "use_mesh"]


class PmapSharding:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("jax.sharding.PmapSharding: jaxkit's pmap results carry "
                                  "their own sharding; use NamedSharding for new code")


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh of the types: always the empty one (jaxkit's avals carry none)."""
    return empty_abstract_mesh
