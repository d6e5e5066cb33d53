"""Block-spec rules of the primitives that assemble arrays: ``concatenate`` (a block lies in
one operand: each operand's block index is the output's shifted by the operand's offset,
and the kernel picks the operand the block falls in), ``stack``/``unstack`` (the stacked
axis is one block holding all operands) and ``tile`` (a block is a tile of the operand or
a whole number of them); and reading a ref (``get``: the block is read from the ref, whole
dimensions blocked and indexed ones squeezed). Pull and eval rules, as in JAX."""
from __future__ import annotations

import numpy as np

from jaxkit import lax, ref
from jaxkit import numpy as jnp
from jaxkit.experimental.pallas import core as pallas_core
from jaxkit.experimental.pallas.fuser import block_spec as bsl
from jaxkit.experimental.pallas.fuser.block_spec import block_size, no_block_index_transform
from jaxkit.indexing import ds

__all__: list[str] = []


def _no_elements(block_shape, what: str) -> None:
    if any(isinstance(d, pallas_core.Element) for d in block_shape):
        raise NotImplementedError(f"{what} with Element indexing is not yet supported.")


def _concat_blocks(avals, block_shape, dimension):
    """The size of the block along the concatenated dimension and each operand's number of
    blocks there (None when one block holds the whole result)."""
    bd = block_shape[dimension]
    b = 1 if bd is None or isinstance(bd, pallas_core.Squeezed) else block_size(bd)
    if b == sum(a.shape[dimension] for a in avals):
        return b, None
    for a in avals:
        if a.shape[dimension] % b:
            raise ValueError(f"Shape along concat dimension {dimension} must be divisible by "
                             f"the block shape {bd} for all children. Got shape {a.shape}.")
    return b, [a.shape[dimension] // b for a in avals]


def _update(t, i, v):
    return (*t[:i], v, *t[i + 1:])


def _concatenate_pull(ctx, t, *, dimension):
    _no_elements(t.block_shape, "Concatenation")
    _, counts = _concat_blocks(ctx.avals_in, t.block_shape, dimension)
    if counts is None:
        return [t.replace(block_shape=_update(tuple(t.block_shape), dimension,
                                              a.shape[dimension])) for a in ctx.avals_in]
    ends = np.cumsum(counts).astype(np.int32)
    starts = np.concatenate(([0], ends[:-1])).astype(np.int32)

    def operand(k):
        def transform(*idxs):
            idx = tuple(t.block_index_transform(*idxs))
            i = idx[dimension]
            inside = (starts[k] <= i) & (i < ends[k])
            # outside this operand: any of its blocks does (the kernel will not use it)
            outside = jnp.where(i < starts[k], 0, counts[k] - 1)
            return _update(idx, dimension, jnp.where(inside, i - starts[k], outside))
        return t.replace(block_index_transform=transform)

    return [operand(k) for k in range(len(ctx.avals_in))]


def _concatenate_eval(ctx, *args, dimension):
    shape = ctx.out_block_specs[0].block_shape
    _no_elements(shape, "Concatenation")
    _, counts = _concat_blocks(ctx.avals_in, shape, dimension)
    if counts is None:
        return lax.concatenate(args, dimension)
    ends = np.cumsum(counts).astype(np.int32)
    starts = np.concatenate(([0], ends[:-1])).astype(np.int32)
    i = ctx.get_out_block_indices()[0][dimension]
    which = 0
    for k in range(len(args)):
        which = lax.select((starts[k] <= i) & (i < ends[k]), np.int32(k), which)
    dtype = args[0].dtype
    # select_n of bfloat16 blocks goes through float32, as JAX's rule does
    args = [a.astype(np.float32) if a.dtype == jnp.bfloat16 else a for a in args]
    return lax.select_n(which, *args).astype(dtype)


bsl.pull_block_spec_rules[lax.concatenate_p] = _concatenate_pull
bsl.eval_rules[lax.concatenate_p] = _concatenate_eval


def _stack_pull(ctx, t, *, axis):
    _no_elements(t.block_shape, "Stack")
    bd = t.block_shape[axis]
    b = 1 if bd is None or isinstance(bd, pallas_core.Squeezed) else block_size(bd)
    n = len(ctx.avals_in)
    if b != n:
        raise NotImplementedError("Stacking only supported when the block size along the "
                                  "stack axis equals the number of inputs. Got "
                                  f"block_dim={b}, expected {n}.")
    shape = tuple(d for i, d in enumerate(t.block_shape) if i != axis)

    def transform(*idxs):
        return tuple(x for i, x in enumerate(t.block_index_transform(*idxs)) if i != axis)

    return [t.replace(block_shape=shape, block_index_transform=transform)] * n


def _unstack_pull(ctx, ts, *, axis):
    given = [t for t in ts if t is not no_block_index_transform]
    if not given:
        return [no_block_index_transform]
    t = given[0]
    shape = list(t.block_shape)
    shape.insert(axis, pallas_core.Blocked(len(ts)))

    def transform(*idxs):
        idx = list(t.block_index_transform(*idxs))
        idx.insert(axis, 0)
        return tuple(idx)

    return [t.replace(block_shape=tuple(shape), block_index_transform=transform)]


bsl.pull_block_spec_rules[lax.stack_p] = _stack_pull
bsl.eval_rules[lax.stack_p] = lambda ctx, *args, axis: lax.stack(args, axis=axis)
bsl.pull_block_spec_rules[lax.unstack_p] = _unstack_pull
bsl.eval_rules[lax.unstack_p] = lambda ctx, x, *, axis: lax.unstack(x, axis=axis)


def _tile_pull(ctx, t, *, reps):
    shape_in = ctx.avals_in[0].shape
    shape = t.block_shape
    if not all(isinstance(d, (int, np.integer, pallas_core.Squeezed)) for d in shape):
        raise NotImplementedError("tile with non-int block dimensions not supported yet")
    if not all(block_size(d) % n == 0 or n % block_size(d) == 0
               for d, n in zip(shape, shape_in) if not isinstance(d, pallas_core.Squeezed)):
        raise NotImplementedError("Every block dimension must be either a multiple or factor "
                                  f"of input. Got block {tuple(shape)} for input {shape_in}")
    new_shape = tuple(d if isinstance(d, pallas_core.Squeezed) else min(d, n)
                      for d, n in zip(shape, shape_in))

    def transform(*idxs):
        idx = t.block_index_transform(*idxs)
        return tuple(i if isinstance(d, pallas_core.Squeezed) else
                     (0 if d >= n else i % (n // d))
                     for i, d, n in zip(idx, shape, shape_in))

    return [t.replace(block_shape=new_shape, block_index_transform=transform)]


def _tile_eval(ctx, x, *, reps):
    shape = tuple(d for d in ctx.out_block_specs[0].block_shape
                  if not isinstance(d, pallas_core.Squeezed) and d is not None)
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        raise NotImplementedError("tile with non-int block dimensions not supported yet")
    if not all(d % n == 0 for d, n in zip(shape, x.shape)):
        raise NotImplementedError("Block size must be a multiple of the input size. Got "
                                  f"block block_shape={shape} but input {x.shape}.")
    return lax.tile(x, tuple(d // n if d >= n else 1 for d, n in zip(shape, x.shape)))


bsl.pull_block_spec_rules[lax.tile_p] = _tile_pull
bsl.eval_rules[lax.tile_p] = _tile_eval


# ---- push: only when every operand's block holds the whole stacked/concatenated axis --------


def _canonical(d):
    if d is None or isinstance(d, pallas_core.Squeezed):
        return pallas_core.Squeezed()
    return pallas_core.Blocked(int(d)) if isinstance(d, (int, np.integer)) else d


def _same_indices(specs, args, what: str) -> list:
    # One output block spec exists only if every operand is at the same block; the indices
    # must be the very same values (what can be proven while tracing).
    all_idx = [tuple(bs.index_map(*args)) for bs in specs]
    if not all(a is b for other in all_idx for a, b in zip(all_idx[0], other)):
        raise ValueError(f"Cannot statically prove that all input blocks to {what} are the "
                         "same.")
    return list(all_idx[0])


def _concatenate_push(ctx, *specs, dimension):
    shapes = [tuple(map(_canonical, bs.block_shape)) for bs in specs]
    if not all(s[dimension] == pallas_core.Blocked(a.shape[dimension])
               for s, a in zip(shapes, ctx.avals_in)):
        raise NotImplementedError(f"concatenate not supported yet: block_shapes={shapes}, "
                                  f"avals_in={ctx.avals_in}")

    def index_map(*args):
        idx = _same_indices(specs, args, "concatenate")
        idx[dimension] = 0
        return tuple(idx)

    shape = list(specs[0].block_shape)
    shape[dimension] = sum(block_size(s[dimension]) for s in shapes)
    return pallas_core.BlockSpec(tuple(shape), index_map)


def _stack_push(ctx, *specs, axis):
    def index_map(*args):
        idx = _same_indices(specs, args, "stack")
        idx.insert(axis, 0)
        return tuple(idx)

    shape = list(specs[0].block_shape)
    shape.insert(axis, len(specs))
    return pallas_core.BlockSpec(tuple(shape), index_map)


def _unstack_push(ctx, bs, *, axis):
    aval = ctx.avals_in[0]
    shape = tuple(map(_canonical, bs.block_shape))
    n = aval.shape[axis]
    if shape[axis] != pallas_core.Blocked(n):
        raise NotImplementedError(f"unstack not supported yet: block_shape={shape}, "
                                  f"aval_in={aval}, axis={axis}")

    def index_map(*args):
        idx = list(bs.index_map(*args))
        idx.pop(axis)
        return tuple(idx)

    out = pallas_core.BlockSpec(tuple(d for i, d in enumerate(bs.block_shape) if i != axis),
                                index_map)
    return [out] * n


bsl.push_block_spec_rules[lax.concatenate_p] = _concatenate_push
bsl.push_block_spec_rules[lax.stack_p] = _stack_push
bsl.push_block_spec_rules[lax.unstack_p] = _unstack_push


# ---- reading a ref ---------------------------------------------------------------------------


def _get_dims(aval, indexer) -> list:
    """Per dimension of the ref: "full" (read whole, blocked) or a static index (squeezed)."""
    if indexer is None:
        return ["full"] * len(aval.shape)
    if len(indexer) != len(aval.shape) or not all(
            i == "full" or isinstance(i, (int, np.integer)) for i in indexer):
        raise NotImplementedError("get not supported yet")
    return list(indexer)


def _get_pull(ctx, t, *, indexer):
    rest = [no_block_index_transform] * (len(ctx.avals_in) - 1)
    if t.block_shape is None:
        return [t, *rest]
    if not all(d is None or isinstance(d, (int, np.integer, pallas_core.Blocked,
                                           pallas_core.Squeezed)) for d in t.block_shape):
        raise NotImplementedError("get not supported yet")
    dims = _get_dims(ctx.avals_in[0], indexer)
    it = iter(t.block_shape)
    shape = tuple(block_size(next(it)) if d == "full" else pallas_core.Squeezed()
                  for d in dims)

    def transform(*idxs):
        idx = iter(t.block_index_transform(*idxs))
        return tuple(next(idx) if d == "full" else 0 for d in dims)

    return [t.replace(block_shape=shape, block_index_transform=transform), *rest]


def _get_eval(ctx, r, *dyn, indexer):
    spec = ctx.in_block_specs[0]
    if spec is pallas_core.no_block_spec or spec.block_shape is None:
        return ref.get_p.bind(r, *dyn, indexer=indexer)  # an unblocked ref: read as it is
    dims = _get_dims(ctx.avals_in[0], indexer)
    it = iter(ctx.get_out_block_indices()[0])
    index = []
    for d, bd in zip(dims, spec.block_shape):
        if d == "full":
            b = block_size(bd)
            i = next(it)
            index.append(i if b is None else ds(i * b, b))
        else:
            index.append(d)
    return r[tuple(index)]


bsl.pull_block_spec_rules[ref.get_p] = _get_pull
bsl.eval_rules[ref.get_p] = _get_eval
