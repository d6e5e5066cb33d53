"""``jax._src.dtypes`` and the public ``jax.dtypes`` (Flax tests RNGs against
``dtypes.prng_key``; its fp8 layers define their own extended dtype): jaxkit's dtype module,
plus the extended-dtype names.

A user-defined extended dtype subclasses :class:`ExtendedDType` and says how it behaves
through a ``_rules`` class, JAX's protocol (Flax's ``fp8_meta_dtype_wrapper``: a float32 whose
cotangents accumulate by ``max``). This class reads those rules into the interface jaxkit's
own extended dtypes (``key<fry>``) implement directly.
"""
from typing import Any

import numpy as np

from jaxkit import dtypes as _dtypes
from jaxkit._src_compat.earray import EArray
from jaxkit.avals import ShapedArray
from jaxkit.dtypes import *  # noqa: F401,F403
from jaxkit.dtypes import (DType, extended, finfo, issubdtype, prng_key,  # noqa: F401
                           supports_inf)
from jaxkit.runtime.array import Array


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
