"""``shard_map``: per-device code over a mesh, with collectives over its named axes.

``shard_map(f, mesh=mesh, in_specs=P('x'), out_specs=P())`` traces ``f`` once on the *local*
block types (each dimension divided by the mesh axes its spec splits it over) while every
mesh axis is bound in the axis environment, so ``psum``, ``all_gather``, ``ppermute``,
``psum_scatter``, ``all_to_all`` and ``axis_index`` name them. The body is bound as the
``shard_map`` primitive, lowered to a Shardy ``sdy.manual_computation`` over all the mesh's
axes inside a program partitioned over the mesh; its collectives address devices by their
partition ids. Outputs are assembled as ``out_specs`` says: a dimension split over an axis
concatenates the devices' blocks, an axis left out means the blocks are equal (replicated).

Outside ``jit`` the call runs as a jitted program. ``jvp`` and ``vmap`` of a shard_map
transform its body (a vmapped axis is never split). Its partial evaluation and transpose
(so ``grad`` *of* a shard_map; ``grad`` inside the body works) and JAX's replication checks
(``check_vma``) are not implemented yet: ``grad`` raises ``NotImplementedError`` naming the
missing rule.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from jaxkit import core, tree_util
from jaxkit.core import ClosedJaxpr, ShapedArray
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import ir, sdy
from jaxkit.lax import parallel
from jaxkit.runtime.sharding import Mesh, NamedSharding, PartitionSpec, current_mesh
from jaxkit.transforms.jit import jit

__all__ = ["shard_map", "shard_map_p"]

shard_map_p = core.Primitive("shard_map")
shard_map_p.multiple_results = True


def _tiling(mesh: Mesh, spec: PartitionSpec, ndim: int) -> list[int]:
    sizes = mesh.shape
    counts = []
    for axes in spec._normalized(ndim):
        n = 1
        for a in axes:
            n *= sizes[a]
        counts.append(n)
    return counts


def _local_aval(mesh: Mesh, spec: PartitionSpec, aval: ShapedArray, what: str) -> ShapedArray:
    NamedSharding(mesh, spec)  # checks the axis names
    if len(spec) > len(aval.shape):
        raise ValueError(f"shard_map {what} {spec} has {len(spec)} entries for a value of "
                         f"rank {len(aval.shape)} ({aval.str_short()})")
    shape = []
    for d, (n, t) in enumerate(zip(aval.shape, _tiling(mesh, spec, len(aval.shape)))):
        if n % t:
            raise ValueError(f"shard_map {what} {spec} splits dimension {d} of "
                             f"{aval.str_short()} into {t} blocks, but {n} is not divisible "
                             f"by {t}")
        shape.append(n // t)
    return aval.update(shape=tuple(shape))


def _global_aval(mesh: Mesh, spec: PartitionSpec, aval: ShapedArray) -> ShapedArray:
    return aval.update(shape=tuple(n * t for n, t in zip(
        aval.shape, _tiling(mesh, spec, len(aval.shape)))))


def _specs_per_leaf(specs: Any, tree: Any, what: str) -> tuple[PartitionSpec, ...]:
    is_spec = lambda s: isinstance(s, PartitionSpec) or s is None  # noqa: E731
    if is_spec(specs):
        return (specs or PartitionSpec(),) * len(tree_util.tree_leaves(tree))
    try:
        full = tree_util.tree_broadcast(specs, tree, is_spec)
    except (ValueError, TypeError) as e:
        raise ValueError(f"shard_map {what} must be a PartitionSpec or a pytree prefix of the "
                         f"{'arguments' if what == 'in_specs' else 'outputs'}: {e}") from None
    return tuple(s or PartitionSpec() for s in tree_util.tree_leaves(full, is_leaf=is_spec))


@contextlib.contextmanager
def _mesh_axes_bound(mesh: Mesh):
    with contextlib.ExitStack() as stack:
        for name, size in mesh.shape_tuple:
            stack.enter_context(parallel.extend_axis_env(name, size))
        yield


def shard_map(f: Callable | None = None, /, *, out_specs: Any, in_specs: Any = None,
              mesh: Mesh | None = None, axis_names=None, check_vma: bool = True,
              check_rep: bool | None = None) -> Callable:
    """``f`` run on every device of ``mesh`` on its block of the arguments (split as
    ``in_specs`` says), its results assembled as ``out_specs`` says."""
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs,
                                 mesh=mesh, axis_names=axis_names, check_vma=check_vma,
                                 check_rep=check_rep)
    if not callable(f):
        raise TypeError(f"shard_map requires a callable for its first argument, got {f!r}")
    if axis_names is not None and mesh is not None and set(axis_names) != set(mesh.axis_names):
        raise NotImplementedError("shard_map over some of the mesh's axes (axis_names) is not "
                                  "implemented; it is manual over all of them")

    @functools.wraps(f)
    def mapped(*args):
        the_mesh = mesh if mesh is not None else current_mesh()
        if the_mesh is None:
            raise ValueError("shard_map needs a mesh: pass mesh=..., or call it inside "
                             "`with mesh:` / jaxkit.sharding.set_mesh(mesh)")
        flat, in_tree = tree_util.tree_flatten(args)
        specs_in = _specs_per_leaf(in_specs if in_specs is not None else PartitionSpec(),
                                   args, "in_specs")
        avals = [core.get_aval(x) for x in flat]
        local = [_local_aval(the_mesh, s, a, "in_specs") for s, a in zip(specs_in, avals)]
        with _mesh_axes_bound(the_mesh):
            jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(
                lambda a: f(*a), in_tree, local, pe.debug_info("shard_map", f, ()))
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
        full_out = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
        specs_out = _specs_per_leaf(out_specs, full_out, "out_specs")
        for s, a in zip(specs_out, closed.out_avals):
            NamedSharding(the_mesh, s)
            if len(s) > len(a.shape):
                raise ValueError(f"shard_map out_specs {s} has {len(s)} entries for an output "
                                 f"of rank {len(a.shape)} ({a.str_short()})")
        specs_in = (PartitionSpec(),) * len(consts) + specs_in
        outs = shard_map_p.bind(*consts, *flat, jaxpr=closed, mesh=the_mesh,
                                in_specs=specs_in, out_specs=specs_out)
        return tree_util.tree_unflatten(out_tree, outs)

    return mapped


def _abstract_eval(*avals, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs, out_specs):
    return [_global_aval(mesh, s, a) for s, a in zip(out_specs, jaxpr.out_avals)]


def _impl(*args, **params):
    return _run_jitted(*args, **params)


@functools.partial(jit, static_argnames=("jaxpr", "mesh", "in_specs", "out_specs"))
def _run_jitted(*args, jaxpr, mesh, in_specs, out_specs):
    return shard_map_p.bind(*args, jaxpr=jaxpr, mesh=mesh, in_specs=in_specs,
                            out_specs=out_specs)


def _per_value_attr(mesh: Mesh, specs, avals) -> ir.Attribute:
    items = []
    for s, a in zip(specs, avals):
        attr = NamedSharding(mesh, s).sdy_attr(len(a.shape))
        items.append(attr[len("#sdy.sharding"):])
    return ir.Attribute.parse(f"#sdy.sharding_per_value<[{', '.join(items)}]>")


def _lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs,
              out_specs):
    mctx = ctx.module_context
    if mctx.mesh is None:  # inside a pmap body: its programs are replicated, not partitioned
        raise NotImplementedError("shard_map inside pmap is not supported; use shard_map (or "
                                  "pmap) alone over the devices")
    if tuple(mctx.mesh) != mesh.shape_tuple:
        raise ValueError(f"shard_map over {mesh} inside a program partitioned over a mesh of "
                         f"axes {tuple(mctx.mesh)}; use one mesh")
    if mctx.manual:
        raise NotImplementedError("shard_map: a shard_map inside another one is not "
                                  "implemented")
    names = ", ".join(f'"{n}"' for n in mesh.axis_names)
    op = sdy.ManualComputationOp(
        [mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(args),
        _per_value_attr(mesh, in_specs, ctx.avals_in),
        _per_value_attr(mesh, out_specs, ctx.avals_out),
        ir.Attribute.parse(f"#sdy<manual_axes{{{names}}}>"))
    block = op.body.blocks.append(*[mlir.aval_to_ir_type(a) for a in jaxpr.in_avals])
    inner = dataclasses.replace(mctx, axis_env=mesh.shape_tuple, manual=True)
    with ir.InsertionPoint(block):
        outs = mlir.closed_subcomp(inner, jaxpr, *block.arguments)
        sdy.ReturnOp(outs)
    return list(op.results)


def _bind(closed: ClosedJaxpr, args, in_specs, out_specs, mesh: Mesh) -> list:
    """Bind ``shard_map`` on a body that may have constants: they become leading replicated
    operands, as closed-over values do."""
    consts = list(closed.consts)
    if consts:
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(closed.jaxpr), [])
    return shard_map_p.bind(*consts, *args, jaxpr=closed, mesh=mesh,
                            in_specs=(PartitionSpec(),) * len(consts) + tuple(in_specs),
                            out_specs=tuple(out_specs))


def _jvp(primals, tangents, *, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs, out_specs):
    nonzeros = [not ad.is_zero(t) for t in tangents]
    with _mesh_axes_bound(mesh):
        jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    tangents_nz = [t for t in tangents if not ad.is_zero(t)]
    t_in = [s for s, nz in zip(in_specs, nonzeros) if nz]
    t_out = [s for s, nz in zip(out_specs, out_nz) if nz]
    outs = _bind(jvp_closed, [*primals, *tangents_nz], [*in_specs, *t_in],
                 [*out_specs, *t_out], mesh)
    n_out = len(jaxpr.out_avals)
    tangents_it = iter(outs[n_out:])
    return outs[:n_out], [next(tangents_it) if nz else ad.Zero(o.aval.to_tangent_aval())
                          for o, nz in zip(outs[:n_out], out_nz)]


def _unsplit_front(spec: PartitionSpec) -> PartitionSpec:
    return PartitionSpec(None, *spec)


def _batcher(axis_data, vals, dims, *, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs, out_specs):
    """vmap of shard_map: the batch axis goes in front, unsplit, through the body."""
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    body_dims = [None if d is None else 0 for d in dims]
    with _mesh_axes_bound(mesh):
        batched, _ = batching.batch_jaxpr_axes(jaxpr, axis_data, body_dims,
                                               [0] * len(jaxpr.out_avals))
    new_in = [s if d is None else _unsplit_front(s) for s, d in zip(in_specs, dims)]
    outs = _bind(batched, vals, new_in, [_unsplit_front(s) for s in out_specs], mesh)
    return outs, [0] * len(outs)


def _partial_eval(trace, *args, **params):
    # Without a rule the whole equation would become unknown, primal outputs included,
    # which linearize cannot use: say what is missing instead.
    raise NotImplementedError(
        "partial evaluation rule for 'shard_map' is not implemented, so a shard_map cannot be "
        "differentiated in reverse mode (grad, vjp, jacrev) yet; take the gradient inside the "
        "shard_map body (and psum/pmean it over the mesh axes), or use jvp/jacfwd.")


shard_map_p.def_impl(_impl)
shard_map_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(shard_map_p, _lowering)
ad.defjvp_rule(shard_map_p, _jvp)
batching.defrule(shard_map_p, _batcher)
pe.defpartial_eval(shard_map_p, _partial_eval)
