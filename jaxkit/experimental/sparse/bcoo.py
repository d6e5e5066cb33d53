"""``jax.experimental.sparse.bcoo``: the ``BCOO`` (batched coordinate) sparse array and its
public operations. The primitives live in ``_bcoo_core`` (conversions), ``_bcoo_dot``
(products) and ``_bcoo_ops`` (reorganizing stored elements); arithmetic operators are
installed by ``transform`` through ``sparsify``, as in JAX."""
from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple, Protocol

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.api import ShapeDtypeStruct, eval_shape, make_jaxpr
from jaxkit import numpy as jnp
from jaxkit.experimental.sparse import _bcoo_ops as ops
from jaxkit.experimental.sparse._base import BatchedSparse
from jaxkit.experimental.sparse._bcoo_core import (
    bcoo_extract_p, bcoo_fromdense_p, bcoo_todense_p, bcoo_transpose_p, validate_bcoo)
from jaxkit.experimental.sparse._bcoo_core import validate_permutation as ops_validate_permutation
from jaxkit.experimental.sparse._bcoo_dot import (
    bcoo_dot_general_dense, bcoo_dot_general_p, bcoo_dot_general_sampled,
    bcoo_dot_general_sampled_p, bcoo_rdot_general_dense)
from jaxkit.experimental.sparse._bcoo_ops import bcoo_sort_indices_p, bcoo_sum_duplicates_p
from jaxkit.experimental.sparse._bcoo_spdot import bcoo_spdot_general_p, spdot_general
from jaxkit.experimental.sparse._bcoo_core import broadcast_batch
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit._util import (
    ranges_like, remaining, safe_zip, split_list, unzip2)
from jaxkit.experimental.sparse._lowerings import coo_spmm_p, coo_spmv_p
from jaxkit.experimental.sparse.util import (
    CuSparseEfficiencyWarning, SparseEfficiencyError, SparseEfficiencyWarning, SparseInfo,
    _count_stored_elements, nfold_vmap)
from jaxkit.lax.gather_scatter import GatherDimensionNumbers, GatherScatterMode
from jaxkit.numpy._promotion import canonicalize_axis
from jaxkit.transforms.vmap import vmap
from jaxkit.tree_util import register_pytree_node_class
from jaxkit.typing import Array

__all__ = ["BCOO", "bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_dot_general_sampled",
           "bcoo_dot_general_sampled_p", "bcoo_dot_general", "bcoo_dot_general_p",
           "bcoo_eliminate_zeros", "bcoo_extract", "bcoo_extract_p", "bcoo_fromdense",
           "bcoo_fromdense_p", "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum",
           "bcoo_reshape", "bcoo_rev", "bcoo_slice", "bcoo_sort_indices", "bcoo_sort_indices_p",
           "bcoo_spdot_general_p",
           "bcoo_squeeze",
           "bcoo_sum_duplicates", "bcoo_sum_duplicates_p", "bcoo_todense", "bcoo_todense_p",
           "bcoo_transpose", "bcoo_transpose_p", "bcoo_update_layout", "bcoo_dynamic_slice",
           "bcoo_gather", "bcoo_conv_general_dilated", "BCOOProperties", "Buffer",
           "CUSPARSE_DATA_DTYPES", "CUSPARSE_INDEX_DTYPES",
           # re-exported, as JAX's module imports them
           "Array", "CuSparseEfficiencyWarning", "GatherDimensionNumbers", "GatherScatterMode",
           "JAXSparse", "canonicalize_axis", "coo_spmm_p", "coo_spmv_p", "ranges_like",
           "remaining", "safe_zip", "split_list", "unzip2", "vmap"]

# The dtypes JAX's cuSPARSE lowering accepts (it falls back to the generic one otherwise, with a
# CuSparseEfficiencyWarning); jaxkit always uses the generic lowering.
CUSPARSE_DATA_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
CUSPARSE_INDEX_DTYPES = [np.int32]


class BCOOProperties(NamedTuple):
    """The layout of a BCOO array: its numbers of batch, sparse and dense dimensions, and
    ``nse``."""

    n_batch: int
    n_sparse: int
    n_dense: int
    nse: int


