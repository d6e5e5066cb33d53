"""The Python array API's entry points (https://data-apis.org/array-api/), as JAX 0.10.2 has
them: ``x.__array_namespace__()`` gives ``jaxkit.numpy``, ``__array_api_version__`` is the
standard's version it follows, and ``__array_namespace_info__()`` describes what it supports
(the dtypes of each kind, devices, capabilities). Also ``x in array`` (``__contains__``), as
JAX defines it: a scalar searched in a one-dimensional array, giving a traced-friendly
boolean array."""
from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit._config import config
from jaxkit.numpy import _reductions
from jaxkit.numpy._promotion import ensure_arraylike
from jaxkit.runtime import pjrt
from jaxkit.runtime.array import Array

__array_api_version__ = "2024.12"


def array_namespace(self, *, api_version: str | None = None) -> ModuleType:
    """``x.__array_namespace__()``: the array API namespace of jaxkit arrays."""
    if api_version is not None and api_version != __array_api_version__:
        raise ValueError(f"api_version={api_version!r} is not available; available versions "
                         f"are: {[__array_api_version__]}")
    return sys.modules["jaxkit.numpy"]


def array_module(self, types) -> Any:
    """NEP 37's ``__array_module__``: jaxkit.numpy when every type is an array it handles."""
    if all(issubclass(t, (core.Tracer, Array, np.ndarray)) for t in types):
        return sys.modules["jaxkit.numpy"]
    return NotImplemented


def contains(self, other) -> Any:
    """``other in x``: whether the scalar ``other`` equals an element of the 1-d ``x`` (JAX
    departs from NumPy here: no other shapes, and the result is an array)."""
    if other is None or isinstance(other, str):
        raise TypeError(f"Array.__contains__: unsupported operand type {type(other)}.")
    query = ensure_arraylike("Array.__contains__", other)
    if self.ndim != 1:
        raise ValueError("Array.__contains__: search array must be one-dimensional, got "
                         f"arr.shape={self.shape}.")
    if query.ndim != 0:
        raise ValueError(f"Array.__contains__: query value must be a scalar, got "
                         f"query.shape={query.shape}")
    return _reductions.any(self == query)


# The standard's dtypes, by its kinds; the 64-bit ones only while x64 is on.
_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["integral"] = _KINDS["signed integer"] + _KINDS["unsigned integer"]
_KINDS["numeric"] = _KINDS["integral"] + _KINDS["real floating"] + _KINDS["complex floating"]
_WIDE = frozenset({"int64", "uint64", "float64", "complex128"})


class ArrayNamespaceInfo:
    """What ``__array_namespace_info__()`` describes: the array API inspection object."""

    _capabilities = {
        "boolean indexing": False,  # (not under transformations: shapes depend on values)
        "data-dependent shapes": False,
        "max dimensions": 64,  # XLA's limit
    }

    def capabilities(self) -> dict:
        return self._capabilities

    def default_device(self) -> None:
        # Arrays are uncommitted by default (None): jaxkit places them.
        return None

    def devices(self) -> list:
        return [None, *pjrt.devices()]  # None: uncommitted

    def default_dtypes(self, *, device=None) -> dict:
        del device  # the same on every device
        return {"real floating": dtypes.default_float_dtype(),
                "complex floating": dtypes.default_complex_dtype(),
                "integral": dtypes.default_int_dtype(),
                "indexing": dtypes.default_int_dtype()}

    def dtypes(self, *, device=None, kind: str | tuple[str, ...] | None = None) -> dict:
        del device
        if kind is None:
            names = _KINDS["bool"] + _KINDS["numeric"]
        elif isinstance(kind, tuple):
            names = tuple(n for k in kind for n in _KINDS[k])
        else:
            names = _KINDS[kind]
        return {n: np.dtype(n) for n in names if config.x64 or n not in _WIDE}


def __array_namespace_info__() -> ArrayNamespaceInfo:
    return ArrayNamespaceInfo()
