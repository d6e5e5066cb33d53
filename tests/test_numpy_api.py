"""Array operators and methods (on arrays and tracers), scalar types, dtype utilities,
promotion/broadcasting helpers and the layering rule of jaxkit.numpy."""
from __future__ import annotations

import operator
import pathlib
import re

import numpy as np
import pytest
from _numpy_checks import W, assert_same, jax, jjnp, rng_array, to_jax, to_kit

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.numpy import _promotion

F32 = rng_array((3, 4), np.float32)
I8 = rng_array((3, 4), np.int8, seed=1)
V4 = rng_array((4,), np.float32, seed=2)
C64 = rng_array((3, 4), np.complex64, seed=3)

BINARY_OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "lt": operator.lt, "le": operator.le, "eq": operator.eq, "ne": operator.ne,
    "gt": operator.gt, "ge": operator.ge,
}
INT_OPS = {"and": operator.and_, "or": operator.or_, "xor": operator.xor,
           "lshift": operator.lshift, "rshift": operator.rshift}
OPERANDS = [(F32, V4), (F32, 2.0), (2.0, F32), (I8, 1), (I8, 1.0), (1, I8), (W(2.0), 3),
            (W(2), 3.0), (F32, np.float32(2)), (np.float32(2), F32), (I8, np.int32(3)),
            (W(1.5), W(2)), (W(3), V4)]


def _same(f, *args, rtol=1e-5):
    assert_same(f(*to_kit(args)), f(*to_jax(args)), rtol=rtol)


@pytest.mark.parametrize("op", list(BINARY_OPS))
def test_binary_operators(op):
    for a, b in OPERANDS:
        _same(BINARY_OPS[op], a, b)


@pytest.mark.parametrize("op", list(INT_OPS))
def test_integer_operators(op):
    for a, b in [(I8, 1), (1, I8), (I8, I8), (W(3), 1), (I8 > 0, I8 < 0)]:
        if op in ("lshift", "rshift") and isinstance(a, np.ndarray) and a.dtype == bool:
            continue
        _same(INT_OPS[op], a, b)


def test_unary_operators_and_matmul():
    for f in (operator.neg, operator.pos, abs, operator.invert):
        _same(f, I8)
        _same(f, W(3))
    _same(operator.neg, F32)
    _same(abs, C64)
    _same(lambda x, y: x @ y, F32, V4)
    _same(lambda x, y: y.T @ x, F32, F32)
    _same(lambda x, y: divmod(x, y), F32, 0.7)
    _same(lambda x: round(x, 1), F32)


METHODS = [
    ("sum", ()), ("sum", (1,)), ("mean", ()), ("std", ()), ("var", (0,)), ("max", ()),
    ("min", (1,)), ("prod", ()), ("all", ()), ("any", ()), ("argmax", ()), ("argmin", (0,)),
    ("cumsum", ()), ("cumprod", (1,)), ("reshape", (4, 3)), ("reshape", ((2, 6),)),
    ("reshape", (-1,)), ("transpose", ()), ("transpose", (1, 0)), ("transpose", ((1, 0),)),
    ("ravel", ()), ("flatten", ()), ("squeeze", ()), ("astype", (np.int32,)),
    ("astype", (jnp.float16,)), ("clip", (0, 1)), ("round", (1,)), ("conj", ()),
    ("conjugate", ()), ("sort", ()), ("argsort", ()), ("take", (np.array([0, 2]),)),
    ("repeat", (2,)), ("swapaxes", (0, 1)), ("trace", ()), ("diagonal", ()), ("dot", (V4,)),
    ("ptp", ()), ("copy", ()), ("view", (np.int32,)), ("view", (np.uint8,)),
    ("view", (np.float16,)), ("nonzero", ()), ("item", (3,)),
]


@pytest.mark.parametrize("meth,args", METHODS, ids=[f"{m}-{i}" for i, (m, _) in
                                                    enumerate(METHODS)])
def test_methods(meth, args):
    if meth == "item":
        assert jnp.asarray(F32).item(3) == F32.item(3)
        return
    got = getattr(jnp.asarray(F32), meth)(*to_kit(args))
    want = getattr(jjnp.asarray(F32), meth)(*[jjnp.float16 if x is jnp.float16 else x
                                              for x in to_jax(args)])
    assert_same(got, want)
    if meth == "nonzero":
        return  # needs size= under jit (tested in test_numpy_sorting)
    out = jaxkit.jit(lambda a: getattr(a, meth)(*to_kit(args)))(jnp.asarray(F32))
    assert_same(out, want, what=f"{meth} under jit")


def test_properties_and_at():
    for prop in ("T", "mT", "real", "imag"):
        assert_same(getattr(jnp.asarray(F32), prop), getattr(jjnp.asarray(F32), prop))
        assert_same(getattr(jnp.asarray(C64), prop), getattr(jjnp.asarray(C64), prop))
    out = jaxkit.jit(lambda a: (a.T, a.at[0].add(1.0), a[1:, ::2].sum()))(jnp.asarray(F32))
    want = (jjnp.asarray(F32).T, jjnp.asarray(F32).at[0].add(1.0),
            jjnp.asarray(F32)[1:, ::2].sum())
    assert_same(out, want)


