"""``bcoo_dot_general``: a BCOO array contracted with a dense array, with all its rules.

The product is computed per batch entry (vmapped over the BCOO batch dimensions): the rhs is
gathered at the stored indices of the contracted sparse dimensions, multiplied with the stored
data by ``lax.dot_general`` (contracting dense dimensions), and scattered to the free sparse
dimensions. Both transposes are the linear transposes of that same computation, so gradients
flow to the stored data and to the dense operand."""
from __future__ import annotations

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.api import ShapeDtypeStruct, eval_shape
from jaxkit.api_extra import linear_transpose
from jaxkit.experimental.sparse._bcoo_core import (
    batched_bufs_to_front, broadcast_batch, define_sparse_primitive, validate_bcoo)
from jaxkit.experimental.sparse.util import SparseInfo
from jaxkit.interpreters import ad, batching
from jaxkit.transforms.vmap import vmap

not_mapped = batching.not_mapped


def _split_dims(dimension_numbers, n_batch: int, n_sparse: int):
    (lc, rc), (lb, rb) = dimension_numbers
    pairs = list(zip(lc, rc))
    cb = [(lhs, r) for lhs, r in pairs if lhs < n_batch]
    cs = [(lhs - n_batch, r) for lhs, r in pairs if n_batch <= lhs < n_batch + n_sparse]
    cd = [(lhs - n_batch - n_sparse, r) for lhs, r in pairs if lhs >= n_batch + n_sparse]
    return cb, cs, cd, tuple(lb), tuple(rb)


def _dot_general_impl(lhs_data, lhs_indices, rhs, *, dimension_numbers,
                      preferred_element_type, lhs_spinfo: SparseInfo):
    out_aval = _dot_general_abstract_eval(core.get_aval(lhs_data), core.get_aval(lhs_indices),
                                          core.get_aval(rhs),
                                          dimension_numbers=dimension_numbers,
                                          preferred_element_type=preferred_element_type,
                                          lhs_spinfo=lhs_spinfo, _check_dense=False)
    shape = tuple(lhs_spinfo.shape)
    n_batch, n_sparse, n_dense, nse = validate_bcoo(lhs_data, lhs_indices, shape)
    cb, cs, cd, lb, rb = _split_dims(dimension_numbers, n_batch, n_sparse)
    contracted = {d for d, _ in cb}
    free_b = [d for d in range(n_batch) if d not in lb and d not in contracted]
    batch_order = [*lb, *free_b, *(d for d, _ in cb)]
    rhs_contract = {r for _, r in (*cb, *cs, *cd)}
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_contract and d not in rb]
    rhs = lax.transpose(rhs, (*rb, *(r for _, r in cb), *(r for _, r in cs),
                              *(r for _, r in cd), *rhs_free))
    lhs_data = broadcast_batch(lhs_data, shape[:n_batch])
    lhs_indices = broadcast_batch(lhs_indices, shape[:n_batch])
    perm = tuple(batch_order)
    lhs_data = lax.transpose(lhs_data, (*perm, *range(n_batch, lhs_data.ndim)))
    lhs_indices = lax.transpose(lhs_indices, (*perm, n_batch, n_batch + 1))
    free_s = [d for d in range(n_sparse) if d not in {c for c, _ in cs}]
    free_sparse_shape = tuple(shape[n_batch + d] for d in free_s)
    n_cd = len(cd)

    def unbatched(data, indices, r):
        if cs:
            g = r.at[tuple(indices[:, c] for c, _ in cs)].get(mode="fill", fill_value=0)
        else:
            g = jnp.broadcast_to(r[None], (nse, *r.shape))
        prod = lax.dot_general(data, g, ((tuple(1 + d for d, _ in cd),
                                          tuple(range(1, 1 + n_cd))), ((0,), (0,))),
                               preferred_element_type=preferred_element_type)
        if free_s:
            out = jnp.zeros(free_sparse_shape + tuple(prod.shape[1:]), prod.dtype)
            return out.at[tuple(indices[:, f] for f in free_s)].add(prod, mode="drop")
        return prod.sum(0)

    fun = unbatched
    # Innermost vmap first: the last batch dimension in batch_order is mapped innermost.
    for pos in reversed(range(n_batch)):
        paired = pos < len(lb) or pos >= len(lb) + len(free_b)
        fun = vmap(fun, in_axes=(0, 0, 0 if paired else None))
    out = fun(lhs_data, lhs_indices, rhs)
    if cb:  # contracted batch dimensions were mapped last: sum them away
        out = out.sum(tuple(range(len(lb) + len(free_b), n_batch)))
    return out.astype(out_aval.dtype)


