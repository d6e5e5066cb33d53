"""``jax.experimental.sparse.bcsr``: the batched CSR format (``BCSR``: ``data``, ``indices``
(column of each stored element), ``indptr`` (row starts), two sparse dimensions) and its
primitives ``bcsr_fromdense``, ``bcsr_todense``, ``bcsr_extract`` and ``bcsr_dot_general``.
Each primitive converts to BCOO indices inside its computation and reuses the BCOO kernels, as
JAX does, with its own JVP, transpose and batching rules."""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from jaxkit import core, dtypes
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse import _bcoo_core, _bcoo_dot
from jaxkit.experimental.sparse._base import BatchedSparse, JAXSparse
from jaxkit.experimental.sparse._bcoo_core import define_sparse_primitive
from jaxkit.experimental.sparse._linear import deflinear_in
from jaxkit._util import safe_zip, split_list
from jaxkit.experimental.sparse.bcoo import (
    BCOO, bcoo_broadcast_in_dim, bcoo_concatenate, bcoo_sum_duplicates)
from jaxkit.experimental.sparse.csr import _csr_to_coo
from jaxkit.experimental.sparse.util import (
    CuSparseEfficiencyWarning, SparseEfficiencyWarning, SparseInfo, _count_stored_elements,
    nfold_vmap)
from jaxkit.interpreters import ad, batching
from jaxkit.interpreters.mlir import hlo
from jaxkit.tree_util import register_pytree_node_class
from jaxkit.typing import Array

__all__ = ["BCSR", "bcsr_dot_general", "bcsr_dot_general_p", "bcsr_eliminate_zeros",
           "bcsr_extract", "bcsr_extract_p", "bcsr_fromdense", "bcsr_fromdense_p",
           "bcsr_sum_duplicates", "bcsr_todense", "bcsr_todense_p", "bcsr_broadcast_in_dim",
           "bcsr_concatenate", "BCSRProperties",
           # re-exported, as JAX's module imports them
           "Array", "CuSparseEfficiencyWarning", "SparseEfficiencyWarning", "hlo", "safe_zip",
           "split_list"]

not_mapped = batching.not_mapped


class BCSRProperties(NamedTuple):
    """The layout of a BCSR array: its numbers of batch and dense dimensions, and ``nse``."""

    n_batch: int
    n_dense: int
    nse: int


def _validate_bcsr_indices(indices, indptr, shape):
    shape = tuple(shape)
    nse, n_batch = indices.shape[-1], indices.ndim - 1
    n_dense = len(shape) - n_batch - 2
    if n_dense < 0:
        raise ValueError(f"BCSR indices {tuple(indices.shape)} do not fit shape={shape}")
    ok = lambda a: all(s1 in (1, s2) for s1, s2 in zip(a, shape[:n_batch]))
    if not ok(indices.shape[:n_batch]):
        raise ValueError("indices batch dimensions not compatible for "
                         f"indices.shape={tuple(indices.shape)}, shape={shape}")
    if not ok(indptr.shape[:n_batch]):
        raise ValueError("indptr batch dimensions not compatible for "
                         f"indptr.shape={tuple(indptr.shape)}, shape={shape}")
    if tuple(indptr.shape[n_batch:]) != (shape[n_batch] + 1,):
        raise ValueError("indptr shape must match the matrix shape plus 1.")
    return n_batch, n_dense, nse


def _validate_bcsr(data, indices, indptr, shape):
    n_batch, n_dense, nse = _validate_bcsr_indices(indices, indptr, shape)
    shape = tuple(shape)
    if not all(s1 in (1, s2) for s1, s2 in zip(data.shape[:n_batch], shape[:n_batch])):
        raise ValueError("data batch dimensions not compatible for "
                         f"data.shape={tuple(data.shape)}, shape={shape}")
    if tuple(data.shape[n_batch:]) != (nse, *shape[n_batch + 2:]):
        raise ValueError(f"Invalid data.shape={tuple(data.shape)} for nse={nse}, "
                         f"n_batch={n_batch}, n_dense={n_dense}")
    return n_batch, n_dense, nse


