"""``bcoo_spdot_general``: the product of two BCOO arrays, itself a BCOO array.

Per batch entry, every pair of stored elements whose contracted indices agree contributes the
product of their values at the concatenation of their free indices; the pairs are then merged
by ``bcoo_sum_duplicates`` into ``out_nse`` stored elements. Batch dimensions are mapped by
nested vmaps (paired ones together, free ones of each operand separately)."""
from __future__ import annotations

import math

import numpy as np

from jaxkit import core
from jaxkit import numpy as jnp
from jaxkit.api import ShapeDtypeStruct, eval_shape
from jaxkit import lax
from jaxkit.experimental.sparse._bcoo_core import (
    batched_bufs_to_front, broadcast_batch, define_sparse_primitive, validate_bcoo)
from jaxkit.experimental.sparse._bcoo_ops import bcoo_sum_duplicates_p
from jaxkit.experimental.sparse.util import SparseInfo
from jaxkit.interpreters import ad, batching
from jaxkit.transforms.vmap import vmap


def _layout(lhs_data, lhs_indices, rhs_data, rhs_indices, lhs_spinfo, rhs_spinfo,
            dimension_numbers, preferred_element_type):
    lshape, rshape = tuple(lhs_spinfo.shape), tuple(rhs_spinfo.shape)
    out = eval_shape(lambda a, b: lax.dot_general(a, b, dimension_numbers,
                                                  preferred_element_type=preferred_element_type),
                     ShapeDtypeStruct(lshape, lhs_data.dtype),
                     ShapeDtypeStruct(rshape, rhs_data.dtype))
    lb_, ls, ld, lnse = validate_bcoo(lhs_data, lhs_indices, lshape)
    rb_, rs, rd, rnse = validate_bcoo(rhs_data, rhs_indices, rshape)
    (lc, rc), (lb, rb) = dimension_numbers
    if ld or rd:
        raise NotImplementedError("bcoo_spdot_general with dense dimensions.")
    if (lb and max(lb) >= lb_) or (rb and max(rb) >= rb_):
        raise NotImplementedError("bcoo_spdot_general: batch_dims must correspond to batch "
                                  "dimensions of the sparse representation.")
    for c, nb, ns in ((lc, lb_, ls), (rc, rb_, rs)):
        if c and (min(c) < nb or max(c) >= nb + ns):
            raise NotImplementedError("bcoo_spdot_general only supports contraction of sparse "
                                      "indices.")
    if rb_ > len(rb) and ls > len(lc):
        raise ValueError("bcoo_spdot_general: cannot have unused batch dims on rhs with unused "
                         "sparse dims on lhs.")
    out_nse = (lnse if ls > len(lc) else 1) * (rnse if rs > len(rc) else 1)
    out_n_batch = lb_ + rb_ - len(lb)
    out_nse = min(out_nse, math.prod(out.shape[out_n_batch:]))
    batch = (*(lshape[d] for d in lb), *(lshape[d] for d in range(lb_) if d not in lb),
             *(rshape[d] for d in range(rb_) if d not in rb))
    return out, out_nse, batch, ls + rs - 2 * len(lc)


def _spdot_abstract_eval(lhs_data, lhs_indices, rhs_data, rhs_indices, *, lhs_spinfo,
                         rhs_spinfo, dimension_numbers, preferred_element_type):
    out, out_nse, batch, n_sparse = _layout(lhs_data, lhs_indices, rhs_data, rhs_indices,
                                            lhs_spinfo, rhs_spinfo, dimension_numbers,
                                            preferred_element_type)
    return [core.ShapedArray((*batch, out_nse), out.dtype),
            core.ShapedArray((*batch, out_nse, n_sparse), lhs_indices.dtype)]


