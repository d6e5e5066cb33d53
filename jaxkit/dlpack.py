"""``jax.dlpack``: exchange arrays with other libraries through DLPack.

``from_dlpack`` is ``jnp.from_dlpack`` (host tensors; see ``jaxkit.numpy._dlpack``) with
JAX's signature here (every argument may be passed by keyword); jaxkit arrays export
themselves through ``Array.__dlpack__`` / ``__dlpack_device__``.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from jaxkit import numpy as jnp
from jaxkit.typing import Array

__all__ = ["from_dlpack", "is_supported_dtype"]

_SUPPORTED = frozenset(np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128,
    np.bool_))


def from_dlpack(external_array: Any, device: Any = None, copy: bool | None = None) -> Array:
    """An array holding the DLPack tensor ``external_array`` (``jnp.from_dlpack``)."""
    return jnp.from_dlpack(external_array, device=device, copy=copy)


def is_supported_dtype(dtype) -> bool:
    """Whether DLPack can carry arrays of ``dtype``."""
    if dtype is None:
        # NumPy would read None as float64
        raise TypeError(f"Expected a string or dtype-like object; got {dtype=}")
    return np.dtype(dtype) in _SUPPORTED
