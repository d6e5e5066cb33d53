"""Regression tests for the causes of Optax/chex/Flax test-suite failures on jaxkit
(``bench/ecosystem_tests.py``), each checked against the JAX oracle where it is installed.

Each block names the library tests it came from. Checks run in this process on jaxkit and on
the real ``jax`` (the oracle, skipped where it is not installed) side by side.
"""
import re

import numpy as np
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


# --------------------------------------------------------------------------------------------
# Lowered.as_text("hlo") / compiler_ir("hlo") give XLA HLO (optax numerics_test
# test_abs_sqr_hlo_equivalence*, which reads compiler_ir(dialect="hlo").as_hlo_text())
# --------------------------------------------------------------------------------------------

HLO_FUNS = [
    ("square_mul", lambda m: lambda x: x * x, 3.0),
    ("square_pow", lambda m: lambda x: x ** 2, 3.0),
    ("jnp_square", lambda m: m.numpy.square, [4.0, 5.2]),
    ("complex_abs_sq", lambda m: lambda x: (x.conj() * x).real, 3.0 + 1j),
    ("two_outputs", lambda m: lambda x, y: (m.numpy.sin(x) + y, x @ y), ([[1.0]], [[2.0]])),
]


def _entry_opcodes(hlo_text: str) -> list[str]:
    """The instruction opcodes of the ENTRY computation (names and argument labels left out:
    jaxkit names parameters Arg_i where JAX uses the Python argument names)."""
    entry = hlo_text[hlo_text.index("ENTRY"):]
    return re.findall(r"= \S+ ([\w-]+)\(", entry)


@pytest.mark.parametrize("name,make,arg", HLO_FUNS, ids=[r[0] for r in HLO_FUNS])
def test_lowered_hlo_dialect(name, make, arg):
    jax = _oracle()
    args = arg if isinstance(arg, tuple) else (arg,)
    texts = {}
    for mod in (jaxkit, jax):
        lowered = mod.jit(make(mod)).lower(*map(np.asarray, args))
        text = lowered.as_text(dialect="hlo")
        assert text == lowered.compiler_ir(dialect="hlo").as_hlo_text()
        assert text.startswith("HloModule ")
        texts[mod.__name__] = text
    assert _entry_opcodes(texts["jaxkit"]) == _entry_opcodes(texts["jax"]), texts


def test_lowered_dialect_default_and_errors():
    jax = _oracle()
    for mod in (jaxkit, jax):
        lowered = mod.jit(lambda x: x + 1).lower(1.0)
        assert lowered.as_text().startswith("module @")
        assert lowered.as_text(dialect="stablehlo") == lowered.as_text()
        with pytest.raises(ValueError, match="unknown dialect: mhlo"):
            lowered.as_text(dialect="mhlo")
        with pytest.raises(ValueError, match="unknown dialect: mhlo"):
            lowered.compiler_ir(dialect="mhlo")


# --------------------------------------------------------------------------------------------
# jax.typeof of a key array (Flax nnx's is_array_ref on every Rngs stream key: nnx
# rngs_test went from 45 failures to 15 with this and the isinstance fix above)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,make", KEY_MAKERS[:3], ids=[k[0] for k in KEY_MAKERS[:3]])
def test_typeof_key_array(name, make):
    jax = _oracle()
    mine, theirs = jaxkit.typeof(make(jaxkit)), jax.typeof(make(jax))
    assert (repr(mine), str(mine.dtype), mine.shape, mine.ndim, mine.str_short()) == \
        (repr(theirs), str(theirs.dtype), theirs.shape, theirs.ndim, theirs.str_short())
    assert jaxkit.dtypes.issubdtype(mine.dtype, jaxkit.dtypes.prng_key)
    assert mine == jaxkit.typeof(make(jaxkit)) and mine != jaxkit.typeof(jnp.zeros(mine.shape))


# --------------------------------------------------------------------------------------------
# out_sharding= on lax.dot_general, lax.dot and jnp.dot (Flax nnx Linear passes
# out_sharding=None to dot_general; nnx Embed.attend to jnp.dot)
# --------------------------------------------------------------------------------------------

DOT_CALLS = [
    ("dot_general", lambda m, x, y, s: m.lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                                         out_sharding=s)),
    ("lax_dot", lambda m, x, y, s: m.lax.dot(x, y, out_sharding=s)),
    ("jnp_dot", lambda m, x, y, s: m.numpy.dot(x, y, out_sharding=s)),
]


