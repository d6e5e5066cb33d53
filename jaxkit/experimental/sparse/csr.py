"""``jax.experimental.sparse.csr``: the 2-D ``CSR`` format (``data``, ``indices``, ``indptr``)
and its column-major twin ``CSC``, with the primitives ``csr_todense``, ``csr_fromdense``,
``csr_matvec`` and ``csr_matmat``. Rows are recovered from ``indptr`` inside each primitive, so
they lower to the same gathers and scatter-adds as COO."""
from __future__ import annotations

import numpy as np

from jaxkit import core
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit.experimental.sparse._bcoo_core import define_sparse_primitive
from jaxkit.experimental.sparse._linear import defbatch_by_vmap, deflinear_in
from jaxkit.experimental.sparse.coo import COOInfo
from jaxkit.interpreters import ad
from jaxkit.tree_util import register_pytree_node_class

__all__ = ["CSC", "CSR", "csr_fromdense", "csr_fromdense_p", "csr_matmat", "csr_matmat_p",
           "csr_matvec", "csr_matvec_p", "csr_todense", "csr_todense_p"]


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
        if isinstance(other, JAXSparse):
            raise NotImplementedError("matmul between two sparse objects.")
        other = jnp.asarray(other)
        dtype = jnp.result_type(self.data, other)
        data, other = self.data.astype(dtype), other.astype(dtype)
        if other.ndim == 1:
            return _csr_product(csr_matvec_p, data, self.indices, self.indptr, other,
                                self.shape, False)
        if other.ndim == 2:
            return _csr_product(csr_matmat_p, data, self.indices, self.indptr, other,
                                self.shape, False)
        raise NotImplementedError(f"matmul with object of shape {other.shape}")

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
        if isinstance(other, JAXSparse):
            raise NotImplementedError("matmul between two sparse objects.")
        other = jnp.asarray(other)
        dtype = jnp.result_type(self.data, other)
        data, other = self.data.astype(dtype), other.astype(dtype)
        prim = {1: csr_matvec_p, 2: csr_matmat_p}.get(other.ndim)
        if prim is None:
            raise NotImplementedError(f"matmul with object of shape {other.shape}")
        return _csr_product(prim, data, self.indices, self.indptr, other, self.shape[::-1],
                            True)


def _check(indices, indptr):
    if indices.ndim != 1 or indptr.ndim != 1:
        raise TypeError(f"CSR indices and indptr must be 1-D, got {indices.str_short()} and "
                        f"{indptr.str_short()}")


# ---- csr_todense ---------------------------------------------------------------------------

def _todense_impl(data, indices, indptr, *, spinfo):
    row, col = _csr_to_coo(indices, indptr)
    return jnp.zeros(spinfo.shape, data.dtype).at[row, col].add(data)


def _todense_abstract_eval(data, indices, indptr, *, spinfo):
    _check(indices, indptr)
    return core.ShapedArray(tuple(spinfo.shape), data.dtype)


csr_todense_p = define_sparse_primitive("csr_todense", _todense_impl, _todense_abstract_eval)
deflinear_in(csr_todense_p, _todense_impl, (0,))
defbatch_by_vmap(csr_todense_p, _todense_impl)


def csr_todense(mat: CSR):
    """The dense matrix of a CSR matrix."""
    return csr_todense_p.bind(mat.data, mat.indices, mat.indptr, spinfo=COOInfo(mat.shape))


# ---- csr_fromdense -------------------------------------------------------------------------

def _fromdense_impl(mat, *, nse, index_dtype):
    m = mat.shape[0]
    row, col = jnp.nonzero(mat, size=nse)
    data = mat[row, col]
    real = jnp.arange(nse) < (mat != 0).sum()
    data = jnp.where(real, data, jnp.zeros((), data.dtype))
    row = jnp.where(real, row, m)  # padding counts in no row
    counts = jnp.zeros(m, index_dtype).at[row].add(1, mode="drop")
    indptr = jnp.concatenate([jnp.zeros(1, index_dtype), jnp.cumsum(counts).astype(index_dtype)])
    return data, col.astype(index_dtype), indptr


def _fromdense_abstract_eval(mat, *, nse, index_dtype):
    if mat.ndim != 2:
        raise ValueError(f"csr_fromdense expects a 2-D matrix, got {mat.str_short()}")
    return [core.ShapedArray((nse,), mat.dtype), core.ShapedArray((nse,), index_dtype),
            core.ShapedArray((mat.shape[0] + 1,), index_dtype)]


