"""``shard_map``: per-device code over a mesh, with collectives over its named axes.

``shard_map(f, mesh=mesh, in_specs=P('x'), out_specs=P())`` traces ``f`` once on the *local*
block types (each dimension divided by the mesh axes its spec splits it over) while its
*manual* axes are bound in the axis environment, so ``psum``, ``all_gather``, ``ppermute``,
``psum_scatter``, ``all_to_all`` and ``axis_index`` name them. The manual axes are all the
mesh's, or those of ``axis_names``: the others stay with XLA, which may split the blocks over
them too (specs may name manual axes only). A shard_map inside another one takes its mesh and
is manual over further axes. The body is bound as the ``shard_map`` primitive, lowered to a
Shardy ``sdy.manual_computation`` over its manual axes (nested ones inside) in a program
partitioned over the mesh; its collectives address devices by their partition ids. Outputs
are assembled as ``out_specs`` says: a dimension split over an axis concatenates the devices'
blocks, an axis left out means the blocks are equal (replicated).

Outside ``jit`` the call runs as a jitted program; a value printed in its body shows every
device's block, as JAX's eager shard_map prints it (``shard_map_eager``). ``jvp`` and ``vmap``
of a shard_map transform its body (a vmapped axis is never split). Reverse mode (``grad``, ``vjp``,
``linearize``, ``jacrev`` of a shard_map) splits the body into a known shard_map, run now,
whose per-device residuals come out split over all its manual axes, and an unknown one taking
them back; the transpose is a shard_map of the transposed body.

With ``check_vma=True`` (the default) the body's types carry the manual axes each value varies
over (``f32[3]{V:i}``; the rules are in ``jaxkit.lax.parallel_vma``), an output whose spec
leaves out an axis its type varies over raises JAX's error, and differentiation follows the
types: a replicated input used against varying values was ``pvary``-ed, whose transpose
``psum``-s its cotangent. With ``check_vma=False`` types carry no axes and differentiation
follows JAX's rules for that mode: the cotangent of an output replicated over some axes is
shared out among those devices, and that of an input replicated over some axes is
``psum``-med over them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit import tree_util
from jaxkit._util import split_list
from jaxkit.core import ClosedJaxpr, ShapedArray
from jaxkit.interpreters import ad, batching, mlir, mlir_tokens
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import ir, sdy
from jaxkit import avals as avals_mod
from jaxkit.lax import parallel, parallel_vma
from jaxkit.lax.elementwise import div
from jaxkit.lax.structural import reshape
from jaxkit.runtime import sharding as _sharding
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import (AbstractMesh, AxisType, Mesh, NamedSharding,
                                     PartitionSpec, current_mesh, typed_sharding)
from jaxkit.transforms import shard_map_check, shard_map_eager
from jaxkit.transforms.shard_map_check import (check_out_ur, check_replication,
                                               check_specs_manual, check_specs_match_types,
                                               check_unreduced_specs, implicit_casts, spec_axes)
from jaxkit.transforms.jit import jit

__all__ = ["Infer", "shard_map", "shard_map_p", "smap"]

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


def _local_aval(mesh: Mesh, spec: PartitionSpec, aval: ShapedArray, what: str,
                vma: bool = False) -> ShapedArray:
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
    # A block's type carries no layout: the mesh axes are manual inside the body. With
    # ``vma``, it varies over the axes the spec splits it over, and is unreduced/reduced over
    # those its type (and spec) says.
    if not vma:
        return aval.strip_sharding().update(shape=tuple(shape), vma=frozenset())
    shard_map_check.check_in_ur(spec, aval)
    return aval.strip_sharding().update(shape=tuple(shape), vma=aval.vma | spec_axes(spec),
                                        mur=(spec.unreduced, spec.reduced))


def _global_aval(mesh: Mesh, spec: PartitionSpec, aval: ShapedArray,
                 manual: frozenset) -> ShapedArray:
    """The global type of a result: its layout over Explicit mesh axes is ``spec``'s; inside
    an enclosing shard_map it still varies over the enclosing one's axes it varied over."""
    ndim = len(aval.shape)
    return ShapedArray(tuple(n * t for n, t in zip(aval.shape, _tiling(mesh, spec, ndim))),
                       aval.dtype, aval.weak_type,
                       typed_sharding(mesh, (spec.partitions + (None,) * ndim)[:ndim],
                                      spec.unreduced, spec.reduced),
                       aval.vma - manual)


def _specs_per_leaf(specs: Any, tree: Any, what: str) -> tuple[PartitionSpec, ...]:
    is_spec = lambda s: isinstance(s, PartitionSpec) or s is None  # noqa: E731
    if is_spec(specs):
        return (PartitionSpec() if specs is None else specs,) * len(tree_util.tree_leaves(tree))
    try:
        prefix_leaves, prefix_def = tree_util.tree_flatten(specs, is_spec)
        subtrees = prefix_def.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise ValueError(f"shard_map {what} must be a PartitionSpec or a pytree prefix of the "
                         f"{'arguments' if what == 'in_specs' else 'outputs'}: {e}") from None
    # A spec covers every leaf of its subtree; one over an empty subtree (None) covers none.
    return tuple(PartitionSpec() if s is None else s for s, sub in zip(prefix_leaves, subtrees)
                 for _ in tree_util.tree_leaves(sub))


