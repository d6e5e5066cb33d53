"""The per-primitive rules of block-spec propagation (``block_spec``): how a block of each
primitive's output maps to blocks of its inputs (pull), the reverse (push), how to compute
the output block from the input blocks (eval), and which inputs are scalars read from
scalar memory (usage). Elementwise ops, binary ops with their broadcasts, broadcasts,
transposes, reshapes that merge dimensions or split the last one, conversions,
``select_n``, ``squeeze``, ``reduce_sum``, ``iota`` and calls (``jit``, ``custom_jvp``,
``custom_vjp``: their bodies) are covered, as in JAX.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from jaxkit import core, lax, tree_util
from jaxkit import random as jrandom
from jaxkit import numpy as jnp
from jaxkit.experimental.pallas import core as pallas_core
from jaxkit.experimental.pallas.fuser import block_spec as bsl
from jaxkit.experimental.pallas.fuser.block_spec import (BlockIndexTransform, Usage,
                                                         block_size,
                                                         no_block_index_transform)
from jaxkit.experimental.pallas.primitives import multiple_of_p
from jaxkit.interpreters import ad
from jaxkit.random import key_prims, prng
from jaxkit.transforms import custom_derivatives, custom_vjp, jit_primitive

__all__ = ["register_binop_rule", "register_eltwise_rule"]

_no = pallas_core.no_block_spec


def _tuple_update(t, i, v):
    return (*t[:i], v, *t[i + 1:])


def _tuple_insert(t, i, v):
    return (*t[:i], v, *t[i:])


def _bind_rule(prim, ctx, *args, **params):
    return prim.bind(*args, **params)


# ---- elementwise ---------------------------------------------------------------------------


def register_eltwise_rule(prim: core.Primitive) -> None:
    bsl.pull_block_spec_rules[prim] = lambda ctx, t, **_: [t]
    bsl.usage_rules[prim] = lambda ctx, used, **_: [used]
    bsl.eval_rules[prim] = functools.partial(_bind_rule, prim)
    bsl.push_block_spec_rules[prim] = lambda ctx, bs, **_: bs


for _p in (lax.exp_p, lax.tanh_p, lax.sin_p, lax.cos_p, lax.sqrt_p, lax.rsqrt_p, lax.square_p,
           lax.log_p, lax.integer_pow_p, lax.logistic_p, multiple_of_p):
    register_eltwise_rule(_p)


def _pull_bcast(t: BlockIndexTransform, i: int) -> BlockIndexTransform:
    # dimension i is broadcast (size 1): always its block 0, of one element
    def transform(*idxs):
        return _tuple_update(tuple(t.block_index_transform(*idxs)), i, 0)

    if t.block_shape[i] is None:
        return t.replace(block_index_transform=transform)
    one = pallas_core.Element(1) if isinstance(t.block_shape[i], pallas_core.Element) else 1
    return t.replace(block_shape=_tuple_update(tuple(t.block_shape), i, one),
                     block_index_transform=transform)


def _binop_pull(ctx, t, **_):
    left, right = ctx.avals_in
    if not right.shape:
        return [t, no_block_index_transform]
    if not left.shape:
        return [no_block_index_transform, t]
    lt = rt = t
    for i, (lsz, rsz) in enumerate(zip(left.shape, right.shape)):
        if lsz == 1 and rsz != 1:
            lt = _pull_bcast(lt, i)
        if rsz == 1 and lsz != 1:
            rt = _pull_bcast(rt, i)
    return [lt, rt]


def _binop_usage(ctx, used, **_):
    if used == {Usage.SCALAR_PREFETCH}:
        return [{Usage.SCALAR_PREFETCH}] * 2
    if used == {Usage.REGULAR}:
        return [{Usage.REGULAR}] * len(ctx.avals_in)
    return [set()] * len(ctx.avals_in)


def _binop_push(ctx, lbs, rbs, **_):
    left, right = ctx.avals_in
    if not right.shape:
        return lbs
    if not left.shape:
        return rbs
    has_l, has_r = lbs is not _no, rbs is not _no
    if not (has_l ^ has_r):
        if lbs is rbs:
            return lbs
        raise ValueError("Illegal binary push. One of the block specs must be no_block_spec.")
    for lsz, rsz in zip(left.shape, right.shape):
        if lsz == 1 and rsz != 1 and has_l:
            raise ValueError("Cannot propagate block spec through LHS broadcast.")
        if rsz == 1 and lsz != 1 and has_r:
            raise ValueError("Cannot propagate block spec through RHS broadcast.")
    return rbs if lbs is _no else lbs


def register_binop_rule(prim: core.Primitive, push: bool = True) -> None:
    bsl.pull_block_spec_rules[prim] = _binop_pull
    bsl.usage_rules[prim] = _binop_usage
    bsl.eval_rules[prim] = functools.partial(_bind_rule, prim)
    if push:
        bsl.push_block_spec_rules[prim] = _binop_push


for _p in (lax.mul_p, lax.add_p, lax.sub_p, lax.div_p, lax.max_p, lax.min_p, lax.lt_p,
           lax.eq_p, lax.gt_p, lax.and_p, lax.pow_p, ad.add_jaxvals_p):
    register_binop_rule(_p)
for _p in (lax.le_p, lax.ge_p, lax.or_p, lax.xor_p, lax.shift_right_logical_p):
    register_binop_rule(_p, push=False)  # JAX pushes through none of these



# ---- select_n, squeeze, conversions ----------------------------------------------------------


def _select_n_pull(ctx, t, **_):
    if ctx.avals_in[0].shape:
        return [t] * len(ctx.avals_in)
    return [no_block_index_transform, *[t] * (len(ctx.avals_in) - 1)]


def _select_n_push(ctx, *specs, **_):
    given = [b for b in specs if b is not _no]
    if any(b is not given[0] for b in given[1:]):
        raise NotImplementedError("select_n with multiple differing inputs not supported yet")
    return given[0]


bsl.pull_block_spec_rules[lax.select_n_p] = _select_n_pull
bsl.push_block_spec_rules[lax.select_n_p] = _select_n_push
bsl.eval_rules[lax.select_n_p] = lambda ctx, *args: lax.select_n(*args)


def _squeeze_pull(ctx, t, *, dimensions):
    if t is no_block_index_transform:
        return [no_block_index_transform]

    def transform(*idxs):
        idx = tuple(t.block_index_transform(*idxs))
        for d in dimensions:
            idx = _tuple_insert(idx, d, 0)
        return idx

    shape = tuple(t.block_shape)
    for d in dimensions:
        shape = _tuple_insert(shape, d, None)
    return [t.replace(block_shape=shape, block_index_transform=transform)]


bsl.pull_block_spec_rules[lax.squeeze_p] = _squeeze_pull
bsl.eval_rules[lax.squeeze_p] = lambda ctx, x, **_: x  # the squeezed dims are not in blocks


def _same_block(ctx, t, **_):
    return [t]


bsl.pull_block_spec_rules[lax.convert_element_type_p] = _same_block
bsl.push_block_spec_rules[lax.convert_element_type_p] = lambda ctx, bs, **_: bs
bsl.eval_rules[lax.convert_element_type_p] = (
    lambda ctx, x, *, new_dtype, **_: lax.convert_element_type(x, new_dtype))


def _bitcast_pull(ctx, t, *, new_dtype):
    old = ctx.avals_in[0].dtype
    if np.dtype(old).itemsize != np.dtype(new_dtype).itemsize:
        raise NotImplementedError("bitcast_convert_type with different bitwidths not "
                                  f"supported yet: old_dtype={old!r}, "
                                  f"new_dtype={np.dtype(new_dtype)!r}")
    return [t]


bsl.pull_block_spec_rules[lax.bitcast_convert_type_p] = _bitcast_pull
bsl.eval_rules[lax.bitcast_convert_type_p] = (
    lambda ctx, x, *, new_dtype: lax.bitcast_convert_type(x, new_dtype))


# ---- broadcast_in_dim, transpose, reshape, reduce_sum, iota ------------------------------------


def _bcast_usage(ctx, used, **_):
    if used == {Usage.SCALAR_PREFETCH}:
        raise NotImplementedError("scalar prefetch not supported yet")
    if used == {Usage.REGULAR}:
        return [{Usage.SCALAR_PREFETCH} if not ctx.avals_in[0].shape else {Usage.REGULAR}]
    return [set()]


def _bcast_pull(ctx, t, *, shape, broadcast_dimensions, **_):
    in_shape = ctx.avals_in[0].shape
    if not in_shape:
        return [no_block_index_transform]

    def transform(*idxs):
        idx = t.block_index_transform(*idxs)
        return tuple(0 if d == 1 else idx[i] for i, d in zip(broadcast_dimensions, in_shape))

    new_shape = tuple(b if (b := t.block_shape[i]) is None or d != 1 else 1
                      for i, d in zip(broadcast_dimensions, in_shape))
    return [t.replace(block_shape=new_shape, block_index_transform=transform)]


def _bcast_eval(ctx, x, *, shape, broadcast_dimensions, **_):
    if ctx.avals_in[0].shape == tuple(shape):
        return x
    out = tuple(map(block_size, ctx.out_block_specs[0].block_shape))
    dims = tuple(d - sum(s is None for s in out[:d]) for d in broadcast_dimensions
                 if out[d] is not None)
    return lax.broadcast_in_dim(x, tuple(s for s in out if s is not None), dims)


def _bcast_push(ctx, bs, *, shape, broadcast_dimensions, **_):
    in_shape = ctx.avals_in[0].shape
    source = {out: i for i, out in enumerate(broadcast_dimensions)}
    new_shape = []
    for d, size in enumerate(shape):
        i = source.get(d)
        if i is None or in_shape[i] != size:
            # a new or broadcast dimension: the output block covers all of it (a broadcast
            # one came from a block of one element)
            assert i is None or block_size(bs.block_shape[i]) == 1
            new_shape.append(size)
        else:
            new_shape.append(bs.block_shape[i])
    inner = bs.index_map

    def index_map(*args):
        idx = inner(*args)
        return tuple(idx[source[d]] if d in source else 0 for d in range(len(shape)))

    return pallas_core.BlockSpec(tuple(new_shape), index_map)


bsl.usage_rules[lax.broadcast_in_dim_p] = _bcast_usage
bsl.pull_block_spec_rules[lax.broadcast_in_dim_p] = _bcast_pull
bsl.eval_rules[lax.broadcast_in_dim_p] = _bcast_eval
bsl.push_block_spec_rules[lax.broadcast_in_dim_p] = _bcast_push


def _check_transpose(permutation):
    if set(permutation[-2:]) != {permutation[-1], permutation[-2]}:
        raise NotImplementedError("Cannot permute last two dimensions with leading "
                                  "dimensions.")


def _transpose_pull(ctx, t, *, permutation):
    _check_transpose(permutation)
    shape = tuple(t.block_shape[i] for i in permutation)

    def transform(*idxs):
        idx = t.block_index_transform(*idxs)
        return tuple(idx[i] for i in permutation)

    return [t.replace(block_shape=shape, block_index_transform=transform)]


def _squeezed(d):
    return d is None or isinstance(d, pallas_core.Squeezed)


def _transpose_eval(ctx, x, *, permutation):
    shape = ctx.out_block_specs[0].block_shape
    it = iter(range(sum(not _squeezed(d) for d in shape)))
    kept = [None if _squeezed(d) else next(it) for d in shape]
    perm = [p for p in (kept[i] for i in permutation) if p is not None]
    return lax.transpose(x, tuple(perm))


def _transpose_push(ctx, bs, *, permutation):
    _check_transpose(permutation)
    inner = bs.index_map

    def index_map(*args):
        idx = inner(*args)
        return tuple(idx[i] for i in permutation)

    return pallas_core.BlockSpec(tuple(bs.block_shape[i] for i in permutation), index_map)


bsl.pull_block_spec_rules[lax.transpose_p] = _transpose_pull
bsl.eval_rules[lax.transpose_p] = _transpose_eval
bsl.push_block_spec_rules[lax.transpose_p] = _transpose_push


def _lanes_to_sublanes(aval_in, aval_out) -> bool:
    # (..., n * l) -> (..., n, l) with l a multiple of 128
    if len(aval_out.shape) < 2 or not aval_in.shape:
        return False
    *lead_in, last_in = aval_in.shape
    *lead_out, second, last = aval_out.shape
    return lead_in == lead_out and second * last == last_in and last % 128 == 0


def _plain(d) -> bool:
    return isinstance(d, (int, np.integer, pallas_core.Blocked))


def _reshape_pull(ctx, t, *, dimensions=None, new_sizes, **_):
    if dimensions is not None:
        raise NotImplementedError("reshape with None dimensions not supported yet")
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    shape_in, shape_out, block_shape = aval_in.shape, aval_out.shape, t.block_shape
    i = j = 0
    merged_dims = []
    while i < len(shape_in) and j < len(shape_out):
        merged = []
        while not merged or math.prod(merged) < shape_out[j]:
            merged.append(shape_in[i])
            i += 1
        if math.prod(merged) > shape_out[j]:
            break  # a split, or something more complex
        merged_dims.append(merged)
        j += 1
    if i == len(shape_in) and math.prod(shape_out[j:]) == 1:
        new_block, grids = [], []
        for d, bd, merged in zip(shape_out, block_shape, merged_dims):
            bs = block_size(bd)
            if len(merged) == 1:
                grids.append((merged[0] // bs,) if bs else (1,))
                new_block.append(bd if bd is not None else 1)
                continue
            if not _plain(bd):
                raise NotImplementedError("reshape merge must use `Blocked` block size")
            num_blocks = -(-d // bs)
            dims = []
            for md in reversed(merged):
                if bs % md == 0:
                    dims.append(md)
                    bs //= md
                elif md % bs == 0:
                    dims.append(bs)
                    bs = 1
                else:
                    raise NotImplementedError("unsupported reshape merge")
            dims.reverse()
            new_block.extend(dims)
            grid = tuple(np.int32(md // b) for md, b in zip(merged, dims))
            grids.append(grid)
            if math.prod(grid) != num_blocks:
                raise NotImplementedError("reshape merge must maintain grid size")

        def transform(*idxs):
            out = ()
            for idx, grid in zip(t.block_index_transform(*idxs), grids):
                out += tuple(jnp.unravel_index(idx, grid)) if len(grid) > 1 else (idx,)
            return out

        return [t.replace(block_shape=tuple(new_block), block_index_transform=transform)]
    if _lanes_to_sublanes(aval_in, aval_out):
        if not _plain(block_shape[-1]):
            raise NotImplementedError(f"reshape must use Blocked block size on lanes: "
                                      f"{block_shape}")
        if not _plain(block_shape[-2]):
            raise NotImplementedError(f"reshape must use Blocked block size on sublanes: "
                                      f"{block_shape}")
        sub, lane = block_size(block_shape[-2]), block_size(block_shape[-1])
        if (sub * lane) % 128 != 0:
            raise NotImplementedError("reshape with non-128 aligned block size on lanes not "
                                      "supported yet")
        if lane != shape_out[-1]:
            raise NotImplementedError("reshape with non-matching block size on lanes not "
                                      f"supported yet: {block_shape}")

        def transform(*idxs):
            *idx, second, last = t.block_index_transform(*idxs)
            return (*idx, second)

        return [t.replace(block_shape=(*block_shape[:-2], sub * lane),
                          block_index_transform=transform)]
    raise NotImplementedError(f"reshape not supported yet: {aval_in}, {aval_out}")


def _reshape_eval(ctx, x, **_):
    shape = tuple(s for s in map(block_size, ctx.out_block_specs[0].block_shape)
                  if s is not None)
    return x.reshape(shape)


def _reshape_push(ctx, bs, *, dimensions=None, new_sizes, **_):
    if dimensions is not None:
        raise NotImplementedError("reshape with None dimensions not supported yet")
    aval_in, aval_out = ctx.avals_in[0], ctx.avals_out[0]
    if _lanes_to_sublanes(aval_in, aval_out):
        block_shape = tuple(bs.block_shape)
        if not _plain(block_shape[-1]):
            raise NotImplementedError(f"reshape must use Blocked block size on lanes: "
                                      f"{block_shape}")
        last, last_block = aval_out.shape[-1], block_size(block_shape[-1])
        if last_block % 128 != 0:
            raise NotImplementedError("reshape with non-128 aligned block size on lanes not "
                                      "supported yet")
        if last_block % last != 0:
            raise NotImplementedError("reshape with non-divisible block size on lanes not "
                                      "supported yet")
        inner = bs.index_map

        def index_map(*args):
            *idx, lst = inner(*args)
            return (*idx, lst, 0)

        return pallas_core.BlockSpec((*block_shape[:1], last_block // last, last), index_map)
    raise NotImplementedError(f"reshape not supported yet: {aval_in}, {aval_out}")


bsl.pull_block_spec_rules[lax.reshape_p] = _reshape_pull
bsl.eval_rules[lax.reshape_p] = _reshape_eval
bsl.push_block_spec_rules[lax.reshape_p] = _reshape_push


def _reduce_sum_pull(ctx, t, *, axes, **_):
    shape = ctx.avals_in[0].shape
    it = iter(t.block_shape)
    new_shape = tuple(pallas_core.Blocked(d) if i in axes else next(it)
                      for i, d in enumerate(shape))

    def transform(*idxs):
        idx = iter(t.block_index_transform(*idxs))
        return tuple(0 if i in axes else next(idx) for i in range(len(shape)))

    return [t.replace(block_shape=new_shape, block_index_transform=transform)]


def _reduce_sum_eval(ctx, x, *, axes, **_):
    shape, block = ctx.avals_in[0].shape, tuple(ctx.in_block_specs[0].block_shape)
    for i in axes:
        if block_size(block[i]) != shape[i]:
            raise NotImplementedError(f"reduce_sum on partial blocks not supported: "
                                      f"aval_in={ctx.avals_in[0]}, block_shape={block}")
    return lax.reduce_sum(x, axes)


def _reduce_sum_push(ctx, bs, *, axes, **_):
    shape = ctx.avals_in[0].shape
    if not all(shape[i] == block_size(bs.block_shape[i]) for i in axes):
        raise NotImplementedError(f"reduce_sum over partial blocks not supported yet: "
                                  f"aval_in.shape={shape}, "
                                  f"block_spec.block_shape={bs.block_shape}, axes={axes}")
    inner = bs.index_map

    def index_map(*args):
        return tuple(x for i, x in enumerate(inner(*args)) if i not in axes)

    return pallas_core.BlockSpec(tuple(d for i, d in enumerate(bs.block_shape)
                                       if i not in axes), index_map)


bsl.pull_block_spec_rules[lax.reduce_sum_p] = _reduce_sum_pull
bsl.eval_rules[lax.reduce_sum_p] = _reduce_sum_eval
bsl.push_block_spec_rules[lax.reduce_sum_p] = _reduce_sum_push


def _iota_pull(ctx, t, *, dimension, **_):
    if t.block_shape[dimension] is None:
        raise ValueError(f"Cannot pull iota along dimension {dimension} with None block "
                         "size.")
    return []


def _iota_eval(ctx, *, dimension, dtype, shape, **_):
    spec = ctx.out_block_specs[0]
    idx = ctx.get_out_block_indices()[0]
    sizes = [block_size(s) for s in spec.block_shape]
    local = lax.broadcasted_iota(dtype, tuple(s for s in sizes if s is not None),
                                 dimension - sum(s is None for s in sizes[:dimension]))
    return local + lax.convert_element_type(idx[dimension] * sizes[dimension], dtype)


bsl.pull_block_spec_rules[lax.iota_p] = _iota_pull
bsl.eval_rules[lax.iota_p] = _iota_eval


# ---- slices and dot_general -----------------------------------------------------------------


def _static_check(pred: Any, msg: str) -> None:
    # a check on traced indices cannot fail at trace time (JAX leaves it to checkify)
    if not isinstance(pred, core.Tracer) and not pred:
        raise ValueError(msg)


def _offset_index(bd: Any, index: Any, start: Any, size: int) -> Any:
    """A block index moved by a slice starting at element ``start``."""
    if isinstance(start, (int, np.integer)) and start == 0:
        return index
    if bd is None or isinstance(bd, (pallas_core.Squeezed, pallas_core.Element)):
        if isinstance(bd, pallas_core.Element):
            _static_check(start % bd.block_size == 0,
                          f"slice_start is not a multiple of block_size {bd.block_size}")
            _static_check(size % bd.block_size == 0,
                          f"slice_size is not a multiple of block_size {bd.block_size}")
        return index + start
    if _plain(bd):
        b = block_size(bd)
        _static_check(start % b == 0, f"slice_start is not a multiple of block_size {b}")
        _static_check(size % b == 0, f"slice_size is not a multiple of block_size {b}")
        return index + start // b
    raise ValueError(f"Unsupported block size {bd}")


def _slice_pull(ctx, t, *, start_indices, limit_indices, strides):
    if strides is not None and not all(s == 1 for s in strides):
        raise NotImplementedError("strides are not supported yet")
    sizes = tuple(int(e - s) for s, e in zip(start_indices, limit_indices))
    for bd, start, size in zip(t.block_shape, start_indices, sizes):
        if bd is None or isinstance(bd, pallas_core.Squeezed):
            continue
        if isinstance(bd, (pallas_core.Element, pallas_core.BoundedSlice)):
            if block_size(bd) > size:
                raise ValueError(f"Block size {block_size(bd)} is larger than the slice "
                                 f"size {size}")
        elif start % block_size(bd) or size % block_size(bd):
            raise ValueError(f"The slice {tuple(start_indices)}:{tuple(limit_indices)} is "
                             f"not aligned to the blocks {tuple(t.block_shape)}")

    def transform(*idxs):
        idx = t.block_index_transform(*idxs)
        return tuple(_offset_index(bd, i, s, n)
                     for bd, i, s, n in zip(t.block_shape, idx, start_indices, sizes))

    return [t.replace(block_index_transform=transform)]


def _dynamic_slice_usage(ctx, used, **_):
    if used == {Usage.SCALAR_PREFETCH}:
        raise NotImplementedError("scalar prefetch not supported yet")
    if used == {Usage.REGULAR}:
        return [used] + [{Usage.SCALAR_PREFETCH}] * (len(ctx.avals_in) - 1)
    return [set()] * len(ctx.avals_in)


def _dynamic_slice_pull(ctx, t, *, slice_sizes):
    def transform(*idxs):
        starts = ctx.scalar_prefetch_fn()  # set once this rule has returned
        if len(starts) != len(t.block_shape):
            raise ValueError(f"Expected {len(t.block_shape)} slice starts, got {len(starts)}")
        idx = t.block_index_transform(*idxs)
        return tuple(_offset_index(bd, i, s, n)
                     for i, bd, s, n in zip(idx, t.block_shape, starts, slice_sizes))

    return ([t.replace(block_index_transform=transform)]
            + [no_block_index_transform] * (len(ctx.avals_in) - 1))


bsl.pull_block_spec_rules[lax.slice_p] = _slice_pull
bsl.eval_rules[lax.slice_p] = lambda ctx, x, **_: x  # the block is already the slice's
bsl.usage_rules[lax.dynamic_slice_p] = _dynamic_slice_usage
bsl.pull_block_spec_rules[lax.dynamic_slice_p] = _dynamic_slice_pull
bsl.eval_rules[lax.dynamic_slice_p] = lambda ctx, x, *starts, **_: x


def _dot_general_pull(ctx, t, *, dimension_numbers, **_):
    if t is no_block_index_transform:
        return [no_block_index_transform] * 2
    lhs, rhs = ctx.avals_in
    if lhs.ndim != 2 or rhs.ndim != 2:
        raise NotImplementedError("Only 2D dot_general supported.")
    (lc, rc), (lb, rb) = dimension_numbers
    if lb or rb:
        raise NotImplementedError("Batch dimensions not supported")
    if len(lc) != 1 or len(rc) != 1:
        raise NotImplementedError("Multiple contracting dimensions not supported")
    k = lhs.shape[lc[0]]

    def operand(contracting: int, out_dim: int) -> BlockIndexTransform:
        # the contracted dimension is taken whole (block 0); the other follows the output
        kept = 1 - contracting

        def transform(*idxs):
            idx = [0, 0]
            idx[kept] = t.block_index_transform(*idxs)[out_dim]
            return tuple(idx)

        shape = [k, k]
        shape[kept] = t.block_shape[out_dim]
        return BlockIndexTransform(tuple(shape), transform, pipeline_mode=t.pipeline_mode)

    return [operand(lc[0], 0), operand(rc[0], 1)]


def _dot_general_push(ctx, lbs, rbs, **_):
    raise NotImplementedError("dot_general not supported yet")


bsl.pull_block_spec_rules[lax.dot_general_p] = _dot_general_pull
bsl.usage_rules[lax.dot_general_p] = (
    lambda ctx, used, **_: [{Usage.REGULAR}] * 2 if Usage.REGULAR in used else [set()] * 2)
bsl.eval_rules[lax.dot_general_p] = functools.partial(_bind_rule, lax.dot_general_p)
bsl.push_block_spec_rules[lax.dot_general_p] = _dot_general_push


# ---- random bits: each block draws from the key folded in with its block indices ----------


def _key_transform(ctx, t, **_):
    key = BlockIndexTransform(None, memory_space=pallas_core.MemorySpace.KEY)
    return [key] + [no_block_index_transform] * (len(ctx.avals_in) - 1)


def _random_bits_eval(ctx, key, *, bit_width, shape):
    spec = ctx.out_block_specs[0]
    for i in ctx.get_out_block_indices()[0]:
        key = jrandom.fold_in(key, i)
    sizes = tuple(s for s in map(block_size, spec.block_shape) if s is not None)
    return key_prims.random_bits(key, bit_width, sizes)


bsl.pull_block_spec_rules[key_prims.random_bits_p] = _key_transform
bsl.eval_rules[key_prims.random_bits_p] = _random_bits_eval
bsl.pull_block_spec_rules[key_prims.random_fold_in_p] = _key_transform
bsl.eval_rules[key_prims.random_fold_in_p] = functools.partial(_bind_rule,
                                                               key_prims.random_fold_in_p)
bsl.pull_block_spec_rules[prng.random_wrap_p] = (
    lambda ctx, t, **_: [BlockIndexTransform(None)])
bsl.eval_rules[prng.random_wrap_p] = functools.partial(_bind_rule, prng.random_wrap_p)


# ---- calls: their bodies -------------------------------------------------------------------


def _body(params: dict) -> core.ClosedJaxpr:
    return params["jaxpr"] if "jaxpr" in params else params["call_jaxpr"]


def _all_regular(v):
    # Inside a call's body every value is used as itself (JAX: no scalar prefetch there).
    return {Usage.REGULAR}


def _call_usage(ctx, used, **params):
    body = _body(params)
    read = bsl.compute_usage(body.jaxpr, used)
    return [read(v) for v in body.jaxpr.invars]


def _call_pull(ctx, ts, **params):
    body = _body(params)
    if body.consts:
        raise NotImplementedError("pull_block_spec rule for a call with constants is not "
                                  "implemented")
    ins, _, _ = bsl.pull_block_transforms(body.jaxpr, tuple(ts), read_usage=_all_regular,
                                          scalar_prefetch_handler=ctx.scalar_prefetch_handler,
                                          grid_len=ctx.grid_len, strict_mode=ctx.strict_mode)
    return [no_block_index_transform if t is None else t for t in ins]


def _call_eval(ctx, *args, **params):
    body = _body(params)
    specs = ctx.out_block_specs
    flat = tuple(specs)
    read = _all_regular
    _, env, sp_fns = bsl.pull_block_transforms(
        body.jaxpr, bsl._init_block_transforms(flat), read_usage=read,
        scalar_prefetch_handler=ctx.scalar_prefetch_handler, grid_len=ctx.grid_len)
    spec_env = {v: bsl._apply_block_transform(flat, t) for v, t in env.items()}
    tree = _flat_tree(len(args))
    fn = bsl.make_kernel_function(body.jaxpr, body.consts, tree, _flat_tree(len(specs), False),
                                  read, ctx.in_block_specs, spec_env, sp_fns,
                                  ctx.scalar_prefetch_handler, ctx.grid_len)
    return list(fn(ctx.program_ids, ctx.scalar_prefetch, *args))


def _flat_tree(n: int, with_kwargs: bool = True) -> Any:
    leaves = ((0,) * n, {}) if with_kwargs else [0] * n
    return tree_util.tree_structure(leaves)


def _call_push(ctx, *specs, **params):
    body = _body(params)
    return bsl.push_block_specs(body.jaxpr, *specs)


for _p in (jit_primitive.jit_p, custom_derivatives.custom_jvp_call_p,
           custom_vjp.custom_vjp_call_p):
    bsl.usage_rules[_p] = _call_usage
    bsl.pull_block_spec_rules[_p] = _call_pull
    bsl.eval_rules[_p] = _call_eval
    bsl.push_block_spec_rules[_p] = _call_push

del _p
