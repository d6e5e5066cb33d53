"""Collective primitives over named axes: ``psum``, ``pmax``, ``all_gather``, ``ppermute``, ...

A collective names an axis (``axis_name``, or a tuple of names) bound by an enclosing ``pmap``
(devices: the primitive lowers to a StableHLO collective over replica groups) or ``vmap`` with
``axis_name`` (one device: its batching rule rewrites it into array operations over the batch
axis, as JAX does). The *axis environment* tells the wrappers the size of each named axis while
tracing: ``pmap`` pushes a frame with ``extend_axis_env`` while it traces its body, and a
vmapped axis is found with ``batching.find_axis``. A name bound by neither raises
``NameError("unbound axis name: ...")``.

Sizes that shape a result (``all_gather``, ``psum_scatter``, ``all_to_all``) are recorded as the
``axis_size`` parameter when the primitive is bound, so abstract evaluation never needs the
environment again (transformations re-trace bodies outside it).

Differentiation follows JAX's pmap semantics: every collective here is linear, and ``psum``
transposes to ``psum`` (a psum is treated as a sum followed by a broadcast), so
``pmap(grad(lambda x: psum(f(x), 'i')))`` scales gradients by the axis size exactly as JAX does.
``pmax``/``pmin`` have no derivative rule in JAX either.
"""
from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax import elementwise
from jaxkit.lax.elementwise import mul
from jaxkit.lax.reductions import reduce_max, reduce_min
from jaxkit.lax.slicing import index_in_dim
from jaxkit.lax.structural import (
    broadcast_in_dim,
    concatenate,
    convert_element_type,
    iota,
    reduce_sum,
    reshape,
    transpose,
    zeros_like_array,
)
from jaxkit.runtime.sharding import current_abstract_mesh
from jaxkit.typing import Array

__all__ = ["all_gather", "all_gather_p", "all_to_all", "all_to_all_p", "axis_index",
           "axis_index_p", "axis_size", "extend_axis_env", "pmax", "pmax_p", "pmean",
           "pmin", "pmin_p", "ppermute", "ppermute_p", "pshuffle", "pswapaxes",
           "psum", "psum_p", "psum_scatter", "reduce_scatter_p"]

# --------------------------------------------------------------------------------------------
# The axis environment
# --------------------------------------------------------------------------------------------


class _AxisEnv(threading.local):
    def __init__(self):
        self.frames: list[tuple[Any, int]] = []  # (name, size) of pmapped axes, innermost last


_axis_env = _AxisEnv()


@contextlib.contextmanager
def extend_axis_env(name: Any, size: int) -> Iterator[None]:
    """Bind the axis ``name`` to ``size`` while the block runs (``pmap`` traces its body in
    one). A ``None`` name binds nothing."""
    if name is None:
        yield
        return
    _axis_env.frames.append((name, int(size)))
    try:
        yield
    finally:
        _axis_env.frames.pop()


@contextlib.contextmanager
def extend_axis_env_nd(axes: Iterable[tuple[Any, int]]) -> Iterator[None]:
    """``extend_axis_env`` for several ``(name, size)`` pairs (a mesh's), outermost first."""
    with contextlib.ExitStack() as stack:
        for name, size in axes:
            stack.enter_context(extend_axis_env(name, size))
        yield


def named_axes_key() -> tuple:
    """The named axes a function traced here sees: ``(name, size)`` of the vmapped ones
    (innermost first) and of those bound by ``pmap``/``axis_env``, then the abstract mesh in
    context, if any. Part of the key of a cached trace: collectives fold an axis's size into
    the program (``psum(1, 'i')``), and a function may read the mesh."""
    key = tuple(batching.named_axes_in_scope()) + tuple(_axis_env.frames)
    mesh = current_abstract_mesh()
    return key if mesh.empty else (*key, mesh)


def _lookup_axis_size(name: Any, api_name: str | None = None) -> int:
    """The size of one named axis: a vmapped axis (innermost) or a pmapped one. Unbound, it
    raises JAX's NameError (naming ``api_name``, where JAX's check for that API does)."""
    try:
        return batching.find_axis(name).axis_data.size
    except NameError:
        pass
    for frame_name, size in reversed(_axis_env.frames):
        if frame_name == name:
            return size
    raise NameError(f"unbound axis name: {name}" if api_name is None else
                    f"Found an unbound axis name: {name}. To fix this, please call {api_name} "
                    "under `jax.shard_map`.")