def _dot_general_abstract_eval(lhs_data, lhs_indices, rhs, *, dimension_numbers,
                               preferred_element_type, lhs_spinfo: SparseInfo,
                               _check_dense: bool = True):
    n_batch, n_sparse, _, _ = validate_bcoo(lhs_data, lhs_indices, lhs_spinfo.shape)
    out = eval_shape(lambda a, b: lax.dot_general(a, b, dimension_numbers,
                                                  preferred_element_type=preferred_element_type),
                     ShapeDtypeStruct(tuple(lhs_spinfo.shape), lhs_data.dtype),
                     ShapeDtypeStruct(tuple(rhs.shape), rhs.dtype))
    (lc, _), (lb, _) = dimension_numbers
    if lb and max(lb) >= n_batch:
        raise NotImplementedError(
            "bcoo_dot_general batch dimensions must be among the batch dimensions in the "
            f"sparse representation.\ngot lhs_batch={tuple(lb)}, n_batch={n_batch}")
    if _check_dense and any(d >= n_batch + n_sparse for d in lc):
        raise NotImplementedError("bcoo_dot_general: contracting over dense dimensions.")
    return core.ShapedArray(tuple(out.shape), out.dtype)


def _dot_general_transpose(ct, lhs_data, lhs_indices, rhs, **params):
    if ad.is_undefined_primal(lhs_indices):
        raise ValueError("Cannot transpose with respect to sparse indices")
    if type(ct) is ad.Zero:
        return [ad.Zero(lhs_data.aval) if ad.is_undefined_primal(lhs_data) else None, None,
                ad.Zero(rhs.aval) if ad.is_undefined_primal(rhs) else None]
    # The cotangent may be wider than the inputs (preferred_element_type); the transposed
    # computation runs in the cotangent's dtype and the result is cast back, as in lax.
    if ad.is_undefined_primal(lhs_data):
        aval = lhs_data.aval
        f = lambda d: _dot_general_impl(d, lhs_indices, rhs, **params)
        (d_ct,) = linear_transpose(f, ShapeDtypeStruct(aval.shape, aval.dtype))(ct)
        return [d_ct.astype(aval.dtype), None, None]
    aval = rhs.aval
    f = lambda r: _dot_general_impl(lhs_data, lhs_indices, r, **params)
    (r_ct,) = linear_transpose(f, ShapeDtypeStruct(aval.shape, aval.dtype))(ct)
    return [None, None, r_ct.astype(aval.dtype)]


def _dot_general_batch(axis_data, batched_args, batch_dims, *, dimension_numbers,
                       preferred_element_type, lhs_spinfo):
    size = batching.batch_size(batched_args, batch_dims)
    data, indices = batched_bufs_to_front(batched_args[:2], batch_dims[:2], size)
    rhs = batching.bdim_at_front(batched_args[2], batch_dims[2], size)
    (lc, rc), (lb, rb) = dimension_numbers
    inc = lambda ds: tuple(d + 1 for d in ds)
    dims = ((inc(lc), inc(rc)), ((0, *inc(lb)), (0, *inc(rb))))
    spinfo = lhs_spinfo._replace(shape=(size, *lhs_spinfo.shape))
    return bcoo_dot_general_p.bind(data, indices, rhs, dimension_numbers=dims,
                                   preferred_element_type=preferred_element_type,
                                   lhs_spinfo=spinfo), 0


bcoo_dot_general_p = define_sparse_primitive(
    "bcoo_dot_general", lambda *a, **p: _dot_general_impl(*a, **p),
    lambda *a, **p: _dot_general_abstract_eval(*a, **p))
ad.defjvp(bcoo_dot_general_p,
          lambda t, d, i, r, **p: bcoo_dot_general_p.bind(t, i, r, **p), None,
          lambda t, d, i, r, **p: bcoo_dot_general_p.bind(d, i, t, **p))
ad.deftranspose(bcoo_dot_general_p, _dot_general_transpose)
ad.linear_primitives.add(bcoo_dot_general_p)
batching.defrule(bcoo_dot_general_p, _dot_general_batch)


def canonical_dimension_numbers(dimension_numbers, lhs_ndim: int, rhs_ndim: int):
    """Dimension numbers as nested tuples of non-negative ints (hashable parameters)."""
    (lc, rc), (lb, rb) = dimension_numbers
    norm = lambda ds, n: tuple(int(d) % n if n else int(d) for d in ds)
    return ((norm(lc, lhs_ndim), norm(rc, rhs_ndim)), (norm(lb, lhs_ndim), norm(rb, rhs_ndim)))


def bcoo_dot_general_dense(lhs_data, lhs_indices, rhs, *, dimension_numbers,
                           preferred_element_type, lhs_spinfo: SparseInfo):
    """Bind ``bcoo_dot_general`` after canonicalizing its parameters."""
    rhs = jnp.asarray(rhs)
    dims = canonical_dimension_numbers(dimension_numbers, len(lhs_spinfo.shape), rhs.ndim)
    pet = None if preferred_element_type is None else np.dtype(
        dtypes.canonicalize_dtype(preferred_element_type))
    return bcoo_dot_general_p.bind(lhs_data, lhs_indices, rhs, dimension_numbers=dims,
                                   preferred_element_type=pet, lhs_spinfo=lhs_spinfo)