class Buffer(Protocol):
    """Anything with a ``shape`` and a ``dtype`` (an array or an abstract value)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> Any: ...


@register_pytree_node_class
class BCOO(BatchedSparse):
    """Batched COO sparse array: ``data`` of shape ``batch + (nse,) + dense`` and ``indices``
    of shape ``batch + (nse, n_sparse)``; duplicate indices are summed."""

    def __init__(self, args: tuple, *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False):
        self.data, self.indices = map(jnp.asarray, args)
        self.indices_sorted = indices_sorted
        self.unique_indices = unique_indices
        super().__init__(args, shape=tuple(shape))
        validate_bcoo(self.data, self.indices, self.shape)

    @property
    def _info(self) -> SparseInfo:
        return SparseInfo(self.shape, self.indices_sorted, self.unique_indices)

    @property
    def _bufs(self):
        return self.data, self.indices

    @property
    def nse(self) -> int:
        return self.indices.shape[-2]

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - 2

    @property
    def n_sparse(self) -> int:
        return self.indices.shape[-1]

    @property
    def n_dense(self) -> int:
        return self.data.ndim - 1 - self.n_batch

    def _repr_extra(self) -> str:
        extra = f", n_batch={self.n_batch}" if self.n_batch else ""
        return extra + (f", n_dense={self.n_dense}" if self.n_dense else "")

    @classmethod
    def fromdense(cls, mat, *, nse: int | None = None, index_dtype=np.int32,
                  n_dense: int = 0, n_batch: int = 0) -> BCOO:
        """Create a BCOO array from a (dense) array."""
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense,
                              n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat, *, index_dtype=None, n_dense: int = 0,
                          n_batch: int = 0) -> BCOO:
        """Create a BCOO array from a ``scipy.sparse`` array (2-D, no batch or dense dims)."""
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCOO.from_scipy_sparse with n_dense or n_batch")
        mat = mat.tocoo()
        data = jnp.asarray(mat.data)
        indices = jnp.column_stack([mat.row, mat.col]).astype(index_dtype or jnp.int32)
        return cls((data, indices), shape=mat.shape, indices_sorted=False,
                   unique_indices=False)

    @classmethod
    def _empty(cls, shape, *, dtype=None, index_dtype="int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> BCOO:
        shape = tuple(shape)
        n_sparse = len(shape) - n_dense - n_batch
        if n_sparse < 0 or n_dense < 0 or n_batch < 0 or nse < 0:
            raise ValueError(f"Invalid inputs: shape={shape}, n_dense={n_dense}, "
                             f"n_batch={n_batch}, nse={nse}")
        batch, sparse = shape[:n_batch], shape[n_batch:n_batch + n_sparse]
        data = jnp.zeros((*batch, nse, *shape[n_batch + n_sparse:]), dtype)
        indices = jnp.full((*batch, nse, n_sparse), jnp.array(sparse, index_dtype), index_dtype)
        return cls((data, indices), shape=shape, indices_sorted=True, unique_indices=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype=None, index_dtype="int32",
             n_batch: int = 0, n_dense: int = 0) -> BCOO:
        if 2 - n_batch - n_dense < 0 or n_dense < 0 or n_batch < 0:
            raise ValueError(f"Invalid inputs: shape={(N, M)}, n_dense={n_dense}, "
                             f"n_batch={n_batch}")
        diag = min(N, M - k) if k > 0 else min(N + k, M)
        if diag <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype, n_batch=n_batch,
                              n_dense=n_dense)
        if n_dense > 0 or n_batch > 1:
            return cls.fromdense(jnp.eye(N, M, k, dtype=dtype), n_batch=n_batch,
                                 n_dense=n_dense, index_dtype=index_dtype)
        if n_batch == 0:
            idx = np.arange(diag)
            rows, cols = idx - min(k, 0), idx + max(k, 0)
            data = jnp.ones(diag, dtype=dtype)
            indices = jnp.asarray(np.stack([rows, cols], 1), index_dtype)
        else:
            # One stored element per row; rows off the diagonal store zero at column M.
            cols = np.arange(N) + k
            valid = (cols >= 0) & (cols < M)
            data = jnp.asarray(valid.astype(dtypes.canonicalize_dtype(dtype or float)))[:, None]
            indices = jnp.asarray(np.where(valid, cols, M), index_dtype)[:, None, None]
        return cls((data, indices), shape=(N, M), indices_sorted=True, unique_indices=True)

    def update_layout(self, *, n_batch: int | None = None, n_dense: int | None = None,
                      on_inefficient: str | None = "error") -> BCOO:
        """The same array with another storage layout (see ``bcoo_update_layout``)."""
        return bcoo_update_layout(self, n_batch=n_batch, n_dense=n_dense,
                                  on_inefficient=on_inefficient)

    def sum_duplicates(self, nse: int | None = None, remove_zeros: bool = True) -> BCOO:
        """A copy with duplicate indices summed (and explicit zeros removed)."""
        if remove_zeros:
            return bcoo_eliminate_zeros(self, nse=nse)
        return bcoo_sum_duplicates(self, nse=nse)

    def sort_indices(self) -> BCOO:
        """A copy with indices sorted lexicographically."""
        return bcoo_sort_indices(self)

    def todense(self):
        """The dense array."""
        return bcoo_todense(self)

    def transpose(self, axes: Sequence[int] | None = None) -> BCOO:
        """The transposed array (batch, sparse and dense dimensions permute among themselves)."""
        perm = list(range(self.ndim)[::-1] if axes is None else axes)
        out = bcoo_transpose(self, permutation=perm)
        sparse_perm = [p - self.n_batch for p in perm[self.n_batch:self.n_batch + self.n_sparse]]
        keeps_order = tuple(sparse_perm) == tuple(range(self.n_sparse))
        return BCOO(out._bufs, shape=out.shape,
                    indices_sorted=self.indices_sorted and keeps_order,
                    unique_indices=self.unique_indices)

    def tree_flatten(self):
        return (self.data, self.indices), (self.shape, self.n_batch, self.indices_sorted,
                                           self.unique_indices)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        shape, n_batch, indices_sorted, unique_indices = aux_data
        obj = object.__new__(cls)
        obj.data, obj.indices = children
        # Under vmap the buffers lose (or gain) a leading batch axis: the shape follows them,
        # so a BCOO mapped over axis 0 is a BCOO of one batch element (JAX's vmappable BCOO).
        nd = getattr(obj.indices, "ndim", None)
        if isinstance(nd, int) and nd - 2 == n_batch - 1 and n_batch >= 1:
            shape = shape[1:]
        elif isinstance(nd, int) and nd - 2 == n_batch + 1:
            shape = (max(obj.data.shape[0], obj.indices.shape[0]), *shape)
        obj.shape, obj.indices_sorted, obj.unique_indices = shape, indices_sorted, unique_indices
        return obj


# ---- conversions ---------------------------------------------------------------------------

def bcoo_todense(mat: BCOO):
    """The dense array of a BCOO array."""
    return bcoo_todense_p.bind(mat.data, mat.indices, spinfo=mat._info)


def bcoo_fromdense(mat, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype=jnp.int32) -> BCOO:
    """A BCOO array holding the nonzeros of ``mat``; ``nse`` is needed under transformations."""
    mat = jnp.asarray(mat)
    if nse is None:
        nse = _count_stored_elements(mat, n_batch, n_dense)
    nse = core.concrete_or_error(nse, "The error arose for the nse argument of "
                                      "bcoo_fromdense. In order for BCOO.fromdense() to be "
                                      "used in traced/compiled code, you must pass a concrete "
                                      "value to the nse (number of stored elements) argument.")
    nse = operator.index(np.asarray(nse).item() if hasattr(nse, "shape") else nse)
    data, indices = bcoo_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                          index_dtype=np.dtype(index_dtype))
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def bcoo_extract(sparr: BCOO, arr, *, assume_unique: bool | None = None) -> BCOO:
    """The values of dense ``arr`` at the stored indices of ``sparr``, as a BCOO array."""
    if not isinstance(sparr, BCOO):
        raise TypeError(f"First argument to bcoo_extract should be a BCOO array. Got "
                        f"type(sparr)={type(sparr)}")
    arr = jnp.asarray(arr)
    if arr.shape != sparr.shape:
        raise ValueError(f"shape mismatch: sparr.shape={sparr.shape} arr.shape={arr.shape}")
    if assume_unique is None:
        assume_unique = sparr.unique_indices
    data = bcoo_extract_p.bind(sparr.indices, arr, assume_unique=bool(assume_unique))
    return BCOO((data, sparr.indices), **sparr._info._asdict())


def bcoo_transpose(mat: BCOO, *, permutation: Sequence[int]) -> BCOO:
    """Permute the dimensions of ``mat`` (never mixing batch, sparse and dense ones)."""
    permutation = tuple(int(p) for p in permutation)
    data, indices = bcoo_transpose_p.bind(mat.data, mat.indices, permutation=permutation,
                                          spinfo=mat._info)
    shape = tuple(mat.shape[p] for p in permutation)
    return BCOO((data, indices), shape=shape, indices_sorted=False,
                unique_indices=mat.unique_indices)


def bcoo_sort_indices(mat: BCOO) -> BCOO:
    """A copy of ``mat`` with indices sorted."""
    data, indices = bcoo_sort_indices_p.bind(mat.data, mat.indices, spinfo=mat._info)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True,
                unique_indices=mat.unique_indices)


def bcoo_sum_duplicates(mat: BCOO, nse: int | None = None) -> BCOO:
    """A copy of ``mat`` with duplicate indices summed; without ``nse``, the smallest that
    holds them (needs concrete indices)."""
    if nse is None and not isinstance(mat.indices, core.Tracer):
        nse = ops.unique_count(mat.indices, mat.shape)
    elif nse is not None:
        nse = core.concrete_or_error(nse, "nse argument of bcoo_sum_duplicates.")
        nse = operator.index(nse)
    data, indices = bcoo_sum_duplicates_p.bind(mat.data, mat.indices, spinfo=mat._info,
                                               nse=nse)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def bcoo_eliminate_zeros(mat: BCOO, nse: int | None = None) -> BCOO:
    """Drop explicitly stored zeros (their indices become out-of-bounds), then sum
    duplicates."""
    n_batch, n_sparse, _, _ = validate_bcoo(mat.data, mat.indices, mat.shape)
    zero = (mat.data == 0).all(tuple(range(n_batch + 1, mat.data.ndim)))
    zero = zero.all(tuple(i for i, s in enumerate(mat.indices.shape[:n_batch]) if s == 1),
                    keepdims=True)
    fill = jnp.array(mat.shape[n_batch:n_batch + n_sparse], dtype=mat.indices.dtype)
    indices = jnp.where(zero[..., None], fill, mat.indices)
    return bcoo_sum_duplicates(BCOO((mat.data, indices), shape=mat.shape), nse=nse)


# ---- products and arithmetic ---------------------------------------------------------------

def bcoo_dot_general(lhs, rhs, *, dimension_numbers, precision=None,
                     preferred_element_type=None, out_sharding=None):
    """``lax.dot_general`` with a BCOO operand (the other dense); returns a dense array."""
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        data, indices, shape = spdot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                                             preferred_element_type=preferred_element_type)
        return BCOO((data, indices), shape=shape)
    if isinstance(lhs, BCOO):
        return bcoo_dot_general_dense(lhs.data, lhs.indices, rhs,
                                      dimension_numbers=dimension_numbers,
                                      preferred_element_type=preferred_element_type,
                                      lhs_spinfo=lhs._info)
    if isinstance(rhs, BCOO):
        return bcoo_rdot_general_dense(lhs, rhs.data, rhs.indices,
                                       dimension_numbers=dimension_numbers,
                                       preferred_element_type=preferred_element_type,
                                       rhs_spinfo=rhs._info)
    raise TypeError("bcoo_dot_general needs at least one BCOO operand, got "
                    f"{type(lhs).__name__} and {type(rhs).__name__}")


def bcoo_multiply_dense(sp_mat: BCOO, v):
    """Elementwise product of a BCOO array and a dense array: the new stored data."""
    return ops.multiply_dense(sp_mat.data, sp_mat.indices, v, sp_mat._info)


def bcoo_multiply_sparse(lhs: BCOO, rhs: BCOO) -> BCOO:
    """Elementwise product of two BCOO arrays."""
    data, indices, shape = ops.multiply_sparse(lhs._bufs, rhs._bufs, lhs._info, rhs._info)
    return BCOO((data, indices), shape=shape)


def bcoo_reduce_sum(mat: BCOO, *, axes: Sequence[int]) -> BCOO:
    """Sum over ``axes``; the result is a BCOO array."""
    data, indices, shape = ops.reduce_sum(mat.data, mat.indices, mat._info, axes)
    return BCOO((data, indices), shape=shape)


def bcoo_squeeze(arr: BCOO, *, dimensions: Sequence[int]) -> BCOO:
    """Remove size-1 ``dimensions`` (summing over a size-1 axis is exactly squeezing it)."""
    dims = sorted({int(d) % arr.ndim for d in dimensions})
    if any(arr.shape[d] != 1 for d in dims):
        raise ValueError(f"cannot select an axis to squeeze out which has size not equal to "
                         f"one, got shape={arr.shape} and dimensions={tuple(dimensions)}")
    return bcoo_reduce_sum(arr, axes=dims)


def bcoo_concatenate(operands: Sequence[BCOO], *, dimension: int) -> BCOO:
    """Concatenate BCOO arrays along ``dimension``."""
    if not all(isinstance(op, BCOO) for op in operands):
        raise ValueError("bcoo_concatenate: expected operands to be a sequence of BCOO arrays. "
                         f"Got {operands}")
    data, indices, shape = ops.concatenate([(op.data, op.indices, op._info) for op in operands],
                                           dimension)
    return BCOO((data, indices), shape=shape)


def bcoo_slice(mat: BCOO, *, start_indices: Sequence[int], limit_indices: Sequence[int],
               strides: Sequence[int] | None = None) -> BCOO:
    """A static slice of a BCOO array (as ``lax.slice``)."""
    strides = [1] * mat.ndim if strides is None else list(strides)
    if not len(start_indices) == len(limit_indices) == mat.ndim:
        raise ValueError(f"bcoo_slice: indices must have size mat.ndim={mat.ndim}")
    if len(strides) != mat.ndim:
        raise ValueError(f"len(strides) = {len(strides)}; expected {mat.ndim}")
    if any(s <= 0 for s in strides):
        raise ValueError(f"strides must be a sequence of positive integers; got {strides}")
    if not all(0 <= a <= b <= n for a, b, n in zip(start_indices, limit_indices, mat.shape)):
        raise ValueError(f"bcoo_slice: invalid indices. Got start_indices={start_indices}, "
                         f"limit_indices={limit_indices} and shape={mat.shape}")
    nb, ns = mat.n_batch, mat.n_sparse
    sl = [slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides)]
    data_sl = [sl[i] if mat.data.shape[i] == mat.shape[i] else slice(None) for i in range(nb)]
    ind_sl = [sl[i] if mat.indices.shape[i] == mat.shape[i] else slice(None) for i in range(nb)]
    data = mat.data[(*data_sl, slice(None), *sl[nb + ns:])]
    indices = mat.indices[(*ind_sl, slice(None), slice(None))]
    shape = tuple((b - a + s - 1) // s for a, b, s in zip(start_indices, limit_indices, strides))
    if ns:
        starts = jnp.array(start_indices[nb:nb + ns], indices.dtype)
        ends = jnp.array(limit_indices[nb:nb + ns], indices.dtype)
        steps = jnp.array(strides[nb:nb + ns], indices.dtype)
        keep = jnp.all((indices >= starts) & (indices < ends) & ((indices - starts) % steps == 0),
                       axis=-1, keepdims=True)
        indices = jnp.where(keep, (indices - starts + steps - 1) // steps,
                            (ends - starts + steps - 1) // steps)
        keep_data = keep[..., 0][(Ellipsis,) + (None,) * mat.n_dense]
        data = jnp.where(keep_data, data, jnp.zeros((), data.dtype))
        new_nse = int(np.prod(shape[nb:nb + ns]))
        if mat.nse > new_nse:
            data, indices = bcoo_sum_duplicates_p.bind(data, indices,
                                                       spinfo=SparseInfo(shape), nse=new_nse)
    return BCOO((data, indices), shape=shape)


def _split_sizes(new_sizes, batch_size: int, sparse_size: int):
    """Where the new shape's batch, sparse and dense parts begin (by cumulative size)."""
    cum = np.cumprod(new_sizes) if len(new_sizes) else np.array([], int)
    # Leading sizes whose product stays at the batch size are batch dimensions (a leading 1 is
    # a batch dimension even of an unbatched array, as in JAX).
    i1 = int(np.searchsorted(cum, batch_size, side="right"))
    i2 = int(np.searchsorted(cum, batch_size * sparse_size, side="right"))
    if i2 < i1:
        i2 = i1
    return tuple(new_sizes[:i1]), tuple(new_sizes[i1:i2]), tuple(new_sizes[i2:])


