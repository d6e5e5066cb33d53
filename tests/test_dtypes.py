"""Dtypes and config: promotion, canonicalisation, categories, finfo/iinfo, the config object.

Two kinds of tests. Oracle-free ones check hard-coded expectations (JAX 0.10.2's documented
promotion table, copied below) and run without ``jax``. Oracle tests compare every pair of
dtypes with ``jax`` itself, configured the same way; they skip when jax is not installed.
"""
import itertools
import os
import subprocess
import sys
import types
import warnings

import ml_dtypes
import numpy as np
import pytest

from jaxkit import dtypes
from jaxkit._config import Config, config

# ---- the dtypes under test ----------------------------------------------------------------

# Short name (as in JAX's promotion table; weak types are i*, f*, c*) -> scalar type.
TYPES = {
    "b": np.bool_, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
    "i*": int, "f*": float, "c*": complex,
}
STRONG = [n for n in TYPES if not n.endswith("*")]
ML_TYPES = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4, ml_dtypes.uint4]
ALL_DTYPES = [np.dtype(TYPES[n]) for n in STRONG] + [np.dtype(t) for t in ML_TYPES]


def _short(dt: np.dtype, weak: bool) -> str:
    name = "b" if dt == np.bool_ else dtypes.short_dtype_name(dt)
    return name + ("*" if weak else "")


# JAX 0.10.2's jax.dtypes.result_type(row, column, return_weak_type_flag=True), written as
# short names with "*" for a weak result (this is the table in JAX's type promotion docs,
# for both x64 settings). Without x64, inputs are canonicalised *before* promotion, which is
# why u64 x i64 is i32 there but a weak f64 with x64.
RESULT_TABLE = {False: """
       b    u8   u16   u32   u64    i8   i16   i32   i64  bf16   f16   f32   f64   c64  c128    i*    f*    c*
  b    b    u8   u16   u32   u32    i8   i16   i32   i32  bf16   f16   f32   f32   c64   c64  i32*  f32*  c64*
 u8   u8    u8   u16   u32   u32   i16   i16   i32   i32  bf16   f16   f32   f32   c64   c64    u8  f32*  c64*
u16  u16   u16   u16   u32   u32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   u16  f32*  c64*
u32  u32   u32   u32   u32   u32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   u32  f32*  c64*
u64  u32   u32   u32   u32   u32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   u32  f32*  c64*
 i8   i8   i16   i32   i32   i32    i8   i16   i32   i32  bf16   f16   f32   f32   c64   c64    i8  f32*  c64*
i16  i16   i16   i32   i32   i32   i16   i16   i32   i32  bf16   f16   f32   f32   c64   c64   i16  f32*  c64*
i32  i32   i32   i32   i32   i32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   i32  f32*  c64*
i64  i32   i32   i32   i32   i32   i32   i32   i32   i32  bf16   f16   f32   f32   c64   c64   i32  f32*  c64*
bf16 bf16 bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f32   c64   c64  bf16  bf16   c64
f16  f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f32   c64   c64   f16   f16   c64
f32  f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   c64   c64   f32   f32   c64
f64  f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   c64   c64   f32   f32   c64
c64  c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64
c128 c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64
 i* i32*    u8   u16   u32   u32    i8   i16   i32   i32  bf16   f16   f32   f32   c64   c64  i32*  f32*  c64*
 f* f32*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  f32*  bf16   f16   f32   f32   c64   c64  f32*  f32*  c64*
 c* c64*  c64*  c64*  c64*  c64*  c64*  c64*  c64*  c64*   c64   c64   c64   c64   c64   c64  c64*  c64*  c64*
""", True: """
       b    u8   u16   u32   u64    i8   i16   i32   i64  bf16   f16   f32   f64   c64  c128    i*    f*    c*
  b    b    u8   u16   u32   u64    i8   i16   i32   i64  bf16   f16   f32   f64   c64  c128  i64*  f64* c128*
 u8   u8    u8   u16   u32   u64   i16   i16   i32   i64  bf16   f16   f32   f64   c64  c128    u8  f64* c128*
u16  u16   u16   u16   u32   u64   i32   i32   i32   i64  bf16   f16   f32   f64   c64  c128   u16  f64* c128*
u32  u32   u32   u32   u32   u64   i64   i64   i64   i64  bf16   f16   f32   f64   c64  c128   u32  f64* c128*
u64  u64   u64   u64   u64   u64  f64*  f64*  f64*  f64*  bf16   f16   f32   f64   c64  c128   u64  f64* c128*
 i8   i8   i16   i32   i64  f64*    i8   i16   i32   i64  bf16   f16   f32   f64   c64  c128    i8  f64* c128*
i16  i16   i16   i32   i64  f64*   i16   i16   i32   i64  bf16   f16   f32   f64   c64  c128   i16  f64* c128*
i32  i32   i32   i32   i64  f64*   i32   i32   i32   i64  bf16   f16   f32   f64   c64  c128   i32  f64* c128*
i64  i64   i64   i64   i64  f64*   i64   i64   i64   i64  bf16   f16   f32   f64   c64  c128   i64  f64* c128*
bf16 bf16 bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16  bf16   f32   f32   f64   c64  c128  bf16  bf16   c64
f16  f16   f16   f16   f16   f16   f16   f16   f16   f16   f32   f16   f32   f64   c64  c128   f16   f16   c64
f32  f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f32   f64   c64  c128   f32   f32   c64
f64  f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64   f64  c128  c128   f64   f64  c128
c64  c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64   c64  c128   c64  c128   c64   c64   c64
c128 c128 c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128  c128
 i* i64*    u8   u16   u32   u64    i8   i16   i32   i64  bf16   f16   f32   f64   c64  c128  i64*  f64* c128*
 f* f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  f64*  bf16   f16   f32   f64   c64  c128  f64*  f64* c128*
 c* c128* c128* c128* c128* c128* c128* c128* c128* c128*   c64   c64   c64  c128   c64  c128 c128* c128* c128*
"""}


