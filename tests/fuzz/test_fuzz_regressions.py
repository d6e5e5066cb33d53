"""Regressions for the mismatches with JAX that the differential fuzzer found (one test per
fix; the fuzzer's own tests are test_fuzz_ops.py and test_fuzz_programs.py)."""
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
