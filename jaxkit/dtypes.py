"""JAX's dtype system: the dtypes, x64 canonicalisation, weak types and type promotion.

Everything here reproduces JAX 0.10.2 (``jax._src.dtypes``) without importing ``jax``.

* **Dtypes.** NumPy's, plus the ML types from ``ml_dtypes`` (``bfloat16``, the float8/6/4
  types, ``int4`` ...), plus ``float0``, the empty dtype JAX gives the tangents of integer and
  boolean values.
* **Canonicalisation.** With ``jax_enable_x64`` off, 64-bit dtypes stand for their 32-bit
  counterparts (:func:`canonicalize_dtype`).
* **Weak types.** Python ``int``/``float``/``complex`` scalars are *weakly typed*: they take
  the dtype of what they are combined with (``int8_array + 1`` is int8), and their own dtype is
  the default one (int32/float32/complex64 without x64). ``bool`` is never weak.
* **Promotion.** :func:`result_type` and :func:`promote_types` find the least upper bound on
  JAX's type-promotion lattice, in which the weak types are nodes ``i*``, ``f*``, ``c*`` of
  their own (https://docs.jax.dev/en/latest/type_promotion.html).
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from jaxkit._config import config
from jaxkit._dtypes_explicit import is_explicit_specifier, truncate_request
from jaxkit._dtypes_extended import ExtendedDType, extended, float0, prng_key  # noqa: F401

DType = np.dtype
DTypeLike = Any  # a dtype, scalar type, dtype name, or anything with a ``.dtype``

# --------------------------------------------------------------------------------------------
# Scalar types and dtypes
# --------------------------------------------------------------------------------------------

bool_ = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
bfloat16: type[np.generic] = ml_dtypes.bfloat16

# The ML types. float8_e4m3fn/e5m2, int4/uint4 have been in ml_dtypes for years; the others
# came with ml_dtypes 0.5 or later, so they are None where the installed version lacks them.
float8_e4m3fn: type[np.generic] = ml_dtypes.float8_e4m3fn
float8_e5m2: type[np.generic] = ml_dtypes.float8_e5m2
float8_e4m3fnuz: type[np.generic] = ml_dtypes.float8_e4m3fnuz
float8_e5m2fnuz: type[np.generic] = ml_dtypes.float8_e5m2fnuz
float8_e4m3b11fnuz: type[np.generic] = ml_dtypes.float8_e4m3b11fnuz
int4: type[np.generic] = ml_dtypes.int4
uint4: type[np.generic] = ml_dtypes.uint4
float8_e3m4: type[np.generic] | None = getattr(ml_dtypes, "float8_e3m4", None)
float8_e4m3: type[np.generic] | None = getattr(ml_dtypes, "float8_e4m3", None)
float8_e8m0fnu: type[np.generic] | None = getattr(ml_dtypes, "float8_e8m0fnu", None)
float6_e2m3fn: type[np.generic] | None = getattr(ml_dtypes, "float6_e2m3fn", None)
float6_e3m2fn: type[np.generic] | None = getattr(ml_dtypes, "float6_e3m2fn", None)
float4_e2m1fn: type[np.generic] | None = getattr(ml_dtypes, "float4_e2m1fn", None)
int2: type[np.generic] | None = getattr(ml_dtypes, "int2", None)
uint2: type[np.generic] | None = getattr(ml_dtypes, "uint2", None)
int1: type[np.generic] | None = getattr(ml_dtypes, "int1", None)
uint1: type[np.generic] | None = getattr(ml_dtypes, "uint1", None)

# In JAX's order (which decides the order of the category tuples below).
_CUSTOM_FLOAT_NAMES = (
    "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4", "float8_e4m3",
    "float8_e8m0fnu", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
    "float8_e5m2fnuz", "bfloat16",
)
_custom_float_scalar_types: tuple[type, ...] = tuple(
    getattr(ml_dtypes, n) for n in _CUSTOM_FLOAT_NAMES if hasattr(ml_dtypes, n))
_custom_float_dtypes = frozenset(np.dtype(t) for t in _custom_float_scalar_types)
_float8_dtypes = frozenset(d for d in _custom_float_dtypes if d.name.startswith("float8"))
_sub_byte_float_dtypes = frozenset(d for d in _custom_float_dtypes
                                   if d.name.startswith(("float4", "float6")))
_sint_n_scalar_types = tuple(getattr(ml_dtypes, n) for n in ("int1", "int2", "int4")
                             if hasattr(ml_dtypes, n))
_uint_n_scalar_types = tuple(getattr(ml_dtypes, n) for n in ("uint1", "uint2", "uint4")
                             if hasattr(ml_dtypes, n))
_intn_dtypes = frozenset(np.dtype(t) for t in _sint_n_scalar_types + _uint_n_scalar_types)

_BOOL = np.dtype(bool)
_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)
_U32, _U64 = np.dtype(np.uint32), np.dtype(np.uint64)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_C64, _C128 = np.dtype(np.complex64), np.dtype(np.complex128)

# Categories, each in JAX's lattice order. ``int_types`` holds signed *and* unsigned integers
# (as JAX's ``_int_types``); ``sint_types``/``uint_types`` split them.
bool_types: tuple[np.dtype, ...] = (_BOOL,)
uint_types: tuple[np.dtype, ...] = (
    *(np.dtype(t) for t in _uint_n_scalar_types),
    *map(np.dtype, (np.uint8, np.uint16, np.uint32, np.uint64)))
sint_types: tuple[np.dtype, ...] = (
    *(np.dtype(t) for t in _sint_n_scalar_types),
    *map(np.dtype, (np.int8, np.int16, np.int32, np.int64)))
int_types = uint_types + sint_types
float_types: tuple[np.dtype, ...] = (
    *(np.dtype(t) for t in _custom_float_scalar_types),
    *map(np.dtype, (np.float16, np.float32, np.float64)))
complex_types: tuple[np.dtype, ...] = (_C64, _C128)
inexact_types = float_types + complex_types
numeric_types = int_types + inexact_types
all_types = bool_types + numeric_types  # every dtype that takes part in promotion

# What dtype() accepts: the promotable dtypes plus float0.
_valid_dtypes = frozenset((*all_types, float0))


def extra_scalar_types() -> tuple[type, ...]:
    """The ml_dtypes scalar types, which are missing from ``np.sctypeDict``."""
    return _custom_float_scalar_types + _sint_n_scalar_types + _uint_n_scalar_types


class TypePromotionError(ValueError):
    """Raised when the inputs of a promotion have no common type."""


# --------------------------------------------------------------------------------------------
# Canonicalisation and default dtypes
# --------------------------------------------------------------------------------------------

_TO_32BIT = {_I64: _I32, _U64: _U32, _F64: _F32, _C128: _C64}
_SAME_UNDER_X64 = _valid_dtypes - set(_TO_32BIT)  # canonical whatever jax_enable_x64 says

# (dtype-like, x64) -> canonical dtype. Only dtypes, types and names are used as keys, so that
# the cache cannot keep arbitrary objects alive.
_canonical_cache: dict[tuple[Any, bool], np.dtype] = {}


def _canonicalize(dtype: Any, x64: bool) -> np.dtype:
    if isinstance(dtype, ExtendedDType):  # key<fry> is its own canonical form
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"dtype {dtype!r} not understood") from e
    return dt if x64 else _TO_32BIT.get(dt, dt)


def canonicalize_dtype(dtype: DTypeLike) -> np.dtype:
    """The dtype jaxkit uses for ``dtype``: 64-bit types become 32-bit ones unless x64 is on."""
    # Hot path (every operation): one dict lookup.
    x64 = config.x64
    try:
        return _canonical_cache[dtype, x64]
    except (KeyError, TypeError):  # TypeError: unhashable
        pass
    out = _canonicalize(dtype, x64)
    if isinstance(dtype, (np.dtype, type, str)):
        _canonical_cache[dtype, x64] = out
    return out


def default_int_dtype() -> np.dtype:
    """The dtype of Python ints: int64 with x64, else int32."""
    return _I64 if config.x64 else _I32


def default_uint_dtype() -> np.dtype:
    """The default unsigned dtype: uint64 with x64, else uint32."""
    return _U64 if config.x64 else _U32


def default_float_dtype() -> np.dtype:
    """The dtype of Python floats: float64 with x64, else float32."""
    return _F64 if config.x64 else _F32


def default_complex_dtype() -> np.dtype:
    """The dtype of Python complex numbers: complex128 with x64, else complex64."""
    return _C128 if config.x64 else _C64


def check_and_canonicalize_user_dtype(dtype: DTypeLike, fun_name: str | None = None) -> np.dtype:
    """A public function's ``dtype=``, canonicalised. With x64 off a 64-bit dtype warns as JAX
    does (naming ``fun_name``), or raises if ``jax_explicit_x64_dtypes='error'``. jaxkit's own
    64-bit requests use :func:`canonicalize_dtype`, which never warns."""
    if dtype is None:
        raise ValueError("dtype must be specified.")
    if hasattr(dtype, "aval"):  # a jaxkit array or tracer
        raise ValueError("Passing an array as a dtype argument is no longer supported; "
                         "instead of dtype=arr use dtype=arr.dtype.")
    if dtype in _SAME_UNDER_X64 or isinstance(dtype, ExtendedDType):  # float32, bool...: as is
        return dtype
    if isinstance(dtype, type) and dtype in python_scalar_dtypes:
        return python_scalar_dtype(dtype)
    requested = np.dtype(dtype)
    if requested not in _valid_dtypes:
        raise TypeError(f"JAX only supports number, bool, and string dtypes, got dtype {dtype}"
                        + (f" in {fun_name}" if fun_name else ""))
    if (out := canonicalize_dtype(requested)) == requested:
        return out
    return truncate_request(requested, out, fun_name)


#: The Python scalar types' (uncanonicalised) dtypes, as JAX's ``python_scalar_types_to_dtypes``.
python_scalar_dtypes: dict[type, np.dtype] = {bool: _BOOL, int: _I64, float: _F64,
                                              complex: _C128}
_WEAK_SCALAR_TYPES = (int, float, complex)  # the lattice nodes i*, f*, c*


_PY_DEFAULTS: dict[tuple[type, bool], np.dtype] = {
    (t, x64): (d if x64 else _TO_32BIT.get(d, d))
    for t, d in python_scalar_dtypes.items() for x64 in (False, True)}


def python_scalar_dtype(typ: type) -> np.dtype:
    """The canonical dtype of Python scalars of type ``typ`` (bool, int, float, complex)."""
    return _PY_DEFAULTS[typ, config.x64]


def is_python_scalar(x: Any) -> bool:
    """True for Python ``bool``, ``int``, ``float`` and ``complex`` values."""
    return type(x) in python_scalar_dtypes


_DEFAULT_TYPE_NAMES = {"int_": (np.int64, np.int32), "uint": (np.uint64, np.uint32),
                       "float_": (np.float64, np.float32),
                       "complex_": (np.complex128, np.complex64)}


def __getattr__(name: str) -> Any:
    # ``dtypes.int_``, ``dtypes.uint``, ``dtypes.float_``, ``dtypes.complex_``: the default scalar
    # type for the *current* x64 setting (a module attribute would freeze it at import time).
    if name in _DEFAULT_TYPE_NAMES:
        wide, narrow = _DEFAULT_TYPE_NAMES[name]
        return wide if config.x64 else narrow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------------------------
# Categories
# --------------------------------------------------------------------------------------------

_ALWAYS_ABOVE = frozenset({np.number, np.generic})
_issubdtype_cache: dict[tuple[Any, Any], bool] = {}


def _scalar_type(x: type | np.dtype) -> type:
    return x if isinstance(x, type) and issubclass(x, np.generic) else np.dtype(x).type


def itemsize_bits(dtype: DTypeLike) -> int:
    """The number of bits of one element of ``dtype`` (4 for int4, 8 for bool)."""
    dt = np.dtype(dtype)
    bits = getattr(dt, "itemsize_bits", None)  # ml_dtypes' sub-byte types say it themselves
    if bits is None:
        name = dt.name
        bits = 4 if name in ("int4", "uint4", "float4_e2m1fn") else \
            2 if name in ("int2", "uint2") else dt.itemsize * 8
    return int(bits)


def scalar_type_of(x: Any) -> type:
    """The Python scalar type (bool, int, float or complex) of the values of ``x``."""
    dt = dtype(x)
    if dt == np.bool_:
        return bool
    if np.issubdtype(dt, np.integer):
        return int
    if np.issubdtype(dt, np.complexfloating):
        return complex
    if issubdtype(dt, np.floating):
        return float
    raise TypeError(f"Invalid scalar value {x}")
def is_extended(dtype: Any) -> bool:
    """Whether ``dtype`` is an extended (non-NumPy) dtype such as ``key<fry>``."""
    return isinstance(dtype, ExtendedDType)


def _extended_type(x) -> type | None:
    t = getattr(x, "type", None) if not isinstance(x, (type, np.dtype, str)) else None
    return t if isinstance(t, type) and issubclass(t, extended) else None


def issubdtype(a: DTypeLike, b: DTypeLike) -> bool:
    """``np.issubdtype`` that also places the ml_dtypes types in NumPy's hierarchy.

    The bfloat16/float8 scalar types derive from ``np.generic`` only, so NumPy says bfloat16 is
    not floating. Here (as in JAX) they are floating, and int4 & co. are (un)signed integers.
    Typed keys' dtypes are under ``prng_key`` and ``extended`` (and ``np.generic``) only.
    """
    a_ext, b_ext = _extended_type(a), _extended_type(b)
    if a_ext is not None or b_ext is not None:
        if a_ext is None:
            return False
        return a == b if b_ext is not None else (isinstance(b, type) and issubclass(a_ext, b))
    a = a if isinstance(a, (type, np.dtype)) else np.dtype(a)
    b = b if isinstance(b, (type, np.dtype)) else np.dtype(b)
    try:
        return _issubdtype_cache[a, b]
    except KeyError:
        pass
    a_t, b_t = _scalar_type(a), _scalar_type(b)
    if a_t in _custom_float_scalar_types:
        out = b_t is a_t or b_t in (np.floating, np.inexact) or b_t in _ALWAYS_ABOVE
    elif a_t in _sint_n_scalar_types:
        out = b_t is a_t or b_t in (np.signedinteger, np.integer) or b_t in _ALWAYS_ABOVE
    elif a_t in _uint_n_scalar_types:
        out = b_t is a_t or b_t in (np.unsignedinteger, np.integer) or b_t in _ALWAYS_ABOVE
    else:
        out = bool(np.issubdtype(a_t, b_t))
    _issubdtype_cache[a, b] = out
    return out


_DTYPE_KINDS: dict[str, frozenset[np.dtype]] = {
    "bool": frozenset(bool_types),
    "signed integer": frozenset(sint_types),
    "unsigned integer": frozenset(uint_types),
    "integral": frozenset(int_types),
    "real floating": frozenset(float_types),
    "complex floating": frozenset(complex_types),
    "numeric": frozenset(numeric_types),
}


def isdtype(dtype: DTypeLike, kind: str | DTypeLike | tuple[str | DTypeLike, ...]) -> bool:
    """Array-API ``isdtype``: is ``dtype`` of ``kind`` (a kind name, a dtype, or a tuple)?

    Kind names: ``'bool'``, ``'signed integer'``, ``'unsigned integer'``, ``'integral'``,
    ``'real floating'`` (includes bfloat16 and the float8 types), ``'complex floating'``,
    ``'numeric'``.
    """
    the_dtype = np.dtype(dtype)
    options: set[np.dtype] = set()
    for k in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(k, str) and k in _DTYPE_KINDS:
            options.update(_DTYPE_KINDS[k])
            continue
        try:
            options.add(np.dtype(k))
        except TypeError as e:
            if not isinstance(k, str):
                raise TypeError(f"Expected kind to be a dtype, string, or tuple; got kind={k!r}"
                                ) from e
            # An unknown kind name is a ValueError, as in JAX.
            raise ValueError(f"Unrecognized kind={k!r} expected one of {list(_DTYPE_KINDS)}, "
                             "or a compatible input for jnp.dtype()") from e
    return the_dtype in options


def _as_dtype_arg(x: Any) -> Any:
    # Arrays and tracers stand for their dtype. Passing them on would be wrong, not just slow:
    # ml_dtypes.finfo compares its argument with ``==``, which on an array is elementwise.
    if isinstance(x, (type, np.dtype, str)) or x is None:
        return x
    dt = getattr(x, "dtype", None)
    return dt if isinstance(dt, np.dtype) else x


def can_cast(from_: Any, to: DTypeLike, casting: str = "safe") -> bool:
    """``np.can_cast`` (which is what ``jnp.can_cast`` is); it knows the ml_dtypes casts."""
    return bool(np.can_cast(_as_dtype_arg(from_), _as_dtype_arg(to), casting))


def finfo(dtype: DTypeLike) -> Any:
    """Machine limits of a floating (or complex) dtype, bfloat16 and float8 included."""
    return ml_dtypes.finfo(_as_dtype_arg(dtype))


def iinfo(dtype: DTypeLike) -> Any:
    """Machine limits of an integer dtype, int4 and friends included."""
    return ml_dtypes.iinfo(_as_dtype_arg(dtype))


_NO_INF_FLOATS = frozenset(np.dtype(getattr(ml_dtypes, n)) for n in (
    "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(ml_dtypes, n))


def supports_inf(dtype: DTypeLike) -> bool:
    """Whether ``dtype`` has infinities: inexact, and not one of the finite-only float8 types.

    (JAX's list, which also leaves out the float4/float6/e8m0 types that lack infinities.)
    """
    return np.dtype(dtype) not in _NO_INF_FLOATS and issubdtype(dtype, np.inexact)


def tangent_dtype(dtype: DTypeLike) -> np.dtype:
    """The dtype of tangents (and cotangents) of values of ``dtype``: itself if inexact,
    else ``float0`` (integers, booleans and keys are not differentiable); an extended dtype's
    own rule."""
    if isinstance(dtype, ExtendedDType):  # a method, or a field (primal_tangent_dtype's)
        return dtype.tangent_dtype() if callable(dtype.tangent_dtype) else dtype.tangent_dtype
    dt = np.dtype(dtype)
    return dt if issubdtype(dt, np.inexact) else float0


_TO_INEXACT = {np.dtype(k): np.dtype(v) for k, v in (
    ("bool", "float32"), ("uint8", "float32"), ("int8", "float32"), ("uint16", "float32"),
    ("int16", "float32"), ("uint32", "float32"), ("int32", "float32"), ("uint64", "float64"),
    ("int64", "float64"))}
for _t in _intn_dtypes:
    _TO_INEXACT[_t] = _F32


def to_inexact_dtype(dtype: DTypeLike) -> np.dtype:
    """The dtype that integer/bool inputs of ``jnp.mean`` & co. are promoted to (as JAX)."""
    dt = np.dtype(dtype)
    return _TO_INEXACT.get(dt, dt)


def to_complex_dtype(dtype: DTypeLike) -> np.dtype:
    """The complex dtype wide enough for ``dtype``: complex128 for 64-bit, else complex64."""
    return _C128 if to_inexact_dtype(dtype) in (_F64, _C128) else _C64


def to_numeric_dtype(dtype: DTypeLike) -> np.dtype:
    """``dtype``, except bool becomes int32 (as JAX's ``jnp.sum`` of booleans)."""
    dt = np.dtype(dtype)
    return _I32 if dt == _BOOL else dt


_short_names: dict[np.dtype, str] = {float0: "float0"}


def dtype_name(dtype: np.dtype) -> str:
    """The dtype's long name as types print it (``float0``, which NumPy calls ``void``)."""
    return "float0" if dtype == float0 else dtype.name


def short_dtype_name(dtype: DTypeLike) -> str:
    """The dtype's name as jaxprs print it: ``f32``, ``bf16``, ``u8``, ``c64``, ``bool``,
    ``f8_e4m3fn``, ``float0``, ``key<fry>``."""
    if isinstance(dtype, ExtendedDType):
        return dtype.name
    dt = np.dtype(dtype)
    name = _short_names.get(dt)
    if name is None:
        name = _short_names[dt] = (dt.name.replace("float", "f").replace("uint", "u")
                                   .replace("int", "i").replace("complex", "c"))
    return name


# --------------------------------------------------------------------------------------------
# The dtype of a value, and weak types
# --------------------------------------------------------------------------------------------

def is_weakly_typed(x: Any) -> bool:
    """True for Python int/float/complex values and for weakly typed arrays and tracers.

    Arrays say so through ``x.aval.weak_type`` (jaxkit arrays and tracers) or ``x.weak_type``
    (abstract values).
    """
    t = type(x)
    if t is int or t is float or t is complex:
        return True
    if isinstance(x, type):
        return False
    aval = getattr(x, "aval", None)
    if aval is not None:
        return bool(getattr(aval, "weak_type", False))
    return bool(getattr(x, "weak_type", False))


def dtype(x: Any, canonicalize: bool = False) -> np.dtype:
    """The dtype of a value, scalar type or dtype name.

    Python scalars and their types map to the default dtypes (``int`` -> int32 without x64).
    Arrays and tracers (anything with an ``aval``) give their dtype as is: a 64-bit array made
    while x64 was on stays 64-bit, as in JAX. Other inputs (NumPy arrays and scalars, dtypes,
    names) are canonicalised only if ``canonicalize`` is true.
    """
    if x is None:
        raise ValueError(f"Invalid argument to dtype: {x}.")
    t = type(x)
    if t in python_scalar_dtypes:
        return python_scalar_dtype(t)
    if isinstance(x, type):
        if x in python_scalar_dtypes:
            return python_scalar_dtype(x)
        if issubclass(x, np.generic):
            dt = np.dtype(x)
        else:  # e.g. a jnp scalar-type object with a ``dtype`` class attribute
            dt = _dtype_of_object(x)
    elif isinstance(x, (str, np.dtype)):
        dt = np.dtype(x)
    else:
        aval = getattr(x, "aval", None)
        if aval is not None:
            return aval.dtype
        dt = _dtype_of_object(x)
    if dt not in _valid_dtypes:
        raise TypeError(f"Value '{x}' with dtype {dt} is not a valid JAX array type. Only "
                        "arrays of numeric types are supported by JAX.")
    return canonicalize_dtype(dt) if canonicalize else dt


def _dtype_of_object(x: Any) -> np.dtype:
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    try:  # lists, tuples, objects with __array__
        return np.result_type(x)
    except TypeError as err:
        if isinstance(x, (list, tuple)):
            raise TypeError(f"Cannot determine dtype of {x}") from err
    try:  # arbitrary objects: NumPy's object dtype, which the caller rejects as JAX does
        return np.asarray(x).dtype
    except (TypeError, ValueError) as err:
        raise TypeError(f"Cannot determine dtype of {x}") from err


# --------------------------------------------------------------------------------------------
# Type promotion
# --------------------------------------------------------------------------------------------

def _type_promotion_lattice(x64: bool) -> dict[Any, list[Any]]:
    """JAX's promotion lattice as a DAG: each node maps to the nodes immediately above it.

    Nodes are dtypes and the Python types ``int``, ``float``, ``complex`` standing for the weak
    types i*, f*, c*. Everything not listed as above a node is unrelated to it.
    """
    u8, u16, u32, u64 = map(np.dtype, (np.uint8, np.uint16, np.uint32, np.uint64))
    i8, i16, i32, i64 = map(np.dtype, (np.int8, np.int16, np.int32, np.int64))
    bf16, f16, f32, f64 = map(np.dtype, (bfloat16, np.float16, np.float32, np.float64))
    small_floats = [d for d in float_types if d not in (bf16, f16, f32, f64)]
    intn = [np.dtype(t) for t in _sint_n_scalar_types + _uint_n_scalar_types]
    i_, f_, c_ = _WEAK_SCALAR_TYPES
    lattice: dict[Any, list[Any]] = {
        _BOOL: [i_],
        # Weak int is below every integer: int8 + 1 stays int8. Sub-byte ints and the float8
        # types sit directly above a weak type and below nothing: they never promote implicitly.
        i_: [u8, i8, *intn],
        u8: [i16, u16], u16: [i32, u32], u32: [i64, u64], u64: [f_],
        i8: [i16], i16: [i32], i32: [i64], i64: [f_],
        # Above every integer is weak float, so int8 + 1.0 gives a *weak* float.
        f_: [*small_floats, bf16, f16, c_],
        bf16: [f32], f16: [f32], f32: [f64, _C64], f64: [_C128],
        c_: [_C64], _C64: [_C128], _C128: [],
        **{t: [] for t in (*intn, *small_floats)},
    }
    if not x64:
        # Without x64, no promotion may form a 64-bit type from narrower inputs. The only such
        # edge is uint32 x int32 -> int64, so there uint32 gets int32 as an upper bound instead.
        lattice[u32] = [i32, u64]
    return lattice


def _upper_bounds(x64: bool) -> dict[Any, frozenset[Any]]:
    """The transitive closure of the lattice: node -> every node at or above it."""
    lattice = _type_promotion_lattice(x64)
    ubs: dict[Any, frozenset[Any]] = {}

    def visit(node: Any) -> frozenset[Any]:
        if node not in ubs:
            ubs[node] = frozenset({node}).union(*(visit(n) for n in lattice[node]))
        return ubs[node]

    for node in lattice:
        visit(node)
    return ubs


_UPPER_BOUNDS = {False: _upper_bounds(False), True: _upper_bounds(True)}
_lub_cache: dict[tuple[bool, frozenset[Any]], Any] = {}


def _least_upper_bound(x64: bool, nodes: frozenset[Any]) -> Any:
    """The least upper bound of lattice nodes: the common upper bound below all the others."""
    key = (x64, nodes)
    out = _lub_cache.get(key)
    if out is not None:
        return out
    ub = _UPPER_BOUNDS[x64]
    for n in nodes:
        if n not in ub:
            raise ValueError(f"dtype={n} is not a valid dtype for JAX type promotion.")
    common = frozenset.intersection(*(ub[n] for n in nodes))
    # Shortcut: an input that bounds all the others is the answer.
    lub = (common & nodes) or {c for c in common if common <= ub[c]}
    if len(lub) != 1:
        raise TypePromotionError(_no_promotion_message(nodes) if not lub else
                                 f"Internal type promotion error: {nodes} have no unique least "
                                 f"upper bound; options are {lub}.")
    out = _lub_cache[key] = next(iter(lub))
    return out


def _no_promotion_message(nodes: frozenset[Any]) -> str:
    names = tuple(str(n) for n in nodes)
    head = f"Input dtypes {names} have no available implicit dtype promotion path."
    tail = " If you'd like your inputs to be promoted to another type, you can do so " \
           "explicitly using e.g. x.astype('{}')"
    for group, what, to in ((_float8_dtypes, "8-bit floats", "float32"),
                            (_sub_byte_float_dtypes, "4-bit and 6-bit floats", "float32"),
                            (_intn_dtypes, "1-bit, 2-bit and 4-bit integers", "int32")):
        if any(n in group for n in nodes):
            return (f"{head} To avoid unintended promotion, {what} do not support implicit "
                    f"promotion.{tail.format(to)}")
    return f"{head} Try explicitly casting inputs to the desired output type."


def _node(dt: np.dtype, weak: bool) -> Any:
    """The lattice node of a (dtype, weak) pair: a weak value is i*, f* or c* by kind."""
    if not weak or dt == _BOOL:
        return dt
    if dt in _custom_float_dtypes or dt.kind == "f":
        return float
    if dt.kind == "c":
        return complex
    if dt.kind in "iu" or dt in _intn_dtypes:
        return int
    return dt


def _node_dtype(node: Any) -> np.dtype:
    """The canonical dtype of a lattice node (weak nodes give the default dtypes)."""
    if isinstance(node, np.dtype):
        return canonicalize_dtype(node)
    return python_scalar_dtype(node)


# Types whose instances carry an ``aval`` (jaxkit arrays, tracers), learnt on first sight so
# that later calls skip the generic path.
_aval_types: set[type] = set()
_dtype_like_cache: dict[tuple[Any, bool], tuple] = {}  # -> ((dtype, weak), request, key)


def _dtype_and_weak(x: Any) -> tuple[np.dtype, bool]:
    """(dtype, weak_type) of a promotion input; NumPy inputs are canonicalised (as JAX)."""
    t = type(x)
    if t in _aval_types:
        aval = x.aval
        return aval.dtype, aval.weak_type
    if t is int or t is float or t is complex:
        return _PY_DEFAULTS[t, config.x64], True
    if x is None:  # result_type's stand-in for the default float dtype
        return default_float_dtype(), False
    if isinstance(x, (type, np.dtype, str)):  # dtype-likes: cached, they recur constantly
        key = (x, config.x64)
        out = _dtype_like_cache.get(key)
        # (jnp.float64 == np.float64: an entry is the object's own, told by identity)
        if out is None or out[2] is not x:
            # The Python types themselves count as weak: result_type(int8, int) is int8.
            dt = dtype(x, canonicalize=True)
            # A 64-bit dtype given as such (not int or jnp.float64) is truncated with JAX's
            # warning, as its dtype() does: on every call, so it is remembered here.
            request = (np.dtype(x) if is_explicit_specifier(x) and np.dtype(x) != dt
                       else None)
            out = _dtype_like_cache[key] = ((dt, any(x is w for w in _WEAK_SCALAR_TYPES)),
                                            request, x)
        if out[1] is not None:
            truncate_request(out[1], out[0][0], "dtype")
        return out[0]
    aval = getattr(x, "aval", None)
    if aval is not None:
        # Arrays and tracers: their dtype is not re-canonicalised (an int64 array made under
        # x64 stays int64), as JAX does for its Arrays.
        _aval_types.add(t)
        return aval.dtype, aval.weak_type
    return dtype(x, canonicalize=True), bool(getattr(x, "weak_type", False))


# (x64, (dtype, weak), ...) -> (dtype, weak): the final answer of result_type.
_result_cache: dict[tuple[Any, ...], tuple[np.dtype, bool, np.dtype]] = {}
_RESULT_CACHE_MAX = 4096  # long argument lists (concatenate) could otherwise grow it forever


def _lattice_result_type(x64: bool, pairs: tuple[tuple[np.dtype, bool], ...]
                         ) -> tuple[np.dtype, bool]:
    """JAX's ``lattice_result_type``: the promoted dtype and whether it is weak."""
    dts = {d for d, _ in pairs}
    all_weak = all(w for _, w in pairs)
    if len(pairs) == 1:
        dt, weak = pairs[0]
    elif len(dts) == 1 and not all_weak:
        # Same dtype everywhere: no lattice needed (this also lets float0 through).
        dt, weak = pairs[0][0], False
    elif all_weak:
        # All weak: promote the strong counterparts and make the result weak. Going through
        # the weak nodes instead would lose widths (weak int16 + weak int16 is not i*).
        dt, weak = _node_dtype(_least_upper_bound(x64, frozenset(dts))), True
    else:
        node = _least_upper_bound(x64, frozenset(_node(d, w) for d, w in pairs))
        # Identity, not ==: np.dtype("int64") == int is True.
        dt, weak = _node_dtype(node), any(node is t for t in _WEAK_SCALAR_TYPES)
    return dt, bool(weak) and dt != _BOOL


def result_type(*args: Any, return_weak_type_flag: bool = False) -> Any:
    """The dtype of the result of an operation on ``args``, by JAX's promotion rules.

    ``args`` may be arrays, tracers, Python or NumPy scalars, dtypes, scalar types or dtype
    names; ``None`` stands for the default float dtype. The result is canonical for the x64
    setting. A weak result (every input weak, or a strong input that is absorbed by a weak
    node, e.g. ``int8 + 1.0``) has the default dtype of its kind. With
    ``return_weak_type_flag=True`` returns ``(dtype, weak_type)``.
    """
    out = _promoted(args)
    return out[:2] if return_weak_type_flag else out[0]


def lattice_result_type(*args: Any) -> tuple[np.dtype, bool]:
    """``(dtype, weak_type)`` as jnp's functions promote their operands (JAX's
    ``lattice_result_type``): as ``result_type``, but a weak result keeps the width of its
    inputs (a weak float32 made without x64 stays float32 once x64 is on)."""
    out = _promoted(args)
    return out[2], out[1]


def _promoted(args: tuple) -> tuple[np.dtype, bool, np.dtype]:
    """(result_type's dtype, weak, lattice_result_type's dtype), cached."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    # Hot path (every binary operation): extract (dtype, weak) pairs, then one dict lookup.
    x64 = config.x64
    if len(args) == 2:  # unrolled: the common binary case, ~40% faster than map + unpack
        key = (x64, _dtype_and_weak(args[0]), _dtype_and_weak(args[1]))
    else:
        key = (x64, *map(_dtype_and_weak, args))
    out = _result_cache.get(key)
    if out is None:
        dt, weak = _lattice_result_type(x64, key[1:])
        if len(_result_cache) >= _RESULT_CACHE_MAX:
            _result_cache.clear()
        out = _result_cache[key] = (_weak_default(dt) if weak else dt, weak, dt)
    return out


def _weak_default(dt: np.dtype) -> np.dtype:
    if dt.kind == "f" or dt in _custom_float_dtypes:
        return default_float_dtype()
    if dt.kind == "c":
        return default_complex_dtype()
    if dt.kind == "u" or dt in uint_types:
        return default_uint_dtype()
    if dt.kind == "i" or dt in sint_types:
        return default_int_dtype()
    return dt


def promote_types(a: DTypeLike, b: DTypeLike) -> np.dtype:
    """``jnp.promote_types``: the least upper bound of two dtypes on JAX's lattice.

    Inputs are not canonicalised and neither is the result. The Python types ``int``,
    ``float`` and ``complex`` are the weak nodes, so ``promote_types('uint8', int)`` is uint8.
    """
    a_n = a if any(a is t for t in _WEAK_SCALAR_TYPES) else np.dtype(a)
    b_n = b if any(b is t for t in _WEAK_SCALAR_TYPES) else np.dtype(b)
    return np.dtype(_least_upper_bound(config.x64, frozenset((a_n, b_n))))


def safe_to_cast(from_: Any, to: Any) -> bool:
    """Whether promoting ``from_`` with the (strong) dtype of ``to`` gives that dtype."""
    to_dtype = dtype(to, canonicalize=True)
    if dtype(from_, canonicalize=True) == to_dtype:
        return True
    return result_type(from_, to_dtype) == to_dtype
