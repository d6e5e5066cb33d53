"""Regression tests for the causes of Optax/chex/Flax test-suite failures on jaxkit
(``bench/ecosystem_tests.py``), each checked against the JAX oracle where it is installed.

Each block names the library tests it came from. Checks run in this process on jaxkit and on
the real ``jax`` (the oracle, skipped where it is not installed) side by side.
"""
import pytest

import jaxkit
import jaxkit.numpy as jnp


def _oracle():
    return pytest.importorskip("jax")


# --------------------------------------------------------------------------------------------
# Typed keys are jax.Array instances (Flax's _is_valid_rng; optax linear_algebra_test
# test_power_iteration_mlp_hessian, Flax linen init with jax.random.key)
# --------------------------------------------------------------------------------------------

KEY_MAKERS = [
    ("key", lambda m: m.random.key(0)),
    ("split_keys", lambda m: m.random.split(m.random.key(1), 3)),
    ("wrapped", lambda m: m.random.wrap_key_data(m.random.key_data(m.random.key(2)))),
    ("raw_prngkey", lambda m: m.random.PRNGKey(0)),
]


@pytest.mark.parametrize("name,make", KEY_MAKERS, ids=[k[0] for k in KEY_MAKERS])
def test_key_arrays_are_jax_arrays(name, make):
    jax = _oracle()
    for mod, np_mod in ((jaxkit, jnp), (jax, jax.numpy)):
        k = make(mod)
        got = (isinstance(k, mod.Array), isinstance(k, np_mod.ndarray),
               issubclass(type(k), mod.Array), str(k.dtype), k.shape)
        if mod is jaxkit:
            mine = got
        else:
            assert mine == got, name


def test_non_arrays_are_still_not_jax_arrays():
    for x in (0, 1.5, [1, 2], (jnp.ones(2),), None, "a"):
        assert not isinstance(x, jaxkit.Array)
