"""More collectives over named axes: ``pbroadcast``, ``ragged_all_to_all`` and
``psend``/``precv``, written like those of ``jaxkit.lax.parallel`` (whose axis environment, replica
groups and helpers they share).

What XLA:CPU lacks, and how it is handled here:

* ``stablehlo.collective_broadcast`` is not implemented by XLA:CPU (JAX registers its
  ``pbroadcast`` lowering for GPU only, so on CPU it fails to lower). jaxkit lowers
  ``pbroadcast`` to an ``all_gather`` over the axis followed by a static slice at ``source``:
  exact for every dtype, on every backend.
* XLA:CPU has no ``ragged-all-to-all`` either (JAX emits its custom call, which fails to
  compile on CPU). jaxkit lowers ``ragged_all_to_all`` to ``all_gather``s of the operand and of
  the offset/size tables, followed by a gather of the rows this device receives and a scatter
  of them into ``output``: the semantics of JAX's docstring, on every backend.
* ``psend``/``precv`` lower to StableHLO send/recv in JAX on GPU only; on CPU JAX raises
  ``NotImplementedError`` when lowering them. jaxkit does the same on every backend: it has no
  GPU send/recv lowering (its lowering context does not know the platform). ``psend`` returns
  an ordering token (printed ``Tok``) and is kept in jaxprs even when its token is unused.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax.elementwise import add, eq, ge, lt, mul, select
from jaxkit.lax.elementwise_bits import bitwise_and
from jaxkit.lax.gather_scatter import gather, scatter
from jaxkit.lax.gather_scatter_dims import (GatherDimensionNumbers, GatherScatterMode,
                                            ScatterDimensionNumbers)
from jaxkit.lax.parallel import (
    _axes_tuple,
    _insert_axis,
    _is_traced,
    _require_single_axis,
    all_gather_p,
    all_to_all,
    axis_index,
    axis_index_p,
    axis_size,
    psum,
    replica_groups,
)
from jaxkit.lax.clamp import clamp
from jaxkit.lax.reductions import reduce_or
from jaxkit.lax.slicing import dynamic_index_in_dim, index_in_dim
from jaxkit.lax.structural import (
    broadcast_in_dim,
    broadcasted_iota,
    concatenate,
    convert_element_type,
    reshape,
    transpose,
    zeros_like_array,
)

__all__ = [
    "pbroadcast",
    "pbroadcast_p",
    "precv",
    "precv_p",
    "psend",
    "psend_p",
    "ragged_all_to_all",
    "ragged_all_to_all_p",
]


def _hashable_axis_name(axis_name):
    return tuple(axis_name) if isinstance(axis_name, list) else axis_name


# --------------------------------------------------------------------------------------------
# pbroadcast
# --------------------------------------------------------------------------------------------


def pbroadcast(x, axis_name, source: int):
    """Every index of the named axis gets the value ``x`` has at index ``source`` (a
    collective broadcast; ``x`` may be a pytree). Lowers to ``stablehlo.all_gather`` and a
    slice (XLA:CPU has no ``stablehlo.collective_broadcast``)."""
    size = axis_size(_axes_tuple(axis_name))  # NameError for an unbound name
    source = operator.index(source)
    if not 0 <= source < size:
        raise ValueError(f"pbroadcast source {source} is out of range for the axis "
                         f"{axis_name!r} of size {size}")
    name = _hashable_axis_name(axis_name)
    return tree_util.tree_map(lambda v: pbroadcast_p.bind(v, axis_name=name, source=source), x)


def _pbroadcast_abstract_eval(x, *, axis_name, source):
    return x


def _pbroadcast_transpose(ct, x, *, axis_name, source):
    # Every index received index source's value: its cotangent is the sum of them all.
    total = psum(ct, axis_name)
    is_source = broadcast_in_dim(eq(axis_index(axis_name), np.int32(source)), np.shape(ct), ())
    return [select(is_source, total, zeros_like_array(total))]


def _pbroadcast_batcher(axis_data, vals, dims, *, axis_name, source):
    (x,), (d,) = vals, dims
    names = _axes_tuple(axis_name)
    if axis_data.name not in names:
        return pbroadcast_p.bind(x, axis_name=axis_name, source=source), d
    if len(names) > 1:
        raise NotImplementedError("pbroadcast over several axes including a vmapped one "
                                  f"({names}) is not supported")
    if d is None:
        return x, None
    return _insert_axis(index_in_dim(x, source, d, keepdims=False), d, axis_data.size), d


def _pbroadcast_lowering(ctx, x, *, axis_name, source):
    names = _axes_tuple(axis_name)
    n = len(replica_groups(ctx.module_context.axis_env, names)[0])

    def gather_then_pick(v):
        everyone = all_gather_p.bind(v, all_gather_dimension=0, axis_name=names,
                                     axis_index_groups=None, axis_size=n, tiled=False)
        return index_in_dim(everyone, source, 0, keepdims=False)

    return mlir.lower_fun(gather_then_pick)(ctx, x)


pbroadcast_p = core.Primitive("pbroadcast")
pbroadcast_p.def_impl(lambda x, *, axis_name, source: _unbound(axis_name, "pbroadcast"))
pbroadcast_p.def_abstract_eval(_pbroadcast_abstract_eval)
ad.deflinear2(pbroadcast_p, _pbroadcast_transpose)
batching.defrule(pbroadcast_p, _pbroadcast_batcher, named_axis=True)
mlir.register_lowering(pbroadcast_p, _pbroadcast_lowering)


def _unbound(axis_name, prim_name: str):
    raise NameError(f"unbound axis name: {_axes_tuple(axis_name)[0]} ({prim_name} must be "
                    "used inside pmap, shard_map, or vmap with an axis_name)")


# --------------------------------------------------------------------------------------------
# ragged_all_to_all
# --------------------------------------------------------------------------------------------


def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes,
                      *, axis_name, axis_index_groups=None):
    """All-to-all of ragged rows: for slice ``i`` of the offset/size tables (``K`` slices,
    ``K / n`` per destination of an axis of size ``n``), rows
    ``operand[input_offsets[i]:][:send_sizes[i]]`` go to index ``i // (K / n)`` of the named
    axis, which writes them into its ``output`` at ``output_offsets[i]`` (the offset on the
    *receiver*; ``recv_sizes`` are the sizes this index receives). Rows of ``output`` nothing
    is written to keep their value. Lowers to all-gathers, a gather and a scatter (XLA:CPU has
    no ``ragged-all-to-all``)."""
    names = _axes_tuple(axis_name)
    args = (operand, output, input_offsets, send_sizes, output_offsets, recv_sizes)
    try:
        axis_size(names)
    except NameError:
        if not any(_is_traced(a) for a in args):
            raise RuntimeError("ragged_all_to_all must be used within a mapped context like "
                               "vmap or shard_map.") from None
        raise
    groups = (None if axis_index_groups is None
              else tuple(tuple(int(i) for i in g) for g in axis_index_groups))
    return ragged_all_to_all_p.bind(*args, axis_name=names, axis_index_groups=groups)


_TABLES = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")


def _ragged_abstract_eval(operand, output, *tables, axis_name, axis_index_groups):
    for name, t in zip(_TABLES, tables):
        if not dtypes.issubdtype(t.dtype, np.integer):
            raise ValueError(f"ragged_all_to_all {name} must be integer type.")
    for name, t in zip(_TABLES, tables):
        if len(t.shape) != 1 or t.shape[0] < 1:
            raise ValueError(f"ragged_all_to_all {name} must be rank 1 with positive "
                             f"dimension size, but got shape {t.shape}")
    if operand.dtype != output.dtype or operand.shape[1:] != output.shape[1:]:
        raise TypeError("ragged_all_to_all operand and output must have the same dtype and "
                        f"the same trailing dimensions, got {operand.str_short()} and "
                        f"{output.str_short()}")
    return output.update(weak_type=False)


def _ragged_impl(*args, **params):
    raise RuntimeError("ragged_all_to_all must be used within a mapped context like vmap or "
                       "shard_map.")


def _ragged_jvp(primals, tangents, *, axis_name, axis_index_groups):
    operand, output, *tables = primals
    d_operand, d_output = tangents[:2]
    out = ragged_all_to_all_p.bind(*primals, axis_name=axis_name,
                                   axis_index_groups=axis_index_groups)
    if ad.is_zero(d_operand) and ad.is_zero(d_output):
        return out, ad.Zero(core.get_aval(out).to_tangent_aval())
    d_out = ragged_all_to_all_p.bind(ad.instantiate_zeros(d_operand),
                                     ad.instantiate_zeros(d_output), *tables,
                                     axis_name=axis_name, axis_index_groups=axis_index_groups)
    return out, d_out


def _ragged_transpose(ct, operand, output, input_offsets, send_sizes, output_offsets,
                      recv_sizes, *, axis_name, axis_index_groups):
    operand_ct = output_ct = None
    if type(ct) is ad.Zero:
        operand_ct = ad.Zero(operand.aval) if ad.is_undefined_primal(operand) else None
        output_ct = ad.Zero(output.aval) if ad.is_undefined_primal(output) else None
        return [operand_ct, output_ct, None, None, None, None]
    def exchange(t):  # the senders' view of a table <-> the receivers' view
        return all_to_all(t, axis_name, 0, 0, axis_index_groups=axis_index_groups, tiled=True)

    recv_at = exchange(output_offsets)  # where this index received its rows
    if ad.is_undefined_primal(operand):
        zero = ad.zeros_like_aval(operand.aval)
        # The reverse exchange: received rows go back to the sender's input offsets.
        operand_ct = ragged_all_to_all_p.bind(ct, zero, recv_at, recv_sizes,
                                              exchange(input_offsets), send_sizes,
                                              axis_name=axis_name,
                                              axis_index_groups=axis_index_groups)
    if ad.is_undefined_primal(output):
        rows = np.shape(ct)[0]
        k = np.shape(recv_at)[0]
        row = broadcasted_iota(np.int32, (rows, k), 0)
        start = broadcast_in_dim(convert_element_type(recv_at, np.int32), (rows, k), (1,))
        stop = add(start, broadcast_in_dim(convert_element_type(recv_sizes, np.int32),
                                           (rows, k), (1,)))
        overwritten = reduce_or(bitwise_and(ge(row, start), lt(row, stop)), (1,))
        mask = broadcast_in_dim(overwritten, np.shape(ct), (0,))
        output_ct = select(mask, zeros_like_array(ct), ct)
    return [operand_ct, output_ct, None, None, None, None]


def _front(x, d, size: int):
    return batching.bdim_at_front(x, d, size)


def _ragged_batcher(axis_data, vals, dims, *, axis_name, axis_index_groups):
    params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups)
    if axis_data.name in axis_name:
        # Every index of the exchange is in this batch: do it with array operations.
        _require_single_axis(ragged_all_to_all_p, axis_name, axis_index_groups)
        n = axis_data.size
        operand, output, input_offsets, send_sizes, output_offsets, _ = [
            _front(v, d, n) for v, d in zip(vals, dims)]
        k = input_offsets.shape[1]
        if k % n:
            raise ValueError(f"ragged_all_to_all: the {k} slices of the offset and size "
                             f"tables must divide evenly among the {n} indices of axis "
                             f"{axis_data.name!r}")
        return _ragged_exchange(operand, output, input_offsets, send_sizes, output_offsets,
                                broadcasted_iota(np.int32, (n,), 0), k // n), 0
    if all(d is None for d in dims):
        return ragged_all_to_all_p.bind(*vals, **params), None
    # A batch of independent exchanges is one exchange of B times as many slices: example b's
    # rows are stacked at b * N (operand) and b * M (output), and its slice k becomes slice
    # k * B + b, which keeps its destination.
    b = axis_data.size
    operand, output = (_front(v, d, b) for v, d in zip(vals[:2], dims[:2]))
    n_rows, m_rows = operand.shape[1], output.shape[1]
    tables = [transpose(_front(v, d, b), (1, 0)) for v, d in zip(vals[2:], dims[2:])]  # (K, B)

    def shifted(t, rows):
        step = mul(broadcasted_iota(t.dtype, t.shape, 1), np.array(rows, t.dtype))
        return add(t, step)

    tables[0] = shifted(tables[0], n_rows)
    tables[2] = shifted(tables[2], m_rows)
    flat = [reshape(t, (t.shape[0] * b,)) for t in tables]
    out = ragged_all_to_all_p.bind(reshape(operand, (b * n_rows, *operand.shape[2:])),
                                   reshape(output, (b * m_rows, *output.shape[2:])), *flat,
                                   **params)
    return reshape(out, output.shape), 0


def _ragged_exchange(operands, outputs, input_offsets, send_sizes, output_offsets, ranks,
                     per_dest: int):
    """The exchange for the receivers ``ranks`` (R,), from everyone's data: ``operands``
    (n, N, ...) and the tables (n, K) of all n senders, ``outputs`` (R, M, ...) the
    receivers' outputs. Returns the receivers' results (R, M, ...)."""
    n, rows_in = operands.shape[:2]
    r, rows_out = outputs.shape[:2]
    rest = outputs.shape[2:]
    s = per_dest
    # The columns of the tables that address each receiver: (R, s).
    cols = add(mul(broadcast_in_dim(ranks, (r, s), (0,)), np.int32(s)),
               broadcasted_iota(np.int32, (r, s), 1))

    def pick(table):  # table[:, cols] laid out (R, s, n)
        t = transpose(convert_element_type(table, np.int32), (1, 0))  # (K, n)
        dn = GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(0,),
                                    start_index_map=(0,))
        return gather(t, reshape(cols, (r, s, 1)), dn, (1, n),
                      mode=GatherScatterMode.PROMISE_IN_BOUNDS)

    shape = (r, s, n, rows_in)
    row = broadcasted_iota(np.int32, shape, 3)
    start, size, dest = (broadcast_in_dim(pick(t), shape, (0, 1, 2))
                         for t in (input_offsets, send_sizes, output_offsets))
    sender = broadcasted_iota(np.int32, shape, 2)
    src = add(mul(sender, np.int32(rows_in)),
              clamp(np.int32(0), add(start, row), np.int32(rows_in - 1)))
    dst = add(dest, row)
    keep = bitwise_and(lt(row, size), bitwise_and(ge(dst, np.int32(0)),
                                                  lt(dst, np.int32(rows_out))))
    dst = select(keep, dst, np.full(shape, rows_out, np.int32))  # out of bounds: dropped
    flat_operands = reshape(operands, (n * rows_in, *rest))
    window = tuple(range(4, 4 + len(rest)))
    values = gather(flat_operands, reshape(src, (*shape, 1)),
                    GatherDimensionNumbers(offset_dims=window, collapsed_slice_dims=(0,),
                                           start_index_map=(0,)),
                    (1, *rest), mode=GatherScatterMode.PROMISE_IN_BOUNDS)
    receiver = broadcasted_iota(np.int32, (*shape, 1), 0)
    indices = concatenate([receiver, reshape(dst, (*shape, 1))], 4)
    dn = ScatterDimensionNumbers(update_window_dims=window, inserted_window_dims=(0, 1),
                                 scatter_dims_to_operand_dims=(0, 1))
    return scatter(outputs, indices, values, dn, mode=GatherScatterMode.FILL_OR_DROP)


def _rank_in_group(ctx, names: tuple, groups) -> Any:
    """This device's position within its group of the collective over ``names`` (traced)."""
    env = dict(ctx.module_context.axis_env)
    index = None
    for name in names:
        term = axis_index_p.bind(axis_name=name)
        index = term if index is None else add(mul(index, np.int32(env[name])), term)
    if groups is None:
        return index
    position = np.zeros(sum(len(g) for g in groups), np.int32)
    for g in groups:
        for k, i in enumerate(g):
            position[i] = k
    return dynamic_index_in_dim(position, index, 0, keepdims=False)