# The shard_map bodies being traced, innermost last: (mesh, the axes manual there, outer
# ones included). A shard_map inside another takes its mesh from here and is manual over
# axes that are not manual yet.
_body_stack: list[tuple[Mesh, frozenset]] = []


def _enclosing_manual(mesh: Mesh) -> frozenset:
    return _body_stack[-1][1] if _body_stack and _body_stack[-1][0] == mesh else frozenset()


@contextlib.contextmanager
def _mesh_axes_bound(mesh: Mesh, manual_axes: tuple, check_vma: bool):
    """Trace a body: its manual axes are bound for collectives, the abstract mesh shows
    them (and those of enclosing shard_maps) as ``Manual``, as JAX's does, and with
    ``check_vma`` the types carry the manual axes values vary over."""
    manual = _enclosing_manual(mesh) | set(manual_axes)
    types = tuple(AxisType.Manual if n in manual else t
                  for n, t in zip(mesh.axis_names, mesh.axis_types))
    abstract = AbstractMesh(mesh.axis_sizes, mesh.axis_names, types,
                            abstract_device=mesh.abstract_mesh.abstract_device)
    sizes = mesh.shape
    avals_mod.note_axis_order(mesh.axis_names)
    with parallel.extend_axis_env_nd((name, sizes[name]) for name in manual_axes), \
            parallel_vma.checking_vma(check_vma):
        _body_stack.append((mesh, frozenset(manual)))
        _sharding._abstract_mesh_stack.append(abstract)
        try:
            yield
        finally:
            _sharding._abstract_mesh_stack.pop()
            _body_stack.pop()


def _manual_axes(mesh: Mesh, axis_names) -> tuple:
    """The axes a shard_map is newly manual over, in mesh order: ``axis_names`` (all the
    mesh's axes when empty) less those an enclosing shard_map is already manual over."""
    names = frozenset(axis_names) if axis_names else frozenset(mesh.axis_names)
    if not names <= set(mesh.axis_names):
        raise ValueError(f"jax.shard_map requires axis_names={names} to be a subset of "
                         f"mesh.axis_names={frozenset(mesh.axis_names)}")
    names -= _enclosing_manual(mesh)
    return tuple(a for a in mesh.axis_names if a in names)


def shard_map(f: Callable | None = None, /, *, out_specs: Any, in_specs: Any = None,
              mesh: Mesh | None = None, axis_names=None, check_vma: bool = True) -> Callable:
    """``f`` run on every device of ``mesh`` on its block of the arguments (split as
    ``in_specs`` says), its results assembled as ``out_specs`` says. With ``check_vma``, an
    output whose spec leaves out a mesh axis must be seen to be replicated over it (computed
    from replicated inputs, or reduced over the axis by a collective)."""
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs,
                                 mesh=mesh, axis_names=axis_names, check_vma=check_vma)
    if not callable(f):
        raise TypeError(f"shard_map requires a callable for its first argument, got {f!r}")
    if axis_names is not None and not isinstance(axis_names, (set, frozenset)):
        raise TypeError("`axis_names` argument of shard_map should be of type `frozenset` or "
                        f"`set`. Got type: {type(axis_names)}")

    @functools.wraps(f)
    def mapped(*args):
        the_mesh = mesh if mesh is not None else current_mesh()
        if the_mesh is None and _body_stack:
            the_mesh = _body_stack[-1][0]  # nested: the enclosing shard_map's mesh
        if the_mesh is None:
            raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                             "enter into a mesh context")
        if mesh is None:
            the_mesh = _ContextMesh(the_mesh, _sharding.current_abstract_mesh())
        manual = _manual_axes(the_mesh, axis_names)
        check_specs_manual(in_specs, frozenset(manual), "in_specs")
        check_specs_manual(out_specs, frozenset(manual), "out_specs")
        check_unreduced_specs("in_specs", the_mesh, manual, in_specs)
        check_unreduced_specs("out_specs", the_mesh, manual, out_specs)
        # With check_vma, JAX's casts of the results to their specs end the body.
        body = (lambda *a: implicit_casts(f(*a), out_specs)) if check_vma else f
        flat, in_tree = tree_util.tree_flatten(args)
        avals = [core.get_aval(x) for x in flat]
        # Without in_specs, each argument is split as its type says (over Explicit axes;
        # a type without a sharding is unsplit), as JAX infers them.
        specs_in = (_specs_per_leaf(in_specs, args, "in_specs") if in_specs is not None else
                    tuple(a.sharding.spec
                          if getattr(a, "_sharding", None) is not None else PartitionSpec()
                          for a in avals))
        if in_specs is not None:
            check_specs_match_types(the_mesh, manual, specs_in, avals, bool(_body_stack))
        local = [_local_aval(the_mesh, s, a, "in_specs", check_vma)
                 for s, a in zip(specs_in, avals)]
        debug = pe.debug_info("shard_map", f, ())
        # Called eagerly, or in an eager body (a shard_map nested in one): values printed in
        # the body show every device's block.
        eager = core.current_trace() is core.eval_trace or isinstance(
            core.current_trace(), shard_map_eager.ShardMapTrace)
        with _mesh_axes_bound(the_mesh, manual, check_vma):
            if eager:
                jaxpr, consts, out_tree = _trace_eager(body, in_tree, flat, specs_in, local,
                                                       debug, the_mesh, manual, check_vma)
            else:
                jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(lambda a: body(*a), in_tree,
                                                                 local, debug)
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
        full_out = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
        specs_out = _specs_per_leaf(out_specs, full_out, "out_specs")
        for s, a in zip(specs_out, closed.out_avals):
            NamedSharding(the_mesh, s)
            if len(s) > len(a.shape):
                raise ValueError(f"shard_map out_specs {s} has {len(s)} entries for an output "
                                 f"of rank {len(a.shape)} ({a.str_short()})")
        if check_vma:
            check_replication(f, the_mesh, manual, closed.out_avals, out_specs, full_out)
            check_out_ur(specs_out, closed.out_avals)
        specs_in = (PartitionSpec(),) * len(consts) + specs_in
        outs = _bind(closed, [*consts, *flat], specs_in, specs_out, the_mesh, manual,
                     check_vma)
        if eager and set(manual) == set(the_mesh.axis_names):
            outs = [_as_written(o, s) for o, s in zip(outs, specs_out)]
        return tree_util.tree_unflatten(out_tree, outs)

    return mapped


