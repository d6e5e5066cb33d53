"""Regression tests for the causes of Flax 0.12.8 test-suite failures on jaxkit, found by
running the whole suite (``bench/ecosystem_tests.py --suites flax``) on both backends.

Each block names the Flax tests it came from; each check runs on jaxkit and on the real
``jax`` (the oracle, skipped where it is not installed) side by side in this process.
"""
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy  # noqa: F401  (m.numpy below)


def _oracle():
    return pytest.importorskip("jax")


def _same(mine, theirs):
    """Same type kind, dtype, weak type, shape and values."""
    assert isinstance(mine, jaxkit.Array) == hasattr(theirs, "aval")
    assert str(mine.dtype) == str(theirs.dtype)
    assert mine.weak_type == theirs.weak_type
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))


# --------------------------------------------------------------------------------------------
# builtin round() of an array of any shape gives an integer array (Flax cursor_test
# test_magic_methods: round(cursor + 0.123) on a 2x2 array)
# --------------------------------------------------------------------------------------------

ROUND_CASES = [
    ("matrix", lambda m: m.numpy.array([[1, -2], [3, 4]]) + 0.123, ()),
    ("scalar_half", lambda m: m.numpy.array(2.5), ()),
    ("ndigits", lambda m: m.numpy.array([1.26, -3.14159]), (1,)),
    ("ndigits0", lambda m: m.numpy.array([1.5, 2.5]), (0,)),
]


@pytest.mark.parametrize("make,args", [c[1:] for c in ROUND_CASES],
                         ids=[c[0] for c in ROUND_CASES])
def test_builtin_round_of_arrays(make, args):
    jax = _oracle()
    _same(round(make(jaxkit), *args), round(make(jax), *args))


def test_builtin_round_under_jit():
    jax = _oracle()
    x = np.array([0.5, 1.5, -2.7], np.float32)
    _same(jaxkit.jit(round)(x), jax.jit(round)(x))


# --------------------------------------------------------------------------------------------
# Lowered.cost_analysis(): XLA's estimate of the unoptimized program (Flax linen summary_test,
# 15 tests: tabulate counts flops through jit(f).lower(...).cost_analysis())
# --------------------------------------------------------------------------------------------

def _matmul_tanh(m):
    return lambda x, w: m.numpy.tanh(x @ w).sum()


def test_lowered_cost_analysis():
    jax = _oracle()
    x, w = np.ones((4, 8), np.float32), np.ones((8, 3), np.float32)
    mine = jaxkit.jit(_matmul_tanh(jaxkit)).lower(x, w).cost_analysis()
    theirs = jax.jit(_matmul_tanh(jax)).lower(x, w).cost_analysis()
    assert mine == theirs
    assert mine["flops"] > 0
    # A program with no operations costs nothing: an empty dict, not None.
    assert jaxkit.jit(lambda: None).lower().cost_analysis() == \
        jax.jit(lambda: None).lower().cost_analysis()
