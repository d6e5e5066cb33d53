"""The conversion primitives of the batched-COO format, each with all its rules:
``bcoo_todense``, ``bcoo_fromdense``, ``bcoo_extract`` and ``bcoo_transpose``.

A BCOO array of shape ``batch + sparse + dense`` stores ``data`` of shape
``batch + (nse,) + dense`` and ``indices`` of shape ``batch + (nse, n_sparse)``; a batch
dimension of either buffer may be 1 (broadcast). Padding entries carry out-of-bounds indices
(the sparse shape itself), which scatters drop and gathers read as 0.

Every primitive evaluates (and lowers) through a function written in jaxkit operations, vmapped
over the batch dimensions, so XLA sees gathers and scatters."""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse.util import SparseInfo, nfold_vmap
from jaxkit.interpreters import ad, batching, dispatch, mlir

not_mapped = batching.not_mapped


def define_sparse_primitive(name: str, impl: Callable, abstract_eval: Callable,
                            multiple_results: bool = False) -> core.Primitive:
    """A primitive evaluated eagerly by compiling ``impl`` and lowered by inlining it."""
    prim = core.Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_impl(partial(dispatch.apply_primitive, prim))
    prim.def_abstract_eval(abstract_eval)
    mlir.register_lowering(prim, mlir.lower_fun(impl, multiple_results=multiple_results))
    return prim


def validate_bcoo_indices(indices, shape) -> tuple[int, int, int, int]:
    """``(n_batch, n_sparse, n_dense, nse)`` of indices for ``shape``, or a ValueError."""
    shape = tuple(shape)
    if not np.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"BCOO indices must have an integer dtype, got {indices.dtype}")
    if len(indices.shape) < 2:
        raise ValueError("BCOO indices must have at least 2 dimensions (batch..., nse, "
                         f"n_sparse), got shape {tuple(indices.shape)}")
    nse, n_sparse = indices.shape[-2:]
    n_batch = len(indices.shape) - 2
    n_dense = len(shape) - n_batch - n_sparse
    if n_dense < 0:
        raise ValueError(f"BCOO indices of shape {tuple(indices.shape)} address more "
                         f"dimensions than shape={shape} has")
    if any(s1 not in (1, s2) for s1, s2 in zip(indices.shape[:n_batch], shape[:n_batch])):
        raise ValueError("indices batch dimensions not compatible for "
                         f"indices.shape={tuple(indices.shape)}, shape={shape}")
    return n_batch, n_sparse, n_dense, nse


def validate_bcoo(data, indices, shape) -> tuple[int, int, int, int]:
    """Check a (data, indices) pair against ``shape`` as JAX does."""
    n_batch, n_sparse, n_dense, nse = validate_bcoo_indices(indices, shape)
    shape = tuple(shape)
    if any(s1 not in (1, s2) for s1, s2 in zip(data.shape[:n_batch], shape[:n_batch])):
        raise ValueError("data batch dimensions not compatible for "
                         f"data.shape={tuple(data.shape)}, shape={shape}")
    if tuple(data.shape[n_batch:]) != (nse,) + shape[n_batch + n_sparse:]:
        raise ValueError(f"Invalid data.shape={tuple(data.shape)} for nse={nse}, "
                         f"n_batch={n_batch}, n_dense={n_dense}")
    return n_batch, n_sparse, n_dense, nse


def _columns(indices) -> tuple:
    return tuple(indices[:, k] for k in range(indices.shape[-1]))


def broadcast_batch(x, batch_shape: tuple[int, ...]):
    """``x`` with its leading batch dimensions (some possibly 1) broadcast to ``batch_shape``."""
    n = len(batch_shape)
    return jnp.broadcast_to(x, tuple(batch_shape) + tuple(x.shape[n:]))


def batched_bufs_to_front(args, dims, size: int):
    """Sparse buffers with their vmapped axis first; an unmapped one gets a size-1 axis (BCOO
    batch dimensions broadcast)."""
    return [lax.expand_dims(x, (0,)) if d is not_mapped else batching.moveaxis(x, d, 0)
            for x, d in zip(args, dims)]


# ---- bcoo_todense --------------------------------------------------------------------------

def _todense_impl(data, indices, *, spinfo: SparseInfo):
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    shape = tuple(spinfo.shape)
    data = broadcast_batch(data, shape[:n_batch])
    indices = broadcast_batch(indices, shape[:n_batch])

    def unbatched(d, i):
        if n_sparse == 0:  # every stored element covers the whole (dense) array
            return d.sum(0)
        return jnp.zeros(shape[n_batch:], d.dtype).at[_columns(i)].add(
            d, mode="drop", indices_are_sorted=spinfo.indices_sorted,
            unique_indices=spinfo.unique_indices)

    return nfold_vmap(unbatched, n_batch, broadcasted=False)(data, indices)