def bcoo_rdot_general_dense(lhs, rhs_data, rhs_indices, *, dimension_numbers,
                            preferred_element_type, rhs_spinfo: SparseInfo):
    """Dense ``lhs`` times sparse ``rhs``: the swapped product, transposed back into
    ``lax.dot_general``'s output order (batch, lhs free, rhs free)."""
    lhs = jnp.asarray(lhs)
    dims = canonical_dimension_numbers(dimension_numbers, lhs.ndim, len(rhs_spinfo.shape))
    (lc, rc), (lb, rb) = dims
    out = bcoo_dot_general_dense(rhs_data, rhs_indices, lhs, dimension_numbers=((rc, lc),
                                                                                 (rb, lb)),
                                 preferred_element_type=preferred_element_type,
                                 lhs_spinfo=rhs_spinfo)
    n_b = len(lb)
    n_rhs_free = len(rhs_spinfo.shape) - len(rc) - len(rb)
    n_lhs_free = lhs.ndim - len(lc) - len(lb)
    perm = (*range(n_b), *range(n_b + n_rhs_free, n_b + n_rhs_free + n_lhs_free),
            *range(n_b, n_b + n_rhs_free))
    return lax.transpose(out, perm)


# ---- bcoo_dot_general_sampled --------------------------------------------------------------
# The product of two dense arrays read only at given BCOO indices: the cotangent of the stored
# data of a sparse operand of dot_general. Computed as the dense product gathered at the
# indices (JAX's reference evaluation).

def _sampled_impl(A, B, indices, *, dimension_numbers):
    dense = lax.dot_general(A, B, dimension_numbers)
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    indices = broadcast_batch(indices, tuple(dense.shape[:n_batch]))

    def gather(i, d):
        return d.at[tuple(i[:, k] for k in range(n_sparse))].get(mode="fill", fill_value=0)

    f = gather
    for _ in range(n_batch):
        f = vmap(f)
    if n_sparse == 0:
        return jnp.broadcast_to(lax.expand_dims(dense, (n_batch,)),
                                (*dense.shape[:n_batch], indices.shape[-2],
                                 *dense.shape[n_batch:]))
    return f(indices, dense)


def _sampled_abstract_eval(A, B, indices, *, dimension_numbers):
    out = eval_shape(lambda a, b: lax.dot_general(a, b, dimension_numbers),
                     ShapeDtypeStruct(A.shape, A.dtype), ShapeDtypeStruct(B.shape, B.dtype))
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    if n_batch + n_sparse > len(out.shape):
        raise ValueError(f"bcoo_dot_general_sampled: indices {indices.str_short()} address "
                         f"more dimensions than the product shape {tuple(out.shape)}")
    shape = (*out.shape[:n_batch], indices.shape[-2], *out.shape[n_batch + n_sparse:])
    return core.ShapedArray(tuple(shape), out.dtype)


def _sampled_batch(axis_data, args, dims, *, dimension_numbers):
    size = batching.batch_size(args, dims)
    A = batching.bdim_at_front(args[0], dims[0], size)
    B = batching.bdim_at_front(args[1], dims[1], size)
    (indices,) = batched_bufs_to_front(args[2:], dims[2:], size)
    (lc, rc), (lb, rb) = dimension_numbers
    inc = lambda ds: tuple(d + 1 for d in ds)
    dims_out = ((inc(lc), inc(rc)), ((0, *inc(lb)), (0, *inc(rb))))
    return bcoo_dot_general_sampled_p.bind(A, B, indices, dimension_numbers=dims_out), 0


def _sampled_transpose(ct, A, B, indices, *, dimension_numbers):
    if ad.is_undefined_primal(indices):
        raise ValueError("Cannot transpose with respect to sparse indices")
    out = [None, None, None]
    for i, x in ((0, A), (1, B)):
        if not ad.is_undefined_primal(x):
            continue
        if type(ct) is ad.Zero:
            out[i] = ad.Zero(x.aval)
            continue

        def f(v, i=i):
            args = [A, B]
            args[i] = v
            return _sampled_impl(*args, indices, dimension_numbers=dimension_numbers)

        (out[i],) = linear_transpose(f, ShapeDtypeStruct(x.aval.shape, x.aval.dtype))(ct)
    return out


bcoo_dot_general_sampled_p = define_sparse_primitive(
    "bcoo_dot_general_sampled", _sampled_impl, _sampled_abstract_eval)
ad.defjvp(bcoo_dot_general_sampled_p,
          lambda t, A, B, i, **p: bcoo_dot_general_sampled_p.bind(t, B, i, **p),
          lambda t, A, B, i, **p: bcoo_dot_general_sampled_p.bind(A, t, i, **p), None)
ad.deftranspose(bcoo_dot_general_sampled_p, _sampled_transpose)
ad.linear_primitives.add(bcoo_dot_general_sampled_p)
batching.defrule(bcoo_dot_general_sampled_p, _sampled_batch)


def bcoo_dot_general_sampled(A, B, indices, *, dimension_numbers):
    """``lax.dot_general(A, B)`` evaluated only at BCOO ``indices``: the new stored data."""
    A, B = jnp.asarray(A), jnp.asarray(B)
    dims = canonical_dimension_numbers(dimension_numbers, A.ndim, B.ndim)
    return bcoo_dot_general_sampled_p.bind(A, B, jnp.asarray(indices), dimension_numbers=dims)