def bcoo_reshape(mat: BCOO, *, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None,
                 sharding=None) -> BCOO:
    """Reshape a BCOO array; batch, sparse and dense dimensions must reshape among
    themselves."""
    if (tuple(mat.indices.shape[:mat.n_batch]) != tuple(mat.shape[:mat.n_batch])
            or tuple(mat.data.shape[:mat.n_batch]) != tuple(mat.shape[:mat.n_batch])):
        raise NotImplementedError("reshape of arrays with broadcasted batch dimensions.")
    nb, ns = mat.n_batch, mat.n_sparse
    new_sizes = tuple(int(s) for s in new_sizes)
    batch_shape, sparse_shape = mat.shape[:nb], mat.shape[nb:nb + ns]
    dense_shape = mat.shape[nb + ns:]
    if dimensions is None:
        sparse_perm = tuple(range(ns))
        batch_perm, dense_perm = tuple(range(nb)), tuple(range(len(dense_shape)))
    else:
        from_validate = ops_validate_permutation(dimensions, nb, ns, mat.n_dense, mat.shape)
        batch_perm, sparse_perm, dense_perm = from_validate
    if int(np.prod(new_sizes)) != mat.size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new_sizes} "
                        f"for shape {mat.shape}.")
    new_batch, new_sparse, new_dense = _split_sizes(new_sizes, int(np.prod(batch_shape)),
                                                    int(np.prod(sparse_shape)))
    if (np.prod(batch_shape) != np.prod(new_batch) or np.prod(sparse_shape) !=
            np.prod(new_sparse) or np.prod(dense_shape) != np.prod(new_dense)):
        raise ValueError("bcoo_reshape: new shape cannot mix batch, sparse, and dense "
                         f"dimensions; got shape={mat.shape} new_shape={new_sizes} with "
                         f"n_batch={nb}, n_dense={mat.n_dense}")
    data = jnp.transpose(mat.data, (*batch_perm, nb, *(d + nb + 1 for d in dense_perm)))
    data = data.reshape((*new_batch, mat.nse, *new_dense))
    indices = jnp.transpose(mat.indices, (*batch_perm, nb, nb + 1)).reshape(
        (*new_batch, mat.nse, ns))
    if ns == 0:
        indices = jnp.zeros((*new_batch, mat.nse, len(new_sparse)), indices.dtype)
    else:
        cols = tuple(indices[..., i] for i in sparse_perm)
        dims = tuple(sparse_shape[i] for i in sparse_perm)
        oob = (indices >= jnp.array(sparse_shape, indices.dtype)).any(-1, keepdims=True)
        flat = jnp.ravel_multi_index(cols, dims, mode="clip")
        new_cols = jnp.unravel_index(flat, new_sparse) if new_sparse else ()
        indices = (jnp.stack(new_cols, axis=-1).astype(indices.dtype) if new_sparse else
                   jnp.zeros((*indices.shape[:-1], 0), indices.dtype))
        indices = jnp.where(oob, jnp.array(new_sparse, indices.dtype), indices)
    return BCOO((data, indices), shape=new_sizes)