def _todense_abstract_eval(data, indices, *, spinfo):
    validate_bcoo(data, indices, spinfo.shape)
    return core.ShapedArray(tuple(spinfo.shape), data.dtype)


def _todense_transpose(ct, data, indices, *, spinfo):
    if ad.is_undefined_primal(indices):
        raise ValueError("Cannot transpose with respect to sparse indices")
    ct = ad.instantiate_zeros(ct)
    return bcoo_extract_p.bind(indices, ct, assume_unique=True), None


def _todense_batch(axis_data, batched_args, batch_dims, *, spinfo):
    size = batching.batch_size(batched_args, batch_dims)
    data, indices = batched_bufs_to_front(batched_args, batch_dims, size)
    spinfo = spinfo._replace(shape=(size, *spinfo.shape))
    return bcoo_todense_p.bind(data, indices, spinfo=spinfo), 0


bcoo_todense_p = define_sparse_primitive("bcoo_todense", _todense_impl, _todense_abstract_eval)
# Linear in the data only: the indices are integers (float0 tangents), never bound as tangents.
ad.defjvp(bcoo_todense_p, lambda t, data, indices, **p: bcoo_todense_p.bind(t, indices, **p),
          None)
ad.deftranspose(bcoo_todense_p, _todense_transpose)
ad.linear_primitives.add(bcoo_todense_p)
batching.defrule(bcoo_todense_p, _todense_batch)


# ---- bcoo_extract --------------------------------------------------------------------------

def _first_occurrences(indices):
    """True where an index row does not repeat an earlier row (quadratic in nse)."""
    same = (indices[:, None, :] == indices[None, :, :]).all(-1)
    nse = indices.shape[0]
    earlier = lax.broadcasted_iota(np.int32, (nse, nse), 1) < lax.broadcasted_iota(
        np.int32, (nse, nse), 0)
    return ~(same & earlier).any(1)


def _extract_impl(indices, arr, *, assume_unique):
    n_batch, n_sparse, nse = indices.ndim - 2, indices.shape[-1], indices.shape[-2]
    indices = broadcast_batch(indices, tuple(arr.shape[:n_batch]))

    def unbatched(i, a):
        if n_sparse == 0:
            out = jnp.broadcast_to(a[None], (nse, *a.shape))
        else:
            out = a.at[_columns(i)].get(mode="fill", fill_value=0)
        if not assume_unique:
            # Duplicated indices: the value goes to the first of them, as JAX gives it.
            keep = _first_occurrences(i) if n_sparse else jnp.arange(nse) == 0
            out = jnp.where(keep[(slice(None),) + (None,) * (out.ndim - 1)], out,
                            jnp.zeros((), out.dtype))
        return out

    return nfold_vmap(unbatched, n_batch, broadcasted=False)(indices, arr)


def _extract_abstract_eval(indices, arr, *, assume_unique):
    n_batch, n_sparse, _, nse = validate_bcoo_indices(indices, arr.shape)
    shape = tuple(arr.shape[:n_batch]) + (nse,) + tuple(arr.shape[n_batch + n_sparse:])
    return core.ShapedArray(shape, arr.dtype)


def _extract_transpose(ct, indices, arr, *, assume_unique):
    if ad.is_undefined_primal(indices):
        raise ValueError("Cannot transpose with respect to sparse indices")
    ct = ad.instantiate_zeros(ct)
    if tuple(ct.shape[:indices.ndim - 2]) != tuple(arr.aval.shape[:indices.ndim - 2]):
        raise ValueError("bcoo_extract transpose: cotangent batch shape "
                         f"{tuple(ct.shape)} does not match the array {arr.aval.str_short()}")
    spinfo = SparseInfo(tuple(arr.aval.shape), unique_indices=bool(assume_unique))
    return None, bcoo_todense_p.bind(ct, indices, spinfo=spinfo)


def _extract_batch(axis_data, batched_args, batch_dims, *, assume_unique):
    indices, arr = batched_args
    bi, ba = batch_dims
    size = batching.batch_size(batched_args, batch_dims)
    indices = (lax.expand_dims(indices, (0,)) if bi is not_mapped
               else batching.moveaxis(indices, bi, 0))
    arr = batching.bdim_at_front(arr, ba, size)
    return bcoo_extract_p.bind(indices, arr, assume_unique=assume_unique), 0


