"""``jax.sharding`` (Optax and Flax name its classes in annotations and in their sharding
helpers): jaxkit places every array on one device. ``Sharding`` and ``SingleDeviceSharding``
are jaxkit's own; ``PartitionSpec`` is the plain description it is in JAX; meshes and named
shardings, which need SPMD partitioning that jaxkit does not do, raise ``NotImplementedError``
when made."""
from __future__ import annotations

import enum

from jaxkit.runtime.pjrt import Sharding as SingleDeviceSharding

__all__ = ["AbstractMesh", "AxisType", "Mesh", "NamedSharding", "PartitionSpec", "Sharding",
           "SingleDeviceSharding", "get_abstract_mesh"]

Sharding = SingleDeviceSharding


class PartitionSpec(tuple):
    """How each array axis is split over mesh axes (None: not split)."""

    def __new__(cls, *partitions):
        return super().__new__(cls, partitions)

    def __repr__(self):
        return f"PartitionSpec{tuple.__repr__(self)}"


P = PartitionSpec


class AxisType(enum.Enum):
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()


def _no_spmd(what: str):
    raise NotImplementedError(f"jax.sharding.{what}: jaxkit runs each computation on one "
                              "device and has no SPMD partitioner (use pmap for data "
                              "parallelism)")


class Mesh:
    def __init__(self, *args, **kwargs):
        _no_spmd("Mesh")


class AbstractMesh:
    def __init__(self, *args, **kwargs):
        _no_spmd("AbstractMesh")

    empty = True


class NamedSharding:
    def __init__(self, *args, **kwargs):
        _no_spmd("NamedSharding")


class PmapSharding:
    def __init__(self, *args, **kwargs):
        _no_spmd("PmapSharding")


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
    """The mesh in context: always the empty one (jaxkit has no meshes)."""
    return _empty_mesh
