"""Extended dtypes defined the way JAX's libraries define them: ``ExtendedDType`` with a
``_rules`` class (``jax._src.dtypes``), JAX's ``primal_tangent_dtype``, and ``EArray``, the
concrete arrays of such a dtype (``jax._src.earray``; ``jax.experimental`` re-exports it and
``primal_tangent_dtype``).

Flax's fp8 layers import it to learn that extended-dtype values may live outside ``jit``
(``fp8_ops.CAN_USE_EARRAY``). An ``EArray`` is the value of dtype ``aval.dtype`` stored as its
representation array (``physical_aval``): jaxkit passes that array to programs and wraps their
results back, through the dtype's ``to_physical``/``from_physical``
(``ExtendedDType`` below), as it does for typed keys.
"""
from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit import dtypes as _dtypes
from jaxkit.avals import ShapedArray
from jaxkit.runtime.array import Array

__all__ = ["EArray", "ExtendedDType", "PrimalTangentDType", "primal_tangent_dtype"]


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


class ExtendedDType(_dtypes.ExtendedDType):
    """Base of JAX's extended dtype classes, for dtypes that libraries define with a
    ``_rules`` class (jaxkit's own, ``key<fry>``, is ``jaxkit.random.prng.KeyTy``)."""

    _rules: Any = None

    def _rule(self, name: str):
        rule = getattr(self._rules, name, None)
        if rule is None:
            raise NotImplementedError(f"{name} rule for dtype {self.name}: its _rules class "
                                      f"{getattr(self._rules, '__name__', self._rules)!r} has "
                                      "none")
        return rule

    @property
    def _physical(self):
        return self._rule("physical_element_aval")(self)

    @property
    def physical_shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return tuple(self._physical.shape)

    @property
    def physical_dtype(self) -> np.dtype:  # type: ignore[override]
        return np.dtype(self._physical.dtype)

    @property
    def itemsize(self) -> int:  # type: ignore[override]
        return int(np.prod(self.physical_shape)) * self.physical_dtype.itemsize

    def to_physical(self, value: Any) -> Any:
        return value._data  # an EArray's representation array

    def from_physical(self, buf: Any) -> Any:
        data = buf if isinstance(buf, Array) else Array(buf)
        n = len(data.shape) - len(self.physical_shape)
        return EArray(ShapedArray(tuple(data.shape[:n]), self), data)

    def tangent_dtype(self) -> Any:
        rule = getattr(self._rules, "tangent_dtype", None)
        return _dtypes.float0 if rule is None else rule(self)

    def _allowed(self, name: str, *args) -> bool:
        # JAX's older rules say so with one class attribute for both directions.
        rule = getattr(self._rules, name, None)
        if rule is None:
            return bool(getattr(self._rules, "allow_conversion", False))
        return bool(rule(*args))

    def convert_from(self, other: np.dtype) -> bool:
        return self._allowed("convert_from", self, other)

    def convert_to(self, other: np.dtype) -> bool:
        return self._allowed("convert_to", other, self)

    def zero(self) -> Any:
        return self._rule("zero")(self)

    def add(self, x: Any, y: Any) -> Any:
        return self._rule("add")(self, x, y)

    def full(self, shape: tuple[int, ...], fill_value: Any) -> Any:
        return self._rule("full")(shape, fill_value, self)


class primal_tangent_dtype_scalar(_dtypes.extended):  # noqa: N801  (JAX's name)
    """The scalar type of ``primal_tangent_dtype`` dtypes."""


@dataclasses.dataclass(frozen=True, slots=True)
class PrimalTangentDType(ExtendedDType):
    """A dtype whose values are stored as ``primal_dtype`` and whose tangents have
    ``tangent_dtype`` (a field, as in JAX: the tangent rule reads it)."""

    primal_dtype: Any
    tangent_dtype: Any
    name: str
    type = primal_tangent_dtype_scalar

    def __repr__(self) -> str:
        return self.name

    @property
    def _rules(self):
        return types.SimpleNamespace(
            physical_element_aval=lambda dtype: ShapedArray((), self.primal_dtype),
            tangent_dtype=lambda dtype: self.tangent_dtype, allow_conversion=True)


def primal_tangent_dtype(primal_dtype: Any, tangent_dtype: Any,
                         name: str | None = None) -> PrimalTangentDType:
    """An extended dtype stored as ``primal_dtype`` whose tangents are ``tangent_dtype``
    (named ``PrimalTangentDType{f32/i8}`` unless ``name`` is given); values convert to and
    from it with ``lax.convert_element_type``."""
    primal, tangent = _dtypes.dtype(primal_dtype), _dtypes.dtype(tangent_dtype)
    return PrimalTangentDType(primal, tangent, name or (
        f"PrimalTangentDType{{{_short_dtype_name(primal)}/{_short_dtype_name(tangent)}}}"))


@functools.cache
def _short_dtype_name(dtype: Any) -> str:
    if isinstance(dtype, _dtypes.ExtendedDType):
        return str(dtype)
    return (dtype.name.replace("float", "f").replace("uint", "u").replace("int", "i")
            .replace("complex", "c"))