bcoo_extract_p = define_sparse_primitive("bcoo_extract", _extract_impl, _extract_abstract_eval)
ad.defjvp(bcoo_extract_p, None,
          lambda t, indices, arr, **p: bcoo_extract_p.bind(indices, t, **p))
ad.deftranspose(bcoo_extract_p, _extract_transpose)
ad.linear_primitives.add(bcoo_extract_p)
batching.defrule(bcoo_extract_p, _extract_batch)


# ---- bcoo_fromdense ------------------------------------------------------------------------

def _fromdense_impl(mat, *, nse, n_batch, n_dense, index_dtype):
    n_sparse = mat.ndim - n_batch - n_dense
    mask = mat != 0
    if n_dense:
        mask = mask.any(tuple(range(-n_dense, 0)))
    sparse_shape = tuple(mat.shape[n_batch:n_batch + n_sparse])

    def nonzero(m):
        # Padding indices are the sparse shape itself: out of bounds, so dropped by todense.
        cols = jnp.nonzero(m, size=nse, fill_value=sparse_shape)
        return jnp.stack(cols, axis=1).astype(index_dtype)

    if n_sparse:
        indices = nfold_vmap(nonzero, n_batch, broadcasted=False)(mask)
    else:
        indices = jnp.zeros((*mat.shape[:n_batch], nse, 0), index_dtype)
    data = _extract_impl(indices, mat, assume_unique=True)
    # Keep padding data zero even where nse exceeds the number of nonzeros.
    true_nse = mask.sum(tuple(range(n_batch, mask.ndim)))[..., None]
    slots = lax.broadcasted_iota(true_nse.dtype, (1,) * n_batch + (nse,), n_batch)
    keep = (slots < true_nse)[(Ellipsis,) + (None,) * n_dense]
    return jnp.where(keep, data, jnp.zeros((), data.dtype)), indices


def _fromdense_abstract_eval(mat, *, nse, n_batch, n_dense, index_dtype):
    n_sparse = mat.ndim - n_batch - n_dense
    if n_sparse < 0:
        raise ValueError(f"bcoo_fromdense: n_batch={n_batch} + n_dense={n_dense} exceeds the "
                         f"rank of the {mat.str_short()} array")
    data_shape = tuple(mat.shape[:n_batch]) + (nse,) + tuple(mat.shape[n_batch + n_sparse:])
    index_shape = tuple(mat.shape[:n_batch]) + (nse, n_sparse)
    return [core.ShapedArray(data_shape, mat.dtype),
            core.ShapedArray(index_shape, np.dtype(index_dtype))]


def _fromdense_jvp(primals, tangents, *, nse, n_batch, n_dense, index_dtype):
    (mat,), (mat_dot,) = primals, tangents
    data, indices = bcoo_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                          index_dtype=index_dtype)
    if type(mat_dot) is ad.Zero:
        data_dot = ad.Zero(core.get_aval(data).to_tangent_aval())
    else:
        data_dot = bcoo_extract_p.bind(indices, mat_dot, assume_unique=True)
    return [data, indices], [data_dot, ad.Zero(core.get_aval(indices).to_tangent_aval())]


def _fromdense_batch(axis_data, batched_args, batch_dims, *, nse, n_batch, n_dense,
                     index_dtype):
    (mat,), (bd,) = batched_args, batch_dims
    mat = batching.moveaxis(mat, bd, 0)
    return bcoo_fromdense_p.bind(mat, nse=nse, n_batch=n_batch + 1, n_dense=n_dense,
                                 index_dtype=index_dtype), [0, 0]


bcoo_fromdense_p = define_sparse_primitive("bcoo_fromdense", _fromdense_impl,
                                           _fromdense_abstract_eval, multiple_results=True)
ad.defjvp_rule(bcoo_fromdense_p, _fromdense_jvp)
batching.defrule(bcoo_fromdense_p, _fromdense_batch)


# ---- bcoo_transpose ------------------------------------------------------------------------