def _as_written(out, spec: PartitionSpec):
    """An eager result's sharding as ``out_specs`` writes it (``P('x',)``, ``P(None,)``),
    which JAX's eager shard_map lays its result out with; the layout is the same."""
    s = getattr(out, "_sharding", None)
    if type(out) is not ShardedArray or not isinstance(s, NamedSharding):
        return out
    ndim = len(out.shape)
    if s.spec._normalized(ndim) != spec._normalized(ndim) or \
            (s.spec.unreduced, s.spec.reduced) != (spec.unreduced, spec.reduced):
        return out
    return ShardedArray(out._buf, out.aval, NamedSharding(s.mesh, spec))


def _trace_eager(f, in_tree, args: list, specs: tuple, local: list, debug, mesh: Mesh,
                 manual: tuple, check_vma: bool):
    """``pe.trace_tree_to_jaxpr`` of an eager call's body: its values know the call's
    arguments, so that printing one computes it (``shard_map_eager``)."""
    out_trees = []

    def flat_fun(*leaves):
        out_flat, out_tree = tree_util.tree_flatten(f(*tree_util.tree_unflatten(in_tree,
                                                                                leaves)))
        out_trees.append(out_tree)
        return out_flat

    # (called inside the body's bound axes: the stacks' depths around the call are less by
    # this body's entries)
    depths = (len(_sharding._abstract_mesh_stack) - 1, len(_body_stack) - 1,
              len(parallel._axis_env.frames) - len(manual), len(parallel_vma._checking.stack) - 1)
    outer = core.current_trace()
    if isinstance(outer, shard_map_eager.ShardMapTrace):
        # Inside an eager body: a value here is computed through the enclosing body's values.
        run = functools.partial(_nested_run, mesh, manual, check_vma, specs, local)
        compute = functools.partial(shard_map_eager.nested_blocks, outer, run, args, manual,
                                    functools.partial(_enclosing_body, depths))
        manual = tuple(a for a in mesh.axis_names if a in {*outer.manual, *manual})
    else:
        compute = functools.partial(_snapshot_blocks, mesh, manual, check_vma, depths[:2],
                                    args, specs, local)
    jaxpr, consts = shard_map_eager.trace_body(flat_fun, local, debug, mesh, manual,
                                               check_vma, compute)
    return jaxpr, consts, out_trees[0]


def _stacked(mesh: Mesh, manual: tuple, check_vma: bool, local: list, snapshot: core.Jaxpr,
             consts: list) -> tuple[ClosedJaxpr, list]:
    """``snapshot`` (the equations of an eager body recorded so far, one output) as a body
    whose output is its value stacked over the manual axes (varying over all of them, as
    JAX's eager values are: replicated ones by a ``pvary``), and that body's constants."""
    avals = [_local_aval(mesh, PartitionSpec(), core.get_aval(c), "in_specs", check_vma)
             for c in consts] + list(local)

    def body(*xs):
        out = core.eval_jaxpr(snapshot, xs[:len(consts)], *xs[len(consts):])[0]
        if check_vma:
            vma = core.get_aval(out).vma
            out = parallel_vma.pvary(out, tuple(a for a in manual if a not in vma))
        return [reshape(out, (1, *np.shape(out)))]

    jaxpr, body_consts = pe.trace_to_jaxpr(body, avals)
    return ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []), body_consts


