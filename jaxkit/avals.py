"""Abstract values: ``ShapedArray`` (shape, dtype, weak type) for arrays, ``AbstractToken`` for
XLA tokens, and the ``Token`` value. Interned, so equal types are the same object; also what
jaxlib reads when it wraps a result buffer. ``jaxkit.core`` re-exports them."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import dtypes



def aval_sharding_rule(aval: ShapedArray):
    raise NotImplementedError("the sharding of a type needs jaxkit.runtime.sharding loaded")


class ShapedArray:
    """The abstract value of an array: shape, dtype and whether the dtype is weak.

    A weak type comes from a Python scalar: it takes the dtype of whatever it meets
    (``jnp.float16(1) + 1.0`` is float16). jaxlib reads exactly these three attributes when it
    wraps a result buffer, so instances double as jaxlib avals.
    """

    # Instances are interned: one object per (shape, dtype, weak_type). Equal avals are then the
    # same object, so hashing and comparing them is the default identity test, done in C: the
    # jit fast path looks its executables up by argument avals on every call.
    __slots__ = ("shape", "dtype", "weak_type", "__weakref__")
    array_abstraction_level = 1
    _interned: dict[tuple, ShapedArray] = {}

    def __new__(cls, shape: Sequence[int], dtype: Any, weak_type: bool = False):
        key = (tuple([int(d) for d in shape]), np.dtype(dtype), bool(weak_type))
        self = cls._interned.get(key)
        if self is None:
            _check_shape(*key[:2])  # once per distinct aval: interning makes it free after
            self = object.__new__(cls)
            self.shape, self.dtype, self.weak_type = key
            self = cls._interned.setdefault(key, self)  # one winner if threads race
        return self

    def __reduce__(self):
        return ShapedArray, (self.shape, self.dtype, self.weak_type)

    ndim = property(lambda self: len(self.shape))

    @property
    def sharding(self):
        """The sharding in the type, as JAX avals carry one: jaxkit's types carry no mesh
        axes, so it is every dimension replicated over the empty abstract mesh (the object is
        built by ``jaxkit.runtime.sharding``, which sets ``aval_sharding_rule``)."""
        return aval_sharding_rule(self)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def update(self, shape=None, dtype=None, weak_type=None) -> ShapedArray:
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak_type(self) -> ShapedArray:
        return self.update(weak_type=False) if self.weak_type else self

    def to_tangent_aval(self) -> ShapedArray:
        """Integer and boolean values have ``float0`` tangents, as in JAX."""
        return ShapedArray(self.shape, dtypes.tangent_dtype(self.dtype), self.weak_type)

    def str_short(self) -> str:
        dims = ",".join(map(str, self.shape))
        return f"{dtypes.short_dtype_name(self.dtype)}[{dims}]"

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.dtype.name}{list(self.shape)}{weak})".replace(" ", "")

    def __str__(self):
        # JAX's str of an aval: full dtype name, "~" marking a weak type (``~float32[]``).
        dims = ",".join(map(str, self.shape))
        return f"{'~' if self.weak_type else ''}{self.dtype.name}[{dims}]"


class AbstractToken(ShapedArray):
    """The abstract value of an XLA token, which orders side effects and carries no data
    (JAX's ``AbstractToken``, printed ``Tok``). It is a ShapedArray of ``bool[0]``, the
    buffer a token travels as across a program's boundary; inside a program it lowers to
    ``!stablehlo.token``."""

    __slots__ = ()
    _interned: dict = {}  # apart from ShapedArray's: a token is not the bool[0] array

    def __new__(cls):
        return super().__new__(cls, (0,), np.bool_)

    def __reduce__(self):
        return AbstractToken, ()

    def update(self, shape=None, dtype=None, weak_type=None) -> AbstractToken:
        return self

    def to_tangent_aval(self) -> AbstractToken:
        return self

    def str_short(self) -> str:
        return "Tok"

    def __str__(self):
        return "AbstractToken()"

    __repr__ = __str__



class Token:
    """A token value, as ``lax.create_token`` returns (JAX's ``core.Token``): it only orders
    side effects. It holds the zero-sized buffer it crosses program boundaries as."""

    __slots__ = ("_buf",)

    def __init__(self, buf):
        self._buf = buf

    def block_until_ready(self) -> Token:
        self._buf.block_until_ready()
        return self


# XLA counts elements and bytes in int64, and aborts the process (an uncaught absl status in
# C++) when a shape's product overflows it; negative dimensions fail in MLIR with no hint.
# Every array type passes through ShapedArray, so this is where bad shapes are stopped.
_MAX_BYTES = 2 ** 63 - 1


def _check_shape(shape: tuple[int, ...], dtype: np.dtype) -> None:
    if any(d < 0 for d in shape):
        raise TypeError(f"Shapes must have every element be nonnegative, got {shape}. A "
                        "negative dimension usually comes from a size computed from other "
                        "shapes; check it before building the array.")
    size = math.prod(shape)
    if size * max(dtype.itemsize, 1) > _MAX_BYTES:
        raise ValueError(f"Array of shape {shape} and dtype {dtype.name} is too big: "
                         f"{size} elements of {dtype.itemsize} bytes exceed what XLA can "
                         "address (2**63 - 1 bytes). Use a smaller shape.")


abstract_token = AbstractToken()


def typematch(a: ShapedArray, b: ShapedArray) -> bool:
    """Same shape and dtype; weak types may differ (as JAX's type checker allows)."""
    return a.shape == b.shape and a.dtype == b.dtype


