"""``TypedNdArray``: a host NumPy array that carries its jaxkit type, as JAX 0.10.2's.

JAX makes the values of ``float0`` (the dtype of the tangents and cotangents of integers and
booleans) on the host, never on a device: a ``float0`` array holds no data, so every one of
them is all zeros. ``jax.grad(f, allow_int=True)``, ``jnp.zeros(n, float0)``,
``jax.device_put`` of a float0 value and a jitted function's float0 results all give such a
host array, printed ``TypedNdArray([(b'',), (b'',)], dtype=void)``. A program takes a float0
argument as ``bool`` zeros (the dtype it is lowered to) and its float0 results are made here,
without reading the device.
"""
from __future__ import annotations

import numpy as np

from jaxkit import core, dtypes
from jaxkit.avals import ShapedArray


class TypedNdArray(np.ndarray):
    """A NumPy array with an abstract value of its own (``aval``, with ``weak_type``).

    NumPy operations on it see a plain ``ndarray`` (their results are plain arrays); jaxkit
    takes it as a value of its ``aval``."""

    def __new__(cls, value, aval: ShapedArray | None = None):
        array = np.asarray(value).view(cls)
        array._aval = aval
        return array

    def __array_finalize__(self, obj) -> None:
        # A view or a copy (x[0], x.copy()) keeps the weak type, not the shape.
        self._aval = None
        self._weak = getattr(obj, "weak_type", False) if isinstance(obj, TypedNdArray) else False

    @property
    def aval(self) -> ShapedArray:
        if self._aval is None:
            self._aval = ShapedArray(self.shape, self.dtype, weak_type=self._weak)
        return self._aval

    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    @property
    def val(self) -> np.ndarray:
        return np.asarray(self)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # Computed on plain arrays: a result is NumPy's, with no jaxkit type to keep right.
        inputs = tuple(np.asarray(x) if isinstance(x, TypedNdArray) else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(x) if isinstance(x, TypedNdArray) else x
                                  for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __repr__(self) -> str:
        head = "TypedNdArray("
        tail = f"dtype={self.dtype.name}{', weak_type=True' if self.weak_type else ''})"
        width = np.get_printoptions()["linewidth"]
        if self.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(np.asarray(self), prefix=head, suffix=",", separator=", ",
                                   max_line_width=width)
        last_line = len(body) - body.rfind("\n") + 1
        gap = " " if last_line + len(tail) + 1 <= width else " " * len(head)
        return f"{head}{body},{gap}{tail}"

    def __reduce__(self):
        return (_rebuild, (np.asarray(self), self.weak_type))


def _rebuild(value: np.ndarray, weak_type: bool) -> TypedNdArray:
    return TypedNdArray(value, ShapedArray(value.shape, value.dtype, weak_type=weak_type))


def float0_zeros(shape) -> TypedNdArray:
    """The ``float0`` value of ``shape`` (the only one there is: float0 holds no data)."""
    shape = tuple(shape)
    return TypedNdArray(np.zeros(shape, dtypes.float0), ShapedArray(shape, dtypes.float0))


core.pytype_aval_mappings[TypedNdArray] = lambda x: x.aval
