"""BCOO primitives that reorganize stored elements (``bcoo_sort_indices``,
``bcoo_sum_duplicates``) and the buffer-level operations built from jaxkit operations
(reduce_sum, multiply by dense or sparse, concatenate, slice, reshape). The functions here take
and return ``(data, indices)`` buffers and shapes; ``bcoo.py`` wraps them for ``BCOO``."""
from __future__ import annotations

import math

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit.api_extra import linear_transpose
from jaxkit.api import ShapeDtypeStruct
from jaxkit.experimental.sparse._bcoo_core import (
    batched_bufs_to_front, broadcast_batch, define_sparse_primitive, validate_bcoo,
    validate_bcoo_indices)
from jaxkit.experimental.sparse.util import SparseInfo, nfold_vmap
from jaxkit.interpreters import ad, batching


def _fill(shape, n_batch, n_sparse, dtype):
    return jnp.array(shape[n_batch:n_batch + n_sparse], dtype=dtype)


def _sorted_unbatched(indices):
    """Indices sorted lexicographically (stable) and the permutation that sorts them."""
    nse, n = indices.shape
    *cols, perm = lax.sort((*(indices[:, i] for i in range(n)),
                            lax.iota(np.int32, nse)), num_keys=n)
    return jnp.stack(cols, axis=1), perm


# ---- bcoo_sort_indices ---------------------------------------------------------------------

def _sort_indices_impl(data, indices, *, spinfo):
    n_batch, n_sparse, _, _ = validate_bcoo(data, indices, spinfo.shape)
    if n_sparse == 0:
        return data, indices
    batch = tuple(spinfo.shape[:n_batch])
    data, indices = broadcast_batch(data, batch), broadcast_batch(indices, batch)
    indices, perm = nfold_vmap(_sorted_unbatched, n_batch, broadcasted=False)(indices)
    data = nfold_vmap(lambda d, p: d[p], n_batch, broadcasted=False)(data, perm)
    return data, indices


def _bufs_abstract_eval(data, indices, *, spinfo):
    validate_bcoo(data, indices, spinfo.shape)
    batch = tuple(max(a, b) for a, b in zip(data.shape, indices.shape[:indices.ndim - 2]))
    n_batch = indices.ndim - 2
    return [core.ShapedArray(batch + tuple(data.shape[n_batch:]), data.dtype),
            core.ShapedArray(batch + tuple(indices.shape[n_batch:]), indices.dtype)]


def _data_linear_rules(prim, impl):
    """JVP/transpose for a primitive whose data output is linear in its data input, for fixed
    indices; the transpose is the linear transpose of the primitive's own computation."""

    def jvp(primals, tangents, **params):
        data, indices = primals
        out = prim.bind(data, indices, **params)
        if type(tangents[0]) is ad.Zero:
            dot = ad.Zero(core.get_aval(out[0]).to_tangent_aval())
        else:
            dot = prim.bind(tangents[0], indices, **params)[0]
        return out, [dot, ad.Zero(core.get_aval(out[1]).to_tangent_aval())]

    def transpose(cts, data, indices, **params):
        if ad.is_undefined_primal(indices):
            raise ValueError("Cannot transpose with respect to sparse indices")
        ct = cts[0]
        if type(ct) is ad.Zero:
            return ad.Zero(data.aval), None
        aval = data.aval
        f = lambda d: impl(d, indices, **params)[0]
        (d_ct,) = linear_transpose(f, ShapeDtypeStruct(aval.shape, aval.dtype))(ct)
        return d_ct, None

    def batch(axis_data, args, dims, *, spinfo, **params):
        size = batching.batch_size(args, dims)
        data, indices = batched_bufs_to_front(args, dims, size)
        spinfo = spinfo._replace(shape=(size, *spinfo.shape))
        return prim.bind(data, indices, spinfo=spinfo, **params), [0, 0]

    ad.defjvp_rule(prim, jvp)
    ad.deftranspose(prim, transpose)
    batching.defrule(prim, batch)


bcoo_sort_indices_p = define_sparse_primitive("bcoo_sort_indices", _sort_indices_impl,
                                              _bufs_abstract_eval, multiple_results=True)
_data_linear_rules(bcoo_sort_indices_p, _sort_indices_impl)


