"""The staging, stacking and XLA-generator primitives of ``jax.lax`` against the JAX oracle:
how their jaxprs print, what the rules the generic table (``_lax_records``) cannot check do
(JAX's batching of ``rng_bit_generator``, the stateful ``rng_uniform``, ``dce_sink``,
``empty``, ``stage``, ``device_put`` inside ``jit`` and ``grad``), and their errors."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit
import jaxkit.lax as klax
import jaxkit.numpy as knp

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402

X = np.arange(6.0, dtype=np.float32).reshape(2, 3)
KEY = np.array([5, 6, 7, 8], np.uint32)

# (name, fn(api, lax, numpy), args): the same call traced by both libraries
JAXPRS = [
    ("stack", lambda A, L, N, x: L.stack([x, x], axis=1), (X,)),
    ("unstack", lambda A, L, N, x: L.unstack(x, axis=1), (X,)),
    ("tile", lambda A, L, N, x: L.tile(x, (2, 1)), (X,)),
    ("grad_tile", lambda A, L, N, x: A.grad(lambda x: L.tile(x, (2, 2)).sum())(x), (X,)),
    ("grad_stack", lambda A, L, N, x: A.grad(lambda x: L.stack([x, 2 * x]).sum())(x), (X,)),
    ("grad_unstack", lambda A, L, N, x: A.grad(lambda x: L.unstack(x)[1].sum())(x), (X,)),
    ("vmap_unstack", lambda A, L, N, x: A.vmap(L.unstack)(x), (X,)),
    ("mulhi", lambda A, L, N, x: L.mulhi(x, x), (np.arange(3, dtype=np.uint32),)),
    ("barrier", lambda A, L, N, x: L.optimization_barrier((x, x + 1)), (X,)),
    ("dce_sink", lambda A, L, N, x: L.dce_sink(x), (X,)),
    ("stage", lambda A, L, N, x: L.stage(x), (X,)),
    ("stop_gradient_p", lambda A, L, N, x: L.stop_gradient_p.bind(x), (X,)),
    ("eq_to", lambda A, L, N, x: L.eq_to_p.bind(x, x), (X,)),
    ("device_put", lambda A, L, N, x: A.device_put((x, 2 * x)), (X,)),
    ("device_put_device", lambda A, L, N, x: A.device_put(x, A.devices()[0]), (X,)),
    ("device_put_no_alias", lambda A, L, N, x: A.device_put(x, may_alias=False), (X,)),
    ("device_put_donate", lambda A, L, N, x: A.device_put(x, donate=True), (X,)),
    ("grad_device_put", lambda A, L, N, x: A.grad(lambda x: A.device_put(x).sum())(x), (X,)),
    ("rng_bit_generator", lambda A, L, N, k: L.rng_bit_generator(k, (3,)), (KEY,)),
    ("rng_uniform", lambda A, L, N: L.rng_uniform(0.0, 1.0, (3,)), ()),
    ("create_token", lambda A, L, N: L.create_token(), ()),
    ("after_all", lambda A, L, N: L.after_all(L.create_token(), L.create_token()), ()),
]


@pytest.mark.parametrize("name,fn,args", JAXPRS, ids=[r[0] for r in JAXPRS])
def test_jaxpr_prints_like_jax(name, fn, args):
    ours = jaxkit.make_jaxpr(lambda *a: fn(jaxkit, klax, knp, *a))(*args)
    theirs = jax.make_jaxpr(lambda *a: fn(jax, jax.lax, jjnp, *a))(*args)
    assert str(ours) == str(theirs)


def test_tokens_are_values_like_jax():
    token = klax.create_token()
    assert type(token) is jaxkit.core.Token and token.block_until_ready() is token
    assert jaxkit.core.get_aval(token) is jaxkit.core.abstract_token
    assert str(jaxkit.core.abstract_token) == str(jax.typeof(jax.lax.create_token()))
    for out in (jaxkit.jit(klax.create_token)(), klax.after_all(token, token),
                jaxkit.jit(lambda t: t)(token), jaxkit.jit(klax.after_all)(token, token)):
        assert type(out) is jaxkit.core.Token
    t, y = jaxkit.jit(lambda t, x: (klax.after_all(t), x + 1))(token, X)
    assert type(t) is jaxkit.core.Token
    np.testing.assert_array_equal(y, X + 1)
    # a token in a program is XLA's token type; at the program's boundary a bool[0]
    text = jaxkit.jit(lambda: klax.after_all(klax.create_token())).lower().as_text()
    assert "!stablehlo.token" in text and "-> (tensor<0xi1> {jax.result_info" in text
    # tokens ride along under grad and vmap
    assert float(jaxkit.grad(lambda x: (klax.create_token(), x * x)[1])(3.0)) == 6.0
    np.testing.assert_array_equal(
        jaxkit.vmap(lambda x: (klax.create_token(), x * 2)[1])(X), X * 2)


def test_empty_jaxpr_names_its_params_like_jax():
    # JAX prints the dtype as given (a class), jaxkit the canonical dtype: the rest is equal.
    ours = str(jaxkit.make_jaxpr(lambda: klax.empty((2, 3), np.float32))())
    assert ours == ("{ lambda ; . let\n    a:f32[2,3] = empty[dtype=float32 out_sharding=None "
                    "shape=(2, 3)] \n  in (a,) }")
    np.testing.assert_array_equal(klax.empty((2, 3), np.int32), np.zeros((2, 3), np.int32))
    assert jaxkit.jit(lambda: klax.empty(4, np.float32))().shape == (4,)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("algorithm", list(klax.RandomAlgorithm))
def test_rng_bit_generator_bits_match_jax(dtype, algorithm):
    jax.config.update("jax_enable_x64", True)
    try:
        with jaxkit.config.override(jax_enable_x64=True):  # uint64 bits need x64, as in JAX
            ours = klax.rng_bit_generator(KEY, (2, 5), dtype, algorithm)
        theirs = jax.lax.rng_bit_generator(KEY, (2, 5), dtype,
                                           jax.lax.RandomAlgorithm(int(algorithm)))
    finally:
        jax.config.update("jax_enable_x64", False)
    for o, t in zip(ours, theirs):
        assert o.dtype == t.dtype
        np.testing.assert_array_equal(o, t)


def test_rng_bit_generator_under_vmap_follows_jax():
    # JAX's batching rule draws the whole batch from the first key and advances only it.
    keys = np.stack([KEY, KEY + 10, KEY * 3])
    ours = jaxkit.vmap(lambda k: klax.rng_bit_generator(k, (4,)))(keys)
    theirs = jax.vmap(lambda k: jax.lax.rng_bit_generator(k, (4,)))(keys)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o, t)
    # ... which is one call on the first key with the batched shape
    np.testing.assert_array_equal(ours[1], klax.rng_bit_generator(KEY, (3, 4))[1])


def test_rng_bit_generator_derivative_is_zero():
    out, tangent = jaxkit.jvp(lambda k: klax.rng_bit_generator(k, (2,))[1], (KEY,),
                              (np.zeros(4, jaxkit.dtypes.float0),))
    assert tangent.dtype == jaxkit.dtypes.float0


def test_rng_uniform_draws_new_values_in_range():
    f = jaxkit.jit(lambda: klax.rng_uniform(np.float32(2.0), np.float32(3.0), (1000,)))
    a, b = np.asarray(f()), np.asarray(f())
    assert ((a >= 2.0) & (a < 3.0)).all() and not np.array_equal(a, b)
    ints = np.asarray(klax.rng_uniform(np.int32(0), np.int32(10), (2000,)))
    assert ints.dtype == np.int32 and set(np.unique(ints)) == set(range(10))


def test_rng_uniform_has_no_derivative_or_batching_rule_as_in_jax():
    with pytest.raises(NotImplementedError, match="rng_uniform"):
        jaxkit.jvp(lambda a: klax.rng_uniform(a, 1.0, (2,)), (0.0,), (1.0,))
    with pytest.raises(NotImplementedError, match="rng_uniform"):
        jaxkit.vmap(lambda a: klax.rng_uniform(a, 1.0, (2,)))(np.zeros(3, np.float32))


def test_dce_sink_keeps_its_equation_and_runs():
    f = lambda x: (klax.dce_sink(knp.sin(x)), x * 2)[1]  # noqa: E731
    assert "dce_sink" in str(jaxkit.make_jaxpr(f)(X))
    assert "sin" in str(jaxkit.jit(f).trace(X).jaxpr)
    np.testing.assert_array_equal(jaxkit.jit(f)(X), X * 2)
    assert klax.dce_sink(X) is None
    g = jaxkit.jit(lambda x: klax.dce_sink(x, prevent_mlir_dce=True))
    assert "stablehlo.custom_call @dce_sink" in g.lower(X).as_text()
    assert g(X) is None
    assert jaxkit.grad(lambda x: (klax.dce_sink(x), (x * x).sum())[1])(X).shape == X.shape


def test_stage_lifts_values():
    s = klax.stage(2.0)
    assert isinstance(s, jaxkit.Array) and float(s) == 2.0
    assert klax.stage(X).shape == (2, 3)
    x = knp.asarray(X)
    assert klax.stage(x) is x


def test_optimization_barrier_rules():
    f = lambda x, y: klax.optimization_barrier((x * y, knp.sin(y)))  # noqa: E731
    g = lambda x, y: jax.lax.optimization_barrier((x * y, jjnp.sin(y)))  # noqa: E731
    for o, t in zip(jaxkit.jvp(f, (X, X + 1), (X, X))[1], jax.jvp(g, (X, X + 1), (X, X))[1]):
        np.testing.assert_allclose(o, t, rtol=1e-6)
    ours = jaxkit.grad(lambda x: klax.optimization_barrier(x * x).sum())(X)
    np.testing.assert_allclose(ours, 2 * X)
    assert "optimization_barrier" in jaxkit.jit(f).lower(X, X).as_text()


def test_device_put_under_grad_and_jit():
    np.testing.assert_allclose(jaxkit.grad(lambda x: (jaxkit.device_put(x) ** 2).sum())(X), 2 * X)
    np.testing.assert_allclose(jaxkit.jit(lambda x: jaxkit.device_put(x, may_alias=False))(X), X)
    x = knp.asarray(X)
    assert jaxkit.device_put(x) is x
    copied = jaxkit.device_put(x, may_alias=False)
    assert copied is not x
    np.testing.assert_array_equal(copied, X)


ERRORS = [
    (lambda: klax.stack([]), ValueError, "non-empty"),
    (lambda: klax.stack([X, X[0]]), ValueError, "different numbers of dimensions"),
    (lambda: klax.stack([X, X.astype(np.int32)]), TypeError, "same dtypes, got float32, int32"),
    (lambda: klax.stack([X], axis=3), ValueError, "out of bounds"),
    (lambda: klax.unstack(X, axis=2), ValueError, "out of bounds"),
    (lambda: klax.tile(X, (2,)), TypeError, "reps length must be equal to the ndim"),
    # JAX crashes in MLIR here; jaxkit names the problem
    (lambda: klax.tile(X, (-1, 2)), ValueError, "nonnegative"),
    (lambda: klax.mulhi(X, X), TypeError, "mulhi does not accept dtype float32"),
    (lambda: klax.rng_bit_generator(KEY, (2,), np.float32), TypeError, "unsupported dtype"),
    # JAX fails an internal assertion here
    (lambda: klax.rng_bit_generator(KEY[:3], (2,)), TypeError, "shape \\(4,\\)"),
    (lambda: klax.rng_uniform(0.0, np.int32(1), (2,)), ValueError, "identical dtypes"),
    (lambda: klax.rng_uniform(np.zeros(2), np.ones(2), (2,)), ValueError, "must be scalars"),
    (lambda: klax.empty((-1,), np.float32), ValueError, "negative dimensions"),
    (lambda: jaxkit.device_put(X, donate=True, may_alias=True), ValueError, "cannot both"),
    (lambda: klax.after_all(X), TypeError, "after_all must be tokens, got f32\\[2,3\\]"),
]


@pytest.mark.parametrize("fn,exc,msg", ERRORS, ids=range(len(ERRORS)))
def test_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn()