def _bcsr_to_bcoo(indices, indptr, *, shape):
    """BCOO indices (row, column) of BCSR (indices, indptr)."""
    n_batch = indices.ndim - 1
    batch = tuple(shape[:n_batch])
    indices = _bcoo_core.broadcast_batch(indices, batch)
    indptr = _bcoo_core.broadcast_batch(indptr, batch)
    to_coo = nfold_vmap(lambda i, p: jnp.stack(_csr_to_coo(i, p), axis=-1), n_batch,
                        broadcasted=False)
    return to_coo(indices, indptr)


def _bcoo_to_bcsr(indices, *, shape, index_dtype):
    """BCSR (indices, indptr) of lexicographically sorted BCOO indices."""
    n_batch = indices.ndim - 2
    if indices.shape[-1] != 2:
        raise ValueError("Must have 2 sparse dimensions to be converted to BCSR.")
    n_rows = shape[n_batch]

    def ptr(rows):
        counts = jnp.zeros(n_rows, index_dtype).at[rows].add(1, mode="drop")
        return jnp.concatenate([jnp.zeros(1, index_dtype),
                                jnp.cumsum(counts).astype(index_dtype)])

    return indices[..., 1], nfold_vmap(ptr, n_batch, broadcasted=False)(indices[..., 0])


@register_pytree_node_class
class BCSR(BatchedSparse):
    """Batched CSR sparse array: two sparse dimensions after ``n_batch`` batch dimensions."""

    def __init__(self, args, *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False):
        self.data, self.indices, self.indptr = map(jnp.asarray, args)
        self.indices_sorted, self.unique_indices = indices_sorted, unique_indices
        super().__init__(args, shape=shape)
        _validate_bcsr(self.data, self.indices, self.indptr, self.shape)

    @property
    def _bufs(self):
        return self.data, self.indices, self.indptr

    @property
    def _info(self) -> SparseInfo:
        return SparseInfo(self.shape, self.indices_sorted, self.unique_indices)

    @property
    def nse(self) -> int:
        return self.indices.shape[-1]

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - 1

    @property
    def n_sparse(self) -> int:
        return 2

    @property
    def n_dense(self) -> int:
        return self.data.ndim - self.indices.ndim

    @property
    def _sparse_shape(self):
        return tuple(self.shape[self.n_batch:self.n_batch + 2])

    def _repr_extra(self) -> str:
        extra = f", n_batch={self.n_batch}" if self.n_batch else ""
        return extra + (f", n_dense={self.n_dense}" if self.n_dense else "")

    def transpose(self, *args, **kwargs):
        raise NotImplementedError("Transpose is not implemented.")

    def tree_flatten(self):
        return (self.data, self.indices, self.indptr), (*self._info, self.n_batch)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        shape, indices_sorted, unique_indices, n_batch = aux_data
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        # As for BCOO: under vmap (axis 0) the shape follows the buffers' batch axes.
        nd = getattr(obj.indices, "ndim", None)
        if isinstance(nd, int) and nd - 1 == n_batch - 1 and n_batch >= 1:
            shape = shape[1:]
        elif isinstance(nd, int) and nd - 1 == n_batch + 1:
            shape = (max(obj.data.shape[0], obj.indices.shape[0]), *shape)
        obj.shape, obj.indices_sorted, obj.unique_indices = shape, indices_sorted, unique_indices
        return obj

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> BCSR:
        shape = tuple(shape)
        if n_dense < 0 or n_batch < 0 or nse < 0:
            raise ValueError(f"Invalid inputs: shape={shape}, n_dense={n_dense}, "
                             f"n_batch={n_batch}, nse={nse}")
        if len(shape) - n_dense - n_batch != 2:
            raise ValueError("BCSR sparse.empty: must have 2 sparse dimensions.")
        batch, sparse = shape[:n_batch], shape[n_batch:n_batch + 2]
        data = jnp.zeros((*batch, nse, *shape[n_batch + 2:]), dtype)
        indices = jnp.full((*batch, nse), sparse[1], index_dtype)
        indptr = jnp.zeros((*batch, sparse[0] + 1), index_dtype)
        return cls((data, indices, indptr), shape=shape)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32",
             n_batch: int = 0, n_dense: int = 0) -> BCSR:
        if n_batch != 0 or n_dense != 0:
            raise ValueError("BCSR sparse.eye: n_batch and n_dense must be 0")
        return cls.from_bcoo(BCOO._eye(N, M, k, dtype=dtype, index_dtype=index_dtype))

    def sum_duplicates(self, nse: int | None = None, remove_zeros: bool = True) -> BCSR:
        """A copy with duplicates summed (and explicit zeros removed)."""
        return (bcsr_eliminate_zeros if remove_zeros else bcsr_sum_duplicates)(self, nse=nse)

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32,
                  n_dense: int = 0, n_batch: int = 0) -> BCSR:
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    def todense(self):
        return bcsr_todense(self)

    def to_bcoo(self) -> BCOO:
        indices = _bcsr_to_bcoo(self.indices, self.indptr, shape=self.shape)
        return BCOO((self.data, indices), shape=self.shape)

    @classmethod
    def from_bcoo(cls, arr: BCOO) -> BCSR:
        if arr.n_sparse != 2:
            raise NotImplementedError(f"BSCR.from_bcoo requires n_sparse=2; got "
                                      f"arr.n_sparse={arr.n_sparse}")
        if not arr.indices_sorted:
            arr = arr.sort_indices()
        indices, indptr = _bcoo_to_bcsr(arr.indices, shape=arr.shape,
                                        index_dtype=arr.indices.dtype)
        return cls((arr.data, indices, indptr), shape=arr.shape,
                   indices_sorted=arr.indices_sorted, unique_indices=arr.unique_indices)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=None, n_dense: int = 0,
                          n_batch: int = 0) -> BCSR:
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCSR.from_scipy_sparse with n_dense or n_batch")
        mat = mat.tocsr()
        dt = index_dtype or jnp.int32
        return cls((jnp.asarray(mat.data), jnp.asarray(mat.indices).astype(dt),
                    jnp.asarray(mat.indptr).astype(dt)), shape=mat.shape)