# ---- bcoo_sum_duplicates -------------------------------------------------------------------

def _unique_unbatched(indices, shape):
    """Unique index rows (sorted; out-of-bounds rows become the fill row, sorted last), the
    slot of each input row among them, and how many unique in-bounds rows there are."""
    nse, n = indices.shape
    fill = _fill(shape, 0, n, indices.dtype)[None]
    oob = ((indices >= fill) | (indices < 0)).any(-1, keepdims=True)
    indices = jnp.where(oob, fill, indices)
    srt, perm = _sorted_unbatched(indices)
    new = jnp.concatenate([jnp.ones((1,), bool), (srt[1:] != srt[:-1]).any(1)])
    seg = jnp.cumsum(new) - 1
    inverse = jnp.zeros((nse,), np.int32).at[perm].set(seg.astype(np.int32))
    unique = jnp.broadcast_to(fill, (nse, n)).at[seg].set(srt)
    true_size = new.sum() - (srt == fill).all(1).any().astype(new.sum().dtype)
    return unique, inverse, true_size


def _unique_indices(indices, shape):
    n_batch = indices.ndim - 2
    f = lambda i: _unique_unbatched(i, tuple(shape[n_batch:]))
    return nfold_vmap(f, n_batch, broadcasted=False)(indices)


def _adjust_nse(indices, nse, shape):
    """Indices truncated or padded (with the out-of-bounds fill row) to ``nse`` rows."""
    n_batch, n_sparse, _, old = validate_bcoo_indices(indices, shape)
    if nse <= old:
        return indices[..., :nse, :]
    pad = jnp.broadcast_to(_fill(shape, n_batch, n_sparse, indices.dtype),
                           (*indices.shape[:-2], nse - old, n_sparse))
    return jnp.concatenate([indices, pad], axis=-2)


def _sum_duplicates_impl(data, indices, *, spinfo, nse):
    n_batch, n_sparse, _, old_nse = validate_bcoo(data, indices, spinfo.shape)
    nse = old_nse if nse is None else nse
    batch = tuple(spinfo.shape[:n_batch])
    data, indices = broadcast_batch(data, batch), broadcast_batch(indices, batch)
    if n_sparse == 0:
        # No sparse dimensions: every stored element covers the same (whole) position.
        summed = data.sum(n_batch, keepdims=True)
        rest = jnp.zeros((*batch, max(nse - 1, 0), *data.shape[n_batch + 1:]), data.dtype)
        out = jnp.concatenate([summed, rest], n_batch)
        return lax.slice_in_dim(out, 0, nse, axis=n_batch), jnp.zeros((*batch, nse, 0),
                                                                      indices.dtype)
    unique, inverse, _ = _unique_indices(indices, spinfo.shape)
    unique = _adjust_nse(unique, nse, spinfo.shape)
    out_data = jnp.zeros((*batch, nse, *data.shape[n_batch + 1:]), data.dtype)
    put = nfold_vmap(lambda o, m, d: o.at[m].add(d, mode="drop"), n_batch, broadcasted=False)
    return put(out_data, inverse, data), unique


def _sum_duplicates_abstract_eval(data, indices, *, spinfo, nse):
    n_batch, _, _, old_nse = validate_bcoo(data, indices, spinfo.shape)
    nse = old_nse if nse is None else nse
    batch = tuple(spinfo.shape[:n_batch])
    return [core.ShapedArray((*batch, nse, *data.shape[n_batch + 1:]), data.dtype),
            core.ShapedArray((*batch, nse, indices.shape[-1]), indices.dtype)]


bcoo_sum_duplicates_p = define_sparse_primitive("bcoo_sum_duplicates", _sum_duplicates_impl,
                                                _sum_duplicates_abstract_eval,
                                                multiple_results=True)
_data_linear_rules(bcoo_sum_duplicates_p, _sum_duplicates_impl)


def unique_count(indices, shape) -> int:
    """The ``nse`` sum_duplicates chooses for concrete indices (largest over the batch)."""
    n_batch, n_sparse, _, _ = validate_bcoo_indices(indices, shape)
    if n_sparse == 0:
        return 1
    _, _, true_size = _unique_indices(indices, shape)
    return int(np.max(np.asarray(true_size), initial=0))