def test_scalar_types():
    x = jnp.float32(1)
    assert isinstance(x, jaxkit.Array) and x.dtype == np.float32 and not x.weak_type
    assert_same(jnp.float32(1) + 1, jjnp.float32(1) + 1)
    assert_same(jnp.int8(3) * 2, jjnp.int8(3) * 2)
    assert_same(jnp.float32([1, 2]), jjnp.float32([1, 2]))
    assert_same(jnp.bool_(1), jjnp.bool_(1))
    assert np.dtype(jnp.float32) == np.float32
    assert jnp.zeros(2, jnp.int16).dtype == np.int16
    assert jnp.float32 == np.float32 and hash(jnp.float32) == hash(np.float32)
    assert isinstance(np.float32(1), jnp.float32)
    assert jnp.issubdtype(jnp.float32, jnp.floating)
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating)
    assert jnp.dtype("float32") == np.float32
    assert jnp.float64(1).dtype == np.float32  # canonicalised without x64, as JAX


def test_dtype_utilities_match_jax():
    assert jnp.result_type(np.float32, 1.0) == jjnp.result_type(np.float32, 1.0)
    assert jnp.result_type(np.int8, np.uint8) == jjnp.result_type(np.int8, np.uint8)
    assert jnp.promote_types(np.int8, np.uint8) == jjnp.promote_types(np.int8, np.uint8)
    assert jnp.can_cast(np.int8, np.int32) and not jnp.can_cast(np.float32, np.int32)
    assert jnp.finfo(jnp.float32).eps == jjnp.finfo(jjnp.float32).eps
    assert jnp.iinfo(jnp.int8).max == 127
    assert jnp.isdtype(np.float32, "real floating")
    x = jnp.zeros((2, 3))
    assert jnp.shape(x) == (2, 3) and jnp.ndim(x) == 2 and jnp.size(x) == 6
    assert jnp.size(x, 1) == 3 and jnp.shape(1.0) == ()
    assert isinstance(x, jnp.ndarray)
    assert jnp.pi == np.pi and jnp.newaxis is None and np.isnan(jnp.nan) and jnp.inf == np.inf
    assert jnp.isscalar(1.0) and jnp.isscalar(jnp.asarray(1)) and not jnp.isscalar(x)
    assert jnp.iscomplexobj(C64) and jnp.isrealobj(F32)


def test_promotion_helpers():
    a, b = _promotion.promote_dtypes(jnp.asarray(I8), 1.0)
    assert a.dtype == jaxkit.dtypes.dtype(b) == np.float32
    assert a.weak_type and isinstance(b, float)  # int8 array + Python float: weak float32
    x, = _promotion.promote_dtypes_inexact(jnp.asarray(I8))
    assert x.dtype == np.float32 and not x.weak_type
    y, = _promotion.promote_dtypes_numeric(jnp.asarray(np.array([True])))
    assert y.dtype == np.int32
    z, = _promotion.promote_dtypes_complex(jnp.asarray(F32))
    assert z.dtype == np.complex64
    assert jnp.broadcast_shapes((3, 1), (4,), ()) == (3, 4)
    assert jnp.broadcast_shapes(5, (1, 5)) == (1, 5)
    outs = jnp.broadcast_arrays(jnp.asarray(F32), jnp.asarray(V4), 1.0)
    assert [o.shape for o in outs] == [(3, 4)] * 3


def test_numpy_interop():
    x = jnp.ones(2)
    for out in (np.float32(2) * x, np.ones(2) + x, x + np.ones(2)):
        assert isinstance(out, jaxkit.Array)
    assert np.asarray(jnp.arange(3)).tolist() == [0, 1, 2]
    assert [int(v) for v in jnp.arange(3)] == [0, 1, 2]
    assert float(jnp.asarray(2.5)) == 2.5 and bool(jnp.asarray(1))


def test_tracer_methods_reach_jax_errors():
    with pytest.raises(jaxkit.TracerBoolConversionError):
        jaxkit.jit(lambda a: 1 if a.sum() > 0 else 0)(jnp.asarray(F32))
    with pytest.raises(TypeError, match="unsupported operand type"):
        jnp.ones(2) + [1, 2]


def test_numpy_layer_never_binds_primitives():
    """jaxkit.numpy calls jaxkit.lax functions only (the layering rule)."""
    src = pathlib.Path(jnp.__file__).parent
    for path in src.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"\.bind\(", text), f"{path.name} binds a primitive"
        assert "import jax\n" not in text and "from jax " not in text and \
            "from jax." not in text, f"{path.name} imports jax"


def test_jaxpr_of_scalar_literal_is_weak_literal():
    jaxpr = jaxkit.make_jaxpr(lambda a: a * 2 + 1.0)(jnp.asarray(F32))
    text = str(jaxpr)
    assert "mul a 2.0:f32[]" in text and "add" in text
    jaxpr = jaxkit.make_jaxpr(lambda a: a + 1)(jnp.asarray(I8))
    assert "add a 1:i8[]" in str(jaxpr)
    jaxpr2 = jax.make_jaxpr(lambda a: a + 1)(jjnp.asarray(I8))
    assert "add a 1:i8[]" in str(jaxpr2)