def _axes_tuple(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def axis_size(axis_name: Any, api_name: str | None = None) -> int:
    """The size of the named axis (the product of the sizes for a tuple of names)."""
    return math.prod(_lookup_axis_size(n, api_name) for n in _axes_tuple(axis_name))


def _canonical_groups(axis_index_groups) -> tuple[tuple[int, ...], ...] | None:
    if axis_index_groups is None:
        return None
    groups = tuple(tuple(int(i) for i in g) for g in axis_index_groups)
    indices = sorted(i for g in groups for i in g)
    if indices != list(range(len(indices))):
        raise ValueError("axis_index_groups must cover all indices exactly once")
    return groups


def _group_size(axes: tuple, groups, api_name: str | None = None) -> int:
    if groups is not None:
        sizes = {len(g) for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"axis_index_groups must all have the same size, got {groups}")
        total = axis_size(axes, api_name)
        if sum(len(g) for g in groups) != total:
            raise ValueError(f"axis_index_groups {groups} must cover the {total} indices of "
                             f"axis {axes}")
        return sizes.pop()
    return axis_size(axes, api_name)


def _is_traced(x) -> bool:
    return isinstance(x, core.Tracer)


def _unbound_impl(prim_name: str, *args, **params):
    names = params.get("axes", params.get("axis_name"))
    raise NameError(f"unbound axis name: {_axes_tuple(names)[0]} ({prim_name} must be used "
                    "inside pmap, or inside vmap with an axis_name)")


def _collective_primitive(name: str, abstract_eval) -> core.Primitive:
    prim = core.Primitive(name)
    prim.def_impl(partial(_unbound_impl, name))
    prim.def_abstract_eval(abstract_eval)
    return prim


# --------------------------------------------------------------------------------------------
# Lowering helpers: replica groups from the module's axis environment
# --------------------------------------------------------------------------------------------


def replica_groups(axis_env: Sequence[tuple[Any, int]], names: Sequence,
                   axis_index_groups=None) -> list[list[int]]:
    """Replica ids that take part together in a collective over ``names``.

    ``axis_env`` lists the pmapped axes outermost first; replica ids enumerate them row-major.
    Each group holds the replicas that differ only in the named axes."""
    env_names = [n for n, _ in axis_env]
    sizes = [s for _, s in axis_env]
    for n in names:
        if n not in env_names:
            raise NameError(f"unbound axis name: {n}")
    positions = [env_names.index(n) for n in names]
    ids = np.arange(math.prod(sizes), dtype=np.int64).reshape(sizes or [1])
    group_len = math.prod(sizes[p] for p in positions)
    groups = np.moveaxis(ids, positions, list(range(len(positions)))).reshape(group_len, -1).T
    groups = groups.tolist()
    if axis_index_groups is not None:
        groups = [[g[i] for i in idx] for g in groups for idx in axis_index_groups]
    return groups


def _channel(ctx, global_ids: bool = True) -> dict:
    """Inside a shard_map body (a manual computation of a partitioned program) devices are
    partitions, not replicas: a collective needs a channel of its own and names devices by
    their global ids (the partition ids there). Nothing is needed under pmap."""
    mctx = ctx.module_context
    if not mctx.manual:
        return {}
    mctx.channels[0] += 1
    kw = {"channel_handle": hlo.ChannelHandle.get(mctx.channels[0], 1)}  # device to device
    if global_ids:
        kw["use_global_device_ids"] = True
    return kw


def _groups_attr(groups: Sequence[Sequence[int]]):
    width = max(len(g) for g in groups)
    arr = np.full((len(groups), width), -1, np.int64)  # uneven groups are padded with -1
    for i, g in enumerate(groups):
        arr[i, :len(g)] = g
    return mlir.ir.DenseIntElementsAttr.get(np.ascontiguousarray(arr))


def _scalar_type(aval: ShapedArray):
    return mlir.aval_to_ir_type(ShapedArray((), aval.dtype))


def _add_reducer_region(op, aval: ShapedArray, combine) -> None:
    block = op.regions[0].blocks.append(_scalar_type(aval), _scalar_type(aval))
    with mlir.ir.InsertionPoint(block):
        hlo.ReturnOp([combine(*block.arguments).result])


# --------------------------------------------------------------------------------------------
# psum / pmax / pmin
# --------------------------------------------------------------------------------------------


def psum(x, axis_name, *, axis_index_groups=None):
    """All-reduce sum of ``x`` (a pytree) over the named axis. Booleans are summed as int32.
    Lowers to ``stablehlo.all_reduce``."""
    axes = _axes_tuple(axis_name)
    groups = _canonical_groups(axis_index_groups)
    leaves, treedef = tree_util.tree_flatten(x)
    # JAX names psum in its unbound-axis error when it traces one (not for a constant)
    size = _group_size(axes, groups, "psum" if any(map(_is_traced, leaves)) else None)
    leaves = [convert_element_type(v, np.int32) if dtypes.dtype(v) == np.bool_ else v
              for v in leaves]
    if not any(_is_traced(v) for v in leaves):
        # Every device holds the same constant: the sum is size * x (JAX does this too).
        out = [_times(v, size) for v in leaves]
    else:
        out = [bind_psum(v, axes, groups) for v in leaves]
    return tree_util.tree_unflatten(treedef, out)


def bind_psum(x, axes: tuple, groups):  # replaced by jaxkit.lax.parallel_vma (psum_invariant)
    return psum_p.bind(x, axes=axes, axis_index_groups=groups)


def _times(x, n: int):
    if isinstance(x, (int, float, complex)) and not isinstance(x, bool):
        return x * n
    return mul(x, np.array(n, dtypes.dtype(x, canonicalize=True)))


def pmean(x, axis_name, *, axis_index_groups=None):
    """All-reduce mean: ``psum(x) / n`` with ``n`` the (group) size of the axis."""
    summed = psum(x, axis_name, axis_index_groups=axis_index_groups)
    n = _group_size(_axes_tuple(axis_name), _canonical_groups(axis_index_groups))

    def divide(v):
        dtype = dtypes.dtype(v, canonicalize=True)
        if not dtypes.issubdtype(dtype, np.inexact):
            dtype = dtypes.default_float_dtype()
            v = convert_element_type(v, dtype)
        return elementwise.div(v, np.array(n, dtype))

    return tree_util.tree_map(divide, summed)


def pmax(x, axis_name, *, axis_index_groups=None):
    """All-reduce maximum over the named axis. Lowers to ``stablehlo.all_reduce``."""
    return _all_reduce(pmax_p, x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    """All-reduce minimum over the named axis. Lowers to ``stablehlo.all_reduce``."""
    return _all_reduce(pmin_p, x, axis_name, axis_index_groups)


def _all_reduce(prim: core.Primitive, x, axis_name, axis_index_groups):
    axes = _axes_tuple(axis_name)
    groups = _canonical_groups(axis_index_groups)
    _group_size(axes, groups, "psum")  # (JAX's check names psum for pmax and pmin too)
    return tree_util.tree_map(lambda v: prim.bind(v, axes=axes, axis_index_groups=groups), x)


def _allreduce_abstract_eval(x, *, axes, axis_index_groups):
    return ShapedArray(x.shape, x.dtype)


def _allreduce_lowering(combine, bool_combine=None):
    def rule(ctx, x, *, axes, axis_index_groups):
        aval = ctx.avals_in[0]
        groups = replica_groups(ctx.module_context.axis_env, axes, axis_index_groups)
        op = hlo.AllReduceOp([x.type], [x], _groups_attr(groups), **_channel(ctx))
        op_fn = bool_combine if (bool_combine is not None and aval.dtype == np.bool_) else combine
        _add_reducer_region(op, aval, op_fn)
        return op.results[0]
    return rule


def _allreduce_batcher(prim, positional_reduce, if_unmapped, axis_data, vals, dims, *, axes,
                       axis_index_groups):
    (x,), (d,) = vals, dims
    if axis_data.name not in axes:
        return prim.bind(x, axes=axes, axis_index_groups=axis_index_groups), d
    if axis_index_groups is not None:
        raise NotImplementedError(f"axis_index_groups is not supported for {prim.name} over a "
                                  "vmapped axis")
    out = if_unmapped(x, axis_data.size) if d is None else positional_reduce(x, (d,))
    rest = tuple(a for a in axes if a != axis_data.name)
    if rest:
        out = prim.bind(out, axes=rest, axis_index_groups=None)
    return out, None


psum_p = _collective_primitive("psum", _allreduce_abstract_eval)
ad.deflinear2(psum_p, lambda ct, x, *, axes, axis_index_groups: [
    psum_p.bind(ct, axes=axes, axis_index_groups=axis_index_groups)])
batching.defrule(psum_p, partial(_allreduce_batcher, psum_p, reduce_sum,
                                                   _times), named_axis=True)
mlir.register_lowering(psum_p, _allreduce_lowering(hlo.AddOp, hlo.OrOp))

pmax_p = _collective_primitive("pmax", _allreduce_abstract_eval)
batching.defrule(pmax_p, partial(_allreduce_batcher, pmax_p, reduce_max,
                                                   lambda v, n: v), named_axis=True)
mlir.register_lowering(pmax_p, _allreduce_lowering(hlo.MaxOp, hlo.OrOp))

pmin_p = _collective_primitive("pmin", _allreduce_abstract_eval)
batching.defrule(pmin_p, partial(_allreduce_batcher, pmin_p, reduce_min,
                                                   lambda v, n: v), named_axis=True)
mlir.register_lowering(pmin_p, _allreduce_lowering(hlo.MinOp, hlo.AndOp))


# --------------------------------------------------------------------------------------------
# Array helpers for the batching rules
# --------------------------------------------------------------------------------------------


def _moveaxis(x, src: int, dst: int):
    if src == dst:
        return x
    perm = [i for i in range(np.ndim(x)) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def _swapaxes(x, a: int, b: int):
    if a == b:
        return x
    perm = list(range(np.ndim(x)))
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def _splitaxis(x, axis: int, factor: int):
    shape = list(np.shape(x))
    shape[axis:axis + 1] = [factor, shape[axis] // factor]
    return reshape(x, shape)


def _foldaxis(x, axis: int):
    shape = list(np.shape(x))
    shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
    return reshape(x, shape)


def _insert_axis(x, axis: int, size: int):
    shape = list(np.shape(x))
    shape.insert(axis, size)
    return broadcast_in_dim(x, shape, [i for i in range(len(shape)) if i != axis])


def _require_single_axis(prim: core.Primitive, names: tuple, groups) -> None:
    if groups is not None:
        raise NotImplementedError(f"axis_index_groups is not supported for {prim.name} over a "
                                  "vmapped axis")
    if len(names) > 1:
        raise NotImplementedError(f"{prim.name} over several axes including a vmapped one "
                                  f"({names}) is not supported")


# --------------------------------------------------------------------------------------------
# all_gather
# --------------------------------------------------------------------------------------------


def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False):
    """Gather ``x`` from every index of the named axis, stacked at position ``axis`` (or
    concatenated along it when ``tiled``). Lowers to ``stablehlo.all_gather``."""
    names = _axes_tuple(axis_name)
    groups = _canonical_groups(axis_index_groups)
    size = _group_size(names, groups)

    def bind(v):
        rank = np.ndim(v) + (0 if tiled else 1)  # the rank the gathered axis is counted in
        if rank == 0:
            raise ValueError("all_gather with tiled=True needs an operand of rank >= 1")
        dim = int(axis) % rank
        return all_gather_p.bind(v, all_gather_dimension=dim, axis_name=names,
                                 axis_index_groups=groups, axis_size=size, tiled=bool(tiled))

    return tree_util.tree_map(bind, x)


def _all_gather_abstract_eval(x, *, all_gather_dimension, axis_name, axis_index_groups,
                              axis_size, tiled):
    shape = list(x.shape)
    if tiled:
        if not shape:
            raise ValueError("all_gather with tiled=True needs an operand of rank >= 1")
        shape[all_gather_dimension] *= axis_size
    else:
        shape.insert(all_gather_dimension, axis_size)
    return ShapedArray(shape, x.dtype)


def _all_gather_transpose(ct, x, *, all_gather_dimension, axis_name, axis_index_groups,
                          axis_size, tiled):
    return [reduce_scatter_p.bind(ct, scatter_dimension=all_gather_dimension,
                                  axis_name=axis_name, axis_index_groups=axis_index_groups,
                                  axis_size=axis_size, tiled=tiled)]


def _all_gather_batcher(axis_data, vals, dims, *, all_gather_dimension, axis_name,
                        axis_index_groups, axis_size, tiled):
    (x,), (d,) = vals, dims
    dim = all_gather_dimension
    if axis_data.name not in axis_name:
        if d is not None:
            if d <= dim:
                dim += 1
            elif not tiled:
                d += 1
        out = all_gather_p.bind(x, all_gather_dimension=dim, axis_name=axis_name,
                                axis_index_groups=axis_index_groups, axis_size=axis_size,
                                tiled=tiled)
        return out, d
    _require_single_axis(all_gather_p, axis_name, axis_index_groups)
    y = _insert_axis(x, dim, axis_data.size) if d is None else _moveaxis(x, d, dim)
    if tiled:
        y = _foldaxis(y, dim)
    return y, None


def _all_gather_lowering(ctx, x, *, all_gather_dimension, axis_name, axis_index_groups,
                         axis_size, tiled):
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    if not tiled:
        shape = list(aval_in.shape)
        shape.insert(all_gather_dimension, 1)
        x = mlir.broadcast_in_dim(x, aval_in.update(shape=shape),
                                  [i for i in range(len(shape)) if i != all_gather_dimension])
    groups = replica_groups(ctx.module_context.axis_env, axis_name, axis_index_groups)
    return hlo.AllGatherOp([mlir.aval_to_ir_type(aval_out)], [x], all_gather_dimension,
                           _groups_attr(groups), **_channel(ctx)).results[0]


all_gather_p = _collective_primitive("all_gather", _all_gather_abstract_eval)
ad.deflinear2(all_gather_p, _all_gather_transpose)
batching.defrule(all_gather_p, _all_gather_batcher, named_axis=True)
mlir.register_lowering(all_gather_p, _all_gather_lowering)


# --------------------------------------------------------------------------------------------
# psum_scatter (the reduce_scatter primitive)
# --------------------------------------------------------------------------------------------


def psum_scatter(x, axis_name, *, scatter_dimension: int = 0, axis_index_groups=None,
                 tiled: bool = False):
    """``psum`` whose result is left scattered: index ``i`` of the named axis keeps block ``i``
    of ``scatter_dimension`` (squeezed unless ``tiled``). Lowers to
    ``stablehlo.reduce_scatter``."""
    names = _axes_tuple(axis_name)
    groups = _canonical_groups(axis_index_groups)
    size = _group_size(names, groups)

    def bind(v):
        dim = int(scatter_dimension) % max(np.ndim(v), 1)
        return bind_reduce_scatter(v, scatter_dimension=dim, axis_name=names,
                                   axis_index_groups=groups, axis_size=size, tiled=bool(tiled))

    return tree_util.tree_map(bind, x)


def bind_reduce_scatter(x, **params):  # replaced by jaxkit.lax.parallel_ur (unreduced operands)
    return reduce_scatter_p.bind(x, **params)


def _reduce_scatter_abstract_eval(x, *, scatter_dimension, axis_name, axis_index_groups,
                                  axis_size, tiled):
    shape = list(x.shape)
    if not shape:
        raise ValueError("psum_scatter needs an operand of rank >= 1")
    n = shape[scatter_dimension]
    if tiled:
        if n % axis_size:
            raise ValueError(f"tiled psum_scatter: the size {n} of scatter_dimension "
                             f"{scatter_dimension} must be divisible by the axis size "
                             f"{axis_size}")
        shape[scatter_dimension] = n // axis_size
    else:
        if n != axis_size:
            raise ValueError(f"psum_scatter: the size {n} of scatter_dimension "
                             f"{scatter_dimension} must equal the axis size {axis_size} "
                             "(or pass tiled=True)")
        del shape[scatter_dimension]
    return ShapedArray(shape, x.dtype)


def _reduce_scatter_transpose(ct, x, *, scatter_dimension, axis_name, axis_index_groups,
                              axis_size, tiled):
    return [all_gather_p.bind(ct, all_gather_dimension=scatter_dimension, axis_name=axis_name,
                              axis_index_groups=axis_index_groups, axis_size=axis_size,
                              tiled=tiled)]


def _reduce_scatter_batcher(axis_data, vals, dims, *, scatter_dimension, axis_name,
                            axis_index_groups, axis_size, tiled):
    (x,), (d,) = vals, dims
    dim = scatter_dimension
    if axis_data.name not in axis_name:
        if d is not None:
            if d <= dim:
                dim += 1
            elif not tiled:
                d -= 1
        out = reduce_scatter_p.bind(x, scatter_dimension=dim, axis_name=axis_name,
                                    axis_index_groups=axis_index_groups, axis_size=axis_size,
                                    tiled=tiled)
        return out, d
    _require_single_axis(reduce_scatter_p, axis_name, axis_index_groups)
    y = _times(x, axis_data.size) if d is None else reduce_sum(x, (d,))
    if tiled:
        y = _splitaxis(y, dim, axis_data.size)
    return y, dim


def _reduce_scatter_lowering(ctx, x, *, scatter_dimension, axis_name, axis_index_groups,
                             axis_size, tiled):
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    shape = list(aval_in.shape)
    shape[scatter_dimension] //= axis_size
    groups = replica_groups(ctx.module_context.axis_env, axis_name, axis_index_groups)
    op = hlo.ReduceScatterOp(mlir.aval_to_ir_type(aval_in.update(shape=shape)), x,
                             scatter_dimension, _groups_attr(groups), **_channel(ctx))
    _add_reducer_region(op, aval_in, hlo.OrOp if aval_in.dtype == np.bool_ else hlo.AddOp)
    if tiled:
        return op.result
    return hlo.ReshapeOp(mlir.aval_to_ir_type(aval_out), op.result).result


reduce_scatter_p = _collective_primitive("reduce_scatter", _reduce_scatter_abstract_eval)
ad.deflinear2(reduce_scatter_p, _reduce_scatter_transpose)
batching.defrule(reduce_scatter_p, _reduce_scatter_batcher, named_axis=True)
mlir.register_lowering(reduce_scatter_p, _reduce_scatter_lowering)


# --------------------------------------------------------------------------------------------
# ppermute
# --------------------------------------------------------------------------------------------


def ppermute(x, axis_name, perm):
    """Send the value at index ``src`` of the named axis to index ``dst`` for each pair of
    ``perm``; indices that receive nothing get zeros. Lowers to
    ``stablehlo.collective_permute``."""
    names = _axes_tuple(axis_name)
    size = axis_size(names, "ppermute")
    perm = tuple((int(s), int(d)) for s, d in perm)
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}.")
    if any(not 0 <= i < size for i in srcs + dsts):
        raise ValueError(f"ppermute indices must be in [0, {size}) for axis {names}, got {perm}")
    return tree_util.tree_map(lambda v: ppermute_p.bind(v, axis_name=names, perm=perm), x)


def pshuffle(x, axis_name, perm):
    """``ppermute`` with ``perm[i]`` the source of index ``i``: ``perm`` is a permutation."""
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"pshuffle perm must be a permutation, got {perm}")
    return ppermute(x, axis_name, [(src, dst) for dst, src in enumerate(perm)])


def _ppermute_batcher(axis_data, vals, dims, *, axis_name, perm):
    (x,), (d,) = vals, dims
    if axis_data.name not in axis_name:
        return ppermute_p.bind(x, axis_name=axis_name, perm=perm), d
    rest = tuple(n for n in axis_name if n != axis_data.name)
    if rest:
        return ppermute_p.bind(x, axis_name=rest, perm=perm), d
    if d is None:
        return x, None
    sources = {dst: src for src, dst in perm}
    pieces = []
    for i in range(axis_data.size):
        piece = index_in_dim(x, sources.get(i, 0), d, keepdims=True)
        pieces.append(piece if i in sources else zeros_like_array(piece))
    return concatenate(pieces, d), d


def _ppermute_lowering(ctx, x, *, axis_name, perm):
    groups = replica_groups(ctx.module_context.axis_env, axis_name)
    pairs = np.array([[g[s], g[d]] for g in groups for s, d in perm], np.int64).reshape(-1, 2)
    attr = mlir.ir.DenseIntElementsAttr.get(np.ascontiguousarray(pairs))
    return hlo.CollectivePermuteOp(x, attr, **_channel(ctx, global_ids=False)).results[0]


ppermute_p = _collective_primitive("ppermute", lambda x, *, axis_name, perm: x.update(
    weak_type=False))
ad.deflinear2(ppermute_p, lambda ct, x, *, axis_name, perm: [ppermute_p.bind(
    ct, axis_name=axis_name, perm=tuple((d, s) for s, d in perm))])
batching.defrule(ppermute_p, _ppermute_batcher, named_axis=True)
mlir.register_lowering(ppermute_p, _ppermute_lowering)


# --------------------------------------------------------------------------------------------
# all_to_all
# --------------------------------------------------------------------------------------------


def pswapaxes(x, axis_name, axis: int, *, axis_index_groups=None):
    """Swap the mapped axis ``axis_name`` with the array axis ``axis`` (of the same size): an
    ``all_to_all`` that splits and stacks at ``axis``."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def all_to_all(x, axis_name, split_axis: int, concat_axis: int, *, axis_index_groups=None,
               tiled: bool = False):
    """Split ``split_axis`` into one block per index of the named axis, send block ``j`` to
    index ``j``, and stack the received blocks at ``concat_axis`` (concatenate them when
    ``tiled``). Lowers to ``stablehlo.all_to_all``."""
    names = _axes_tuple(axis_name)
    groups = _canonical_groups(axis_index_groups)
    size = _group_size(names, groups)

    def bind(v, split_axis=int(split_axis), concat_axis=int(concat_axis)):
        shape = np.shape(v)
        split_axis %= len(shape)
        if tiled:
            concat_axis %= len(shape)
            if shape[split_axis] % size:
                raise ValueError(f"The size of all_to_all split_axis ({shape[split_axis]}) has "
                                 f"to be divisible by the size of the named axis {names} "
                                 f"({size})")
        else:
            concat_axis %= len(shape)
            if shape[split_axis] != size:
                raise ValueError("all_to_all requires the size of the mapped axis axis_name to "
                                 "equal x.shape[split_axis], but they are "
                                 f"{size} and {shape[split_axis]} respectively.")
            if split_axis < concat_axis:
                concat_axis += 1  # a position after split_axis is removed
                v = _insert_axis(v, concat_axis, 1)
            elif concat_axis < split_axis:
                v = _insert_axis(v, concat_axis, 1)
                split_axis += 1
        out = all_to_all_p.bind(v, split_axis=split_axis, concat_axis=concat_axis,
                                axis_name=names, axis_index_groups=groups, axis_size=size,
                                tiled=bool(tiled))
        if not tiled and split_axis != concat_axis:
            out = reshape(out, [s for i, s in enumerate(np.shape(out)) if i != split_axis])
        return out

    return tree_util.tree_map(bind, x)


def _all_to_all_abstract_eval(x, *, split_axis, concat_axis, axis_name, axis_index_groups,
                              axis_size, tiled):
    shape = list(x.shape)
    if shape[split_axis] % axis_size:
        raise ValueError(f"all_to_all: split_axis size {shape[split_axis]} is not divisible by "
                         f"the axis size {axis_size}")
    shape[split_axis] //= axis_size
    shape[concat_axis] *= axis_size
    return ShapedArray(shape, x.dtype)


def _all_to_all_transpose(ct, x, *, split_axis, concat_axis, axis_name, axis_index_groups,
                          axis_size, tiled):
    return [all_to_all_p.bind(ct, split_axis=concat_axis, concat_axis=split_axis,
                              axis_name=axis_name, axis_index_groups=axis_index_groups,
                              axis_size=axis_size, tiled=tiled)]


def _all_to_all_batcher(axis_data, vals, dims, *, split_axis, concat_axis, axis_name,
                        axis_index_groups, axis_size, tiled):
    (x,), (d,) = vals, dims
    if axis_data.name not in axis_name:
        if d is not None:
            split_axis += d <= split_axis
            concat_axis += d <= concat_axis
        out = all_to_all_p.bind(x, split_axis=split_axis, concat_axis=concat_axis,
                                axis_name=axis_name, axis_index_groups=axis_index_groups,
                                axis_size=axis_size, tiled=tiled)
        return out, d
    _require_single_axis(all_to_all_p, axis_name, axis_index_groups)
    n = axis_data.size
    if d is None:
        x, d = _insert_axis(x, 0, n), 0
    if split_axis == concat_axis:
        axis = split_axis + (d <= split_axis)
        d_before = d
        x = _splitaxis(x, axis, n)
        d += axis <= d
        return _foldaxis(_swapaxes(x, d, axis), axis), d_before
    x_concat = _foldaxis(_moveaxis(x, d, concat_axis), concat_axis)
    return _splitaxis(x_concat, split_axis, n), split_axis


def _all_to_all_lowering(ctx, x, *, split_axis, concat_axis, axis_name, axis_index_groups,
                         axis_size, tiled):
    groups = replica_groups(ctx.module_context.axis_env, axis_name, axis_index_groups)
    if len(groups[0]) == 1:
        return x
    return hlo.AllToAllOp([x], split_axis, concat_axis, len(groups[0]),
                          _groups_attr(groups), **_channel(ctx, global_ids=False)).results[0]


all_to_all_p = _collective_primitive("all_to_all", _all_to_all_abstract_eval)
ad.deflinear2(all_to_all_p, _all_to_all_transpose)
batching.defrule(all_to_all_p, _all_to_all_batcher, named_axis=True)
mlir.register_lowering(all_to_all_p, _all_to_all_lowering)


# --------------------------------------------------------------------------------------------
# axis_index
# --------------------------------------------------------------------------------------------


def axis_index(axis_name) -> Array:
    """The index of this device (or batch example) along the named axis, as an int32 scalar;
    for a tuple of names, the row-major index over them. Lowers to ``stablehlo.replica_id``
    arithmetic."""
    names = _axes_tuple(axis_name)
    if len(names) == 1:
        _lookup_axis_size(names[0], "axis_index")
        return axis_index_p.bind(axis_name=names[0])
    index, inner = None, 1
    for name in reversed(names):
        term = _times(axis_index(name), inner)
        index = term if index is None else elementwise.add(index, term)
        inner *= _lookup_axis_size(name, "axis_index")
    return index


def _axis_index_batcher(axis_data, vals, dims, *, axis_name):
    if axis_data.name != axis_name:
        return axis_index_p.bind(axis_name=axis_name), None
    return iota(np.int32, axis_data.size), 0


def _axis_index_lowering(ctx, *, axis_name):
    env = ctx.module_context.axis_env
    names = [n for n, _ in env]
    if axis_name not in names:
        raise NameError(f"unbound axis name: {axis_name}")
    pos = names.index(axis_name)
    sizes = [s for _, s in env]
    manual = ctx.module_context.manual
    # In a shard_map manual over some of the mesh's axes, XLA's partitioner cannot split a
    # partition id over the others: it is computed in a region manual over those too.
    free = [n for n in names if n not in manual] if isinstance(manual, frozenset) else []
    if not free:
        return _axis_index_value(ctx, sizes, pos)
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    op = mlir.sdy.ManualComputationOp(
        [out_type], [], mlir.ir.Attribute.parse("#sdy.sharding_per_value<[]>"),
        mlir.ir.Attribute.parse("#sdy.sharding_per_value<[<@mesh, []>]>"),
        mlir.ir.Attribute.parse("#sdy<manual_axes{" + ", ".join(f'"{n}"' for n in free)
                                + "}>"))
    with mlir.ir.InsertionPoint(op.body.blocks.append()):
        mlir.sdy.ReturnOp([_axis_index_value(ctx, sizes, pos)])
    return op.results[0]


def _axis_index_value(ctx, sizes: list, pos: int):
    div = mlir.ir_constant(np.array(math.prod(sizes[pos + 1:]), np.uint32))
    mod = mlir.ir_constant(np.array(sizes[pos], np.uint32))
    device = hlo.PartitionIdOp() if ctx.module_context.manual else hlo.ReplicaIdOp()
    index = hlo.RemOp(hlo.DivOp(device.result, div).result, mod).result
    return hlo.ConvertOp(mlir.aval_to_ir_type(ctx.avals_out[0]), index).result


axis_index_p = _collective_primitive("axis_index",
                                     lambda *, axis_name: ShapedArray((), np.int32))
ad.defjvp_zero(axis_index_p)
batching.defrule(axis_index_p, _axis_index_batcher, named_axis=True)
mlir.register_lowering(axis_index_p, _axis_index_lowering)
