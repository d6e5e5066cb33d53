"""``jax.extend.sharding``: XLA's sharding descriptions and their serialized protos.

``GSPMDSharding`` is jaxlib's sharding over a device list by an ``HloSharding`` (jaxkit's
global arrays carry a subclass of it); the functions convert between ``HloSharding``/
``OpSharding`` objects and the serialized ``OpSharding`` protos that custom calls and
partitioners exchange.
"""
from __future__ import annotations

from jaxkit.interpreters.mlir import jaxlib_module

__all__ = ["GSPMDSharding", "get_hlo_sharding_from_serialized_proto",
           "get_op_sharding_from_serialized_proto", "get_serialized_proto_from_hlo_sharding",
           "xla_client"]

xla_client = jaxlib_module("jaxlib.xla_client")
GSPMDSharding = xla_client.GSPMDSharding


def get_op_sharding_from_serialized_proto(sharding: bytes):
    """The ``xla_client.OpSharding`` serialized in ``sharding``."""
    proto = xla_client.OpSharding()
    proto.ParseFromString(sharding)
    return proto


def get_hlo_sharding_from_serialized_proto(sharding: bytes):
    """The ``xla_client.HloSharding`` of the ``OpSharding`` proto serialized in ``sharding``."""
    return xla_client.HloSharding.from_proto(get_op_sharding_from_serialized_proto(sharding))


def get_serialized_proto_from_hlo_sharding(sharding) -> bytes:
    """``sharding`` (an ``xla_client.HloSharding``) as a serialized ``OpSharding`` proto."""
    return sharding.to_proto().SerializeToString()
