"""Regressions for the mismatches with JAX that the differential fuzzer found (one test per
fix; the fuzzer's own tests are test_fuzz_ops.py and test_fuzz_programs.py)."""
import re

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp

jax = pytest.importorskip("jax")


def test_i0_gradient_at_zero_is_zero():
    # I0' = I1 vanishes at 0; differentiating exp(|x|) * i0e(x) gave abs's one-sided 1 there.
    x = np.array([0.0, 1.0, -2.0, 30.0], np.float32)
    ours = jaxkit.vmap(jaxkit.grad(jnp.i0))(x)
    theirs = jax.vmap(jax.grad(jax.numpy.i0))(x)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    assert float(ours[0]) == 0.0


@pytest.mark.parametrize("fn", ["gcd", "lcm"])
def test_gcd_lcm_reject_bools_like_jax(fn):
    # Numeric promotion turned bools into int32; JAX and NumPy reject them.
    with pytest.raises(ValueError, match="must be integers"):
        getattr(jnp, fn)(np.array([True]), np.array([False]))
    assert getattr(jnp, fn)(np.int8(4), 6).dtype == getattr(jax.numpy, fn)(np.int8(4), 6).dtype


def test_round_rejects_bool_like_jax():
    with pytest.raises(ValueError, match="bool"):
        jnp.round(np.array([True, False]))
    with pytest.raises(ValueError):
        jax.numpy.round(np.array([True, False]))


@pytest.mark.parametrize("fn", ["cumsum", "cumprod", "nancumsum"])
def test_cumulative_explicit_axis_of_0d_array_is_out_of_bounds(fn):
    # JAX flattens only Python scalars (weakly typed) when an axis is given; a 0-d array with
    # axis=0 is out of bounds there, and was silently flattened here.
    with pytest.raises(ValueError, match="out of bounds"):
        getattr(jnp, fn)(np.array(1.0, np.float32), axis=0)
    np.testing.assert_array_equal(getattr(jnp, fn)(2.0, axis=0), [2.0])
    np.testing.assert_array_equal(getattr(jnp, fn)(np.array(2.0, np.float32)), [2.0])


_OUT_OF_RANGE_AXIS = [
    lambda m: m.mean(np.ones(()), axis=0),          # JAX: IndexError (indexes the shape)
    lambda m: m.mean(np.ones(3), axis=-2),
    lambda m: m.var(np.ones(3), axis=2),
    lambda m: m.std(np.ones(3), axis=2),
    lambda m: m.argmax(np.ones(()), axis=0),        # JAX: IndexError
    lambda m: m.argmin(np.ones(3), axis=1),
    lambda m: m.nanargmax(np.ones(3), axis=1),
    lambda m: m.swapaxes(np.ones((2, 2)), 2, 0),    # JAX: IndexError
    lambda m: m.split(np.ones(4), 2, axis=1),
    lambda m: m.array_split(np.ones(4), 2, axis=1),
    lambda m: m.sum(np.ones((2, 2)), axis=3),       # JAX: ValueError
    lambda m: m.average(np.ones(3), axis=2),
    lambda m: m.cumsum(np.ones(2), axis=1),
    lambda m: m.moveaxis(np.ones(3), 3, 0),
    lambda m: m.expand_dims(np.ones(3), 5),
    lambda m: m.concatenate([np.ones(3)], axis=2),
    lambda m: m.take(np.ones(3), 0, axis=3),
    lambda m: m.flip(np.ones(3), 2),
    lambda m: m.sort(np.ones(3), axis=2),
    lambda m: m.transpose(np.ones((2, 3)), (0, 2)),
    lambda m: m.median(np.ones(3), axis=2),
    lambda m: m.linalg.matrix_norm(np.ones(3)),
    lambda m: m.fft.fft(np.ones(3), axis=2),
]


@pytest.mark.parametrize("call", _OUT_OF_RANGE_AXIS)
def test_out_of_range_axis_raises_jax_class(call):
    # JAX raises a ValueError, or an IndexError where the function indexes the shape with the
    # axis first; the class is JAX's, the message says which axis (JAX's IndexErrors say only
    # "tuple index out of range").
    with pytest.raises(Exception) as theirs:
        call(jax.numpy)
    with pytest.raises(Exception) as ours:
        call(jnp)
    assert type(ours.value) is type(theirs.value)
    assert re.fullmatch(r"axis -?\d+ is out of bounds for array of dimension \d+",
                        str(ours.value))
    if type(theirs.value) is ValueError:
        assert str(ours.value) == str(theirs.value)


def test_diff_of_empty_axis_is_empty():
    for x in (np.zeros((0,), np.float32), np.zeros((3, 0), bool)):
        ours, theirs = jnp.diff(x, axis=-1), jax.numpy.diff(x, axis=-1)
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype


@pytest.mark.parametrize("fn", ["logaddexp", "logaddexp2"])
def test_logaddexp_of_complex_matches_jax(fn):
    # The real-valued formula took abs of a complex difference and added it to a complex max
    # (lax.add(complex64, float32) failed); JAX has a complex branch.
    x = np.array([1 + 2j, -3 + 0.5j, 100 + 4j, np.inf + 1j], np.complex64)
    y = np.array([0.5 - 1j, 2 + 3j, -1j, 1], np.complex64)
    for a, b in ((x, y), (np.float32(1), y)):
        ours, theirs = getattr(jnp, fn)(a, b), getattr(jax.numpy, fn)(a, b)
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_transpose_with_wrong_axes_is_type_error_like_jax():
    with pytest.raises(TypeError, match="permutation"):
        jax.numpy.transpose(np.ones((3, 1)), (0,))
    with pytest.raises(TypeError, match=r"got permutation \(0,\) for operand shape \(3, 1\)"):
        jnp.transpose(np.ones((3, 1)), (0,))
