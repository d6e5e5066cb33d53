"""The Python operators of typed key arrays: none computes, each raises the TypeError JAX 0.10.2
raises for it.

Keys have no arithmetic, ordering or bitwise operations. JAX refuses them at one of two
levels, and its message says which: with two key operands the ``lax`` primitive names the dtype
it does not accept ("add does not accept dtype key<fry> at position 0. Accepted dtypes ...",
or NumPy's "Cannot interpret 'key<fry>' as a data type" for the operators whose ``jnp``
function looks the dtype up first); with a key and a number, ``jnp``'s promotion names both
dtypes ("multiply does not accept dtypes key<fry>, int32."). ``==`` and ``!=`` compare whole
keys (``jaxkit.numpy._keys``).
"""
from __future__ import annotations

import numbers
from typing import Any, NoReturn

import numpy as np

from jaxkit import core
from jaxkit.runtime.array import Array

__all__ = ["KeyArrayOperators"]

_NUMERIC = "integer, floating, complexfloating"
_ORDERED = "integer, floating, bool"
_BITWISE = "integer, bool"

# dunder: (jnp function name, lax primitive name or None where NumPy's dtype lookup fails
# first, the dtypes the primitive accepts)
_BINARY = {
    "add": ("add", "add", _NUMERIC), "sub": ("subtract", "sub", _NUMERIC),
    "mul": ("multiply", "mul", _NUMERIC), "truediv": ("true_divide", None, ""),
    "floordiv": ("floor_divide", None, ""), "mod": ("remainder", None, ""),
    "pow": ("power", None, ""), "lshift": ("left_shift", None, ""),
    "rshift": ("right_shift", None, ""), "and": ("bitwise_and", "and", _BITWISE),
    "or": ("bitwise_or", "or", _BITWISE), "xor": ("bitwise_xor", "xor", _BITWISE),
    "lt": ("less", "lt", _ORDERED), "le": ("less_equal", "le", _ORDERED),
    "gt": ("greater", "gt", _ORDERED), "ge": ("greater_equal", "ge", _ORDERED),
}
_UNARY = {"neg": ("neg", _NUMERIC), "abs": ("abs", "floating, complexfloating, signedinteger"),
          "invert": ("not", _BITWISE)}


def _array_operand(x: Any) -> bool:
    """Whether JAX would take ``x`` as an array operand (else Python's own TypeError)."""
    return isinstance(x, (numbers.Number, np.ndarray, np.generic, Array, core.Tracer)) or \
        isinstance(x, KeyArrayOperators)


def _dtype_name(x: Any) -> str:
    if isinstance(x, KeyArrayOperators):
        return str(x.dtype)
    if isinstance(x, (bool, int, float, complex)):  # Python scalars: the default dtypes
        return str(core.get_aval(x).dtype)
    return str(np.result_type(x) if not hasattr(x, "dtype") else x.dtype)


def _refuse(fun: str, prim: str | None, accepted: str, a: Any, b: Any) -> NoReturn:
    if isinstance(a, KeyArrayOperators) and isinstance(b, KeyArrayOperators):
        if prim is None:
            raise TypeError(f"Cannot interpret '{a.dtype}' as a data type")
        raise TypeError(f"{prim} does not accept dtype {a.dtype} at position 0. Accepted dtypes "
                        f"at position 0 are subtypes of {accepted}.")
    if fun == "power" and isinstance(a, KeyArrayOperators):  # jnp.power reads x's dtype first
        raise TypeError(f"Cannot interpret '{a.dtype}' as a data type")
    raise TypeError(f"{fun} does not accept dtypes {_dtype_name(a)}, {_dtype_name(b)}.")


def _binary(dunder: str, reflected: bool):
    fun, prim, accepted = _BINARY[dunder]

    def method(self, other):
        if not _array_operand(other):
            return NotImplemented
        _refuse(fun, prim, accepted, *((other, self) if reflected else (self, other)))
    method.__name__ = f"__{'r' if reflected else ''}{dunder}__"
    return method


def _unary(dunder: str):
    prim, accepted = _UNARY[dunder]

    def method(self):
        raise TypeError(f"{prim} does not accept dtype {self.dtype}. Accepted dtypes are "
                        f"subtypes of {accepted}.")
    method.__name__ = f"__{dunder}__"
    return method


class KeyArrayOperators:
    """Operator methods for a key array class (it defines ``dtype``)."""

    __slots__ = ()

    def __pos__(self):
        return self


_ORDER_REFLECTION = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
for _name in _BINARY:
    setattr(KeyArrayOperators, f"__{_name}__", _binary(_name, False))
    if _name not in _ORDER_REFLECTION:  # Python reflects comparisons onto the other one
        setattr(KeyArrayOperators, f"__r{_name}__", _binary(_name, True))
for _name in _UNARY:
    setattr(KeyArrayOperators, f"__{_name}__", _unary(_name))
