"""Regression tests for user-defined extended dtypes (JAX's ``_rules`` protocol), the cause of
Flax linen_test's ``Fp8Test.test_fp8_meta_dtype`` failures on jaxkit
(``bench/ecosystem_tests.py``): Flax's fp8 meta dtype is a float32 whose cotangents accumulate
by ``max``. Each check runs on jaxkit and on the JAX oracle side by side.
"""
import functools

import numpy as np
import pytest
from _max_dtype import max_dtype as _max_dtype

import jaxkit


def _oracle():
    return pytest.importorskip("jax")


def _uses(m):
    """A value used at each step of a scan through the max dtype, its cotangent given in that
    dtype by a custom_vjp (as Flax's ``in_qdq``): its gradient is the max of the steps'
    cotangents, not their sum (and they start from the dtype's zero, -inf, not 0)."""
    dt = _max_dtype(m)
    to_f32 = functools.partial(m.lax.convert_element_type, new_dtype=np.float32)

    @m.custom_vjp
    def use(w, s):
        return w * to_f32(s)

    def use_fwd(w, s):
        return use(w, s), (w, s)

    def use_bwd(res, g):
        w, s = res
        return g * to_f32(s), m.lax.convert_element_type(g * w, dt)

    use.defvjp(use_fwd, use_bwd)

    def f(x, s):
        sm = m.lax.convert_element_type(s, dt)

        def body(c, w):
            return c + use(w, sm), None
        out, _ = m.lax.scan(body, x, m.numpy.array([[-2.0, 3.0], [5.0, 1.0]]))
        return out.sum()
    return f


def test_user_extended_dtype_cotangents_accumulate_by_its_rule():
    jax = _oracle()
    args = (np.zeros(2, np.float32), np.ones(2, np.float32))
    got = [np.asarray(g) for g in jaxkit.jit(jaxkit.grad(_uses(jaxkit), (0, 1)))(*args)]
    want = [np.asarray(g) for g in jax.jit(jax.grad(_uses(jax), (0, 1)))(*args)]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[1], [5.0, 3.0])  # max, not the sum [3, 4]


def _round_trip(m):
    dt = _max_dtype(m)
    return lambda x: m.lax.convert_element_type(m.lax.convert_element_type(x, dt), np.float32)


def test_user_extended_dtype_conversions_print_as_jax():
    jax = _oracle()
    x = np.ones(3, np.float32)
    # (Not under grad: JAX 0.10.2's transpose of from_edtype reads ``.dtype`` of an undefined
    # primal and fails; jaxkit's gives the cotangent.)
    assert str(jaxkit.make_jaxpr(_round_trip(jaxkit))(x)) == \
        str(jax.make_jaxpr(_round_trip(jax))(x))
    xs = np.ones((2, 3), np.float32)  # batched (test_vmap_rules counts on this check)
    assert str(jaxkit.make_jaxpr(jaxkit.vmap(_round_trip(jaxkit), 1))(xs)) == \
        str(jax.make_jaxpr(jax.vmap(_round_trip(jax), 1))(xs))


@pytest.mark.parametrize("m_name", ["jaxkit", "jax"])
def test_user_extended_dtype_conversion_errors(m_name):
    m = jaxkit if m_name == "jaxkit" else _oracle()
    dt = _max_dtype(m)
    with pytest.raises(ValueError, match="Cannot convert_element_type from int32 to max32"):
        m.make_jaxpr(lambda x: m.lax.convert_element_type(x, dt))(np.ones(2, np.int32))


def test_user_extended_dtype_values_outside_jit():
    # Flax's fp8 layers run eagerly when ``jax._src.earray`` imports (CAN_USE_EARRAY; its
    # test_fp8_meta_dtype use_jit=False cases): values of the dtype are EArrays over their
    # representation arrays.
    jax = _oracle()
    x = np.array([1.5, -2.0], np.float32)
    seen = []
    for m in (jaxkit, jax):
        e = m.lax.convert_element_type(x, _max_dtype(m))
        back = m.lax.convert_element_type(e, np.float32)
        seen.append((type(e).__name__, str(e.dtype), e.shape, np.asarray(back).tolist()))
    assert seen[0] == seen[1]