def bcoo_rev(operand: BCOO, dimensions: Sequence[int]) -> BCOO:
    """Reverse ``operand`` along ``dimensions``."""
    nb, ns = operand.n_batch, operand.n_sparse
    dims = sorted({int(d) % operand.ndim for d in dimensions})
    batch = [d for d in dims if d < nb]
    sparse = [d - nb for d in dims if nb <= d < nb + ns]
    dense = [d - nb - ns for d in dims if d >= nb + ns]
    data = operand.data
    indices = operand.indices
    for d in batch:
        if data.shape[d] > 1:
            data = jnp.flip(data, d)
        if indices.shape[d] > 1:
            indices = jnp.flip(indices, d)
    if dense:
        data = jnp.flip(data, tuple(nb + 1 + d for d in dense))
    if sparse:
        sizes = jnp.array([operand.shape[nb + d] for d in sparse], indices.dtype)
        cols = np.array(sparse, np.int32)
        sel = indices[..., cols]
        flipped = jnp.where(sel < sizes, sizes - 1 - sel, sel)  # padding stays out of bounds
        indices = indices.at[..., cols].set(flipped)
    return BCOO((data, indices), shape=operand.shape)


def bcoo_broadcast_in_dim(mat: BCOO, *, shape: Sequence[int],
                          broadcast_dimensions: Sequence[int], sharding=None) -> BCOO:
    """``lax.broadcast_in_dim`` of a BCOO array: new leading dimensions become batch
    dimensions, new trailing ones dense; sparse dimensions may only gain size-1 axes."""
    shape = tuple(int(s) for s in shape)
    bdims = tuple(int(d) for d in broadcast_dimensions)
    if len(mat.shape) != len(bdims):
        raise ValueError(f"spinfo.shape={mat.shape} and broadcast_dimensions={bdims} must have "
                         "the same length")
    nb, ns, nd, nse = mat.n_batch, mat.n_sparse, mat.n_dense, mat.nse
    batch_dims, sparse_dims, dense_dims = bdims[:nb], bdims[nb:nb + ns], bdims[nb + ns:]
    if max(batch_dims, default=0) > min(sparse_dims, default=len(shape)):
        raise ValueError("Cannot mix batch and sparse dimensions during broadcast_in_dim")
    if max(sparse_dims, default=0) > min(dense_dims, default=len(shape)):
        raise ValueError("Cannot mix sparse and dense dimensions during broadcast_in_dim")
    new_nb = min(bdims[nb:], default=len(shape))
    new_nd = nd and len(shape) - min(bdims[-nd:])
    new_ns = len(shape) - new_nb - new_nd
    if int(np.prod(mat.shape[nb:nb + ns])) != int(np.prod(shape[new_nb:new_nb + new_ns])):
        raise NotImplementedError("Adding sparse dimensions with lengths != 1")
    data, indices = mat.data, mat.indices
    if (new_nb, new_nd) != (nb, nd):
        data = lax.broadcast_in_dim(
            data, (*shape[:new_nb], nse, *shape[new_nb + new_ns:]),
            (*batch_dims, new_nb, *(b + 1 - new_ns for b in dense_dims)))
        indices = lax.broadcast_in_dim(indices, (*shape[:new_nb], nse, ns),
                                       (*batch_dims, new_nb, new_nb + 1))
    if new_ns != ns:
        cols = np.array(sparse_dims, np.int32) - new_nb
        indices = jnp.zeros((*indices.shape[:-1], new_ns), indices.dtype).at[..., cols].set(
            indices)
    return BCOO((data, indices), shape=shape)


