"""lax structural primitives: broadcasting, reshaping, transposition, squeeze/expand_dims, rev,
iota, concatenate/split, convert_element_type and full, against NumPy and the jax oracle, with
their JVP, transpose and batching rules."""
import numpy as np
import pytest
from _lax_checks import (
    Case,
    check_batching,
    check_jit,
    check_jvp,
    check_numpy,
    check_transpose,
    check_vs_jax,
)

import jaxkit
from jaxkit import lax

jax = pytest.importorskip("jax")


def f32(*shape):
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def _args(*makers):
    return lambda rng: [m(rng) for m in makers]


CASES = [
    Case("broadcast_in_dim", "broadcast_in_dim",
         lambda l, x: l.broadcast_in_dim(x, (2, 3, 4), (0, 2)), _args(f32(2, 1)),
         np_ref=lambda x: np.broadcast_to(x[:, None, :], (2, 3, 4)), diff=(0,), linear=(0,),
         batch=[(0,), (1,)]),
    Case("broadcast", "broadcast_in_dim", lambda l, x: l.broadcast(x, (2,)), _args(f32(3)),
         np_ref=lambda x: np.broadcast_to(x, (2, 3)), diff=(0,), linear=(0,)),
    Case("expand_dims", "broadcast_in_dim", lambda l, x: l.expand_dims(x, (0, -1)),
         _args(f32(2, 3)), np_ref=lambda x: x[None, :, :, None], diff=(0,), linear=(0,)),
    Case("reshape", "reshape", lambda l, x: l.reshape(x, (3, 2)), _args(f32(2, 3)),
         np_ref=lambda x: x.reshape(3, 2), diff=(0,), linear=(0,), batch=[(0,), (1,)]),
    Case("reshape_dimensions", "reshape", lambda l, x: l.reshape(x, (6, 4), (2, 0, 1)),
         _args(f32(2, 3, 4)), np_ref=lambda x: x.transpose(2, 0, 1).reshape(6, 4), diff=(0,),
         linear=(0,), batch=[(0,), (3,)]),
    Case("collapse", "reshape", lambda l, x: l.collapse(x, 1), _args(f32(2, 3, 4)),
         np_ref=lambda x: x.reshape(2, 12), diff=(0,), linear=(0,)),
    Case("transpose", "transpose", lambda l, x: l.transpose(x, (2, 0, 1)), _args(f32(2, 3, 4)),
         np_ref=lambda x: x.transpose(2, 0, 1), diff=(0,), linear=(0,), batch=[(0,), (2,)]),
    Case("squeeze", "squeeze", lambda l, x: l.squeeze(x, (0, -1)), _args(f32(1, 3, 1)),
         np_ref=lambda x: x[0, :, 0], diff=(0,), linear=(0,), batch=[(0,), (2,)]),
    Case("rev", "rev", lambda l, x: l.rev(x, (0, 2)), _args(f32(2, 3, 4)),
         np_ref=lambda x: x[::-1, :, ::-1], diff=(0,), linear=(0,), batch=[(0,), (1,)]),
    Case("concatenate", "concatenate",
         lambda l, x, y, z: l.concatenate([x, y, z], 1), _args(f32(2, 1), f32(2, 3), f32(2, 2)),
         np_ref=lambda x, y, z: np.concatenate([x, y, z], 1), diff=(0, 1, 2), linear=(0, 1, 2),
         batch=[(0, 0, 0), (None, 1, 0), (1, None, None)]),
    Case("split", "split", lambda l, x: l.split(x, (1, 0, 3), 1), _args(f32(2, 4)),
         np_ref=lambda x: np.split(x, [1, 1], 1), diff=(0,), linear=(0,),
         batch=[(0,), (1,)]),
    Case("convert_f32_i32", "convert_element_type",
         lambda l, x: l.convert_element_type(x, np.int32),
         _args(lambda rng: (rng.standard_normal((2, 3)) * 4).astype(np.float32)),
         np_ref=lambda x: x.astype(np.int32)),
    Case("convert_f32_f16", "convert_element_type",
         lambda l, x: l.convert_element_type(x, np.float16), _args(f32(2, 3)),
         np_ref=lambda x: x.astype(np.float16), diff=(0,), linear=(0,), rtol=1e-3),
    Case("convert_to_bool", "convert_element_type",
         lambda l, x: l.convert_element_type(x, np.bool_),
         _args(lambda rng: np.array([0.0, -0.0, 2.0, np.nan], np.float32)),
         np_ref=lambda x: x.astype(np.bool_)),
    Case("convert_complex_to_real", "convert_element_type",
         lambda l, x: l.convert_element_type(x, np.float32),
         _args(lambda rng: np.array([1 + 2j, -3j], np.complex64))),
    Case("reduce_sum_all", "reduce_sum", lambda l, x: l.reduce_sum(x, (1, 0)),
         _args(f32(2, 3)), np_ref=lambda x: x.sum(), diff=(0,), linear=(0,)),
    Case("broadcast_in_dim_unit", "broadcast_in_dim",
         lambda l, x: l.broadcast_in_dim(x, (4, 3), (0, 1)), _args(f32(1, 3)),
         np_ref=lambda x: np.broadcast_to(x, (4, 3)), diff=(0,), linear=(0,)),
]

_ids = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_vs_jax(case):
    check_vs_jax(case, jax.lax)


@pytest.mark.parametrize("case", [c for c in CASES if c.np_ref], ids=str)
def test_vs_numpy(case):
    check_numpy(case)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_jit(case):
    check_jit(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.diff], ids=str)
def test_jvp(case):
    check_jvp(case, jax)


@pytest.mark.parametrize("case", [c for c in CASES if c.linear], ids=str)
def test_transpose(case):
    check_transpose(case, jax)


