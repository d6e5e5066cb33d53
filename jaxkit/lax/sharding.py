"""``with_sharding_constraint``: pin the layout of a value inside a partitioned program.

The ``sharding_constraint`` primitive is the identity on values. Lowered, it is a Shardy
``sdy.sharding_constraint`` that XLA's partitioner must honour (jit partitions any program
that has one over the constraint's mesh); evaluated eagerly, it lays the array out as asked.
It is linear (its transpose constrains the cotangent the same way), and under ``vmap`` the
batch dimension is left unsplit.
"""
from __future__ import annotations

import math
from functools import partial
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax import sharding_ur
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import (AbstractMesh, AxisType, Mesh, NamedSharding,
                                     PartitionSpec, current_abstract_mesh, current_mesh,
                                     physical_sharding, put_global)

# What ``jax.lax`` exports from here (the package star-imports it); the helpers the rest of
# jaxkit uses (``constrain``, ``lay_out``, ``reshard_p``, ...) are imported by name.
__all__ = ["sharding_constraint_p", "with_sharding_constraint"]

sharding_constraint_p = core.Primitive("sharding_constraint")
reshard_p = core.Primitive("reshard")


def _resolve(s: Any, x: Any, api: str | None = None) -> NamedSharding:
    if isinstance(s, NamedSharding):
        return _on_concrete_mesh(s, x) if isinstance(s.mesh, AbstractMesh) else s
    if isinstance(s, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise _no_mesh_error(s, api)
        return NamedSharding(concrete_mesh_for(current_abstract_mesh(), mesh), s)
    raise TypeError(f"with_sharding_constraint expects NamedShardings or PartitionSpecs, got "
                    f"{s!r}")


def _no_mesh_error(spec: PartitionSpec, api: str | None) -> Exception:
    """JAX's error for a bare spec with no mesh in context: its words for ``api`` (those
    with a message of their own), else the one most APIs raise."""
    if api == "device_put":
        return ValueError("Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed "
                          "to device_put")
    if api == "with_sharding_constraint":
        return RuntimeError(
            "with_sharding_constraint requires a non-empty mesh in context if you are passing "
            "`PartitionSpec`s to shardings. You can define a context mesh via "
            "`jax.set_mesh(mesh)`. Alternatively, provide `Sharding`s to shardings and then "
            "the mesh context manager is not required.")
    return ValueError("Using PartitionSpec when you are not under a mesh context is not "
                      "allowed. Please pass a NamedSharding instance or enter into a mesh "
                      f"context via `jax.set_mesh`. Got {spec}")


def resolve_sharding(s: Any, x: Any, api: str | None = None) -> NamedSharding:
    """The concrete ``NamedSharding`` a sharding argument for ``x`` stands for (a bare
    ``PartitionSpec`` is over the mesh in context; without one, JAX's error for ``api``)."""
    return _resolve(s, x, api)


def concrete_mesh_for(abstract: AbstractMesh, mesh: Mesh) -> Mesh:
    """``mesh``, or, when ``use_abstract_mesh`` entered a mesh of another shape over as many
    devices, that mesh laid over ``mesh``'s devices in their order (as JAX does)."""
    if abstract.empty or abstract.shape_tuple == mesh.shape_tuple:
        return mesh
    if abstract.size != mesh.size:
        raise ValueError(f"The abstract mesh in context {abstract} has {abstract.size} "
                         f"devices but the mesh in context {mesh} has {mesh.size}; "
                         "use_abstract_mesh may change axis sizes, names and types only.")
    return Mesh(np.array(mesh._flat, dtype=object).reshape(abstract.axis_sizes),
                abstract.axis_names, abstract.axis_types)


def sdy_mesh_name(ctx: mlir.LoweringRuleContext, mesh: Mesh) -> str:
    """The Shardy mesh symbol for ``mesh`` in the module being lowered: ``mesh`` for the
    program's own, else one declared (once) for a mesh of another shape over the same
    devices (a ``use_abstract_mesh`` block), as JAX declares ``@mesh_0``."""
    if tuple(ctx.module_context.mesh) == mesh.shape_tuple:
        return "mesh"
    return declare_sdy_mesh(ctx.module_context.module, mesh.shape_tuple)


def sdy_mesh_symbol(shape: tuple) -> str:
    """The symbol jaxkit gives the Shardy mesh of axes ``shape`` other than a program's own
    (JAX's ``empty_mesh`` for no axes: replicated scalar parameters name it)."""
    if not shape:
        return "empty_mesh"
    name = "mesh_" + "_".join(f"{n}{size}" for n, size in shape)
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def declare_sdy_mesh(module: Any, shape: tuple) -> str:
    """Declare the Shardy mesh of axes ``shape`` (``(name, size)`` pairs) in ``module`` unless
    it is there; its symbol name."""
    name = sdy_mesh_symbol(shape)
    body = module.body
    if not any(getattr(op, "sym_name", None) is not None and op.sym_name.value == name
               for op in body.operations):
        axes = ", ".join(f'"{n}"={size}' for n, size in shape)
        with module.context, mlir.ir.Location.unknown(), \
                mlir.ir.InsertionPoint.at_block_begin(body):
            mlir.sdy.MeshOp(name, mlir.ir.Attribute.parse(f"#sdy.mesh<[{axes}]>"))
    return name


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


def _per_leaf(x: Any, shardings: Any) -> tuple[list, Any, list]:
    """``x``'s leaves, its tree and one sharding per leaf (``shardings``: one for all leaves, or
    a pytree prefix of ``x``)."""
    is_leaf = lambda s: isinstance(s, (NamedSharding, PartitionSpec))  # noqa: E731
    leaves, treedef = tree_util.tree_flatten(x)
    if is_leaf(shardings):
        return leaves, treedef, [shardings] * len(leaves)
    per_leaf = tree_util.tree_leaves(tree_util.tree_broadcast(shardings, x, is_leaf),
                                     is_leaf=is_leaf)
    return leaves, treedef, per_leaf


def _axis_types(s: NamedSharding) -> dict:
    """The types of ``s``'s mesh axes as the mesh in context sees them (``auto_axes`` makes
    Explicit axes Auto inside its block)."""
    context = current_abstract_mesh()
    mesh = context if context.shape_tuple == s.mesh.shape_tuple else s.mesh
    return dict(zip(mesh.axis_names, mesh.axis_types))


def _spec_for_rank(spec: PartitionSpec, ndim: int) -> PartitionSpec:
    return PartitionSpec(*spec, *[None] * (ndim - len(spec)))


def _check_constraint(x: Any, s: NamedSharding) -> bool:
    """Whether ``with_sharding_constraint(x, s)`` is only an assertion (every axis of the
    mesh in context is Explicit: the type already says the layout, which must be ``s``'s);
    else ``s`` may name only Auto axes, as in JAX."""
    ndim = np.ndim(x)
    context = current_abstract_mesh()
    if not context.empty and context.are_all_axes_explicit:
        if any(p is PartitionSpec.UNCONSTRAINED for p in s.spec):
            raise ValueError(f"{s.spec} cannot contain `P.UNCONSTRAINED` when no mesh "
                             f"axis_types are `Auto`. Got mesh axis_types: "
                             f"({', '.join(t.name for t in context.axis_types)})")
        have = _spec_for_rank(PartitionSpec(*shr.parts(core.get_aval(x))), ndim)
        want = _spec_for_rank(s.spec, ndim)
        if tuple(have) != tuple(want):
            raise AssertionError(
                "`with_sharding_constraint` acts as an assert when all axes of mesh are of "
                f"type `Explicit`. The array sharding: {have} did not match the sharding "
                f"provided: {want}. Please use `jax.sharding.reshard` to shard your input to "
                "the sharding you want.")
        return True
    kinds = _axis_types(s)
    for axes in s.spec._normalized(0):
        if any(kinds.get(a) is not AxisType.Auto for a in axes):
            raise ValueError(
                "The spec of NamedSharding passed to with_sharding_constraint can only refer "
                f"to Auto axes of the mesh. Got spec={s.spec} and mesh={s.mesh.abstract_mesh}"
                ". You probably meant to use `reshard` API?")
    return False


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """``x`` (a pytree) with each leaf laid out as ``shardings`` says (one sharding for all
    leaves, or a pytree prefix of ``x``). The shardings may name only Auto mesh axes; under a
    mesh whose axes are all Explicit it asserts that the types already say that layout."""
    leaves, treedef, per_leaf = _per_leaf(x, shardings)
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        then = None
        if type(s) in constraint_forms:  # a layout.Format: its sharding, then its layout
            s, then = constraint_forms[type(s)](s)
            if s is None:  # a layout alone
                outs.append(leaf if then is None else then(leaf))
                continue
        named = _resolve(s, leaf, "with_sharding_constraint")
        named.check_shape(np.shape(leaf))
        out = leaf if _check_constraint(leaf, named) else \
            sharding_constraint_p.bind(leaf, sharding=named)
        outs.append(out if then is None else then(out))
    return tree_util.tree_unflatten(treedef, outs)


# Other forms a constraint may take, by type: ``form -> (sharding, then)``, ``then`` (or None)
# applied to the constrained value. ``jax.experimental.layout`` (above lax) registers Format.
constraint_forms: dict[type, Callable[[Any], tuple]] = {}


def constrain(x: Any, shardings: Any, prim: core.Primitive | None = None,
              api: str | None = None) -> Any:
    """``x`` (a pytree) laid out as ``shardings`` says, over any mesh axes (what ``device_put``
    and the ``out_sharding=`` arguments do); ``prim`` (default ``sharding_constraint``) is the
    primitive that says so in a jaxpr; ``api`` names the caller in JAX's no-mesh error."""
    prim = sharding_constraint_p if prim is None else prim
    leaves, treedef, per_leaf = _per_leaf(x, shardings)
    outs = []
    for leaf, s in zip(leaves, per_leaf):
        named = _resolve(s, leaf, api)
        named.check_shape(np.shape(leaf))
        outs.append(prim.bind(leaf, sharding=named))
    return tree_util.tree_unflatten(treedef, outs)


def reshard_leaves(x: Any, shardings: Any) -> Any:
    """``jax.sharding.reshard``'s primitive: ``x`` (a pytree) in the layout asked for, its type
    saying so over Explicit axes."""
    return constrain(x, shardings, reshard_p)


def lay_out(x: Any, name: str, out_sharding: Any) -> Any:
    """``x``, the result of ``name``, laid out as its ``out_sharding=`` argument asks (a
    ``PartitionSpec`` on the mesh in context or a ``NamedSharding``; over Explicit axes its
    type then says so). None, or a sharding over a mesh with no axes (Flax's default), lays
    nothing out."""
    if shr.resolve_out_sharding(name, out_sharding) is None:
        return x
    return constrain(x, out_sharding)


def _impl(x, *, sharding: NamedSharding):
    aval = core.get_aval(x)
    if dtypes.is_extended(aval.dtype):
        # Keys are laid out as their data, whose trailing physical axes stay whole.
        return aval.dtype.from_physical(_impl(aval.dtype.to_physical(x),
                                              sharding=physical_sharding(sharding, aval)))
    if type(x) is ShardedArray and x.sharding == sharding:
        return x
    if sharding.spec.unreduced:
        # Which summand each device holds is XLA's choice: only a partitioned program makes it.
        raise NotImplementedError(
            "reshard to an unreduced sharding outside jit is not implemented; use "
            "jax.device_put(x, sharding) or reshard inside jax.jit")
    value = (reduced_value(x) if type(x) is ShardedArray and x.sharding.spec.unreduced else
             np.asarray(x._value if isinstance(x, Array) else x))
    # The type comes from the new layout (its Explicit axes), not from the operand's.
    aval = core.get_aval(x).strip_sharding()
    return ShardedArray(put_global(value, aval, sharding), aval, sharding)


def reduced_value(x: ShardedArray) -> np.ndarray:
    """The value of an array unreduced over some mesh axes: each slice of it is the sum of the
    summands the devices along those axes hold (one copy along the other replicated axes)."""
    sharding = x.sharding
    spec = sharding.spec
    mesh = sharding.mesh
    whole = NamedSharding(mesh, spec.update(unreduced=frozenset()))
    indices = whole.devices_indices_map(x.shape)
    split = {a for axes in spec._normalized(0) for a in axes}
    by_device = {s.device: np.asarray(s.data) for s in x.addressable_shards}
    out = np.zeros(x.shape, x.dtype)
    for pos, device in zip(np.ndindex(*mesh.axis_sizes), mesh._flat):
        if any(k and a not in split and a not in spec.unreduced
               for a, k in zip(mesh.axis_names, pos)):
            continue  # another copy along a replicated axis
        out[indices[device]] += by_device[device]
    return out


def sdy_constraint(ctx: mlir.LoweringRuleContext, sharding: NamedSharding, ndim: int,
                   what: str = "with_sharding_constraint") -> str:
    """The Shardy layout that constrains a value of rank ``ndim`` to ``sharding`` in the
    program being lowered, which must be partitioned over the same devices (``what`` names
    the asker in the error otherwise)."""
    mesh = ctx.module_context.mesh
    if mesh is None:
        raise NotImplementedError(
            "sharding_constraint: the lowering rule needs a program partitioned over a mesh "
            "(inside pmap, use the pmap axis instead)")
    program = ctx.module_context.device_assignment
    if math.prod(size for _, size in mesh) != sharding.mesh.size or (
            program and {d.id for d in program} != {d.id for d in sharding.mesh._flat}):
        ids = lambda ds: sorted(d.id for d in ds)  # noqa: E731
        raise ValueError(
            f"Received incompatible devices for jitted computation: {what} lays a value out "
            f"over {sharding.mesh} (device ids {ids(sharding.mesh._flat)}) inside a program "
            f"partitioned over a mesh of axes {tuple(mesh)}"
            + (f" (device ids {ids(program)})" if program else "")
            + "; lay the values out over one mesh.")
    return sharding.sdy_attr(ndim, sdy_mesh_name(ctx, sharding.mesh))


def _lowering(ctx: mlir.LoweringRuleContext, x, *, sharding: NamedSharding):
    return mlir.sharding_constraint(x, sdy_constraint(ctx, sharding,
                                                      len(ctx.avals_in[0].shape)))


def _reshard_impl(x, *, sharding: NamedSharding):
    # Into a mesh with Auto axes (``auto_axes``): the array keeps its layout over those axes
    # (XLA's to choose), only its mesh's axis types change, as JAX's eager reshard gives.
    # (A spec naming Auto axes, which JAX refuses, lays out just as asked.)
    s = getattr(x, "_sharding", None) if type(x) is ShardedArray else None
    mesh = sharding.mesh
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    named = {a for axes in sharding.spec._normalized(0) for a in axes}
    if (AxisType.Auto in mesh.axis_types and type(s) is NamedSharding
            and s.mesh.shape_tuple == mesh.shape_tuple and not s.spec.unreduced
            and all(kinds[a] is not AxisType.Auto for a in named)):
        ndim = np.ndim(x)
        kept = [[a for a in axes if kinds[a] is AxisType.Auto and a not in named]
                for axes in s.spec._normalized(ndim)]
        parts = [tuple(axes) + tuple(extra) or None
                 for axes, extra in zip(sharding.spec._normalized(ndim), kept)]
        parts = [p[0] if p is not None and len(p) == 1 else p for p in parts]
        sharding = NamedSharding(mesh, PartitionSpec(*parts))
    return _impl(x, sharding=sharding)


def _reshard_lowering(ctx: mlir.LoweringRuleContext, x, *, sharding: NamedSharding):
    # Over Auto axes the layout is XLA's to choose: no constraint at all when every axis is
    # Auto, else every dimension open to them, as JAX lowers a value typed over such a mesh.
    if sharding.mesh.are_all_axes_auto:
        return x
    if AxisType.Auto not in sharding.mesh.axis_types:
        return _lowering(ctx, x, sharding=sharding)
    return mlir.sharding_constraint(x, sharding.sdy_attr(
        len(ctx.avals_in[0].shape), sdy_mesh_name(ctx, sharding.mesh),
        modify_wrt_axis_types=True))


def _batcher(prim, axis_data, args, dims, *, sharding: NamedSharding):
    (x,), (d,) = args, dims
    if d is batching.not_mapped:
        return prim.bind(x, sharding=sharding), d
    parts = list(sharding.spec) + [None] * (len(x.shape) - 1 - len(sharding.spec))
    parts.insert(d, axis_data.explicit_mesh_axis)  # the batch keeps the layout it had
    return prim.bind(x, sharding=NamedSharding(sharding.mesh, PartitionSpec(*parts))), d


def _reshard_transpose(ct, x, *, sharding: NamedSharding):
    # The cotangent goes back to the operand's layout: its type's, on the same devices, over
    # the axis types of the operand's mesh (``auto_axes`` reshards into another typing of the
    # same mesh), else of the mesh in context. It is reduced where the operand is unreduced
    # and unreduced where it is reduced (JAX's cotangent type).
    typed = x.aval._sharding
    types = (typed.mesh if typed is not None else current_abstract_mesh()).axis_types
    mesh = sharding.mesh
    if len(types) == len(mesh.axis_types) and types != mesh.axis_types \
            and isinstance(mesh, Mesh):
        mesh = Mesh(mesh.devices, mesh.axis_names, types)
    u, r = (typed.spec.unreduced, typed.spec.reduced) if typed is not None else (frozenset(),) * 2
    back = NamedSharding(mesh, PartitionSpec(*shr.parts(x.aval), unreduced=r, reduced=u))
    return [reshard_p.bind(ct, sharding=back)]


sharding_constraint_p.def_impl(_impl)
sharding_constraint_p.def_abstract_eval(lambda x, **_: x)
ad.deflinear(sharding_constraint_p,
             lambda ct, *, sharding: [sharding_constraint_p.bind(ct, sharding=sharding)])
batching.defrule(sharding_constraint_p, partial(_batcher, sharding_constraint_p))
mlir.register_lowering(sharding_constraint_p, _lowering)
shr.defsharding(sharding_constraint_p, shr.sharding_constraint_rule)
sharding_ur.defur(sharding_constraint_p, sharding_ur.asked_rule)

# ``reshard``: the same value and layout rules; JAX prints it bare (``b:f32[8@x,4] = reshard
# a``), and transposes it back to the operand's layout.
reshard_p.def_impl(_reshard_impl)
reshard_p.def_abstract_eval(lambda x, **_: x)
ad.deflinear2(reshard_p, _reshard_transpose)
batching.defrule(reshard_p, partial(_batcher, reshard_p))
mlir.register_lowering(reshard_p, _reshard_lowering)
shr.defsharding(reshard_p, shr.sharding_constraint_rule)
sharding_ur.defur(reshard_p, sharding_ur.asked_rule)
core.defpp_params(reshard_p, lambda params: {})