def _bufs_to_front(args, dims, size):
    return _bcoo_core.batched_bufs_to_front(args, dims, size)


# ---- bcsr_todense --------------------------------------------------------------------------

def _todense_impl(data, indices, indptr, *, spinfo):
    coo = _bcsr_to_bcoo(indices, indptr, shape=spinfo.shape)
    return _bcoo_core._todense_impl(data, coo, spinfo=spinfo)


def _todense_abstract_eval(data, indices, indptr, *, spinfo):
    _validate_bcsr(data, indices, indptr, spinfo.shape)
    return core.ShapedArray(tuple(spinfo.shape), data.dtype)


def _todense_batch(axis_data, args, dims, *, spinfo):
    size = batching.batch_size(args, dims)
    bufs = _bufs_to_front(args, dims, size)
    return bcsr_todense_p.bind(*bufs, spinfo=spinfo._replace(shape=(size, *spinfo.shape))), 0


bcsr_todense_p = define_sparse_primitive("bcsr_todense", _todense_impl, _todense_abstract_eval)
deflinear_in(bcsr_todense_p, _todense_impl, (0,))
batching.defrule(bcsr_todense_p, _todense_batch)


def bcsr_todense(mat: BCSR):
    """The dense array of a BCSR array."""
    return bcsr_todense_p.bind(mat.data, mat.indices, mat.indptr, spinfo=mat._info)


# ---- bcsr_extract --------------------------------------------------------------------------

def _extract_impl(indices, indptr, mat):
    coo = _bcsr_to_bcoo(indices, indptr, shape=mat.shape)
    return _bcoo_core._extract_impl(coo, mat, assume_unique=True)


def _extract_abstract_eval(indices, indptr, mat):
    n_batch, n_dense, nse = _validate_bcsr_indices(indices, indptr, mat.shape)
    return core.ShapedArray((*mat.shape[:n_batch], nse, *mat.shape[n_batch + 2:]), mat.dtype)