def _snapshot_blocks(mesh: Mesh, manual: tuple, check_vma: bool, depths: tuple, args: list,
                     specs: tuple, local: list, snapshot: core.Jaxpr,
                     consts: list) -> np.ndarray:
    """Run ``snapshot`` on the call's arguments: every device's block of its output, stacked
    in mesh order."""
    closed, body_consts = _stacked(mesh, manual, check_vma, local, snapshot, consts)
    n_replicated = len(body_consts) + len(consts)
    with _outside_body(depths):
        out, = _bind(closed, [*body_consts, *consts, *args],
                     (PartitionSpec(),) * n_replicated + tuple(specs),
                     (PartitionSpec(manual),), mesh, manual, check_vma)
        return np.asarray(out)


def _nested_run(mesh: Mesh, manual: tuple, check_vma: bool, specs: tuple, local: list,
                snapshot: core.Jaxpr, consts: list) -> Callable:
    """For a shard_map called in an eager body: ``snapshot`` stacked (``_stacked``, built
    here, in its body), as a function of the values of its constants and arguments in the
    enclosing body, which binds it as a shard_map there."""
    closed, body_consts = _stacked(mesh, manual, check_vma, local, snapshot, consts)
    n_replicated = len(body_consts) + len(consts)

    def run(values: list):
        out, = _bind(closed, [*body_consts, *values],
                     (PartitionSpec(),) * n_replicated + tuple(specs),
                     (PartitionSpec(manual),), mesh, manual, check_vma)
        return out
    return run


@contextlib.contextmanager
def _enclosing_body(depths: tuple):
    """Trace in the enclosing body's context while a nested one traces: the nested one's
    abstract mesh, body, bound axes and typing set aside (``depths``: those stacks' depths
    around its call)."""
    stacks = (_sharding._abstract_mesh_stack, _body_stack, parallel._axis_env.frames,
              parallel_vma._checking.stack)
    inside = [stack[depth:] for stack, depth in zip(stacks, depths)]
    for stack, depth in zip(stacks, depths):
        del stack[depth:]
    try:
        yield
    finally:
        for stack, entries in zip(stacks, inside):
            stack.extend(entries)


@contextlib.contextmanager
def _outside_body(depths: tuple):
    """Run a program eagerly while a body traces: its manual axes unbound, its abstract mesh
    and varying-axes typing left, as around the shard_map call (``depths``: the abstract
    mesh and body stacks' depths there)."""
    # The entries from the body's own one on (and any the user's code in it added) set aside.
    stacks = (_sharding._abstract_mesh_stack, _body_stack)
    inside = [stack[depth:] for stack, depth in zip(stacks, depths)]
    for stack, depth in zip(stacks, depths):
        del stack[depth:]
    try:
        with core.set_current_trace(core.eval_trace), parallel_vma.outside_bodies():
            yield
    finally:
        for stack, entries in zip(stacks, inside):
            stack.extend(entries)


class _ContextMesh(Mesh):
    """The mesh in context, as a shard_map called without ``mesh=`` holds it: that mesh, but
    its equation shows (``mesh=``) the abstract mesh in context, which is what JAX's
    shard_map holds then."""

    def __init__(self, mesh: Mesh, shown: AbstractMesh):  # noqa: D107  (no Mesh.__init__)
        self.__dict__.update(mesh.__dict__)
        self.shown = shown


def _pp_params(params: dict) -> dict:
    mesh = params["mesh"]
    return dict(sorted({**params, "mesh": mesh.shown if isinstance(mesh, _ContextMesh)
                        else mesh}.items()))


class _InferFromArgs:
    def __repr__(self):
        return "jax.sharding.Infer"


Infer = _InferFromArgs()


def _axes_to_spec(axis_name, axis: int | None) -> PartitionSpec:
    return PartitionSpec() if axis is None else PartitionSpec(*[None] * axis, axis_name)