@pytest.mark.parametrize("case", [c for c in CASES if c.batch or c.diff], ids=str)
def test_batching(case):
    check_batching(case)


# ---- creation ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda l: l.iota(np.int32, 5),
    lambda l: l.iota(np.float32, 4),
    lambda l: l.broadcasted_iota(np.int32, (2, 3), 1),
    lambda l: l.broadcasted_iota(np.uint8, (3, 2), 0),
    lambda l: l.full((2, 3), 1.5),
    lambda l: l.full((2,), 7, np.int8),
    lambda l: l.full((), True),
    lambda l: l.full_like(np.zeros((2, 3), np.float16), 2),
    lambda l: l.full_like(np.zeros((2, 3), np.float32), 1, np.int32, (4,)),
], ids=["iota_i32", "iota_f32", "biota", "biota_u8", "full_weak", "full_i8", "full_bool",
        "full_like_f16", "full_like_shape_dtype"])
def test_creation_vs_jax(fn):
    ours, theirs = fn(lax), fn(jax.lax)
    np.testing.assert_array_equal(ours, theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert ours.weak_type == theirs.weak_type


def test_zeros_like_array():
    out = lax.zeros_like_array(np.ones((2, 2), np.int16))
    assert out.dtype == np.int16 and not out.weak_type
    np.testing.assert_array_equal(out, np.zeros((2, 2)))


def test_iota_rules():
    from jaxkit.interpreters import ad
    out, t = ad.jvp_rules[lax.iota_p]([], [], dtype=np.dtype(np.float32), shape=(3,),
                                          dimension=0)
    assert type(t) is ad.Zero and t.aval.shape == (3,)
    np.testing.assert_array_equal(out, [0, 1, 2])


def test_full_like_of_tracer_is_weak_like_its_input():
    out = jaxkit.jit(lambda: lax.full_like(2.0, 3))()
    assert out.weak_type and out.dtype == np.float32


# ---- printing ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda l, x: l.rev(x, (0,)),
    lambda l, x: l.concatenate([x, x], 1),
    lambda l, x: l.squeeze(l.expand_dims(x, (0,)), (0,)),
    lambda l, x: l.transpose(x, (1, 0)),
    lambda l, x: l.convert_element_type(x, np.int32),
], ids=["rev", "concatenate", "squeeze", "transpose", "convert"])
def test_jaxpr_prints_like_jax(fn):
    x = np.zeros((2, 3), np.float32)
    ours = jaxkit.make_jaxpr(lambda x: fn(lax, x))(x).jaxpr.eqns
    theirs = jax.make_jaxpr(lambda x: fn(jax.lax, x))(x).jaxpr.eqns
    assert [e.primitive.name for e in ours] == [e.primitive.name for e in theirs]
    for a, b in zip(ours, theirs):  # the params we share print the same
        shared = set(a.params) & set(b.params)
        assert {k: str(a.params[k]) for k in shared} == {k: str(b.params[k]) for k in shared}


def test_reshape_jaxpr_params():
    x = np.zeros((2, 3), np.float32)
    text = str(jaxkit.make_jaxpr(lambda x: lax.reshape(x, (3, 2), (1, 0)))(x))
    assert "reshape[dimensions=(1, 0) new_sizes=(3, 2)] a" in text
    text = str(jaxkit.make_jaxpr(lambda x: lax.reshape(x, (6,)))(x))
    assert "reshape[dimensions=None new_sizes=(6,)] a" in text


# ---- errors -----------------------------------------------------------------------------

ERRORS = [
    (lambda: lax.broadcast_in_dim(np.zeros((2, 3)), (2, 4), (0, 1)), TypeError,
     r"got operand of shape \(2, 3\), target broadcast shape \(2, 4\)"),
    (lambda: lax.reshape(np.zeros((2, 3)), (4, 2)), TypeError,
     r"reshape total size must be unchanged, got new_sizes \(4, 2\) for shape \(2, 3\)"),
    (lambda: lax.reshape(np.zeros((2, 3)), (6,), (0, 0)), TypeError,
     "reshape dimensions must be a permutation of operand dimensions"),
    (lambda: lax.transpose(np.zeros((2, 3)), (0, 0)), TypeError,
     r"got permutation \(0, 0\) for operand shape \(2, 3\)"),
    (lambda: lax.squeeze(np.zeros((2, 3)), (0,)), ValueError,
     "cannot select an axis to squeeze out which has size not equal to one"),
    (lambda: lax.expand_dims(np.zeros(2), (0, 0)), ValueError, "repeated axis"),
    (lambda: lax.rev(np.zeros((2, 3)), (2,)), TypeError,
     "rev dimensions must all be less than operand ndim"),
    (lambda: lax.concatenate([np.zeros((2, 3)), np.zeros((3, 3))], 1), TypeError,
     r"concatenating along dimension 1 for shapes \(2, 3\), \(3, 3\)"),
    (lambda: lax.concatenate([np.zeros(2, np.float32), np.zeros(2, np.int32)], 0), TypeError,
     "requires arguments to have the same dtypes, got float32, int32"),
    (lambda: lax.concatenate([], 0), ValueError, "non-empty"),
    (lambda: lax.split(np.zeros((2, 3)), (1, 1), 1), ValueError,
     r"Sum of sizes 2 must be equal to dimension 1 of the operand shape \[2, 3\]"),
    (lambda: lax.broadcasted_iota(np.int32, (2, 3), 2), ValueError, "iota dimension must be"),
    (lambda: lax.full((2,), np.zeros(2)), TypeError, "full must be called with scalar"),
    (lambda: lax.collapse(np.zeros((2, 3)), 2, 1), ValueError, "Invalid dimension range"),
]


@pytest.mark.parametrize("fn,exc,msg", ERRORS)
def test_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn()