def bcoo_update_layout(mat: BCOO, *, n_batch: int | None = None, n_dense: int | None = None,
                       on_inefficient: str | None = "error") -> BCOO:
    """The same array with ``n_batch`` batch and ``n_dense`` dense dimensions. Turning sparse
    dimensions of size > 1 into batch or dense ones stores many zeros: that raises
    ``SparseEfficiencyError`` (or warns) as ``on_inefficient`` says."""
    n_batch = mat.n_batch if n_batch is None else operator.index(n_batch)
    n_dense = mat.n_dense if n_dense is None else operator.index(n_dense)
    if (n_batch, n_dense) == (mat.n_batch, mat.n_dense):
        return mat
    n_sparse = mat.ndim - n_batch - n_dense
    if on_inefficient not in ("error", "warn", None):
        raise ValueError(f"on_inefficent={on_inefficient!r}; expected one of "
                         "['error', 'warn', None].")
    if n_batch < 0:
        raise ValueError(f"n_batch must be non-negative; got {n_batch}")
    if n_dense < 0:
        raise ValueError(f"n_dense must be non-negative; got {n_dense}")
    if n_sparse < 0:
        raise ValueError(f"sum of n_batch={n_batch} and n_dense={n_dense} cannot be larger "
                         f"than mat.ndim={mat.ndim}.")

    def inefficient(msg):
        if on_inefficient == "error":
            raise SparseEfficiencyError(msg + " To disable this error, set the on_inefficient "
                                        "argument of bcoo_update_layout to 'warn' or None.")
        if on_inefficient == "warn":
            warnings.warn(msg + " To disable this warning, set the on_inefficient argument of "
                          "bcoo_update_layout to None.", category=SparseEfficiencyWarning)

    shape = mat.shape
    if n_dense > mat.n_dense and any(d > 1 for d in shape[-n_dense:mat.ndim - mat.n_dense]):
        inefficient(f"For matrix of shape {shape}, increasing n_dense from {mat.n_dense} to "
                    f"{n_dense} results in inefficient storage.")
    if n_batch > mat.n_batch and any(d > 1 for d in shape[mat.n_batch:n_batch]):
        inefficient(f"For matrix of shape {shape}, increasing n_batch from {mat.n_batch} to "
                    f"{n_batch} results in inefficient storage.")
    nb, nd = mat.n_batch, mat.n_dense
    data = broadcast_batch(mat.data, shape[:nb])
    indices = broadcast_batch(mat.indices, shape[:nb])
    if n_dense < nd:  # leading dense dimensions become sparse: one element per position
        n = nd - n_dense

        def dense_to_sparse(d, i):
            count = int(np.prod(d.shape[:n]))
            grid = np.indices(d.shape[:n]).reshape(n, count).T.astype(i.dtype)
            new_i = jnp.concatenate([jnp.broadcast_to(i, (count, i.shape[0])),
                                     jnp.asarray(grid)], axis=1)
            return d.reshape((count, *d.shape[n:])), new_i

        data, indices = nfold_vmap(dense_to_sparse, nb + 1, broadcasted=False)(data, indices)
        data = data.reshape((*data.shape[:nb], -1, *data.shape[nb + 2:]))
        indices = indices.reshape((*indices.shape[:nb], -1, indices.shape[-1]))
        nd = n_dense
    if n_batch < nb:  # trailing batch dimensions fold into the stored elements
        n = nb - n_batch

        def batch_to_sparse(d, i):
            lead = (*i.shape[:n], i.shape[n])
            grid = np.indices(lead).reshape(len(lead), -1)[:-1].T.astype(i.dtype)
            # Explicit counts: with no sparse dimensions a -1 cannot be inferred.
            count = int(np.prod(lead))
            new_i = jnp.concatenate([jnp.asarray(grid), i.reshape(count, i.shape[-1])], axis=1)
            return d.reshape((count, *d.shape[n + 1:])), new_i

        data, indices = nfold_vmap(batch_to_sparse, n_batch, broadcasted=False)(data, indices)
        nb = n_batch
    if n_dense > nd:  # trailing sparse dimensions become dense
        n = n_dense - nd

        def sparse_to_dense(d, i):
            cols = tuple(i[-n:][k] for k in range(n))
            out = jnp.zeros(shape[len(shape) - n_dense:], d.dtype)
            return out.at[cols].set(d, mode="drop"), i[:-n]

        data, indices = nfold_vmap(sparse_to_dense, nb + 1, broadcasted=False)(data, indices)
        nd = n_dense
    if n_batch > nb:  # leading sparse dimensions become batch dimensions
        n = n_batch - nb

        def sparse_to_batch(d, i):
            nse = i.shape[0]
            idx = tuple(i[:, k] for k in range(n)) + (jnp.arange(nse),)
            new_i = jnp.broadcast_to(i[:, n:], (*shape[nb:n_batch], nse, i.shape[1] - n))
            new_d = jnp.zeros((*shape[nb:n_batch], nse, *d.shape[1:]), d.dtype)
            return new_d.at[idx].set(d, mode="drop"), new_i

        data, indices = nfold_vmap(sparse_to_batch, nb, broadcasted=False)(data, indices)
    return BCOO((data, indices), shape=shape)