def _extract_batch(axis_data, args, dims):
    size = batching.batch_size(args, dims)
    indices, indptr = _bufs_to_front(args[:2], dims[:2], size)
    mat = batching.bdim_at_front(args[2], dims[2], size)
    return bcsr_extract_p.bind(indices, indptr, mat), 0


bcsr_extract_p = define_sparse_primitive("bcsr_extract", _extract_impl, _extract_abstract_eval)
deflinear_in(bcsr_extract_p, _extract_impl, (2,))
batching.defrule(bcsr_extract_p, _extract_batch)


def bcsr_extract(indices, indptr, mat):
    """The values of dense ``mat`` at the stored positions of (indices, indptr)."""
    return bcsr_extract_p.bind(jnp.asarray(indices), jnp.asarray(indptr), jnp.asarray(mat))


# ---- bcsr_fromdense ------------------------------------------------------------------------

def _fromdense_impl(mat, *, nse, n_batch, n_dense, index_dtype):
    if mat.ndim - n_dense - n_batch != 2:
        raise ValueError("bcsr_fromdense: must have 2 sparse dimensions.")
    data, coo = _bcoo_core._fromdense_impl(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                           index_dtype=index_dtype)
    indices, indptr = _bcoo_to_bcsr(coo, shape=mat.shape, index_dtype=index_dtype)
    return data, indices, indptr


def _fromdense_abstract_eval(mat, *, nse, n_batch, n_dense, index_dtype):
    if mat.ndim - n_dense - n_batch != 2:
        raise ValueError("bcsr_fromdense: must have 2 sparse dimensions.")
    batch = tuple(mat.shape[:n_batch])
    return [core.ShapedArray((*batch, nse, *mat.shape[n_batch + 2:]), mat.dtype),
            core.ShapedArray((*batch, nse), index_dtype),
            core.ShapedArray((*batch, mat.shape[n_batch] + 1), index_dtype)]


def _fromdense_jvp(primals, tangents, **params):
    (mat,), (mat_dot,) = primals, tangents
    data, indices, indptr = bcsr_fromdense_p.bind(mat, **params)
    if type(mat_dot) is ad.Zero:
        data_dot = ad.Zero(core.get_aval(data).to_tangent_aval())
    else:
        data_dot = bcsr_extract_p.bind(indices, indptr, mat_dot)
    return [data, indices, indptr], [data_dot,
                                     ad.Zero(core.get_aval(indices).to_tangent_aval()),
                                     ad.Zero(core.get_aval(indptr).to_tangent_aval())]


def _fromdense_batch(axis_data, args, dims, *, n_batch, **params):
    mat = batching.moveaxis(args[0], dims[0], 0)
    return bcsr_fromdense_p.bind(mat, n_batch=n_batch + 1, **params), [0, 0, 0]


bcsr_fromdense_p = define_sparse_primitive("bcsr_fromdense", _fromdense_impl,
                                           _fromdense_abstract_eval, multiple_results=True)
ad.defjvp_rule(bcsr_fromdense_p, _fromdense_jvp)
batching.defrule(bcsr_fromdense_p, _fromdense_batch)