def _parse_table(text: str) -> dict[tuple[str, str], str]:
    header, *rows = text.strip().splitlines()
    cols = header.split()
    out = {}
    for row in rows:
        name, *cells = row.split()
        assert len(cells) == len(cols)
        out.update({(name, c): cell for c, cell in zip(cols, cells)})
    return out


RESULTS = {x64: _parse_table(t) for x64, t in RESULT_TABLE.items()}


class FakeArray:
    """Stands in for a jaxkit Array/tracer: has ``dtype`` and ``aval.weak_type``."""

    def __init__(self, dtype, weak_type=False):
        self.aval = types.SimpleNamespace(shape=(), dtype=np.dtype(dtype), weak_type=weak_type)
        self.dtype = self.aval.dtype

    def __eq__(self, other):  # like an array: == must never be used to compare dtypes
        raise AssertionError("dtypes compared an array with ==")

    __hash__ = None


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request):
    with config.override(jax_enable_x64=request.param):
        yield request.param


@pytest.fixture
def jax_x64(x64):
    """The oracle, with jax_enable_x64 set like jaxkit's for the test, restored afterwards."""
    jax = pytest.importorskip("jax")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    with warnings.catch_warnings():
        # JAX warns when a 64-bit dtype is requested without x64; jaxkit truncates silently.
        warnings.simplefilter("ignore", UserWarning)
        yield jax
    jax.config.update("jax_enable_x64", old)


