"""``mesh_cast``: the same layout, typed over a mesh whose axis types differ.

``auto_axes`` and ``explicit_axes`` switch mesh axes between ``Explicit`` (the layout is in the
type, ``f32[8@x,4]``) and ``Auto`` (XLA chooses it, the type says nothing). The values and
their device buffers stay as they are; only the type changes, so the primitive lowers to
nothing. Its parameter is a ``NamedSharding`` over the abstract mesh with the new axis types
(or None: no explicit sharding at all); evaluated eagerly it relabels an array's mesh.
"""
from __future__ import annotations

from typing import Any

from jaxkit import core
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax import sharding_rules as shr
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import AbstractMesh, Mesh, NamedSharding, PartitionSpec

__all__ = ["mesh_cast", "mesh_cast_p"]

mesh_cast_p = core.Primitive("mesh_cast")


def mesh_cast(x: Any, mesh: AbstractMesh) -> Any:
    """``x`` typed over ``mesh`` (same axis names and sizes as its own, other axis types):
    only the axes Explicit in ``mesh`` stay in its type."""
    aval = core.get_aval(x)
    typed = aval._sharding
    if typed is None:
        return x  # nothing in the type to change: the axes it is split over are not Explicit
    return mesh_cast_p.bind(x, sharding=NamedSharding(mesh, typed.spec))


def _impl(x, *, sharding: NamedSharding | None):
    if type(x) is not ShardedArray or type(x._sharding) is not NamedSharding:
        return x
    concrete = x._sharding
    types = (concrete.mesh.axis_types if sharding is None else
             tuple(dict(zip(sharding.mesh.axis_names, sharding.mesh.axis_types))[n]
                   for n in concrete.mesh.axis_names))
    relabelled = NamedSharding(Mesh(concrete.mesh.devices, concrete.mesh.axis_names, types),
                               concrete.spec)
    return ShardedArray(x._buf, x.aval.strip_sharding(), relabelled)


def _rule(x, *, sharding: NamedSharding | None):
    return sharding


def _transpose(ct, x, *, sharding):
    back = x.aval._sharding
    return [mesh_cast_p.bind(ct, sharding=back)]


def _batcher(axis_data, args, dims, *, sharding):
    (x,), (d,) = args, dims
    if sharding is None or d is batching.not_mapped:
        return mesh_cast_p.bind(x, sharding=sharding), d
    parts = list(sharding.spec) + [None] * (len(x.shape) - 1 - len(sharding.spec))
    parts.insert(d, axis_data.explicit_mesh_axis)  # the batch keeps the layout it had
    return mesh_cast_p.bind(x, sharding=NamedSharding(sharding.mesh, PartitionSpec(*parts))), d


mesh_cast_p.def_impl(_impl)
mesh_cast_p.def_abstract_eval(lambda x, *, sharding: x.strip_sharding())
shr.defsharding(mesh_cast_p, _rule)
ad.deflinear2(mesh_cast_p, _transpose)
batching.defrule(mesh_cast_p, _batcher)
mlir.register_lowering(mesh_cast_p, lambda ctx, x, *, sharding: x)