def bcoo_dynamic_slice(mat: BCOO, start_indices: Sequence, slice_sizes: Sequence[int]) -> BCOO:
    """``lax.dynamic_slice`` of a BCOO array: traced starts, static sizes; starts are clamped
    so the slice fits, as in lax."""
    if not isinstance(mat, BCOO):
        raise TypeError(f"bcoo_slice: input should be BCOO array, got type(mat)={type(mat)}")
    sizes = tuple(operator.index(s) for s in slice_sizes)
    if not len(start_indices) == len(sizes) == mat.ndim:
        raise ValueError(f"bcoo_dynamic_slice: indices must have size mat.ndim={mat.ndim}")
    if not all(0 <= s <= n for s, n in zip(sizes, mat.shape)):
        raise TypeError("slice_sizes must be less than or equal to operand shape, got "
                        f"slice_sizes {sizes} for operand shape {mat.shape}")
    starts = [jnp.asarray(i) for i in start_indices]
    if any(not np.issubdtype(s.dtype, np.integer) or s.shape != () for s in starts):
        raise TypeError("bcoo_dynamic_slice: start_indices must be scalar integers")
    nb, ns = mat.n_batch, mat.n_sparse
    zero = jnp.zeros((), starts[0].dtype if starts else np.int32)
    d_start, d_size, i_start, i_size = [], [], [], []
    for i in range(nb):
        d_b = mat.data.shape[i] != mat.shape[i]  # broadcast (size-1) batch axis stays as is
        i_b = mat.indices.shape[i] != mat.shape[i]
        d_start.append(zero if d_b else starts[i])
        d_size.append(1 if d_b else sizes[i])
        i_start.append(zero if i_b else starts[i])
        i_size.append(1 if i_b else sizes[i])
    data = lax.dynamic_slice(mat.data, (*d_start, zero, *starts[nb + ns:]),
                             (*d_size, mat.nse, *sizes[nb + ns:]))
    indices = lax.dynamic_slice(mat.indices, (*i_start, zero, zero),
                                (*i_size, mat.nse, ns))
    if ns:
        dt = indices.dtype
        st = jnp.stack([s.astype(dt) for s in starts[nb:nb + ns]])
        sz = jnp.array(sizes[nb:nb + ns], dt)
        full = jnp.array(mat.shape[nb:nb + ns], dt)
        st = jnp.clip(jnp.where(st < 0, st + full, st), 0, full - sz)
        keep = jnp.all((indices >= st) & (indices < st + sz), -1, keepdims=True)
        indices = jnp.where(keep, indices - st, sz)
        data = jnp.where(keep[..., 0][(Ellipsis,) + (None,) * mat.n_dense], data,
                         jnp.zeros((), data.dtype))
        new_nse = int(np.prod(sizes[nb:nb + ns]))
        if mat.nse > new_nse:
            data, indices = bcoo_sum_duplicates_p.bind(data, indices,
                                                       spinfo=SparseInfo(sizes), nse=new_nse)
    return BCOO((data, indices), shape=sizes)