# ---- buffer-level operations ---------------------------------------------------------------

def reduce_sum(data, indices, spinfo: SparseInfo, axes):
    """Sum over ``axes``: dense axes sum the data, sparse axes drop index columns, batch axes
    merge into the stored-element axis. Returns ``(data, indices, shape)``."""
    shape = tuple(spinfo.shape)
    n_batch, n_sparse, _, nse = validate_bcoo(data, indices, shape)
    axes = sorted({int(a) % len(shape) if shape else int(a) for a in axes})
    dense_axes = tuple(a - n_sparse + 1 for a in axes if a >= n_batch + n_sparse)
    data = data.sum(dense_axes)
    if n_sparse:
        # Padding entries must not land on a real position once their columns are dropped.
        inb = (indices < _fill(shape, n_batch, n_sparse, indices.dtype)).all(-1)
        inb = lax.expand_dims(inb, tuple(range(inb.ndim, data.ndim)))
        data = jnp.where(inb, data, jnp.zeros((), data.dtype))
    keep = [i for i in range(n_sparse) if i + n_batch not in axes]
    indices = (indices[..., np.array(keep, dtype=np.int32)] if keep
               else jnp.zeros((*indices.shape[:-1], 0), indices.dtype))
    batch_axes = [a for a in axes if a < n_batch]
    for ax in batch_axes:
        if data.shape[ax] == 1 and indices.shape[ax] == 1:
            data = data * shape[ax]
        elif data.shape[ax] == 1:
            data = jnp.broadcast_to(data, (*data.shape[:ax], shape[ax], *data.shape[ax + 1:]))
        elif indices.shape[ax] == 1:
            data = data.sum(ax, keepdims=True)
    kept_batch = [i for i in range(n_batch) if i not in batch_axes]
    new_batch = tuple(data.shape[i] for i in kept_batch)
    new_nse = nse * math.prod(data.shape[i] for i in batch_axes)
    order = (*kept_batch, *batch_axes)
    data = lax.transpose(data, (*order, *range(n_batch, data.ndim))).reshape(
        (*new_batch, new_nse, *data.shape[n_batch + 1:]))
    indices = lax.transpose(indices, (*order, *range(n_batch, indices.ndim))).reshape(
        (*new_batch, new_nse, indices.shape[-1]))
    return data, indices, tuple(s for i, s in enumerate(shape) if i not in axes)


def multiply_dense(data, indices, v, spinfo: SparseInfo):
    """The stored data times a dense array broadcast to the sparse shape."""
    shape = tuple(spinfo.shape)
    v = jnp.asarray(v)
    if v.ndim == 0:
        return lax.mul(data, v.astype(data.dtype)) if v.dtype != data.dtype else data * v
    if jnp.broadcast_shapes(v.shape, shape) != shape:
        raise NotImplementedError(
            "multiplication between sparse and dense is only implemented for cases where the "
            f"output shape matches the sparse matrix shape. Got shape={shape}, v.shape={v.shape}")
    v = lax.expand_dims(v, tuple(range(len(shape) - v.ndim)))
    n_batch, n_sparse, _, _ = validate_bcoo(data, indices, shape)

    def mul(d, i, w):
        idx = tuple(i[:, k] if s != 1 else 0 for k, s in enumerate(w.shape[:n_sparse]))
        # Padding entries (out-of-bounds indices) read 0, so their data gets no gradient.
        return d * w.at[idx].get(mode="fill", fill_value=0)

    return nfold_vmap(mul, n_batch)(data, indices, v)