def bcsr_fromdense(mat, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype=jnp.int32) -> BCSR:
    """A BCSR array holding the nonzeros of ``mat``; ``nse`` is needed under transformations."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = _count_stored_elements(mat, n_batch, n_dense)
    nse = operator.index(int(core.concrete_or_error(
        nse, "The error arose for the nse argument of bcsr_fromdense. In order for "
             "BCSR.fromdense() to be used in traced/compiled code, you must pass a concrete "
             "value to the nse (number of stored elements) argument.")))
    bufs = bcsr_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                 index_dtype=np.dtype(index_dtype))
    return BCSR(bufs, shape=mat.shape)  # no index flags, as JAX


# ---- bcsr_dot_general ----------------------------------------------------------------------

def _dot_impl(data, indices, indptr, rhs, *, dimension_numbers, preferred_element_type,
              lhs_spinfo):
    coo = _bcsr_to_bcoo(indices, indptr, shape=lhs_spinfo.shape)
    return _bcoo_dot._dot_general_impl(data, coo, rhs, dimension_numbers=dimension_numbers,
                                       preferred_element_type=preferred_element_type,
                                       lhs_spinfo=lhs_spinfo)


def _dot_abstract_eval(data, indices, indptr, rhs, *, dimension_numbers,
                       preferred_element_type, lhs_spinfo):
    n_batch, _, nse = _validate_bcsr(data, indices, indptr, lhs_spinfo.shape)
    coo = core.ShapedArray((*indices.shape[:n_batch], nse, 2), indices.dtype)
    return _bcoo_dot._dot_general_abstract_eval(
        data, coo, rhs, dimension_numbers=dimension_numbers,
        preferred_element_type=preferred_element_type, lhs_spinfo=lhs_spinfo)


def _dot_batch(axis_data, args, dims, *, dimension_numbers, preferred_element_type,
               lhs_spinfo):
    size = batching.batch_size(args, dims)
    bufs = _bufs_to_front(args[:3], dims[:3], size)
    rhs = batching.bdim_at_front(args[3], dims[3], size)
    (lc, rc), (lb, rb) = dimension_numbers
    inc = lambda ds: tuple(d + 1 for d in ds)
    dims_out = ((inc(lc), inc(rc)), ((0, *inc(lb)), (0, *inc(rb))))
    return bcsr_dot_general_p.bind(*bufs, rhs, dimension_numbers=dims_out,
                                   preferred_element_type=preferred_element_type,
                                   lhs_spinfo=lhs_spinfo._replace(
                                       shape=(size, *lhs_spinfo.shape))), 0


bcsr_dot_general_p = define_sparse_primitive("bcsr_dot_general", _dot_impl, _dot_abstract_eval)
deflinear_in(bcsr_dot_general_p, _dot_impl, (0, 3))
batching.defrule(bcsr_dot_general_p, _dot_batch)


def bcsr_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """``lax.dot_general`` of a BCSR array with a dense array (or dense with BCSR)."""
    if not isinstance(lhs, BCSR) or isinstance(rhs, JAXSparse):
        # JAX's limitation: convert with .to_bcoo() for the other products.
        raise NotImplementedError("bcsr_dot_general currently implemented for BCSR lhs and "
                                  "ndarray rhs.")
    rhs = jnp.asarray(rhs)
    dims = _bcoo_dot.canonical_dimension_numbers(dimension_numbers, lhs.ndim, rhs.ndim)
    pet = None if preferred_element_type is None else np.dtype(
        dtypes.canonicalize_dtype(preferred_element_type))
    return bcsr_dot_general_p.bind(lhs.data, lhs.indices, lhs.indptr, rhs,
                                   dimension_numbers=dims, preferred_element_type=pet,
                                   lhs_spinfo=lhs._info)


def bcsr_sum_duplicates(mat: BCSR, nse: int | None = None) -> BCSR:
    """A copy of ``mat`` with duplicate indices summed."""
    return BCSR.from_bcoo(bcoo_sum_duplicates(mat.to_bcoo(), nse=nse))


def bcsr_eliminate_zeros(mat: BCSR, nse: int | None = None) -> BCSR:
    """A copy of ``mat`` without explicitly stored zeros (duplicates summed)."""
    return BCSR.from_bcoo(mat.to_bcoo().sum_duplicates(nse=nse, remove_zeros=True))




def bcsr_broadcast_in_dim(mat: BCSR, *, shape: Sequence[int],
                          broadcast_dimensions: Sequence[int], sharding=None) -> BCSR:
    """``lax.broadcast_in_dim`` of a BCSR array (through its BCOO form)."""
    return BCSR.from_bcoo(bcoo_broadcast_in_dim(mat.to_bcoo(), shape=tuple(shape),
                                                broadcast_dimensions=broadcast_dimensions))


def bcsr_concatenate(operands: Sequence[BCSR], *, dimension: int) -> BCSR:
    """``lax.concatenate`` of BCSR arrays of one layout along a batch or sparse dimension
    (through their BCOO forms)."""
    return BCSR.from_bcoo(bcoo_concatenate([m.to_bcoo() for m in operands],
                                           dimension=dimension))