@pytest.mark.parametrize("name,call", DOT_CALLS, ids=[c[0] for c in DOT_CALLS])
def test_dot_out_sharding_none(name, call):
    jax = _oracle()
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    y = np.arange(6.0, dtype=np.float32).reshape(3, 2)
    mine, theirs = (call(m, m.numpy.asarray(x), m.numpy.asarray(y), None) for m in (jaxkit, jax))
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    assert mine.dtype == theirs.dtype


@pytest.mark.parametrize("name,call", DOT_CALLS, ids=[c[0] for c in DOT_CALLS])
def test_dot_out_sharding_refused(name, call):
    """out_sharding names Explicit mesh axes only (tests/test_explicit_sharding.py uses
    them); an Auto axis is refused with JAX's ValueError, never ignored."""
    mesh = jaxkit.sharding.Mesh(np.array(jaxkit.devices()[:1]), ("a",))
    s = jaxkit.sharding.NamedSharding(mesh, jaxkit.sharding.PartitionSpec("a"))
    with pytest.raises(ValueError, match="cannot contain axis names that are of type Auto or "
                                         "Manual. Got PartitionSpec: P\\('a',\\) with axis name: a"):
        call(jaxkit, jnp.ones((4, 3)), jnp.ones((3, 2)), s)


# --------------------------------------------------------------------------------------------
# Samplers take out_sharding=None (Flax nnx Dropout calls bernoulli so); key arrays copy()
# (Flax nnx rngs_test test_fork_rngs*)
# --------------------------------------------------------------------------------------------

SAMPLER_CALLS = [
    ("bernoulli", lambda m, k, s: m.random.bernoulli(k, 0.3, (5,), out_sharding=s)),
    ("uniform", lambda m, k, s: m.random.uniform(k, (2, 3), out_sharding=s)),
    ("normal", lambda m, k, s: m.random.normal(k, (4,), out_sharding=s)),
    ("exponential", lambda m, k, s: m.random.exponential(k, (3,), out_sharding=s)),
]


@pytest.mark.parametrize("name,call", SAMPLER_CALLS, ids=[c[0] for c in SAMPLER_CALLS])
def test_sampler_out_sharding(name, call):
    jax = _oracle()
    mine, theirs = (call(m, m.random.key(7), None) for m in (jaxkit, jax))
    np.testing.assert_array_equal(np.asarray(mine), np.asarray(theirs))
    # a layout over an Auto mesh lays the sample out (its values do not change), as in JAX
    laid_out = []
    for m in (jaxkit, jax):
        mesh = m.sharding.Mesh(np.array(m.devices()[:1]), ("a",))
        s = m.sharding.NamedSharding(mesh, m.sharding.PartitionSpec())
        laid_out.append(np.asarray(call(m, m.random.key(7), s)))
    np.testing.assert_array_equal(*laid_out)
    np.testing.assert_array_equal(laid_out[0], np.asarray(mine))


def test_key_array_copy():
    jax = _oracle()
    mine, theirs = (m.random.split(m.random.key(5), 2).copy() for m in (jaxkit, jax))
    assert repr(mine) == repr(theirs)
    np.testing.assert_array_equal(np.asarray(jaxkit.random.key_data(mine)),
                                  np.asarray(jax.random.key_data(theirs)))


@pytest.mark.parametrize("name,call", SAMPLER_CALLS,
                         ids=[c[0] for c in SAMPLER_CALLS])
def test_out_sharding_over_an_empty_mesh(name, call):
    """Flax passes NamedSharding(AbstractMesh((), ()), P(None, ...)): it lays nothing out."""
    jax = _oracle()
    outs = []
    for m in (jaxkit, jax):
        s = m.sharding.NamedSharding(m.sharding.AbstractMesh((), (), axis_types=()),
                                     m.sharding.PartitionSpec(None))
        outs.append(np.asarray(call(m, m.random.key(3), s)))
    np.testing.assert_array_equal(*outs)


def test_jit_with_shardings_that_are_all_unspecified():
    # Flax's nnx.jit passes in_shardings as a pytree of None ("unspecified"): no mesh is
    # named, so the call is an ordinary one (it used to fail looking for the mesh).
    def f(a, b):
        return {"y": a * 2 + b["c"]}

    args = (np.arange(3.0, dtype=np.float32), {"c": np.float32(1)})
    got = jaxkit.jit(f, in_shardings=(None, {"c": None}), out_shardings=None)(*args)
    want = _oracle().jit(f, in_shardings=(None, {"c": None}), out_shardings=None)(*args)
    np.testing.assert_array_equal(np.asarray(got["y"]), np.asarray(want["y"]))
