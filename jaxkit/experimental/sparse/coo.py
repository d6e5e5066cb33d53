"""``jax.experimental.sparse.coo``: the 2-D ``COO`` format (``data``, ``row``, ``col``) with
its primitives ``coo_todense``, ``coo_fromdense``, ``coo_matvec`` and ``coo_matmat``, built by
``_format_rules`` from COO's index encoding (lowered by composition: scatter-adds and gathers)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit.experimental.sparse._format_rules import define_format_primitives
from jaxkit.experimental.sparse.util import CuSparseEfficiencyWarning
from jaxkit.interpreters.mlir import hlo
from jaxkit.numpy._promotion import promote_dtypes
from jaxkit.tree_util import register_pytree_node_class
from jaxkit.typing import Array

__all__ = ["COO", "COOInfo", "coo_fromdense", "coo_fromdense_p", "coo_matmat", "coo_matmat_p",
           "coo_matvec", "coo_matvec_p", "coo_todense", "coo_todense_p",
           # re-exported, as JAX's module imports them
           "Array", "CuSparseEfficiencyWarning", "hlo", "promote_dtypes"]


class COOInfo(NamedTuple):
    """Static part of a COO matrix (a hashable primitive parameter)."""

    shape: tuple[int, ...]
    rows_sorted: bool = False
    cols_sorted: bool = False


@register_pytree_node_class
class COO(JAXSparse):
    """A 2-D sparse matrix in coordinate format; prefer ``BCOO`` for transformations."""

    def __init__(self, args, *, shape, rows_sorted: bool = False, cols_sorted: bool = False):
        self.data, self.row, self.col = map(jnp.asarray, args)
        self._rows_sorted, self._cols_sorted = rows_sorted, cols_sorted
        super().__init__(args, shape=shape)

    @property
    def _info(self) -> COOInfo:
        return COOInfo(self.shape, self._rows_sorted, self._cols_sorted)

    @property
    def _bufs(self):
        return self.data, self.row, self.col

    @property
    def nse(self) -> int:
        return self.data.size

    @property
    def dtype(self):
        return self.data.dtype

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32) -> COO:
        return coo_fromdense(mat, nse=nse, index_dtype=index_dtype)

    def _sort_indices(self) -> COO:
        if self._rows_sorted:
            return self
        row, col, data = lax.sort((self.row, self.col, self.data), num_keys=2)
        return type(self)((data, row, col), shape=self.shape, rows_sorted=True)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32") -> COO:
        shape = tuple(shape)
        if len(shape) != 2:
            raise ValueError(f"COO must have ndim=2; got shape={shape}")
        data = jnp.zeros(0, dtype)
        row = col = jnp.zeros(0, index_dtype)
        return cls((data, row, col), shape=shape, rows_sorted=True, cols_sorted=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32") -> COO:
        diag = min(N, M - k) if k > 0 else min(N + k, M)
        if diag <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        idx = np.arange(diag)
        row = jnp.asarray(idx - min(k, 0), index_dtype)
        col = jnp.asarray(idx + max(k, 0), index_dtype)
        return cls((jnp.ones(diag, dtype), row, col), shape=(N, M), rows_sorted=True,
                   cols_sorted=True)

    def todense(self):
        return coo_todense(self)

    def transpose(self, axes=None) -> COO:
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return COO((self.data, self.col, self.row), shape=self.shape[::-1],
                   rows_sorted=self._cols_sorted, cols_sorted=self._rows_sorted)

    def tree_flatten(self):
        return (self.data, self.row, self.col), self._info

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.data, obj.row, obj.col = children
        obj.shape = aux_data.shape
        obj._rows_sorted, obj._cols_sorted = aux_data.rows_sorted, aux_data.cols_sorted
        return obj

    def __matmul__(self, other):
        if isinstance(other, JAXSparse):
            raise NotImplementedError("matmul between two sparse objects.")
        other = jnp.asarray(other)
        dtype = jnp.result_type(self.data, other)
        mat = COO((self.data.astype(dtype), self.row, self.col), shape=self.shape,
                  rows_sorted=self._rows_sorted, cols_sorted=self._cols_sorted)
        other = other.astype(dtype)
        if other.ndim == 1:
            return coo_matvec(mat, other)
        if other.ndim == 2:
            return coo_matmat(mat, other)
        raise NotImplementedError(f"matmul with object of shape {other.shape}")


def _check_indices(row, col):
    if row.ndim != 1 or col.ndim != 1 or row.shape != col.shape:
        raise TypeError(f"COO row and col must be 1-D and of equal size, got {row.str_short()} "
                        f"and {col.str_short()}")


coo_todense_p, coo_fromdense_p, coo_matvec_p, coo_matmat_p = define_format_primitives(
    "coo", to_coo=lambda row, col: (row, col),
    pack=lambda row, col, real, n_rows, index_dtype: (row, col),
    index_avals=lambda shape, nse, index_dtype: [core.ShapedArray((nse,), index_dtype)] * 2,
    check_indices=_check_indices)


def coo_todense(mat: COO):
    """The dense matrix of a COO matrix."""
    return coo_todense_p.bind(mat.data, mat.row, mat.col, spinfo=mat._info)


def coo_fromdense(mat, *, nse: int | None = None, index_dtype=jnp.int32) -> COO:
    """A COO matrix of the nonzeros of the 2-D ``mat``."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = (mat != 0).sum()
    nse = int(core.concrete_or_error(nse, "coo_fromdense nse argument"))
    data, row, col = coo_fromdense_p.bind(mat, nse=nse, index_dtype=np.dtype(index_dtype))
    return COO((data, row, col), shape=mat.shape, rows_sorted=True)


def coo_matvec(mat: COO, v, transpose: bool = False):
    """``mat @ v`` (or ``mat.T @ v``) for a COO matrix and a dense vector."""
    return coo_matvec_p.bind(mat.data, mat.row, mat.col, jnp.asarray(v), spinfo=mat._info,
                             transpose=bool(transpose))


def coo_matmat(mat: COO, B, *, transpose: bool = False):
    """``mat @ B`` (or ``mat.T @ B``) for a COO matrix and a dense matrix."""
    return coo_matmat_p.bind(mat.data, mat.row, mat.col, jnp.asarray(B), spinfo=mat._info,
                             transpose=bool(transpose))