def smap(f: Callable | None = None, /, *, in_axes: Any = Infer, out_axes: Any,
         axis_name: Any) -> Callable:
    """``f`` mapped over one mesh axis of the mesh in context (``jax.set_mesh``): a shard_map
    manual over ``axis_name`` only, each argument split along its ``in_axes`` dimension and
    each output assembled along its ``out_axes`` dimension (``None``: not split)."""
    if f is None:
        return lambda g: smap(g, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got "
                        f"{axis_name}")
    if in_axes is not None and in_axes is not Infer and not isinstance(in_axes, (int, tuple)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or a tuple of "
                        "entries corresponding to the positional arguments passed to the "
                        f"function, but got {in_axes}.")
    if in_axes is not Infer and not all(isinstance(a, int)
                                        for a in tree_util.tree_leaves(in_axes)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or (nested) "
                        f"container with those types as leaves, but got {in_axes}.")
    if not all(isinstance(a, int) for a in tree_util.tree_leaves(out_axes)):
        raise TypeError("smap out_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {out_axes}.")
    to_spec = functools.partial(_axes_to_spec, axis_name)
    is_none = lambda x: x is None  # noqa: E731
    out_specs = tree_util.tree_map(to_spec, out_axes, is_leaf=is_none)

    @functools.wraps(f)
    def mapped(*args):
        the_mesh = current_mesh() or (_body_stack[-1][0] if _body_stack else None)
        if the_mesh is None:
            raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                             "enter into a mesh context")
        if in_axes is Infer:
            kind = dict(zip(the_mesh.axis_names, the_mesh.axis_types)).get(axis_name)
            if kind is not AxisType.Explicit:
                raise TypeError(f"in_axes was not specified when "
                                f"axis_name={frozenset({axis_name})} was of type {kind}")
            raise NotImplementedError(
                "smap without in_axes infers them from the arguments' sharding types, which "
                "jaxkit's types do not carry (explicit sharding); pass in_axes")
        in_specs = tree_util.tree_map(to_spec, in_axes, is_leaf=is_none)
        if isinstance(in_axes, tuple):
            in_specs = tuple(in_specs)
        return shard_map(f, in_specs=in_specs, out_specs=out_specs,
                         axis_names={axis_name})(*args)

    return mapped


def _abstract_eval(*avals, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs, out_specs, check_vma,
                   newly_manual_axes):
    return [_global_aval(mesh, s, a, newly_manual_axes)
            for s, a in zip(out_specs, jaxpr.out_avals)]


def _impl(*args, **params):
    return _run_jitted(*args, **params)


@functools.partial(jit, static_argnames=("jaxpr", "mesh", "in_specs", "out_specs",
                                         "check_vma", "newly_manual_axes"))
def _run_jitted(*args, **params):
    return shard_map_p.bind(*args, **params)


def _in_mesh_order(mesh: Mesh, names: frozenset) -> tuple:
    return tuple(a for a in mesh.axis_names if a in names)


def _per_value_attr(mesh: Mesh, specs, avals, open_dims: bool) -> ir.Attribute:
    """The layouts of a manual computation's operands or results. With axes left to XLA
    (not manual), every dimension is open (``?``) so it may also be split over them."""
    items = []
    for s, a in zip(specs, avals):
        dims = []
        # a key's data has trailing physical axes too, which stay whole
        for axes in s._normalized(len(core.physical_aval(a).shape)):
            names = [f'"{n}"' for n in axes] + (["?"] if open_dims else [])
            dims.append("{" + ", ".join(names) + "}")
        # an unreduced value's devices hold summands (Shardy's ``unreduced``, in mesh order)
        unreduced = ", ".join(f'"{n}"' for n in mesh.axis_names if n in s.unreduced)
        unreduced = f", unreduced={{{unreduced}}}" if unreduced else ""
        items.append(f"<@mesh, [{', '.join(dims)}]{unreduced}>")
    return ir.Attribute.parse(f"#sdy.sharding_per_value<[{', '.join(items)}]>")


def _lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs,
              out_specs, check_vma, newly_manual_axes):
    manual_axes = _in_mesh_order(mesh, newly_manual_axes)
    mctx = ctx.module_context
    if mctx.mesh is None:  # inside a pmap body: its programs are replicated, not partitioned
        raise NotImplementedError("shard_map inside pmap is not supported; use shard_map (or "
                                  "pmap) alone over the devices")
    if tuple(mctx.mesh) != mesh.shape_tuple:
        raise ValueError(f"shard_map over {mesh} inside a program partitioned over a mesh of "
                         f"axes {tuple(mctx.mesh)}; use one mesh")
    sizes = dict(mesh.shape_tuple)
    outer = mctx.manual if isinstance(mctx.manual, frozenset) else frozenset()
    inner = dataclasses.replace(mctx, axis_env=mesh.shape_tuple,
                                manual=outer | frozenset(manual_axes))
    if all(sizes[name] == 1 for name in manual_axes):
        # As JAX: no manual region when every manual axis has one device (in a one-partition
        # program XLA would leave the region's shape custom calls unexpanded).
        with parallel.extend_axis_env_nd((name, 1) for name in manual_axes):
            return mlir.closed_subcomp(inner, jaxpr, *args)
    # Over some of the mesh's axes (or nested in a shard_map over others), dimensions stay
    # open to the axes that are not manual here, as JAX's lowering leaves them.
    open_dims = len(manual_axes) < len(mesh.axis_names)
    names = ", ".join(f'"{n}"' for n in manual_axes)
    # The tokens of the body's ordered effects lead the operands and results, replicated
    # (as JAX's): the body's ordered calls stay in order with those around it.
    kinds = mlir_tokens.ordered_effects(jaxpr)
    ntok, token_specs = len(kinds), [PartitionSpec()] * len(kinds)
    token_avals = [ShapedArray((), np.bool_)] * ntok
    token_types = mlir_tokens.token_types(kinds)
    op = sdy.ManualComputationOp(
        [*token_types, *map(mlir.aval_to_ir_type, ctx.avals_out)],
        [*mlir_tokens.current_tokens(mctx, kinds), *args],
        _per_value_attr(mesh, [*token_specs, *in_specs], [*token_avals, *ctx.avals_in],
                        open_dims),
        _per_value_attr(mesh, [*token_specs, *out_specs], [*token_avals, *ctx.avals_out],
                        open_dims),
        ir.Attribute.parse(f"#sdy<manual_axes{{{names}}}>"))
    block = op.body.blocks.append(*token_types,
                                  *[mlir.aval_to_ir_type(a) for a in jaxpr.in_avals])
    # ``manual`` (in ``inner``): the axes manual in the region (enclosing shard_maps' too).
    # The manual axes are bound while the body lowers, as while it was traced: lowering rules
    # that trace (a key's physical lowering, say) may bind collectives that look them up.
    with ir.InsertionPoint(block), \
            parallel.extend_axis_env_nd((name, sizes[name]) for name in manual_axes):
        tokens, block_args = split_list(list(block.arguments), [ntok])
        mlir_tokens.set_tokens(inner, kinds, tokens)
        outs = mlir.closed_subcomp(inner, jaxpr, *block_args)
        sdy.ReturnOp([*mlir_tokens.current_tokens(inner, kinds), *outs])
    tokens, outs = split_list(list(op.results), [ntok])
    mlir_tokens.set_tokens(mctx, kinds, tokens)
    return outs