def _ragged_lowering(ctx, operand, output, *tables, axis_name, axis_index_groups):
    groups = replica_groups(ctx.module_context.axis_env, axis_name, axis_index_groups)
    n = len(groups[0])
    if any(len(g) != n for g in groups):
        raise ValueError("Replica groups must be equally sized")
    k = ctx.avals_in[2].shape[0]
    if k % n:
        raise ValueError(f"ragged_all_to_all: the {k} slices of the offset and size tables "
                         f"must divide evenly among the {n} indices of axis {axis_name}")

    def everyone(v):
        return all_gather_p.bind(v, all_gather_dimension=0, axis_name=axis_name,
                                 axis_index_groups=axis_index_groups, axis_size=n, tiled=False)

    def exchange(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes):
        rank = reshape(_rank_in_group(ctx, axis_name, axis_index_groups), (1,))
        out = _ragged_exchange(everyone(operand), reshape(output, (1, *output.shape)),
                               everyone(input_offsets), everyone(send_sizes),
                               everyone(output_offsets), rank, k // n)
        return reshape(out, output.shape)

    return mlir.lower_fun(exchange)(ctx, operand, output, *tables)


ragged_all_to_all_p = core.Primitive("ragged_all_to_all")
ragged_all_to_all_p.def_impl(_ragged_impl)
ragged_all_to_all_p.def_abstract_eval(_ragged_abstract_eval)
ad.defjvp_rule(ragged_all_to_all_p, _ragged_jvp)
ad.deftranspose(ragged_all_to_all_p, _ragged_transpose)
batching.defrule(ragged_all_to_all_p, _ragged_batcher, named_axis=True)
mlir.register_lowering(ragged_all_to_all_p, _ragged_lowering)


# --------------------------------------------------------------------------------------------
# psend / precv
# --------------------------------------------------------------------------------------------


def _perm_param(perm) -> tuple:
    return tuple(tuple(int(i) for i in pair) for pair in perm)


def psend(x, axis_name, perm):
    """Send ``x`` (a pytree) from index ``src`` to index ``dst`` of the named axis for each
    pair of ``perm``; returns one token per leaf, to order a matching ``precv``. As in JAX,
    it lowers (to ``stablehlo.send``) only on GPU inside ``shard_map``: elsewhere lowering
    raises ``NotImplementedError``."""
    names = _axes_tuple(axis_name)
    axis_size(names)  # NameError for an unbound name
    perm = _perm_param(perm)
    return tree_util.tree_map(lambda v: psend_p.bind(v, axis_name=names, perm=perm), x)


def precv(token, out_shape, axis_name, perm):
    """Receive a value of ``out_shape`` (shape and dtype) sent by ``psend`` along ``perm``
    after ``token``. As in JAX, it lowers (to ``stablehlo.recv``) only on GPU inside
    ``shard_map``: elsewhere it raises ``NotImplementedError``."""
    return precv_p.bind(token, out_shape=ShapedArray(out_shape.shape, out_shape.dtype),
                        axis_name=_axes_tuple(axis_name), perm=_perm_param(perm))


def _gpu_only(name: str):
    def rule(*args, **params):
        raise NotImplementedError(f"{name} is currently only implemented on GPU")
    return rule


def _p2p_batcher(prim, axis_data, vals, dims, **params):
    if axis_data.name in params["axis_name"]:
        raise NotImplementedError(f"{prim.name} over a vmapped axis ({axis_data.name!r}) is "
                                  "not supported: it needs devices (shard_map on GPU)")
    return prim.bind(*vals, **params), None


psend_p = core.Primitive("psend")
psend_p.def_impl(lambda x, *, axis_name, perm: _unbound(axis_name, "psend"))
psend_p.def_abstract_eval(lambda x, *, axis_name, perm: core.abstract_token)
pe.defeffectful(psend_p)
batching.defrule(psend_p, lambda axis_data, vals, dims, **params: _p2p_batcher(
    psend_p, axis_data, vals, dims, **params), named_axis=True)
mlir.register_lowering(psend_p, _gpu_only("psend"))

precv_p = core.Primitive("precv")
precv_p.def_impl(_gpu_only("precv"))
precv_p.def_abstract_eval(lambda token, *, out_shape, axis_name, perm: out_shape)
pe.defeffectful(precv_p)
batching.defrule(precv_p, lambda axis_data, vals, dims, **params: _p2p_batcher(
    precv_p, axis_data, vals, dims, **params), named_axis=True)
mlir.register_lowering(precv_p, _gpu_only("precv"))