def _outcome(fn, *args):
    """A result, or the exception type name, so that errors are compared too."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        return "ValueError" if isinstance(e, ValueError) else type(e).__name__


# ---- result_type, oracle-free --------------------------------------------------------------


# The table names 64-bit types as a user would: without x64, JAX warns that they are truncated
# (tests/test_explicit_dtype_warnings.py checks that warning); here only the results matter.
@pytest.mark.filterwarnings("ignore:Explicitly requested dtype:UserWarning")
@pytest.mark.parametrize("a, b", list(itertools.product(TYPES, TYPES)))
def test_result_type_table(x64, a, b):
    got = dtypes.result_type(TYPES[a], TYPES[b], return_weak_type_flag=True)
    assert _short(*got) == RESULTS[x64][a, b]


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype:UserWarning")
@pytest.mark.parametrize("args, x64_, expected, weak", [
    ((np.uint8, np.int8), False, np.int16, False),
    ((np.int8, 1), False, np.int8, False),
    ((True, 1), False, np.int32, True),
    ((np.bool_, 1), True, np.int64, True),
    ((np.int8, 1.0), False, np.float32, True),       # int array + float scalar: weak float
    ((np.int8, 1.0), True, np.float64, True),
    ((np.float16, 1.0), True, np.float16, False),
    ((ml_dtypes.bfloat16, np.float16), False, np.float32, False),
    ((np.float32, 1), True, np.float32, False),
    ((np.uint64, np.int64), True, np.float64, True),  # weak f64, not strong
    ((np.uint64, np.int64), False, np.int32, False),  # canonicalised to u32, i32 first
    ((np.uint32, np.int32), False, np.int32, False),
    ((1, 2.0), False, np.float32, True),
    ((1, 2.0, 3j), True, np.complex128, True),
    ((None,), False, np.float32, False),
    ((None, 1), True, np.float64, False),
    (("float16", np.int8, 2), False, np.float16, False),
    ((np.float64(1.0), 1), False, np.float32, False),  # NumPy scalars are strong
    ((np.zeros(3, np.int64),), False, np.int32, False),
    ((int,), False, np.int32, True),                  # the type `int` is weak too
    ((np.int8, int), False, np.int8, False),
    ((bool,), False, np.bool_, False),
])
def test_result_type_cases(args, x64_, expected, weak):
    with config.override(jax_enable_x64=x64_):
        assert dtypes.result_type(*args, return_weak_type_flag=True) == (np.dtype(expected), weak)
        assert dtypes.result_type(*args) == np.dtype(expected)


def test_result_type_weak_arrays():
    with config.override(jax_enable_x64=False):
        weak_i16 = FakeArray(np.int16, weak_type=True)
        # Weak array with a strong one: it is the weak int node, and takes the other's dtype.
        assert dtypes.result_type(weak_i16, np.int8, return_weak_type_flag=True) == \
            (np.dtype(np.int8), False)
        # All weak: promote the underlying dtypes, then the default dtype of that kind.
        assert dtypes.result_type(weak_i16, FakeArray(np.int8, True), 1,
                                  return_weak_type_flag=True) == (np.dtype(np.int32), True)
        assert dtypes.result_type(FakeArray(ml_dtypes.bfloat16, True),
                                  return_weak_type_flag=True) == (np.dtype(np.float32), True)
        assert dtypes.result_type(FakeArray(np.float16), 1.0, return_weak_type_flag=True) == \
            (np.dtype(np.float16), False)
        # Arrays keep their dtype without x64 (as JAX Arrays): no canonicalisation of inputs.
        assert dtypes.result_type(FakeArray(np.int64)) == np.dtype(np.int64)
        # bool is never weak, even when an array claims to be.
        weak_bool = FakeArray(np.bool_, weak_type=True)
        assert dtypes.result_type(weak_bool, weak_bool, return_weak_type_flag=True) == \
            (np.dtype(np.bool_), False)
        # A bare abstract value (weak_type on the object itself) also counts.
        aval = types.SimpleNamespace(dtype=np.dtype(np.float32), weak_type=True)
        assert dtypes.result_type(aval, np.float16) == np.dtype(np.float16)


def test_result_type_errors():
    with pytest.raises(ValueError, match="at least one"):
        dtypes.result_type()
    with pytest.raises(dtypes.TypePromotionError, match="8-bit floats"):
        dtypes.result_type(ml_dtypes.float8_e4m3fn, np.float32)
    with pytest.raises(dtypes.TypePromotionError, match="4-bit integers"):
        dtypes.result_type(ml_dtypes.int4, np.int8)
    with pytest.raises(TypeError, match="not a valid JAX array type"):
        dtypes.result_type(np.dtype(object), np.int8)
    # Same dtype twice needs no lattice, so float8 with itself works.
    assert dtypes.result_type(ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn) == \
        np.dtype(ml_dtypes.float8_e4m3fn)
    assert dtypes.result_type(ml_dtypes.float8_e4m3fn, 1.0) == np.dtype(ml_dtypes.float8_e4m3fn)


def test_promote_types_cases():
    with config.override(jax_enable_x64=False):
        assert dtypes.promote_types(np.uint8, np.int8) == np.int16
        assert dtypes.promote_types("uint8", int) == np.uint8
        assert dtypes.promote_types("float16", float) == np.float16
        # Neither inputs nor outputs are canonicalised: weak nodes give 64-bit dtypes.
        assert dtypes.promote_types(int, int) == np.int64
        assert dtypes.promote_types(np.uint64, np.int64) == np.float64
        assert dtypes.promote_types(np.uint32, np.int32) == np.int32
    with config.override(jax_enable_x64=True):
        assert dtypes.promote_types(np.uint32, np.int32) == np.int64
        assert dtypes.promote_types(ml_dtypes.bfloat16, np.float16) == np.float32
    with pytest.raises(dtypes.TypePromotionError):
        dtypes.promote_types(ml_dtypes.float8_e5m2, np.float16)


# ---- result_type / promote_types vs the oracle ---------------------------------------------


@pytest.mark.parametrize("a, b", list(itertools.product(
    list(TYPES) + ["f8", "i4"], list(TYPES) + ["f8", "i4"])))
def test_result_type_vs_jax(jax_x64, a, b):
    extra = {"f8": ml_dtypes.float8_e4m3fn, "i4": ml_dtypes.int4}
    ta, tb = {**TYPES, **extra}[a], {**TYPES, **extra}[b]
    expected = _outcome(lambda: jax_x64.dtypes.result_type(ta, tb, return_weak_type_flag=True))
    assert _outcome(lambda: dtypes.result_type(ta, tb, return_weak_type_flag=True)) == expected
    assert _outcome(lambda: dtypes.result_type(ta, tb)) == \
        _outcome(lambda: jax_x64.numpy.result_type(ta, tb))


@pytest.mark.parametrize("a", STRONG)
@pytest.mark.parametrize("weak", [False, True])
def test_result_type_arrays_vs_jax(jax_x64, a, weak):
    """Arrays (weak or not) against every type, as the oracle sees real JAX arrays."""
    from jax._src.lax.lax import _convert_element_type  # oracle internals: weak arrays

    dt = np.dtype(TYPES[a])
    oracle_x = _convert_element_type(np.zeros((), dt), dt, weak_type=weak)
    if oracle_x.dtype != dt:  # a 64-bit dtype without x64: JAX truncates it
        pytest.skip("dtype not available without x64")
    ours_x = FakeArray(dt, weak)
    for b in TYPES.values():
        expected = jax_x64.dtypes.result_type(oracle_x, b, return_weak_type_flag=True)
        assert dtypes.result_type(ours_x, b, return_weak_type_flag=True) == expected, b
    for args in [(ours_x,), (ours_x, ours_x)]:  # alone, and all-weak with itself
        oracle_args = (oracle_x,) * len(args)
        assert dtypes.result_type(*args, return_weak_type_flag=True) == \
            jax_x64.dtypes.result_type(*oracle_args, return_weak_type_flag=True)


def _check_result_type(jax, args):
    expected = _outcome(lambda: jax.dtypes.result_type(*args, return_weak_type_flag=True))
    assert _outcome(lambda: dtypes.result_type(*args, return_weak_type_flag=True)) == expected, \
        args


def test_result_type_values_vs_jax(jax_x64):
    values = [True, 1, 1.0, 1j, np.int8(1), np.float64(1), np.zeros(2, np.int64),
              np.zeros(2, ml_dtypes.bfloat16), None, "float16", np.dtype("uint64"), [1, 2]]
    for args in itertools.chain(itertools.product(values, repeat=2), ((v,) for v in values)):
        _check_result_type(jax_x64, args)


def test_result_type_three_args_vs_jax(jax_x64):
    for args in itertools.product(TYPES.values(), repeat=3):
        _check_result_type(jax_x64, args)


@pytest.mark.parametrize("a, b", list(itertools.product(TYPES, TYPES)))
def test_promote_types_vs_jax(jax_x64, a, b):
    expected = _outcome(jax_x64.numpy.promote_types, TYPES[a], TYPES[b])
    assert _outcome(dtypes.promote_types, TYPES[a], TYPES[b]) == expected


def test_promote_types_ml_dtypes_vs_jax(jax_x64):
    for a, b in itertools.product(ALL_DTYPES, repeat=2):
        expected = _outcome(jax_x64.numpy.promote_types, a, b)
        assert _outcome(dtypes.promote_types, a, b) == expected, (a, b)


# ---- can_cast ------------------------------------------------------------------------------


def test_can_cast_cases():
    assert dtypes.can_cast(np.int8, np.int16)
    assert not dtypes.can_cast(np.int16, np.int8)
    assert dtypes.can_cast(ml_dtypes.bfloat16, np.float32)
    assert not dtypes.can_cast(np.float32, ml_dtypes.bfloat16)
    assert dtypes.can_cast(np.float32, ml_dtypes.bfloat16, casting="same_kind")
    assert not dtypes.can_cast(np.float32, np.int32, casting="same_kind")
    assert dtypes.can_cast(FakeArray(np.int8), np.float32)  # arrays stand for their dtype


@pytest.mark.parametrize("a", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("casting", ["no", "equiv", "safe", "same_kind", "unsafe"])
def test_can_cast_vs_jax(a, casting):
    jnp = pytest.importorskip("jax.numpy")
    for b in ALL_DTYPES:
        assert dtypes.can_cast(a, b, casting) == jnp.can_cast(a, b, casting), (a, b)


# ---- canonicalize_dtype, dtype(), weak types -----------------------------------------------


@pytest.mark.parametrize("dt, narrow", [
    (np.int64, np.int32), (np.uint64, np.uint32), (np.float64, np.float32),
    (np.complex128, np.complex64), (np.int8, np.int8), (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
    ("float64", np.float32), (int, np.int32), (float, np.float32), (bool, np.bool_),
])
def test_canonicalize_dtype(dt, narrow):
    with config.override(jax_enable_x64=False):
        assert dtypes.canonicalize_dtype(dt) == np.dtype(narrow)
        assert isinstance(dtypes.canonicalize_dtype(dt), np.dtype)
    with config.override(jax_enable_x64=True):
        assert dtypes.canonicalize_dtype(dt) == np.dtype(dt)
    with config.override(jax_enable_x64=False):  # the cache is keyed on x64 too
        assert dtypes.canonicalize_dtype(dt) == np.dtype(narrow)


def test_canonicalize_dtype_bad():
    with pytest.raises(TypeError, match="not understood"):
        dtypes.canonicalize_dtype("not-a-dtype")


def test_canonicalize_dtype_vs_jax(jax_x64):
    for dt in ALL_DTYPES + [int, float, complex, bool, "int64", np.float64]:
        assert dtypes.canonicalize_dtype(dt) == jax_x64.dtypes.canonicalize_dtype(dt), dt


def test_default_dtypes(x64):
    wide = {np.int32: np.int64, np.uint32: np.uint64, np.float32: np.float64,
            np.complex64: np.complex128}
    for name, narrow in [("int_", np.int32), ("uint", np.uint32), ("float_", np.float32),
                         ("complex_", np.complex64)]:
        assert getattr(dtypes, name) is (wide[narrow] if x64 else narrow)
    assert dtypes.default_int_dtype() == (np.int64 if x64 else np.int32)
    assert dtypes.default_float_dtype() == (np.float64 if x64 else np.float32)
    assert dtypes.default_complex_dtype() == (np.complex128 if x64 else np.complex64)
    assert dtypes.python_scalar_dtype(int) == dtypes.default_int_dtype()
    assert dtypes.python_scalar_dtype(bool) == np.bool_
    assert dtypes.python_scalar_dtypes[float] == np.float64  # uncanonicalised, as JAX
    with pytest.raises(AttributeError):
        dtypes.no_such_thing  # noqa: B018


def test_is_weakly_typed():
    assert dtypes.is_weakly_typed(1) and dtypes.is_weakly_typed(1.0) and dtypes.is_weakly_typed(1j)
    assert not dtypes.is_weakly_typed(True)
    assert not dtypes.is_weakly_typed(np.float32(1))
    assert not dtypes.is_weakly_typed(np.zeros(3))
    assert dtypes.is_weakly_typed(FakeArray(np.float32, weak_type=True))
    assert not dtypes.is_weakly_typed(FakeArray(np.float32))
    assert dtypes.is_weakly_typed(types.SimpleNamespace(dtype=np.float32, weak_type=True))
    assert not dtypes.is_weakly_typed(int)
    assert dtypes.is_python_scalar(True) and not dtypes.is_python_scalar(np.int32(1))


def test_dtype_of_values():
    with config.override(jax_enable_x64=False):
        assert dtypes.dtype(1) == np.int32
        assert dtypes.dtype(1.0) == np.float32
        assert dtypes.dtype(True) == np.bool_
        assert dtypes.dtype(complex) == np.complex64
        assert dtypes.dtype(np.zeros(2, np.float64)) == np.float64
        assert dtypes.dtype(np.zeros(2, np.float64), canonicalize=True) == np.float32
        assert dtypes.dtype(np.int64, canonicalize=True) == np.int32
        assert dtypes.dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
        assert dtypes.dtype(FakeArray(np.int64), canonicalize=True) == np.int64
        assert dtypes.dtype(dtypes.float0) == dtypes.float0
    with config.override(jax_enable_x64=True):
        assert dtypes.dtype(1) == np.int64
    with pytest.raises(ValueError, match="Invalid argument"):
        dtypes.dtype(None)
    with pytest.raises(TypeError, match="not a valid JAX array type"):
        dtypes.dtype(np.array(["a"]))
    with pytest.raises(TypeError, match="not a valid JAX array type"):
        dtypes.dtype(object)
    with pytest.raises(TypeError, match="Cannot determine dtype"):
        dtypes.dtype([1, 2])  # as JAX: lists have no dtype


def test_dtype_vs_jax(jax_x64):
    values = [1, 1.0, 1j, True, int, float, bool, np.int64, np.float16, "float64", "bfloat16",
              np.dtype("uint64"), np.float64(2), np.zeros(2, np.int64), [1.0, 2.0],
              ml_dtypes.float8_e5m2]
    from jax._src.dtypes import dtype as jax_dtype  # not public in jax.dtypes

    for v in values:
        assert _outcome(dtypes.dtype, v, True) == _outcome(jax_dtype, v), v


# ---- categories ----------------------------------------------------------------------------

CATEGORIES = [np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger,
              np.inexact, np.floating, np.complexfloating, np.bool_, np.float32, np.int8,
              ml_dtypes.bfloat16, float, int]


def test_issubdtype_ml_dtypes():
    bf16 = ml_dtypes.bfloat16
    assert not np.issubdtype(bf16, np.floating)  # the reason this function exists
    assert dtypes.issubdtype(bf16, np.floating)
    assert dtypes.issubdtype(np.dtype(bf16), np.inexact)
    assert dtypes.issubdtype("bfloat16", np.number)
    assert not dtypes.issubdtype(bf16, np.integer)
    assert not dtypes.issubdtype(bf16, np.complexfloating)
    assert dtypes.issubdtype(ml_dtypes.float8_e4m3fn, np.floating)
    assert dtypes.issubdtype(ml_dtypes.int4, np.signedinteger)
    assert not dtypes.issubdtype(ml_dtypes.int4, np.unsignedinteger)
    assert dtypes.issubdtype(ml_dtypes.uint4, np.unsignedinteger)
    assert dtypes.issubdtype(np.int32, np.integer)
    assert not dtypes.issubdtype(np.float32, np.integer)
    assert not dtypes.issubdtype(dtypes.float0, np.inexact)


@pytest.mark.parametrize("dt", ALL_DTYPES + [np.dtype(ml_dtypes.float4_e2m1fn)], ids=str)
def test_issubdtype_vs_jax(dt):
    jnp = pytest.importorskip("jax.numpy")
    for cat in CATEGORIES:
        assert dtypes.issubdtype(dt, cat) == jnp.issubdtype(dt, cat), cat
        assert dtypes.issubdtype(dt.type, cat) == jnp.issubdtype(dt.type, cat), cat


KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
         "complex floating", "numeric", np.float32, ("bool", np.int8)]


def test_isdtype_cases():
    assert dtypes.isdtype(ml_dtypes.bfloat16, "real floating")
    assert dtypes.isdtype(np.uint8, ("bool", "unsigned integer"))
    assert not dtypes.isdtype(np.uint8, "signed integer")
    assert dtypes.isdtype(np.float32, np.float32)
    with pytest.raises(ValueError, match="Unrecognized kind"):
        dtypes.isdtype(np.float32, "floating point")
    with pytest.raises(TypeError):
        dtypes.isdtype(np.float32, 3.5)


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_isdtype_vs_jax(dt):
    jnp = pytest.importorskip("jax.numpy")
    for kind in KINDS:
        assert dtypes.isdtype(dt, kind) == jnp.isdtype(dt, kind), kind


def test_category_tuples():
    assert np.dtype(np.int8) in dtypes.int_types and np.dtype(np.uint8) in dtypes.int_types
    assert np.dtype(np.uint8) not in dtypes.sint_types
    assert np.dtype(np.int8) not in dtypes.uint_types
    assert np.dtype(ml_dtypes.bfloat16) in dtypes.float_types
    assert np.dtype(ml_dtypes.float8_e5m2) in dtypes.float_types
    assert set(dtypes.inexact_types) == set(dtypes.float_types) | set(dtypes.complex_types)
    assert set(dtypes.all_types) == set(dtypes.numeric_types) | {np.dtype(bool)}
    assert dtypes.float0 not in dtypes.all_types
    for t in dtypes.all_types:
        assert dtypes.issubdtype(t, np.bool_) == (t in dtypes.bool_types)
        assert dtypes.issubdtype(t, np.integer) == (t in dtypes.int_types)
        assert dtypes.issubdtype(t, np.floating) == (t in dtypes.float_types)
        assert dtypes.issubdtype(t, np.complexfloating) == (t in dtypes.complex_types)
    assert ml_dtypes.bfloat16 in dtypes.extra_scalar_types()


def test_float0_and_tangent_dtype():
    assert dtypes.float0 == np.dtype([("float0", np.void, 0)])
    assert dtypes.float0.itemsize == 0
    assert dtypes.tangent_dtype(np.int32) == dtypes.float0
    assert dtypes.tangent_dtype(np.bool_) == dtypes.float0
    assert dtypes.tangent_dtype(dtypes.float0) == dtypes.float0
    assert dtypes.tangent_dtype(np.float16) == np.float16
    assert dtypes.tangent_dtype(ml_dtypes.bfloat16) == np.dtype(ml_dtypes.bfloat16)
    assert dtypes.tangent_dtype(np.complex64) == np.complex64


def test_inexact_helpers():
    assert dtypes.to_inexact_dtype(np.int8) == np.float32
    assert dtypes.to_inexact_dtype(np.int64) == np.float64
    assert dtypes.to_inexact_dtype(np.float16) == np.float16
    assert dtypes.to_complex_dtype(np.float64) == np.complex128
    assert dtypes.to_complex_dtype(np.int8) == np.complex64
    assert dtypes.to_numeric_dtype(np.bool_) == np.int32
    assert dtypes.supports_inf(np.float32) and dtypes.supports_inf(ml_dtypes.float8_e5m2)
    assert not dtypes.supports_inf(ml_dtypes.float8_e4m3fn)
    assert not dtypes.supports_inf(np.int32)


def test_safe_to_cast():
    assert dtypes.safe_to_cast(np.int16, np.float32)
    assert not dtypes.safe_to_cast(np.float32, np.int16)
    assert dtypes.safe_to_cast(np.float32, np.complex64)
    assert dtypes.safe_to_cast(1, np.int8)  # a weak int fits any integer type


# ---- short names ---------------------------------------------------------------------------

SHORT_NAMES = {
    np.bool_: "bool", np.int8: "i8", np.int16: "i16", np.int32: "i32", np.int64: "i64",
    np.uint8: "u8", np.uint16: "u16", np.uint32: "u32", np.uint64: "u64", np.float16: "f16",
    ml_dtypes.bfloat16: "bf16", np.float32: "f32", np.float64: "f64", np.complex64: "c64",
    np.complex128: "c128", ml_dtypes.float8_e4m3fn: "f8_e4m3fn", ml_dtypes.float8_e5m2: "f8_e5m2",
    ml_dtypes.int4: "i4", ml_dtypes.uint4: "u4",
}


@pytest.mark.parametrize("t, name", SHORT_NAMES.items(), ids=SHORT_NAMES.values())
def test_short_dtype_name(t, name):
    assert dtypes.short_dtype_name(t) == name
    assert dtypes.short_dtype_name(np.dtype(t)) == name


def test_short_dtype_name_float0():
    assert dtypes.short_dtype_name(dtypes.float0) == "float0"


@pytest.mark.parametrize("t", SHORT_NAMES, ids=SHORT_NAMES.values())
def test_short_dtype_name_vs_jaxpr(t):
    """The names as jax.make_jaxpr prints them."""
    jax = pytest.importorskip("jax")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        text = str(jax.make_jaxpr(lambda x: x)(np.zeros((2,), t)))
    finally:
        jax.config.update("jax_enable_x64", old)
    assert f"a:{dtypes.short_dtype_name(t)}[2]" in text, text


# ---- finfo / iinfo -------------------------------------------------------------------------

FINFO_FIELDS = ["bits", "eps", "epsneg", "max", "min", "tiny", "smallest_normal",
                "smallest_subnormal", "resolution", "precision", "nmant", "nexp", "maxexp",
                "minexp", "machep", "negep", "iexp", "dtype"]
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128,
          ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


def test_finfo_cases():
    bf = dtypes.finfo(ml_dtypes.bfloat16)
    assert bf.bits == 16 and float(bf.eps) == 2.0 ** -7 and float(bf.max) > 3e38
    assert dtypes.finfo(np.complex64).dtype == np.float32
    assert float(dtypes.finfo(ml_dtypes.float8_e4m3fn).max) == 448.0
    assert float(dtypes.finfo(FakeArray(np.float16)).eps) == 2.0 ** -10  # from an array
    i8 = dtypes.iinfo(np.int8)
    assert (i8.min, i8.max, i8.bits) == (-128, 127, 8)
    i4 = dtypes.iinfo(ml_dtypes.int4)
    assert (int(i4.min), int(i4.max), i4.bits) == (-8, 7, 4)
    assert int(dtypes.iinfo(FakeArray(np.uint16)).max) == 65535
    with pytest.raises(ValueError):
        dtypes.finfo(np.int32)


@pytest.mark.parametrize("t", FLOATS, ids=lambda t: np.dtype(t).name)
def test_finfo_vs_jax(t):
    jnp = pytest.importorskip("jax.numpy")
    ours, theirs = dtypes.finfo(t), jnp.finfo(t)
    for field in FINFO_FIELDS:
        a, b = getattr(ours, field), getattr(theirs, field)
        assert type(a) is type(b), field
        assert a == b or (np.isnan(a) and np.isnan(b)), field


@pytest.mark.parametrize("t", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                               np.uint32, np.uint64, ml_dtypes.int4, ml_dtypes.uint4],
                         ids=lambda t: np.dtype(t).name)
def test_iinfo_vs_jax(t):
    jnp = pytest.importorskip("jax.numpy")
    ours, theirs = dtypes.iinfo(t), jnp.iinfo(t)
    for field in ["bits", "min", "max", "dtype", "kind"]:
        assert getattr(ours, field) == getattr(theirs, field), field


# ---- config --------------------------------------------------------------------------------


def test_config_defaults():
    c = Config(environ={})
    assert c.jax_enable_x64 is False and c.x64 is False
    assert c.jax_debug_nans is False and c.jax_disable_jit is False
    assert c.jax_explain_cache_misses is False
    assert c.jax_numpy_rank_promotion == "allow"
    assert c.jax_default_matmul_precision is None


def test_config_reads_every_option_from_its_upper_case_environment_variable():
    # As JAX's config: JAX_<OPTION> at start-up (GPU test runs set
    # JAX_DEFAULT_MATMUL_PRECISION for jaxkit and the oracle alike).
    c = Config(environ={"JAX_DEFAULT_MATMUL_PRECISION": "highest", "JAX_DEBUG_NANS": "1",
                        "JAX_NUMPY_RANK_PROMOTION": "raise"})
    assert c.jax_default_matmul_precision == "highest"
    assert c.jax_debug_nans is True and c.jax_numpy_rank_promotion == "raise"
    with pytest.raises(ValueError, match="jax_default_matmul_precision"):
        Config(environ={"JAX_DEFAULT_MATMUL_PRECISION": "ultra"})
    # A JAX setting jaxkit cannot honour warns instead of failing `import jaxkit`.
    with pytest.warns(UserWarning, match="JAX_ENABLE_CHECKS='1' is ignored"):
        assert Config(environ={"JAX_ENABLE_CHECKS": "1"}).jax_enable_checks is False


def test_config_update_and_fast_mirror():
    c = Config(environ={})
    c.update("jax_enable_x64", True)
    assert c.jax_enable_x64 is True and c.x64 is True
    c.update("jax_enable_x64", 0)
    assert c.jax_enable_x64 is False and c.x64 is False
    c.update("jax_numpy_rank_promotion", "raise")
    assert c.jax_numpy_rank_promotion == "raise"
    c.update("jax_default_matmul_precision", "highest")
    assert c.jax_default_matmul_precision == "highest"
    c.jax_debug_nans = True  # attribute assignment goes through update
    assert c.jax_debug_nans is True
    assert c.values["jax_debug_nans"] is True


def test_config_bad_values():
    c = Config(environ={})
    with pytest.raises(ValueError, match="allow"):
        c.update("jax_numpy_rank_promotion", "sometimes")
    with pytest.raises(ValueError):
        c.update("jax_default_matmul_precision", "ultra")
    with pytest.raises(ValueError, match="new int config value must be None or of type int"):
        c.update("jax_num_cpu_devices", 1.5)
    assert c.jax_enable_x64 is False
    c.update("jax_enable_x64", "maybe")  # as JAX's boolean options: the value's truth
    assert c.jax_enable_x64 is True


def test_config_unknown_name():
    c = Config(environ={})
    with pytest.raises(AttributeError, match="jax_enable_x64"):  # lists the valid names
        c.update("jax_enable_x65", True)
    with pytest.raises(AttributeError, match="jax_no_such_option"):
        c.jax_no_such_option  # noqa: B018
    with pytest.raises(AttributeError):
        c.jax_no_such_option = 1
    with pytest.raises(AttributeError), c.override(jax_no_such_option=1):
        pass


def test_config_override_restores():
    c = Config(environ={})
    with c.override(jax_enable_x64=True, jax_disable_jit=True):
        assert c.x64 is True and c.jax_disable_jit is True
        with c.override(jax_enable_x64=False):
            assert c.x64 is False
        assert c.x64 is True
    assert c.x64 is False and c.jax_disable_jit is False
    with pytest.raises(RuntimeError), c.override(jax_debug_nans=True):
        raise RuntimeError
    assert c.jax_debug_nans is False


def test_config_on_change():
    c = Config(environ={})
    calls = []
    c.on_change(lambda name, value: calls.append((name, value)))
    c.update("jax_enable_x64", True)
    c.update("jax_enable_x64", True)  # no change, no call
    with c.override(jax_debug_nans=True):
        assert calls[-1] == ("jax_debug_nans", True)
    assert calls == [("jax_enable_x64", True), ("jax_debug_nans", True),
                     ("jax_debug_nans", False)]


def test_global_config_singleton():
    import jaxkit

    assert jaxkit.config is config
    before = config.x64
    with config.override(jax_enable_x64=not before):
        assert config.x64 is (not before)
        assert dtypes.canonicalize_dtype(np.int64) == (np.int32 if before else np.int64)
    assert config.x64 is before


@pytest.mark.parametrize("env, expected", [
    ({"JAXKIT_ENABLE_X64": "1"}, {"jax_enable_x64": True}),
    ({"JAX_ENABLE_X64": "true"}, {"jax_enable_x64": True}),
    ({"JAXKIT_ENABLE_X64": "0", "JAX_ENABLE_X64": "1"}, {"jax_enable_x64": False}),
    ({"JAXKIT_DEBUG_NANS": "yes"}, {"jax_debug_nans": True}),
    ({"JAXKIT_DISABLE_JIT": "True"}, {"jax_disable_jit": True}),
    ({"JAXKIT_EXPLAIN_CACHE_MISSES": "1"}, {"jax_explain_cache_misses": True}),
    ({"JAXKIT_DEBUG_NANS": "nonsense"}, {"jax_debug_nans": False}),
])
def test_config_from_environ(env, expected):
    c = Config(environ=env)
    for name, value in expected.items():
        assert getattr(c, name) is value
    assert c.x64 is c.jax_enable_x64


def test_config_env_var_in_subprocess():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JAXKIT_", "JAX_ENABLE_X64"))}
    code = ("from jaxkit._config import config; from jaxkit import dtypes; import numpy as np; "
            "print(config.jax_enable_x64, config.x64, config.jax_debug_nans, "
            "dtypes.canonicalize_dtype(np.int64))")
    out = subprocess.run([sys.executable, "-c", code], env={**env, "JAXKIT_ENABLE_X64": "1",
                                                            "JAXKIT_DEBUG_NANS": "yes"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "True", "int64"]
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "False", "int32"]