# ---- gather and convolution (compositions of the operations above) -------------------------

def bcoo_gather(operand: BCOO, start_indices, dimension_numbers: GatherDimensionNumbers,
                slice_sizes: Sequence[int], *, unique_indices: bool = False,
                indices_are_sorted: bool = False, mode: str | GatherScatterMode | None = None,
                fill_value=None) -> BCOO:
    """``lax.gather`` of a BCOO operand: one ``bcoo_dynamic_slice`` per start index (vmapped),
    then the result's dimensions are reshaped and permuted as ``lax.gather`` orders them."""
    validate_bcoo(operand.data, operand.indices, operand.shape)
    mode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode
    if GatherScatterMode.from_any(mode) != GatherScatterMode.PROMISE_IN_BOUNDS:
        raise NotImplementedError(f"bcoo_gather: mode={mode!r} not yet supported.")
    start_indices = jnp.asarray(start_indices)
    slice_sizes = tuple(operator.index(s) for s in slice_sizes)
    # lax.gather's own shape rule validates the arguments and gives the output shape.
    out = eval_shape(partial(lax.gather, dimension_numbers=dimension_numbers,
                             slice_sizes=slice_sizes, unique_indices=unique_indices,
                             indices_are_sorted=indices_are_sorted, mode=mode,
                             fill_value=fill_value),
                     ShapeDtypeStruct(operand.shape, operand.dtype),
                     ShapeDtypeStruct(start_indices.shape, start_indices.dtype))
    offset_dims = tuple(dimension_numbers.offset_dims)
    zero = jnp.zeros((), start_indices.dtype)
    starts: list = [zero] * operand.ndim
    in_axes: list = [None] * operand.ndim
    sizes = list(operand.shape)
    for i, j in enumerate(dimension_numbers.start_index_map):
        starts[j] = start_indices[..., i].ravel()
        sizes[j] = slice_sizes[j]
        in_axes[j] = 0

    def one_slice(idx):
        return bcoo_squeeze(bcoo_dynamic_slice(operand, idx, slice_sizes=sizes),
                            dimensions=tuple(dimension_numbers.collapsed_slice_dims))

    result = vmap(one_slice, in_axes=(in_axes,))(starts)
    result = bcoo_reshape(result, new_sizes=(*start_indices.shape[:-1], *result.shape[1:]),
                          dimensions=tuple(range(result.ndim)))
    if result.shape:
        batch_dims = tuple(d for d in range(len(out.shape)) if d not in offset_dims)
        perm = np.zeros(result.ndim, dtype=int)
        perm[np.array(batch_dims + offset_dims, dtype=int)] = np.arange(result.ndim)
        if set(perm[:len(batch_dims)]) != set(range(len(batch_dims))):
            # The gathered batch dimensions would move behind sparse ones: unbatch first.
            result = bcoo_update_layout(result, n_batch=0)
        result = bcoo_transpose(result, permutation=tuple(int(p) for p in perm))
    if tuple(result.shape) != tuple(out.shape):
        result = bcoo_reshape(result, new_sizes=tuple(out.shape),
                              dimensions=tuple(range(result.ndim)))
    if result.dtype != out.dtype:
        result = BCOO((result.data.astype(out.dtype), result.indices), shape=result.shape,
                      indices_sorted=result.indices_sorted,
                      unique_indices=result.unique_indices)
    return result


