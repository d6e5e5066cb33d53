"""Regression tests for user-defined extended dtypes (JAX's ``_rules`` protocol), the cause of
Flax linen_test's ``Fp8Test.test_fp8_meta_dtype`` failures on jaxkit
(``bench/ecosystem_tests.py``): Flax's fp8 meta dtype is a float32 whose cotangents accumulate
by ``max``. Each check runs on jaxkit and on the JAX oracle side by side.
"""
import dataclasses
import functools

import numpy as np
import pytest

import jaxkit
from jaxkit._src_compat import core as compat_core
from jaxkit._src_compat import dtypes as compat_dtypes


def _oracle():
    return pytest.importorskip("jax")


@functools.cache
def _max_dtype(m):
    """A float32 whose cotangents are summed by ``max`` (as Flax's ``fp32_max_grad``), built
    from library ``m``'s private extended-dtype classes, as Flax builds it."""
    if m is jaxkit:
        core, dtypes = compat_core, compat_dtypes
    else:
        from jax._src import core, dtypes
    lax = m.lax

    class Rules:
        @staticmethod
        def physical_element_aval(dt):
            return core.ShapedArray((), dt.float_dtype)

        @staticmethod
        def convert_from(dt, other):
            return dt.float_dtype == other

        @staticmethod
        def convert_to(other, dt):
            return dt.float_dtype == other

        @staticmethod
        def add(dt, x, y):
            f = functools.partial(lax.convert_element_type, new_dtype=dt.float_dtype)
            return lax.convert_element_type(lax.max(f(x), f(y)), dt)

        @staticmethod
        def zero(dt):
            return lax.convert_element_type(np.array(-np.inf, dt.float_dtype), dt)

        @staticmethod
        def tangent_dtype(dt):
            return dt

        @staticmethod
        def full(shape, fill_value, dt):
            fill = lax.convert_element_type(fill_value, dt.float_dtype)
            return lax.convert_element_type(lax.full(shape, fill, dt.float_dtype), dt)

    class max_meta(dtypes.extended):  # noqa: N801
        pass

    @dataclasses.dataclass(frozen=True)
    class MaxF32(dtypes.ExtendedDType):
        float_dtype: np.dtype
        _rules: type = Rules
        type: type = max_meta

        def __repr__(self) -> str:
            return "max32"
        name = property(__repr__)

    return MaxF32(np.dtype(np.float32))


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


@pytest.mark.parametrize("m_name", ["jaxkit", "jax"])
def test_user_extended_dtype_conversion_errors(m_name):
    m = jaxkit if m_name == "jaxkit" else _oracle()
    dt = _max_dtype(m)
    with pytest.raises(ValueError, match="Cannot convert_element_type from int32 to max32"):
        m.make_jaxpr(lambda x: m.lax.convert_element_type(x, dt))(np.ones(2, np.int32))
