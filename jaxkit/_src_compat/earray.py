"""``jax._src.earray``: concrete arrays of a user-defined extended dtype (JAX's ``EArray``).

Flax's fp8 layers import it to learn that extended-dtype values may live outside ``jit``
(``fp8_ops.CAN_USE_EARRAY``). An ``EArray`` is the value of dtype ``aval.dtype`` stored as its
representation array (``physical_aval``): jaxkit passes that array to programs and wraps their
results back, through the dtype's ``to_physical``/``from_physical``
(``jaxkit._src_compat.dtypes.ExtendedDType``), as it does for typed keys.
"""
from __future__ import annotations

from typing import Any

from jaxkit import core
from jaxkit.runtime.array import Array


class EArray:
    """An array of an extended dtype over its representation array ``data``."""

    __slots__ = ("aval", "_data")
    __array_priority__ = 100

    def __init__(self, aval: core.ShapedArray, data: Any):
        self.aval = aval
        self._data = data if isinstance(data, Array) else Array(data)

    dtype = property(lambda self: self.aval.dtype)
    shape = property(lambda self: self.aval.shape)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self._data.size)

    def block_until_ready(self) -> EArray:
        self._data.block_until_ready()
        return self

    def __repr__(self) -> str:
        return f"EArray({self._data!r}, dtype={self.dtype})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]


core.pytype_aval_mappings[EArray] = lambda x: x.aval
