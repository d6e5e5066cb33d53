"""``coo_spmv_p`` and ``coo_spmm_p``: JAX's raw COO matrix-vector and matrix-matrix products
(reachable as ``jax.experimental.sparse.bcoo.coo_spmv_p``), which take sorted, deduplicated,
in-bounds ``(data, row, col)`` and do no validation of the index values. JAX lowers them only to
cuSPARSE/hipSPARSE; here they lower everywhere to a gather and a scatter-add, and get the same
linear JVP/transpose and batching rules as the COO primitives."""
from __future__ import annotations

import numpy as np

from jaxkit import core
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse._bcoo_core import define_sparse_primitive
from jaxkit.experimental.sparse._linear import defbatch_by_vmap, deflinear_in

__all__ = ["coo_spmm_p", "coo_spmv_p"]

_INDEX_DTYPES = (np.dtype(np.int32),)
_DATA_DTYPES = tuple(map(np.dtype, (np.float32, np.float64, np.complex64, np.complex128)))


def _product_impl(data, row, col, x, *, transpose, shape):
    if transpose:
        row, col = col, row
    n_out = shape[1] if transpose else shape[0]
    prod = (data if x.ndim == 1 else data[:, None]) * x[col]
    return jnp.zeros((n_out, *x.shape[1:]), prod.dtype).at[row].add(prod)


def _abstract_eval(name: str, ndim: int):
    def rule(data, row, col, x, *, transpose, shape):
        if not (data.shape == row.shape == col.shape and row.ndim == 1):
            raise TypeError(f"{name}: data, row and col must be 1-D of one length, got "
                            f"{data.str_short()}, {row.str_short()}, {col.str_short()}")
        if x.ndim != ndim:
            raise TypeError(f"{name}: the dense operand must be {ndim}-D, got {x.str_short()}")
        if row.dtype != col.dtype or row.dtype not in _INDEX_DTYPES:
            raise TypeError(f"{name}: row and col must both be int32, got {row.dtype} and "
                            f"{col.dtype}")
        if data.dtype != x.dtype or x.dtype not in _DATA_DTYPES:
            raise TypeError(f"{name}: data and operand must share one of float32, float64, "
                            f"complex64, complex128; got {data.dtype} and {x.dtype}")
        if len(shape) != 2 or x.shape[0] != (shape[0] if transpose else shape[1]):
            raise TypeError(f"{name}: operand {x.str_short()} does not fit a matrix of shape "
                            f"{tuple(shape)} (transpose={transpose})")
        n_out = shape[1] if transpose else shape[0]
        return core.ShapedArray((n_out, *x.shape[1:]), x.dtype)
    return rule


coo_spmv_p = define_sparse_primitive("coo_spmv", _product_impl, _abstract_eval("coo_spmv", 1))
coo_spmm_p = define_sparse_primitive("coo_spmm", _product_impl, _abstract_eval("coo_spmm", 2))
for _p in (coo_spmv_p, coo_spmm_p):
    deflinear_in(_p, _product_impl, (0, 3))
    defbatch_by_vmap(_p, _product_impl)
