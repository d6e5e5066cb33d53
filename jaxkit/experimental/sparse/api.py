"""``jax.experimental.sparse.api``: format-generic constructors (``empty``, ``eye``) and
``todense``."""
from __future__ import annotations

from collections.abc import Sequence

from jaxkit import numpy as jnp
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit.experimental.sparse.bcoo import BCOO
from jaxkit.experimental.sparse.coo import COO
from jaxkit.experimental.sparse.csr import CSC, CSR

__all__ = ["empty", "eye", "todense"]

_FORMATS = {"bcoo": BCOO, "coo": COO, "csr": CSR, "csc": CSC}


def _format(sparse_format: str):
    if sparse_format not in _FORMATS:  # KeyError, as JAX's lookup raises
        raise KeyError(f"sparse_format={sparse_format!r} not recognized; must be one of "
                         f"{list(_FORMATS)}")
    return _FORMATS[sparse_format]


def empty(shape: Sequence[int], dtype=None, index_dtype="int32", sparse_format: str = "bcoo",
          **kwds) -> JAXSparse:
    """An all-zero sparse array of ``shape`` (``nse=0`` unless given)."""
    return _format(sparse_format)._empty(shape, dtype=dtype, index_dtype=index_dtype, **kwds)


def eye(N: int, M: int | None = None, k: int = 0, dtype=None, index_dtype="int32",
        sparse_format: str = "bcoo", **kwds) -> JAXSparse:
    """A sparse identity-like matrix: ones on the ``k``-th diagonal."""
    return _format(sparse_format)._eye(N, N if M is None else M, k, dtype=dtype,
                                       index_dtype=index_dtype, **kwds)


def todense(arr):
    """The dense array of a sparse array (a dense array is returned as is)."""
    return arr.todense() if isinstance(arr, JAXSparse) else jnp.asarray(arr)
