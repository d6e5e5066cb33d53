"""``with_sharding_constraint``: pin the layout of a value inside a partitioned program.

The ``sharding_constraint`` primitive is the identity on values. Lowered, it is a Shardy
``sdy.sharding_constraint`` that XLA's partitioner must honour (jit partitions any program
that has one over the constraint's mesh); evaluated eagerly, it lays the array out as asked.
It is linear (its transpose constrains the cotangent the same way), and under ``vmap`` the
batch dimension is left unsplit.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import core
from jaxkit import _tree_trace as tree_util
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax import sharding_rules as shr
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import (AbstractMesh, NamedSharding, PartitionSpec, current_mesh,
                                     put_global)

__all__ = ["lay_out", "sharding_constraint_p", "with_sharding_constraint"]

sharding_constraint_p = core.Primitive("sharding_constraint")


def _resolve(s: Any, x: Any) -> NamedSharding:
    if isinstance(s, NamedSharding):
        return _on_concrete_mesh(s, x) if isinstance(s.mesh, AbstractMesh) else s
    if isinstance(s, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(f"with_sharding_constraint got the bare {s}, which needs a mesh: "
                             "call it inside `with mesh:` (or jaxkit.sharding.set_mesh(mesh)),"
                             " or pass NamedSharding(mesh, spec).")
        return NamedSharding(mesh, s)
    raise TypeError(f"with_sharding_constraint expects NamedShardings or PartitionSpecs, got "
                    f"{s!r}")


def _on_concrete_mesh(s: NamedSharding, x: Any) -> NamedSharding:
    """A sharding over an abstract mesh (Flax builds them from ``get_abstract_mesh()``) laid
    over the concrete mesh of ``x``'s own sharding, else of the ``set_mesh`` context. (In JAX
    an array made under ``set_mesh`` carries that mesh; jaxkit's arrays carry no mesh, so the
    context's mesh stands for it.)"""
    x_sharding = getattr(x, "sharding", None)
    mesh = x_sharding.mesh if isinstance(x_sharding, NamedSharding) else current_mesh()
    if mesh is None or isinstance(mesh, AbstractMesh):
        what = core.get_aval(x).str_short()
        if x_sharding is None:
            raise ValueError("Target sharding contains a `jax.sharding.AbstractMesh` which "
                             f"requires the input passed should be a `jax.Array`. Got {type(x)} "
                             f"with shape {what}")
        raise TypeError("The sharding on the input must be a `NamedSharding` since the target "
                        "sharding has an `AbstractMesh` in it. Got sharding type "
                        f"{type(x_sharding)} for shape {what} (make the input under "
                        "`with jax.set_mesh(mesh):`, or use a NamedSharding over a concrete "
                        "Mesh)")
    if mesh.shape_tuple != s.mesh.shape_tuple:
        raise ValueError(f"Mesh shape of the input {mesh.shape_tuple} does not match the mesh "
                         f"shape of the target sharding {s.mesh.shape_tuple} for shape "
                         f"{core.get_aval(x).str_short()}")
    return NamedSharding(mesh, s.spec)


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """``x`` (a pytree) with each leaf laid out as ``shardings`` says (one sharding for all
    leaves, or a pytree prefix of ``x``)."""
    is_leaf = lambda s: isinstance(s, (NamedSharding, PartitionSpec))  # noqa: E731
    if is_leaf(shardings):
        per_leaf = [shardings] * len(tree_util.tree_leaves(x))
    else:
        per_leaf = tree_util.tree_leaves(tree_util.tree_broadcast(shardings, x, is_leaf),
                                         is_leaf=is_leaf)
    leaves, treedef = tree_util.tree_flatten(x)
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        named = _resolve(s, leaf)
        named.check_shape(np.shape(leaf))
        outs.append(sharding_constraint_p.bind(leaf, sharding=named))
    return tree_util.tree_unflatten(treedef, outs)


def lay_out(x: Any, name: str, out_sharding: Any) -> Any:
    """``x``, the result of ``name``, laid out as its ``out_sharding=`` argument asks (a
    ``PartitionSpec`` on the mesh in context or a ``NamedSharding``; over Explicit axes its
    type then says so). None, or a sharding over a mesh with no axes (Flax's default), lays
    nothing out."""
    if shr.resolve_out_sharding(name, out_sharding) is None:
        return x
    return with_sharding_constraint(x, out_sharding)


def _impl(x, *, sharding: NamedSharding):
    if type(x) is ShardedArray and x.sharding == sharding:
        return x
    value = np.asarray(x._value if isinstance(x, Array) else x)
    aval = core.get_aval(x)
    return ShardedArray(put_global(value, aval, sharding), aval, sharding)


def _lowering(ctx: mlir.LoweringRuleContext, x, *, sharding: NamedSharding):
    mesh = ctx.module_context.mesh
    if mesh is None:
        raise NotImplementedError(
            "sharding_constraint: the lowering rule needs a program partitioned over a mesh "
            "(inside pmap, use the pmap axis instead)")
    if tuple(mesh) != sharding.mesh.shape_tuple:
        raise ValueError(f"with_sharding_constraint on {sharding.mesh} inside a program "
                         f"partitioned over a mesh of axes {tuple(mesh)}; use one mesh.")
    return mlir.sharding_constraint(x, sharding.sdy_attr(len(ctx.avals_in[0].shape)))


def _batcher(axis_data, args, dims, *, sharding: NamedSharding):
    (x,), (d,) = args, dims
    if d is batching.not_mapped:
        return sharding_constraint_p.bind(x, sharding=sharding), d
    parts = list(sharding.spec) + [None] * (len(x.shape) - 1 - len(sharding.spec))
    parts.insert(d, axis_data.explicit_mesh_axis)  # the batch keeps the layout it had
    return sharding_constraint_p.bind(
        x, sharding=NamedSharding(sharding.mesh, PartitionSpec(*parts))), d


sharding_constraint_p.def_impl(_impl)
sharding_constraint_p.def_abstract_eval(lambda x, **_: x)
ad.deflinear(sharding_constraint_p,
             lambda ct, *, sharding: [sharding_constraint_p.bind(ct, sharding=sharding)])
batching.defrule(sharding_constraint_p, _batcher)
mlir.register_lowering(sharding_constraint_p, _lowering)
shr.defsharding(sharding_constraint_p, shr.sharding_constraint_rule)
