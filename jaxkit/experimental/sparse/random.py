"""``jax.experimental.sparse.random``: ``random_bcoo``, a BCOO array with random indices and
values drawn by a jaxkit random generator (the same bits as JAX for the same key)."""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

from jaxkit import dtypes
from jaxkit import numpy as jnp
from jaxkit import random
from jaxkit._util import split_list
from jaxkit.experimental.sparse.bcoo import BCOO
from jaxkit.transforms.vmap import vmap
from jaxkit.typing import Array

__all__ = ["random_bcoo", "Array", "split_list"]  # the last two: re-exported, as in JAX


def random_bcoo(key, shape: Sequence[int], *, dtype=None, indices_dtype=None,
                nse: float | int = 0.2, n_batch: int = 0, n_dense: int = 0,
                unique_indices: bool = True, sorted_indices: bool = False,
                generator: Callable = random.uniform, **kwds) -> BCOO:
    """A random BCOO array: ``nse`` stored elements per batch entry (a fraction of the sparse
    size when ``0 < nse < 1``), values from ``generator(key, shape=..., dtype=...)``."""
    shape = tuple(map(operator.index, shape))
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > len(shape):
        raise ValueError(f"Invalid n_batch={n_batch}, n_dense={n_dense} for shape={shape}")
    n_sparse = len(shape) - n_batch - n_dense
    batch_shape = shape[:n_batch]
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    dense_shape = shape[n_batch + n_sparse:]
    sparse_size = math.prod(sparse_shape)
    if not 0 <= nse < sparse_size:
        raise ValueError(f"got nse={nse}, expected to be between 0 and {sparse_size}")
    if 0 < nse < 1:
        nse = int(math.ceil(nse * sparse_size))
    nse = operator.index(nse)
    dtype = dtypes.canonicalize_dtype(float if dtype is None else dtype)
    indices_dtype = dtypes.canonicalize_dtype(int if indices_dtype is None else indices_dtype)
    if sparse_size > jnp.iinfo(indices_dtype).max:
        raise ValueError(f"indices_dtype={indices_dtype} does not have enough range to "
                         f"generate sparse indices of size {sparse_size}.")

    def one_indices(k):
        if not sparse_shape:
            return jnp.zeros((nse, n_sparse), dtype=indices_dtype)
        flat = random.choice(k, sparse_size, shape=(nse,),
                             replace=not unique_indices).astype(indices_dtype)
        return jnp.column_stack(jnp.unravel_index(flat, sparse_shape))

    keys = random.split(key, math.prod(batch_shape) + 1)
    data = generator(keys[0], shape=batch_shape + (nse,) + dense_shape, dtype=dtype, **kwds)
    indices = vmap(one_indices)(keys[1:]).reshape(batch_shape + (nse, n_sparse))
    mat = BCOO((data, indices), shape=shape)
    return mat.sort_indices() if sorted_indices else mat
