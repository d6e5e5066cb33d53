"""Host values that carry their jaxkit type, as JAX 0.10.2's (``jax._src.literals``).

``TypedInt``, ``TypedFloat``, ``TypedComplex``: a Python scalar with the dtype JAX gives it
(weakly typed: ``int32``, ``float32``, ``complex64`` without x64), kept whatever x64 mode is
in force later. ``TypedNdArray``: a host NumPy array with its type (weak or not).

``canonicalize_value`` makes them, as JAX does for every operand of a primitive: what an
eager primitive hands back unchanged (``stop_gradient(1.)``, a ``checkpoint``ed or
``linear_call``ed identity, ``vjp``'s outputs that are its inputs) is the canonical value,
printed ``TypedFloat(1.0, dtype=float32)`` and typed float32 where a NumPy float64 came in.

JAX also makes the values of ``float0`` (the dtype of the tangents and cotangents of integers
and booleans) on the host, never on a device: a ``float0`` array holds no data, so every one
of them is all zeros. ``jax.grad(f, allow_int=True)``, ``jnp.zeros(n, float0)``,
``jax.device_put`` of a float0 value and a jitted function's float0 results all give such a
host array, printed ``TypedNdArray([(b'',), (b'',)], dtype=void)``. A program takes a float0
argument as ``bool`` zeros (the dtype it is lowered to) and its float0 results are made here,
without reading the device.
"""
from __future__ import annotations

import numpy as np

from jaxkit import core, dtypes
from jaxkit.avals import ShapedArray


class _TypedScalar:
    """A Python scalar with the dtype JAX gives it (weakly typed), for the number type it
    subclasses (the second base: ``int``, ``float``, ``complex``)."""

    __slots__ = ()

    def __new__(cls, value, dtype: np.dtype):
        v = super().__new__(cls, value)
        v.dtype = np.dtype(dtype)
        v.aval = ShapedArray((), v.dtype, weak_type=True)
        return v

    def _plain(self):
        """The value as the plain number type (``TypedFloat``'s MRO: itself, this, float)."""
        return type(self).__mro__[2](self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._plain()}, dtype={self.dtype.name})"

    def __getnewargs__(self):
        return self._plain(), self.dtype


class TypedInt(_TypedScalar, int):
    """A Python int with its dtype (ints take no ``__slots__``: the two live in a dict)."""


class TypedFloat(_TypedScalar, float):
    """A Python float with its dtype; prints as a float under ``str``."""

    __slots__ = ("dtype", "aval")

    def __str__(self) -> str:
        return str(float(self))


class TypedComplex(_TypedScalar, complex):
    """A Python complex with its dtype."""

    __slots__ = ("dtype", "aval")


_typed_scalar = {int: TypedInt, float: TypedFloat, complex: TypedComplex}


def canonicalize_value(x):
    """``x`` as JAX's primitives take it: a Python int, float or complex as a typed scalar of
    its canonical dtype, a NumPy array or scalar as a ``TypedNdArray`` of its canonical dtype;
    anything else (arrays, tracers, typed values, bools) as it is."""
    typed = _typed_scalar.get(type(x))
    if typed is not None:
        return typed(x, core.get_aval(x).dtype)  # (a too-large int: JAX's OverflowError)
    if isinstance(x, (np.ndarray, np.generic)) and type(x) is not TypedNdArray:
        dtype = dtypes.canonicalize_dtype(x.dtype)
        return TypedNdArray(np.asarray(x, dtype), ShapedArray(np.shape(x), dtype))
    return x


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
for _t in (TypedInt, TypedFloat, TypedComplex):
    core.pytype_aval_mappings[_t] = lambda x: x.aval