def _fromdense_jvp(primals, tangents, *, nse, index_dtype):
    (mat,), (mat_dot,) = primals, tangents
    data, indices, indptr = csr_fromdense_p.bind(mat, nse=nse, index_dtype=index_dtype)
    if type(mat_dot) is ad.Zero:
        data_dot = ad.Zero(core.get_aval(data).to_tangent_aval())
    else:
        row, col = _csr_to_coo(indices, indptr)
        data_dot = mat_dot.at[row, col].get(mode="fill", fill_value=0)
    return [data, indices, indptr], [data_dot,
                                     ad.Zero(core.get_aval(indices).to_tangent_aval()),
                                     ad.Zero(core.get_aval(indptr).to_tangent_aval())]


csr_fromdense_p = define_sparse_primitive("csr_fromdense", _fromdense_impl,
                                          _fromdense_abstract_eval, multiple_results=True)
ad.defjvp_rule(csr_fromdense_p, _fromdense_jvp)
defbatch_by_vmap(csr_fromdense_p, _fromdense_impl)


def csr_fromdense(mat, *, nse: int | None = None, index_dtype=np.int32) -> CSR:
    """A CSR matrix of the nonzeros of the 2-D ``mat``."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = (mat != 0).sum()
    nse = int(core.concrete_or_error(nse, "csr_fromdense nse argument"))
    return CSR(csr_fromdense_p.bind(mat, nse=nse, index_dtype=np.dtype(index_dtype)),
               shape=mat.shape)


# ---- csr_matvec / csr_matmat ---------------------------------------------------------------

def _product_impl(data, indices, indptr, rhs, *, spinfo, transpose):
    row, col = _csr_to_coo(indices, indptr)
    if transpose:
        row, col = col, row
    n_out = spinfo.shape[1] if transpose else spinfo.shape[0]
    prod = (data if rhs.ndim == 1 else data[:, None]) * rhs[col]
    return jnp.zeros((n_out, *rhs.shape[1:]), prod.dtype).at[row].add(prod)


def _product_abstract_eval(ndim):
    def rule(data, indices, indptr, rhs, *, spinfo, transpose):
        _check(indices, indptr)
        if rhs.ndim != ndim:
            raise ValueError(f"csr_{'matvec' if ndim == 1 else 'matmat'} expects a "
                             f"{ndim}-D dense operand, got {rhs.str_short()}")
        n_in, n_out = (spinfo.shape[::-1] if not transpose else spinfo.shape)
        if rhs.shape[0] != n_in:
            raise ValueError(f"dimension mismatch: matrix {tuple(spinfo.shape)} "
                             f"(transpose={transpose}) with operand {rhs.str_short()}")
        return core.ShapedArray((n_out, *rhs.shape[1:]), data.dtype)
    return rule


csr_matvec_p = define_sparse_primitive("csr_matvec", _product_impl, _product_abstract_eval(1))
deflinear_in(csr_matvec_p, _product_impl, (0, 3))
csr_matmat_p = define_sparse_primitive("csr_matmat", _product_impl, _product_abstract_eval(2))
deflinear_in(csr_matmat_p, _product_impl, (0, 3))
defbatch_by_vmap(csr_matvec_p, _product_impl)
defbatch_by_vmap(csr_matmat_p, _product_impl)


def _csr_product(prim, data, indices, indptr, rhs, shape, transpose):
    return prim.bind(data, indices, indptr, rhs, spinfo=COOInfo(tuple(shape)),
                     transpose=bool(transpose))


def csr_matvec(mat: CSR, v, transpose: bool = False):
    """``mat @ v`` (or ``mat.T @ v``) for a CSR matrix and a dense vector."""
    return _csr_product(csr_matvec_p, mat.data, mat.indices, mat.indptr, jnp.asarray(v),
                        mat.shape, transpose)


def csr_matmat(mat: CSR, B, *, transpose: bool = False):
    """``mat @ B`` (or ``mat.T @ B``) for a CSR matrix and a dense matrix."""
    return _csr_product(csr_matmat_p, mat.data, mat.indices, mat.indptr, jnp.asarray(B),
                        mat.shape, transpose)