def _without_consts(closed: ClosedJaxpr, args, in_specs):
    """A body's constants become leading replicated operands, as closed-over values do."""
    consts = list(closed.consts)
    if consts:
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(closed.jaxpr), [])
    return closed, [*consts, *args], (PartitionSpec(),) * len(consts) + tuple(in_specs)


def _bind(closed: ClosedJaxpr, args, in_specs, out_specs, mesh: Mesh, manual_axes,
          check_vma: bool) -> list:
    """Bind ``shard_map`` on a body that may have constants."""
    closed, args, in_specs = _without_consts(closed, args, in_specs)
    return shard_map_p.bind(*args, jaxpr=closed, mesh=mesh, in_specs=tuple(in_specs),
                            out_specs=tuple(out_specs), check_vma=check_vma,
                            newly_manual_axes=frozenset(manual_axes))


def _jvp(primals, tangents, *, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs, out_specs,
         check_vma, newly_manual_axes):
    manual_axes = _in_mesh_order(mesh, newly_manual_axes)
    nonzeros = [not ad.is_zero(t) for t in tangents]
    with _mesh_axes_bound(mesh, manual_axes, check_vma):
        jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    tangents_nz = [t for t in tangents if not ad.is_zero(t)]
    t_in = [s for s, nz in zip(in_specs, nonzeros) if nz]
    t_out = [s for s, nz in zip(out_specs, out_nz) if nz]
    outs = _bind(jvp_closed, [*primals, *tangents_nz], [*in_specs, *t_in],
                 [*out_specs, *t_out], mesh, manual_axes, check_vma)
    n_out = len(jaxpr.out_avals)
    tangents_it = iter(outs[n_out:])
    return outs[:n_out], [next(tangents_it) if nz else ad.Zero(o.aval.to_tangent_aval())
                          for o, nz in zip(outs[:n_out], out_nz)]


def _unsplit_front(spec: PartitionSpec) -> PartitionSpec:
    return PartitionSpec(None, *spec)