def _spdot_impl(lhs_data, lhs_indices, rhs_data, rhs_indices, *, lhs_spinfo, rhs_spinfo,
                dimension_numbers, preferred_element_type):
    out, out_nse, _, _ = _layout(lhs_data, lhs_indices, rhs_data, rhs_indices, lhs_spinfo,
                                 rhs_spinfo, dimension_numbers, preferred_element_type)
    lshape, rshape = tuple(lhs_spinfo.shape), tuple(rhs_spinfo.shape)
    lnb, rnb = lhs_indices.ndim - 2, rhs_indices.ndim - 2
    (lc, rc), (lb, rb) = dimension_numbers
    lc = [d - lnb for d in lc]
    rc = [d - rnb for d in rc]
    lsp, rsp = lshape[lnb:], rshape[rnb:]
    lfree = [d for d in range(len(lsp)) if d not in lc]
    rfree = [d for d in range(len(rsp)) if d not in rc]
    out_sparse = tuple(out.shape[len(out.shape) - len(lfree) - len(rfree):])
    dtype = out.dtype
    cols = lambda i, ds: (i[:, np.array(ds, np.int32)] if ds else
                          jnp.zeros((i.shape[0], 0), i.dtype))

    def unbatched(ld, li, rd, ri):
        lk, rk = cols(li, lc), cols(ri, rc)
        lfill = jnp.array([lsp[d] for d in lc], li.dtype)
        rfill = jnp.array([rsp[d] for d in rc], ri.dtype)
        match = (lk[:, None, :] == rk[None, :, :].astype(lk.dtype)).all(-1)
        match = match & (lk < lfill).all(-1)[:, None] & (rk < rfill).all(-1)[None, :]
        prod = ld.astype(dtype)[:, None] * rd.astype(dtype)[None, :]
        data = jnp.where(match, prod, jnp.zeros((), dtype)).ravel()
        nl, nr = li.shape[0], ri.shape[0]
        lj, rj = cols(li, lfree), cols(ri, rfree).astype(li.dtype)
        idx = jnp.concatenate([jnp.broadcast_to(lj[:, None], (nl, nr, lj.shape[1])),
                               jnp.broadcast_to(rj[None], (nl, nr, rj.shape[1]))], -1)
        idx = idx.reshape(nl * nr, lj.shape[1] + rj.shape[1])
        return tuple(bcoo_sum_duplicates_p.bind(data, idx, spinfo=SparseInfo(out_sparse),
                                                nse=out_nse))

    lhs_data = broadcast_batch(lhs_data, lshape[:lnb])
    lhs_indices = broadcast_batch(lhs_indices, lshape[:lnb])
    rhs_data = broadcast_batch(rhs_data, rshape[:rnb])
    rhs_indices = broadcast_batch(rhs_indices, rshape[:rnb])
    lperm = [*lb, *(d for d in range(lnb) if d not in lb)]
    rperm = [*rb, *(d for d in range(rnb) if d not in rb)]
    lhs_data = lax.transpose(lhs_data, (*lperm, lnb))
    lhs_indices = lax.transpose(lhs_indices, (*lperm, lnb, lnb + 1))
    rhs_data = lax.transpose(rhs_data, (*rperm, rnb))
    rhs_indices = lax.transpose(rhs_indices, (*rperm, rnb, rnb + 1))
    f = unbatched
    for _ in range(rnb - len(rb)):
        f = vmap(f, in_axes=(None, None, 0, 0))
    for _ in range(lnb - len(lb)):
        f = vmap(f, in_axes=(0, 0, None, None))
    for _ in range(len(lb)):
        f = vmap(f)
    return list(f(lhs_data, lhs_indices, rhs_data, rhs_indices))


def _spdot_jvp(primals, tangents, **params):
    ld, li, rd, ri = primals
    ld_dot, _, rd_dot, _ = tangents
    out = bcoo_spdot_general_p.bind(ld, li, rd, ri, **params)
    dot = None
    if type(ld_dot) is not ad.Zero:
        dot = bcoo_spdot_general_p.bind(ld_dot, li, rd, ri, **params)[0]
    if type(rd_dot) is not ad.Zero:
        t = bcoo_spdot_general_p.bind(ld, li, rd_dot, ri, **params)[0]
        dot = t if dot is None else ad.add_tangents(dot, t)
    if dot is None:
        dot = ad.Zero(core.get_aval(out[0]).to_tangent_aval())
    return out, [dot, ad.Zero(core.get_aval(out[1]).to_tangent_aval())]


def _spdot_batch(axis_data, args, dims, *, lhs_spinfo, rhs_spinfo, dimension_numbers,
                 preferred_element_type):
    size = batching.batch_size(args, dims)
    ld, li = batched_bufs_to_front(args[:2], dims[:2], size)
    rd, ri = batched_bufs_to_front(args[2:], dims[2:], size)
    inc = lambda ds: tuple(d + 1 for d in ds)
    (lc, rc), (lb, rb) = dimension_numbers
    dims_out = ((inc(lc), inc(rc)), ((0, *inc(lb)), (0, *inc(rb))))
    out = bcoo_spdot_general_p.bind(
        ld, li, rd, ri, lhs_spinfo=lhs_spinfo._replace(shape=(size, *lhs_spinfo.shape)),
        rhs_spinfo=rhs_spinfo._replace(shape=(size, *rhs_spinfo.shape)),
        dimension_numbers=dims_out, preferred_element_type=preferred_element_type)
    return out, [0, 0]


bcoo_spdot_general_p = define_sparse_primitive("bcoo_spdot_general", _spdot_impl,
                                               _spdot_abstract_eval, multiple_results=True)
ad.defjvp_rule(bcoo_spdot_general_p, _spdot_jvp)
batching.defrule(bcoo_spdot_general_p, _spdot_batch)


def spdot_general(lhs, rhs, *, dimension_numbers, preferred_element_type):
    """``(data, indices, shape)`` of the product of two BCOO arrays."""
    (lc, rc), (lb, rb) = dimension_numbers
    norm = lambda ds, n: tuple(int(d) % n for d in ds)
    dims = ((norm(lc, lhs.ndim), norm(rc, rhs.ndim)), (norm(lb, lhs.ndim), norm(rb, rhs.ndim)))
    data, indices = bcoo_spdot_general_p.bind(
        lhs.data, lhs.indices, rhs.data, rhs.indices, lhs_spinfo=lhs._info,
        rhs_spinfo=rhs._info, dimension_numbers=dims,
        preferred_element_type=None if preferred_element_type is None else np.dtype(
            preferred_element_type))
    shape = eval_shape(lambda a, b: lax.dot_general(a, b, dims),
                       ShapeDtypeStruct(lhs.shape, lhs.dtype),
                       ShapeDtypeStruct(rhs.shape, rhs.dtype)).shape
    return data, indices, tuple(shape)
