"""dtype and shape queries of ``jax.numpy``: ``dtype``, ``result_type``, ``promote_types``,
``can_cast``, ``finfo``, ``iinfo``, ``issubdtype``, ``isdtype``, ``shape``, ``ndim``, ``size``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import dtypes

dtype = np.dtype
finfo = dtypes.finfo
iinfo = dtypes.iinfo
can_cast = dtypes.can_cast
promote_types = dtypes.promote_types
isdtype = dtypes.isdtype


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """``jnp.issubdtype``: NumPy's, knowing that bfloat16 & co. are floating."""
    return dtypes.issubdtype(arg1, arg2)


def result_type(*args: Any) -> np.dtype:
    """``jnp.result_type``: the dtype JAX's promotion gives ``args`` (weak-type aware)."""
    return dtypes.result_type(*args)


def shape(a: Any) -> tuple[int, ...]:
    """``jnp.shape``: the shape of an array or array-like."""
    s = getattr(a, "shape", None)
    return tuple(s) if s is not None else np.shape(a)


def ndim(a: Any) -> int:
    """``jnp.ndim``: the number of dimensions."""
    n = getattr(a, "ndim", None)
    return int(n) if n is not None else np.ndim(a)


def size(a: Any, axis: int | None = None) -> int:
    """``jnp.size``: the number of elements (along ``axis`` if given)."""
    s = shape(a)
    if axis is None:
        return int(np.prod(s, dtype=np.int64))
    return s[axis]