def _batcher(axis_data, vals, dims, *, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs, out_specs,
             check_vma, newly_manual_axes):
    """vmap of shard_map: the batch axis goes in front, unsplit, through the body; outputs
    that do not depend on a batched input stay unbatched."""
    manual_axes = _in_mesh_order(mesh, newly_manual_axes)
    vals = [v if d is None else batching.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    with _mesh_axes_bound(mesh, manual_axes, check_vma):
        batched, out_batched = batching.batch_jaxpr(jaxpr, axis_data,
                                                    [d is not None for d in dims], False)
    new_in = [s if d is None else _unsplit_front(s) for s, d in zip(in_specs, dims)]
    new_out = [_unsplit_front(s) if b else s for s, b in zip(out_specs, out_batched)]
    outs = _bind(batched, vals, new_in, new_out, mesh, manual_axes, check_vma)
    return outs, [0 if b else None for b in out_batched]


# ---- reverse mode ----
#
# Partial evaluation runs the known part of the body as one shard_map now and stages the
# unknown part as another. Residuals are per-device values: each leaves the known shard_map
# with its leading dimension split over all the manual axes (a scalar first becomes a
# one-element vector), so the global residual holds every device's block and the unknown
# shard_map hands each device its own back. A residual that is a known input is passed as
# that input, with its spec.
#
# With check_vma=False the transpose follows the SPMD view the collectives' transposes take
# (``psum`` transposes to ``psum``): the body is transposed as a map over all devices'
# values. An output replicated over some axes (its spec does not mention them) is one value
# held by those devices, so its cotangent is shared out among them (divided by their
# number); an input replicated over some axes was broadcast to those devices, so its
# cotangent is the sum (``psum``) of theirs. With check_vma=True the types do this (see
# ``_typed_transposed_body``).

def _unmentioned(manual_axes: tuple, spec: PartitionSpec) -> tuple:
    """The manual axes ``spec`` does not split over, in mesh order."""
    named = {a for axes in spec._normalized(0) for a in axes}
    return tuple(a for a in manual_axes if a not in named)


def _residual_spec(manual_axes: tuple) -> PartitionSpec:
    return PartitionSpec(tuple(manual_axes))


# known body -> (known body with promoted residual outputs, unknown body taking them back,
# per residual: the index of the known input it is, or None). The bodies that
# partial_eval_jaxpr returns are cached per jaxpr, so these are too: the programs compiled for
# them are reused.
_residual_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _residual_plan(known: ClosedJaxpr, unknown: ClosedJaxpr, num_res: int):
    hit = _residual_plans.get(known)
    if hit is not None:
        return hit
    n_known_out = len(known.out_avals) - num_res
    invar_index = {v: i for i, v in enumerate(known.jaxpr.invars)}
    res_atoms = known.jaxpr.outvars[n_known_out:]
    fwd = [invar_index.get(a) if type(a) is core.Var else None for a in res_atoms]
    res_avals = known.out_avals[n_known_out:]
    promoted = [f is None and not a.shape for f, a in zip(fwd, res_avals)]

    def known_body(*args):
        outs = core.eval_jaxpr(known.jaxpr, known.consts, *args)
        res = [reshape(r, (1,)) if p else r
               for r, f, p in zip(outs[n_known_out:], fwd, promoted) if f is None]
        return [*res, *outs[:n_known_out]]  # residuals first, as JAX's known shard_map

    def unknown_body(*args):
        res = [reshape(r, ()) if p else r for r, p in zip(args[:num_res], promoted)]
        return core.eval_jaxpr(unknown.jaxpr, unknown.consts, *res, *args[num_res:])

    jaxpr, consts = pe.trace_to_jaxpr(known_body, known.in_avals, known.jaxpr.debug_info)
    known_w = ClosedJaxpr(jaxpr, consts)
    uk_avals = [a.update(shape=(1,)) if p else a for a, p in zip(res_avals, promoted)]
    jaxpr, consts = pe.trace_to_jaxpr(unknown_body, [*uk_avals, *unknown.in_avals[num_res:]],
                                      unknown.jaxpr.debug_info)
    plan = (known_w, ClosedJaxpr(jaxpr, consts), fwd)
    _residual_plans[known] = plan
    return plan


def _partial_eval(trace: pe.JaxprTrace, *args, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs,
                  out_specs, check_vma, newly_manual_axes):
    manual_axes = _in_mesh_order(mesh, newly_manual_axes)
    unknowns = [not trace.is_known(x) for x in args]
    with _mesh_axes_bound(mesh, manual_axes, check_vma):
        known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(jaxpr, unknowns, False)
        known, unknown, fwd = _residual_plan(known, unknown, num_res)
    known_args = [x for x, uk in zip(args, unknowns) if not uk]
    known_specs = [s for s, uk in zip(in_specs, unknowns) if not uk]
    n_res_out = sum(f is None for f in fwd)
    known_out_specs = [_residual_spec(manual_axes)] * n_res_out
    known_out_specs += [s for s, uk in zip(out_specs, out_uk) if not uk]
    known_outs = []
    if known_out_specs:
        with core.set_current_trace(trace.parent):
            known_outs = _bind(known, known_args, known_specs, known_out_specs, mesh,
                               manual_axes, check_vma)
    res_out = iter(known_outs[:n_res_out])
    residuals, res_specs = [], []
    for f in fwd:
        residuals.append(next(res_out) if f is None else known_args[f])
        res_specs.append(_residual_spec(manual_axes) if f is None else known_specs[f])
    unknown, uk_args, uk_specs = _without_consts(
        unknown, [*residuals, *(x for x, uk in zip(args, unknowns) if uk)],
        [*res_specs, *(s for s, uk in zip(in_specs, unknowns) if uk)])
    params = {"jaxpr": unknown, "mesh": mesh, "in_specs": tuple(uk_specs),
              "out_specs": tuple(s for s, uk in zip(out_specs, out_uk) if uk),
              "check_vma": check_vma, "newly_manual_axes": newly_manual_axes}
    out_avals = _abstract_eval(**params)
    unknown_outs = iter(trace.stage(shard_map_p, uk_args, out_avals, params))
    known_it = iter(known_outs[n_res_out:])
    return [next(unknown_outs) if uk else next(known_it) for uk in out_uk]


# transposed body -> {(mesh, specs, which cotangents): the body with the cotangents of
# replicated outputs shared out and those of replicated inputs summed}
_transposed_bodies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cts_first(t_closed: ClosedJaxpr, n_res: int, avals) -> ClosedJaxpr:
    """The transposed body taking the cotangents first, then the residuals (JAX's order)."""
    n_ct = len(avals) - n_res

    def body(*args):
        return core.eval_jaxpr(t_closed.jaxpr, t_closed.consts, *args[n_ct:], *args[:n_ct])

    jaxpr, consts = pe.trace_to_jaxpr(body, avals, t_closed.jaxpr.debug_info)
    return ClosedJaxpr(jaxpr, consts)


def _typed_transposed_body(t_closed: ClosedJaxpr, n_res: int, ct_specs) -> ClosedJaxpr:
    """With ``check_vma``, the types do the work: each cotangent is typed as varying over the
    axes its output's spec splits it over (as JAX's transpose types it), and the transposed
    body is traced again on those types, so a replicated input's cotangent is ``psum``-med by
    the transpose of the ``pvary`` that made it varying."""
    avals = [*(a.update(vma=a.vma | spec_axes(s))
               for a, s in zip(t_closed.in_avals[n_res:], ct_specs)),
             *t_closed.in_avals[:n_res]]
    return _cts_first(t_closed, n_res, avals)


def _spmd_transposed_body(t_closed: ClosedJaxpr, mesh: Mesh, manual_axes: tuple, n_res: int,
                          ct_specs, lin_specs, check_vma: bool) -> ClosedJaxpr:
    key = (mesh, manual_axes, tuple(ct_specs), tuple(lin_specs), n_res, check_vma)
    per = _transposed_bodies.setdefault(t_closed, {})
    hit = per.get(key)
    if hit is not None:
        return hit
    if check_vma:
        per[key] = result = _typed_transposed_body(t_closed, n_res, ct_specs)
        return result
    sizes = mesh.shape

    def share(ct, spec):
        n = math.prod(sizes[a] for a in _unmentioned(manual_axes, spec))
        return ct if n == 1 else div(ct, np.array(n, ct.aval.dtype))

    def body(*args):
        n_ct = len(ct_specs)
        cts = [share(c, s) for c, s in zip(args[:n_ct], ct_specs)]
        outs = core.eval_jaxpr(t_closed.jaxpr, t_closed.consts, *args[n_ct:], *cts)
        return [parallel.psum_p.bind(o, axes=axes, axis_index_groups=None) if axes else o
                for o, axes in ((o, _unmentioned(manual_axes, s))
                                for o, s in zip(outs, lin_specs))]

    avals = [*t_closed.in_avals[n_res:], *t_closed.in_avals[:n_res]]  # cotangents first
    jaxpr, consts = pe.trace_to_jaxpr(body, avals, t_closed.jaxpr.debug_info)
    per[key] = result = ClosedJaxpr(jaxpr, consts)
    return result


def _ct_spec(spec: PartitionSpec) -> PartitionSpec:
    if not (spec.unreduced or spec.reduced):
        return spec
    return spec.update(unreduced=spec.reduced, reduced=spec.unreduced)


def _transpose(cts, *args, jaxpr: ClosedJaxpr, mesh: Mesh, in_specs, out_specs,
               check_vma, newly_manual_axes):
    manual_axes = _in_mesh_order(mesh, newly_manual_axes)
    linear = [ad.is_undefined_primal(x) for x in args]
    ct_nonzero = [not ad.is_zero(c) for c in cts]
    with _mesh_axes_bound(mesh, manual_axes, check_vma):
        t_closed, lin_nz = ad.transpose_jaxpr(jaxpr, linear, ct_nonzero)
        # a cotangent is unreduced where its value is reduced, and reduced where unreduced
        lin_specs = [_ct_spec(s) for s, lin in zip(in_specs, linear) if lin]
        nz_specs = [s for s, nz in zip(lin_specs, lin_nz) if nz]
        ct_specs = [_ct_spec(s) for s, nz in zip(out_specs, ct_nonzero) if nz]
        n_res = len(args) - sum(linear)
        body = _spmd_transposed_body(t_closed, mesh, manual_axes, n_res, ct_specs, nz_specs,
                                     check_vma)
    ins = [x for x, lin in zip(args, linear) if not lin]
    ins_specs = [s for s, lin in zip(in_specs, linear) if not lin]
    outs = iter(_bind(body, [*(c for c, nz in zip(cts, ct_nonzero) if nz), *ins],
                      [*ct_specs, *ins_specs], nz_specs, mesh, manual_axes, check_vma)
                if nz_specs else ())
    nz_it = iter(lin_nz)
    return [(next(outs) if next(nz_it) else ad.Zero(x.aval)) if lin else None
            for x, lin in zip(args, linear)]


shard_map_p.def_impl(_impl)
core.defpp_params(shard_map_p, _pp_params)
shard_map_p.def_abstract_eval(_abstract_eval)
mlir.register_lowering(shard_map_p, _lowering)
ad.defjvp_rule(shard_map_p, _jvp)
batching.defrule(shard_map_p, _batcher)
pe.defpartial_eval(shard_map_p, _partial_eval)
ad.deftranspose(shard_map_p, _transpose)
