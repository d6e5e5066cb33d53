"""``jax.experimental.sparse.csr``: the 2-D ``CSR`` format (``data``, ``indices``, ``indptr``)
and its column-major twin ``CSC``, with the primitives ``csr_todense``, ``csr_fromdense``,
``csr_matvec`` and ``csr_matmat``, built by ``_format_rules``: rows are recovered from ``indptr``
inside each primitive, so they lower to the same gathers and scatter-adds as COO."""
from __future__ import annotations

import numpy as np

from jaxkit import core
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit.experimental.sparse._format_rules import define_format_primitives
from jaxkit.experimental.sparse.coo import COOInfo
from jaxkit.experimental.sparse.util import CuSparseEfficiencyWarning
from jaxkit.numpy._promotion import promote_dtypes
from jaxkit.tree_util import register_pytree_node_class
from jaxkit.typing import Array

__all__ = ["CSC", "CSR", "csr_fromdense", "csr_fromdense_p", "csr_matmat", "csr_matmat_p",
           "csr_matvec", "csr_matvec_p", "csr_todense", "csr_todense_p",
           # re-exported, as JAX's module imports them
           "Array", "CuSparseEfficiencyWarning", "promote_dtypes"]


def _csr_to_coo(indices, indptr):
    """Row of each stored element: one more than the number of row starts before it."""
    marks = jnp.zeros_like(indices).at[indptr].add(1, mode="drop")
    return jnp.cumsum(marks) - 1, indices


@register_pytree_node_class
class CSR(JAXSparse):
    """A 2-D sparse matrix in compressed-row format; prefer ``BCOO`` for transformations."""

    def __init__(self, args, *, shape):
        self.data, self.indices, self.indptr = map(jnp.asarray, args)
        super().__init__(args, shape=shape)

    @property
    def _bufs(self):
        return self.data, self.indices, self.indptr

    @property
    def nse(self) -> int:
        return self.data.size

    @property
    def dtype(self):
        return self.data.dtype

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32) -> CSR:
        return csr_fromdense(mat, nse=nse, index_dtype=index_dtype)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> CSR:
        shape = tuple(shape)
        if len(shape) != 2:
            raise ValueError(f"CSR must have ndim=2; got shape={shape}")
        return cls((jnp.zeros(0, dtype), jnp.zeros(0, index_dtype),
                    jnp.zeros(shape[0] + 1, index_dtype)), shape=shape)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> CSR:
        diag = min(N, M - k) if k > 0 else min(N + k, M)
        if diag <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        k = int(k)
        first, last = max(-k, 0), max(-k, 0) + diag
        rows = np.arange(N)
        indptr = np.clip(rows - first, 0, diag)
        indptr = np.concatenate([indptr, [diag]])
        cols = np.arange(first, last) + k
        return cls((jnp.ones(diag, dtype), jnp.asarray(cols, index_dtype),
                    jnp.asarray(indptr, index_dtype)), shape=(N, M))

    def todense(self):
        return csr_todense(self)

    def transpose(self, axes=None) -> CSC:
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return CSC((self.data, self.indices, self.indptr), shape=self.shape[::-1])

    def __matmul__(self, other):
        return _matmul(self, other, self.shape, False)

    def tree_flatten(self):
        return (self.data, self.indices, self.indptr), {"shape": self.shape}

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        obj.shape = aux_data["shape"]
        return obj


@register_pytree_node_class
class CSC(CSR):
    """A 2-D sparse matrix in compressed-column format: the transpose of a CSR matrix."""

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32) -> CSC:
        return csr_fromdense(jnp.asarray(mat).T, nse=nse, index_dtype=index_dtype).T

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> CSC:
        return CSR._empty(tuple(shape)[::-1], dtype=dtype, index_dtype=index_dtype).T

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> CSC:
        return CSR._eye(M, N, -k, dtype=dtype, index_dtype=index_dtype).T

    def todense(self):
        return csr_todense(self.T).T

    def transpose(self, axes=None) -> CSR:
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return CSR((self.data, self.indices, self.indptr), shape=self.shape[::-1])

    def __matmul__(self, other):
        return _matmul(self, other, self.shape[::-1], True)


def _check(indices, indptr):
    if indices.ndim != 1 or indptr.ndim != 1:
        raise TypeError(f"CSR indices and indptr must be 1-D, got {indices.str_short()} and "
                        f"{indptr.str_short()}")


def _pack(row, col, real, n_rows, index_dtype):
    """CSR buffers of row-major coordinates: padding counts in no row."""
    row = jnp.where(real, row, n_rows)
    counts = jnp.zeros(n_rows, index_dtype).at[row].add(1, mode="drop")
    indptr = jnp.concatenate([jnp.zeros(1, index_dtype), jnp.cumsum(counts).astype(index_dtype)])
    return col, indptr


csr_todense_p, csr_fromdense_p, csr_matvec_p, csr_matmat_p = define_format_primitives(
    "csr", to_coo=_csr_to_coo, pack=_pack,
    index_avals=lambda shape, nse, index_dtype: [core.ShapedArray((nse,), index_dtype),
                                                 core.ShapedArray((shape[0] + 1,), index_dtype)],
    check_indices=_check)


def csr_todense(mat: CSR):
    """The dense matrix of a CSR matrix."""
    return csr_todense_p.bind(mat.data, mat.indices, mat.indptr, spinfo=COOInfo(mat.shape))


def csr_fromdense(mat, *, nse: int | None = None, index_dtype=np.int32) -> CSR:
    """A CSR matrix of the nonzeros of the 2-D ``mat``."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = (mat != 0).sum()
    nse = int(core.concrete_or_error(nse, "csr_fromdense nse argument"))
    return CSR(csr_fromdense_p.bind(mat, nse=nse, index_dtype=np.dtype(index_dtype)),
               shape=mat.shape)


def _csr_product(prim, data, indices, indptr, rhs, shape, transpose):
    return prim.bind(data, indices, indptr, rhs, spinfo=COOInfo(tuple(shape)),
                     transpose=bool(transpose))


def _matmul(mat: CSR, other, shape, transpose: bool):
    """``mat @ other`` for a dense ``other``; a CSC matrix is its CSR transpose."""
    if isinstance(other, JAXSparse):
        raise NotImplementedError("matmul between two sparse objects.")
    other = jnp.asarray(other)
    dtype = jnp.result_type(mat.data, other)
    prim = {1: csr_matvec_p, 2: csr_matmat_p}.get(other.ndim)
    if prim is None:
        raise NotImplementedError(f"matmul with object of shape {other.shape}")
    return _csr_product(prim, mat.data.astype(dtype), mat.indices, mat.indptr,
                        other.astype(dtype), shape, transpose)


def csr_matvec(mat: CSR, v, transpose: bool = False):
    """``mat @ v`` (or ``mat.T @ v``) for a CSR matrix and a dense vector."""
    return _csr_product(csr_matvec_p, mat.data, mat.indices, mat.indptr, jnp.asarray(v),
                        mat.shape, transpose)


def csr_matmat(mat: CSR, B, *, transpose: bool = False):
    """``mat @ B`` (or ``mat.T @ B``) for a CSR matrix and a dense matrix."""
    return _csr_product(csr_matmat_p, mat.data, mat.indices, mat.indptr, jnp.asarray(B),
                        mat.shape, transpose)
