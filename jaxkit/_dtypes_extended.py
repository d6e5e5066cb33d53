"""The dtypes that are not NumPy's numbers: ``float0``, the dtype of the tangents of integer,
boolean and key values, and the extended dtypes (``key<fry>``) with their scalar types.
``jaxkit.dtypes`` serves them; this module needs only NumPy."""
from __future__ import annotations

from typing import Any

import numpy as np

#: The dtype of tangents of integer and boolean values: a zero-size structured dtype, so that
#: such tangents carry no data (JAX prints it as ``float0``).
float0: np.dtype = np.dtype([("float0", np.void, 0)])


class extended(np.generic):  # noqa: N801  (JAX's name)
    """The abstract scalar type of dtypes that are not NumPy's (typed PRNG keys)."""


class prng_key(extended):  # noqa: N801
    """The scalar type of typed PRNG keys' dtypes (``key<fry>``, whose ``.type`` it is)."""


class ExtendedDType:
    """Base of the dtypes that are not NumPy's (``key<fry>``): a value of one is stored as an
    array of ``physical_dtype`` with ``physical_shape`` appended to its own shape. Primitives
    and lowerings see only that: ``jaxkit.avals.physical_aval`` gives the stored type."""

    type: type = extended
    name: str = "extended"
    itemsize: int = 0
    physical_shape: tuple[int, ...] = ()
    physical_dtype: np.dtype = np.dtype(np.uint8)

    def to_physical(self, value: Any) -> Any:
        """The physical array (``uint32[..., 2]`` for keys) of a concrete ``value``."""
        raise NotImplementedError(f"to_physical rule for dtype {self.name}")

    def from_physical(self, buf: Any) -> Any:
        """The concrete value over a program's physical result buffer."""
        raise NotImplementedError(f"from_physical rule for dtype {self.name}")

    def full(self, shape: tuple[int, ...], fill_value: Any) -> Any:
        """``lax.full`` of this dtype (``scan`` fills its output buffers with it)."""
        raise NotImplementedError(f"full rule for dtype {self.name}")

    # Differentiation and conversion. Keys are not differentiable and convert to nothing else;
    # a user-defined dtype (JAX's ``_rules`` protocol, ``jaxkit._src_compat.dtypes``) can be
    # both: Flax's fp8 meta dtype is a float32 whose cotangents accumulate by ``max``.
    def tangent_dtype(self) -> Any:
        """The dtype of this dtype's tangents."""
        return float0

    def convert_from(self, other: np.dtype) -> bool:
        """Whether ``convert_element_type`` may turn values of this dtype into ``other``."""
        return False

    def convert_to(self, other: np.dtype) -> bool:
        """Whether ``convert_element_type`` may turn ``other`` values into this dtype."""
        return False

    def zero(self) -> Any:
        """The rank-0 value the zero tangents/cotangents of this dtype are filled with."""
        raise NotImplementedError(f"zero rule for dtype {self.name}")

    def add(self, x: Any, y: Any) -> Any:
        """The sum of two tangents/cotangents of this dtype (``add_any``)."""
        raise NotImplementedError(f"add rule for dtype {self.name}")

    def __repr__(self):
        return self.name

    __str__ = __repr__
