"""``jax.experimental.sparse.coo``: the 2-D ``COO`` format (``data``, ``row``, ``col``) with
its primitives ``coo_todense``, ``coo_fromdense``, ``coo_matvec`` and ``coo_matmat`` (JVP and
transpose rules; lowered by composition: scatter-adds and gathers)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit.experimental.sparse._bcoo_core import define_sparse_primitive
from jaxkit.experimental.sparse._linear import defbatch_by_vmap, deflinear_in
from jaxkit.interpreters import ad
from jaxkit.tree_util import register_pytree_node_class

__all__ = ["COO", "COOInfo", "coo_fromdense", "coo_fromdense_p", "coo_matmat", "coo_matmat_p",
           "coo_matvec", "coo_matvec_p", "coo_todense", "coo_todense_p"]


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


# ---- coo_todense ---------------------------------------------------------------------------

def _todense_impl(data, row, col, *, spinfo):
    return jnp.zeros(spinfo.shape, data.dtype).at[row, col].add(data)


def _todense_abstract_eval(data, row, col, *, spinfo):
    _check_indices(row, col)
    return core.ShapedArray(tuple(spinfo.shape), data.dtype)


coo_todense_p = define_sparse_primitive("coo_todense", _todense_impl, _todense_abstract_eval)
deflinear_in(coo_todense_p, _todense_impl, (0,))
defbatch_by_vmap(coo_todense_p, _todense_impl)


def coo_todense(mat: COO):
    """The dense matrix of a COO matrix."""
    return coo_todense_p.bind(mat.data, mat.row, mat.col, spinfo=mat._info)


# ---- coo_fromdense -------------------------------------------------------------------------

def _fromdense_impl(mat, *, nse, index_dtype):
    row, col = jnp.nonzero(mat, size=nse)
    data = mat[row, col]
    data = jnp.where(jnp.arange(nse) < (mat != 0).sum(), data, jnp.zeros((), data.dtype))
    return data, row.astype(index_dtype), col.astype(index_dtype)


def _fromdense_abstract_eval(mat, *, nse, index_dtype):
    if mat.ndim != 2:
        raise ValueError(f"coo_fromdense expects a 2-D matrix, got {mat.str_short()}")
    return [core.ShapedArray((nse,), mat.dtype), core.ShapedArray((nse,), index_dtype),
            core.ShapedArray((nse,), index_dtype)]


def _fromdense_jvp(primals, tangents, *, nse, index_dtype):
    (mat,), (mat_dot,) = primals, tangents
    data, row, col = coo_fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
    if type(mat_dot) is ad.Zero:
        data_dot = ad.Zero(core.get_aval(data).to_tangent_aval())
    else:
        data_dot = mat_dot[row, col]
    zero = ad.Zero(core.get_aval(row).to_tangent_aval())
    return [data, row, col], [data_dot, zero, zero]


coo_fromdense_p = define_sparse_primitive("coo_fromdense", _fromdense_impl,
                                          _fromdense_abstract_eval, multiple_results=True)
ad.defjvp_rule(coo_fromdense_p, _fromdense_jvp)
defbatch_by_vmap(coo_fromdense_p, _fromdense_impl)


def coo_fromdense(mat, *, nse: int | None = None, index_dtype=jnp.int32) -> COO:
    """A COO matrix of the nonzeros of the 2-D ``mat``."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = (mat != 0).sum()
    nse = int(core.concrete_or_error(nse, "coo_fromdense nse argument"))
    data, row, col = coo_fromdense_p.bind(mat, nse=nse, index_dtype=np.dtype(index_dtype))
    return COO((data, row, col), shape=mat.shape, rows_sorted=True)


# ---- coo_matvec / coo_matmat ---------------------------------------------------------------

def _product_impl(data, row, col, rhs, *, spinfo, transpose):
    if transpose:
        row, col = col, row
    n_out = spinfo.shape[1] if transpose else spinfo.shape[0]
    prod = (data if rhs.ndim == 1 else data[:, None]) * rhs[col]
    return jnp.zeros((n_out, *rhs.shape[1:]), prod.dtype).at[row].add(prod)


def _product_abstract_eval(ndim):
    def rule(data, row, col, rhs, *, spinfo, transpose):
        _check_indices(row, col)
        if rhs.ndim != ndim:
            raise ValueError(f"coo_{'matvec' if ndim == 1 else 'matmat'} expects a "
                             f"{ndim}-D dense operand, got {rhs.str_short()}")
        n_in, n_out = (spinfo.shape[::-1] if not transpose else spinfo.shape)
        if rhs.shape[0] != n_in:
            raise ValueError(f"dimension mismatch: matrix {tuple(spinfo.shape)} "
                             f"(transpose={transpose}) with operand {rhs.str_short()}")
        if data.dtype != rhs.dtype:
            raise TypeError(f"data types do not match: {data.dtype} and {rhs.dtype}")
        return core.ShapedArray((n_out, *rhs.shape[1:]), data.dtype)
    return rule


coo_matvec_p = define_sparse_primitive("coo_matvec", _product_impl, _product_abstract_eval(1))
deflinear_in(coo_matvec_p, _product_impl, (0, 3))
coo_matmat_p = define_sparse_primitive("coo_matmat", _product_impl, _product_abstract_eval(2))
deflinear_in(coo_matmat_p, _product_impl, (0, 3))
defbatch_by_vmap(coo_matvec_p, _product_impl)
defbatch_by_vmap(coo_matmat_p, _product_impl)


def coo_matvec(mat: COO, v, transpose: bool = False):
    """``mat @ v`` (or ``mat.T @ v``) for a COO matrix and a dense vector."""
    return coo_matvec_p.bind(mat.data, mat.row, mat.col, jnp.asarray(v), spinfo=mat._info,
                             transpose=bool(transpose))


def coo_matmat(mat: COO, B, *, transpose: bool = False):
    """``mat @ B`` (or ``mat.T @ B``) for a COO matrix and a dense matrix."""
    return coo_matmat_p.bind(mat.data, mat.row, mat.col, jnp.asarray(B), spinfo=mat._info,
                             transpose=bool(transpose))
