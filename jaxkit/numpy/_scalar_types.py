"""``jnp.float32`` & co.: scalar types that are dtypes to NumPy and make arrays when called.

``jnp.float32(1)`` is a strongly typed float32 jaxkit array (not a NumPy scalar), while
``np.dtype(jnp.float32)``, ``jnp.zeros(3, jnp.float32)`` and ``jnp.float32 == np.float32`` work
as with the NumPy type, as in JAX.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import dtypes
from jaxkit.numpy._creation import asarray


class _ScalarMeta(type):
    """Metaclass of the jnp scalar types: equal and hashed as the NumPy scalar type."""

    dtype: np.dtype

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __eq__(cls, other: object) -> bool:
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other: object) -> bool:
        return not cls == other

    def __call__(cls, x: Any) -> Any:
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.dtype.type)


def _make_scalar_type(np_scalar_type: type) -> type:
    meta = _ScalarMeta(np_scalar_type.__name__, (object,),
                       {"dtype": np.dtype(np_scalar_type)})
    meta.__module__ = "jaxkit.numpy"
    return meta


bool_ = _make_scalar_type(np.bool_)
uint8 = _make_scalar_type(np.uint8)
uint16 = _make_scalar_type(np.uint16)
uint32 = _make_scalar_type(np.uint32)
uint64 = _make_scalar_type(np.uint64)
int8 = _make_scalar_type(np.int8)
int16 = _make_scalar_type(np.int16)
int32 = _make_scalar_type(np.int32)
int64 = _make_scalar_type(np.int64)
float16 = _make_scalar_type(np.float16)
float32 = _make_scalar_type(np.float32)
float64 = _make_scalar_type(np.float64)
complex64 = _make_scalar_type(np.complex64)
complex128 = _make_scalar_type(np.complex128)
bfloat16 = _make_scalar_type(dtypes.bfloat16)
float8_e4m3fn = _make_scalar_type(dtypes.float8_e4m3fn)
float8_e5m2 = _make_scalar_type(dtypes.float8_e5m2)
float8_e4m3fnuz = _make_scalar_type(dtypes.float8_e4m3fnuz)
float8_e5m2fnuz = _make_scalar_type(dtypes.float8_e5m2fnuz)
float8_e4m3b11fnuz = _make_scalar_type(dtypes.float8_e4m3b11fnuz)
int4 = _make_scalar_type(dtypes.int4)
uint4 = _make_scalar_type(dtypes.uint4)

# Types that need a recent ml_dtypes; absent (None in jaxkit.dtypes) otherwise.
_optional = {name: _make_scalar_type(getattr(dtypes, name)) for name in (
    "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "int2", "uint2", "int1", "uint1") if getattr(dtypes, name) is not None}
globals().update(_optional)

# NumPy's aliases, as JAX defines them (the 64-bit ones become 32-bit without x64 when used).
int_ = int64
uint = uint64
float_ = float64
complex_ = complex128
single = float32
double = float64
csingle = complex64
cdouble = complex128

__all__ = [
    "bfloat16",
    "bool_",
    "cdouble",
    "complex64",
    "complex128",
    "complex_",
    "csingle",
    "double",
    "float8_e4m3b11fnuz",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float16",
    "float32",
    "float64",
    "float_",
    "int4",
    "int8",
    "int16",
    "int32",
    "int64",
    "int_",
    "single",
    "uint",
    "uint4",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]
__all__ += list(_optional)