def bcoo_conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation=None,
                              rhs_dilation=None, dimension_numbers=None,
                              feature_group_count: int = 1, batch_group_count: int = 1,
                              precision=None, preferred_element_type=None,
                              out_sharding=None) -> BCOO:
    """``lax.conv_general_dilated`` with sparse (BCOO) or dense operands, for the case JAX
    supports: one spatial dimension, unit strides and dilations, and leading dimensions
    (1, 1). The output pairs every stored element of ``lhs`` with every one of ``rhs``."""
    conv = partial(lax.conv_general_dilated, window_strides=window_strides, padding=padding,
                   lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                   dimension_numbers=dimension_numbers,
                   feature_group_count=feature_group_count,
                   batch_group_count=batch_group_count, precision=precision,
                   preferred_element_type=preferred_element_type)
    # The traced equation gives lax's canonical parameters (padding pairs, default dilations).
    closed = make_jaxpr(conv)(ShapeDtypeStruct(lhs.shape, lhs.dtype),
                              ShapeDtypeStruct(rhs.shape, rhs.dtype))
    params = closed.jaxpr.eqns[-1].params
    ones = (1,) * (lhs.ndim - 2)
    if tuple(params["lhs_dilation"]) != ones:
        raise NotImplementedError("bcoo convolution with lhs_dilation.")
    if tuple(params["rhs_dilation"]) != (1,) * (rhs.ndim - 2):
        raise NotImplementedError("bcoo convolution with lhs_dilation.")
    if tuple(params["window_strides"]) != ones:
        raise NotImplementedError("bcoo convolution with non-unit window_strides.")
    if params["batch_group_count"] != params["feature_group_count"] != 1:
        raise NotImplementedError("bcoo convolution with non-unit group counts.")
    if lhs.shape[:2] != rhs.shape[:2] != (1, 1):
        raise NotImplementedError("bcoo convolution with leading dimensions other than (1, 1)")
    index_dtype = (lhs.indices.dtype if hasattr(lhs, "indices") else
                   rhs.indices.dtype if hasattr(rhs, "indices") else np.dtype("int32"))
    (pad,) = params["padding"]
    return _bcoo_conv_1d(_conv_operand_1d(lhs, index_dtype), _conv_operand_1d(rhs, index_dtype),
                         tuple(int(p) for p in pad))


def _conv_operand_1d(mat, index_dtype) -> BCOO:
    """A (1, 1, n) operand as a 1-D BCOO array (a dense one stores every element)."""
    if isinstance(mat, BCOO):
        mat = bcoo_update_layout(mat, n_batch=2, n_dense=0)
        data, indices = mat.data[0, 0], mat.indices[0, 0]
        # Padding elements (index n) must not reach the output through the index arithmetic.
        data = jnp.where(indices[:, 0] < mat.shape[-1], data, jnp.zeros((), data.dtype))
    elif isinstance(mat, (np.ndarray, core.Tracer)) or hasattr(mat, "__jax_array__") or (
            hasattr(mat, "shape") and hasattr(mat, "dtype")):
        data = jnp.asarray(mat)[0, 0]
        indices = lax.broadcasted_iota(index_dtype, (data.shape[0], 1), 0)
    else:
        raise TypeError(f"bcoo_conv_general_dilated: input of type {type(mat)} not recognized.")
    return BCOO((data, indices), shape=tuple(mat.shape[2:]))


def _bcoo_conv_1d(lhs: BCOO, rhs: BCOO, padding: tuple[int, int]) -> BCOO:
    # out[i] = sum_j lhs[i + j - pad_lo] * rhs[j]: the pair (a, b) lands at a - b + pad_lo.
    data = (lhs.data[:, None] * rhs.data[None, :]).ravel()
    idx = (lhs.indices[:, None] + (padding[0] - rhs.indices)[None, :]).ravel()
    negative = idx < 0
    idx = jnp.where(negative, 0, idx)
    data = jnp.where(negative, jnp.zeros((), data.dtype), data)
    size = max(0, lhs.shape[0] + padding[0] + padding[1] - rhs.shape[0] + 1)
    return BCOO((data[None, None], idx[None, None, :, None]), shape=(1, 1, size))