def multiply_sparse(lhs, rhs, lhs_spinfo: SparseInfo, rhs_spinfo: SparseInfo):
    """Elementwise product of two BCOO buffers pairs (same rank and n_dense): every pair of
    stored elements with equal indices gives one output element. Returns ``(data, indices,
    shape)``."""
    (ld, li), (rd, ri) = lhs, rhs
    lshape, rshape = tuple(lhs_spinfo.shape), tuple(rhs_spinfo.shape)
    lp, rp = validate_bcoo(ld, li, lshape), validate_bcoo(rd, ri, rshape)
    if len(lshape) != len(rshape):
        raise TypeError("bcoo_multiply_sparse: arrays must have same number of dimensions, "
                        f"got {lshape}, {rshape}")
    if lp[2] != rp[2]:
        raise NotImplementedError("bcoo_multiply_sparse: arrays with differing numbers of "
                                  f"dense dimensions: {lp}, {rp}")
    if lp[0] != rp[0]:
        raise NotImplementedError("bcoo_multiply_sparse: arrays with differing numbers of "
                                  f"batch dimensions (n_batch={lp[0]} and {rp[0]}); use "
                                  "bcoo_update_layout to match them")
    n_batch = lp[0]
    out_shape = tuple(jnp.broadcast_shapes(lshape, rshape))
    max_l, max_r = max(lshape, default=0), max(rshape, default=0)

    def mul(ld, li, rd, ri):
        nse = li.shape[0] * ri.shape[0]
        dims = np.array([i for i, (a, b) in enumerate(zip(lshape[n_batch:], rshape[n_batch:]))
                         if i < li.shape[1] and a != 1 and b != 1], dtype=np.int32)
        match = jnp.all(li[:, None, dims] == ri[None, :, dims], -1)
        il, ir = jnp.nonzero(match, size=nse, fill_value=(li.shape[0], ri.shape[0]))
        d = ld.at[il].get(mode="fill", fill_value=0) * rd.at[ir].get(mode="fill", fill_value=0)
        i = jnp.maximum(li.at[il].get(mode="fill", fill_value=max_l),
                        ri.at[ir].get(mode="fill", fill_value=max_r))
        return d, i

    data, indices = nfold_vmap(mul, n_batch)(ld, li, rd, ri)
    return data, indices, out_shape


def concatenate(operands, dimension: int):
    """Concatenate BCOO buffers ``[(data, indices, spinfo), ...]`` along ``dimension``."""
    shapes = [tuple(s.shape) for _, _, s in operands]
    props = [validate_bcoo(d, i, s) for (d, i, _), s in zip(operands, shapes)]
    if len({p[0] for p in props}) != 1 or len({p[2] for p in props}) != 1:
        raise ValueError("bcoo_concatenate requires inputs to have matching batch and dense "
                         f"dimensions. Got n_batch={[p[0] for p in props]}, "
                         f"n_dense={[p[2] for p in props]}.")
    n_batch, n_sparse = props[0][0], props[0][1]
    ndim = len(shapes[0])
    dimension = int(dimension) % ndim
    for s in shapes:
        if len(s) != ndim or any(a != b for k, (a, b) in enumerate(zip(s, shapes[0]))
                                 if k != dimension):
            raise TypeError("bcoo_concatenate: all operand shapes must match except along "
                            f"dimension {dimension}, got {shapes}")
    out_shape = list(shapes[0])
    out_shape[dimension] = sum(s[dimension] for s in shapes)
    out_shape = tuple(out_shape)
    if dimension < n_batch:
        datas = [broadcast_batch(d, s[:n_batch]) for (d, _, _), s in zip(operands, shapes)]
        inds = [broadcast_batch(i, s[:n_batch]) for (_, i, _), s in zip(operands, shapes)]
        return (jnp.concatenate(datas, dimension), jnp.concatenate(inds, dimension), out_shape)
    if dimension >= n_batch + n_sparse:
        # A dense dimension: all operands must share indices; JAX requires it the same way.
        d = dimension - n_sparse + 1
        return (jnp.concatenate([o[0] for o in operands], d), operands[0][1], out_shape)
    batch = tuple(jnp.broadcast_shapes(*(s[:n_batch] for s in shapes)))
    col = dimension - n_batch
    datas, inds, offset = [], [], 0
    for (d, i, _), s in zip(operands, shapes):
        # Shift this operand's indices along the concatenated axis; padding rows
        # (out of bounds) are moved to the new out-of-bounds value.
        fill = _fill(s, n_batch, n_sparse, i.dtype)
        oob = (i >= fill).any(-1, keepdims=True)
        shifted = i.at[..., col].add(offset)
        new_fill = _fill(out_shape, n_batch, n_sparse, i.dtype)
        inds.append(broadcast_batch(jnp.where(oob, new_fill, shifted), batch))
        datas.append(broadcast_batch(d, batch))
        offset += s[dimension]
    return jnp.concatenate(datas, n_batch), jnp.concatenate(inds, n_batch), out_shape