def validate_permutation(permutation, n_batch: int, n_sparse: int, n_dense: int, shape):
    """Split a permutation of a BCOO array into its batch, sparse and dense parts."""
    permutation = tuple(int(p) for p in permutation)
    if sorted(permutation) != list(range(len(shape))):
        raise TypeError("transpose permutation isn't a permutation of operand dimensions, "
                        f"got permutation {permutation} for shape {tuple(shape)}.")
    batch_perm = permutation[:n_batch]
    sparse_perm = [p - n_batch for p in permutation[n_batch:n_batch + n_sparse]]
    dense_perm = [p - n_sparse - n_batch for p in permutation[n_batch + n_sparse:]]
    if n_batch and tuple(sorted(batch_perm)) != tuple(range(n_batch)):
        raise NotImplementedError("bcoo_transpose: permutation must not mix batch "
                                  f"dimensions with other dimensions; got {permutation} "
                                  f"for n_batch={n_batch}")
    if n_dense and tuple(sorted(dense_perm)) != tuple(range(n_dense)):
        raise NotImplementedError("bcoo_transpose: permutation must not mix dense "
                                  f"dimensions with other dimensions; got {permutation} "
                                  f"for n_dense={n_dense}")
    return tuple(batch_perm), tuple(sparse_perm), tuple(dense_perm)


def _transpose_parts(data, indices, permutation, spinfo):
    n_batch, n_sparse, n_dense, _ = validate_bcoo(data, indices, spinfo.shape)
    return n_batch, validate_permutation(permutation, n_batch, n_sparse, n_dense, spinfo.shape)


def _transpose_impl(data, indices, *, permutation, spinfo):
    n_batch, (batch_perm, sparse_perm, dense_perm) = _transpose_parts(data, indices,
                                                                       permutation, spinfo)
    data = lax.transpose(data, (*batch_perm, n_batch,
                                *(d + n_batch + 1 for d in dense_perm)))
    indices = lax.transpose(indices, (*batch_perm, n_batch, n_batch + 1))
    if sparse_perm:
        indices = jnp.stack([indices[..., p] for p in sparse_perm], axis=-1)
    return data, indices


def _transpose_abstract_eval(data, indices, *, permutation, spinfo):
    n_batch, (batch_perm, _, dense_perm) = _transpose_parts(data, indices, permutation, spinfo)
    data_shape = (*(data.shape[p] for p in batch_perm), data.shape[n_batch],
                  *(data.shape[d + n_batch + 1] for d in dense_perm))
    index_shape = (*(indices.shape[p] for p in batch_perm), *indices.shape[n_batch:])
    return [core.ShapedArray(data_shape, data.dtype),
            core.ShapedArray(index_shape, indices.dtype)]


def _transpose_jvp(primals, tangents, *, permutation, spinfo):
    data, indices = primals
    data_dot, _ = tangents
    out = bcoo_transpose_p.bind(data, indices, permutation=permutation, spinfo=spinfo)
    if type(data_dot) is ad.Zero:
        dot = ad.Zero(core.get_aval(out[0]).to_tangent_aval())
    else:
        dot = bcoo_transpose_p.bind(data_dot, indices, permutation=permutation,
                                    spinfo=spinfo)[0]
    return out, [dot, ad.Zero(core.get_aval(out[1]).to_tangent_aval())]


def _transpose_transpose(cts, data, indices, *, permutation, spinfo):
    if ad.is_undefined_primal(indices):
        raise ValueError("Cannot transpose with respect to sparse indices")
    data_ct, _ = cts
    if type(data_ct) is ad.Zero:
        return ad.Zero(data.aval), None
    n_batch = indices.ndim - 2
    batch_perm, _, dense_perm = validate_permutation(
        permutation, n_batch, indices.shape[-1], len(spinfo.shape) - n_batch - indices.shape[-1],
        spinfo.shape)
    data_perm = (*batch_perm, n_batch, *(d + n_batch + 1 for d in dense_perm))
    return lax.transpose(data_ct, tuple(np.argsort(data_perm))), None


def _transpose_batch(axis_data, batched_args, batch_dims, *, permutation, spinfo):
    size = batching.batch_size(batched_args, batch_dims)
    data, indices = batched_bufs_to_front(batched_args, batch_dims, size)
    permutation = (0, *(p + 1 for p in permutation))
    spinfo = spinfo._replace(shape=(size, *spinfo.shape))
    return bcoo_transpose_p.bind(data, indices, permutation=permutation, spinfo=spinfo), [0, 0]


bcoo_transpose_p = define_sparse_primitive("bcoo_transpose", _transpose_impl,
                                           _transpose_abstract_eval, multiple_results=True)
ad.defjvp_rule(bcoo_transpose_p, _transpose_jvp)
ad.deftranspose(bcoo_transpose_p, _transpose_transpose)
batching.defrule(bcoo_transpose_p, _transpose_batch)
