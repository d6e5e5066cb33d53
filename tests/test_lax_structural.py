"""lax structural primitives: broadcasting, reshaping, transposition, squeeze/expand_dims, rev,
iota, concatenate/split, convert_element_type and full, against NumPy and the jax oracle, with
their JVP, transpose and batching rules beyond the generic checks of ``test_lax_ops.py``
over the records in ``_lax_records.py``."""
import numpy as np
import pytest

import jaxkit
from jaxkit import lax

jax = pytest.importorskip("jax")


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
    for args in [((3, 2), (1, 0)), ((6,),)]:
        ours = str(jaxkit.make_jaxpr(lambda x: lax.reshape(x, *args))(x))
        theirs = str(jax.make_jaxpr(lambda x: jax.lax.reshape(x, *args))(x))
        assert ours == theirs
    assert "reshape[dimensions=(1, 0) new_sizes=(3, 2) sharding=None] a" in str(
        jaxkit.make_jaxpr(lambda x: lax.reshape(x, (3, 2), (1, 0)))(x))


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
