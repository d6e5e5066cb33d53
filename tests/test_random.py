"""jaxkit.random against the jax oracle: identical key bits (PRNGKey, split, fold_in, bits) and
every sampler's numbers for the same keys, eagerly; under jit and under vmap over keys, the same
numbers as eagerly."""
import warnings

import numpy as np
import pytest
from platform_checks import assert_equal_or_ulps

import jaxkit
from jaxkit import random
from jaxkit.api import grad
from jaxkit.transforms.vmap import vmap

jax = pytest.importorskip("jax")
jr = jax.random


def assert_bits_equal(x, ref):
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.dtype == ref.dtype, (x.dtype, ref.dtype)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    # bits exactly; floats derived from them exactly on the oracle's platform (a GPU's
    # log/erf_inv may round the last bit differently)
    assert_equal_or_ulps(x, ref)


def assert_close(x, ref, rtol=2e-5, atol=2e-6):
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.dtype == ref.dtype, (x.dtype, ref.dtype)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    if x.dtype == np.bool_ or np.issubdtype(x.dtype, np.integer):
        np.testing.assert_array_equal(x, ref)
    else:
        np.testing.assert_allclose(x, ref, rtol=rtol, atol=atol, equal_nan=True)


# --------------------------------------------------------------------------------------------
# Key derivations: identical bits
# --------------------------------------------------------------------------------------------

SEEDS = [0, 1, 42, -1, -5, 2 ** 31, 2 ** 32 + 7, 2 ** 40 + 3, 2 ** 63 - 1, -2 ** 63,
         np.uint32(2 ** 32 - 1), np.int8(-3), np.int64(123456789012)]


@pytest.mark.parametrize("seed", SEEDS, ids=repr)
def test_prngkey(seed):
    assert_bits_equal(random.PRNGKey(seed), jr.PRNGKey(seed))


@pytest.mark.parametrize("seed", [2 ** 40 + 3, -1, -2 ** 40, 2 ** 63 - 1,
                                  np.uint64(2 ** 64 - 1)], ids=repr)
def test_prngkey_x64(x64, seed):
    assert_bits_equal(random.PRNGKey(seed), jr.PRNGKey(seed))


def test_prngkey_errors():
    with pytest.raises(OverflowError):
        random.PRNGKey(2 ** 64)
    with pytest.raises(TypeError, match="seed must be an integer"):
        random.PRNGKey(1.5)
    with pytest.raises(TypeError, match="scalar seed"):
        random.PRNGKey(np.array([1, 2]))
    with pytest.raises(TypeError, match="scalar seed, but was given a PRNG key"):
        random.key(random.key(0))


def test_prngkey_under_jit_and_vmap():
    seeds = np.array([0, 3, -7, 2 ** 31 - 1], np.int32)
    assert_bits_equal(jaxkit.jit(random.PRNGKey)(seeds[2]), jr.PRNGKey(int(seeds[2])))
    assert_bits_equal(vmap(random.PRNGKey)(seeds), jax.vmap(jr.PRNGKey)(seeds))


KEY_SEEDS = [0, 7, 2 ** 31 + 5]


@pytest.mark.parametrize("seed", KEY_SEEDS)
@pytest.mark.parametrize("num", [2, 3, 1, (2, 3)], ids=str)
def test_split(seed, num):
    assert_bits_equal(random.split(random.PRNGKey(seed), num),
                      jr.split(jr.PRNGKey(seed), num))


@pytest.mark.parametrize("seed", KEY_SEEDS)
@pytest.mark.parametrize("data", [0, 1, 5, 2 ** 31, 2 ** 32 - 1, np.int32(-4)], ids=repr)
def test_fold_in(seed, data):
    assert_bits_equal(random.fold_in(random.PRNGKey(seed), data),
                      jr.fold_in(jr.PRNGKey(seed), data))


@pytest.mark.parametrize("seed", KEY_SEEDS)
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32"])
def test_bits(seed, shape, dtype):
    assert_bits_equal(random.bits(random.PRNGKey(seed), shape, dtype),
                      jr.bits(jr.PRNGKey(seed), shape, dtype))


@pytest.mark.parametrize("shape", [(), (5,), (2, 3)], ids=str)
def test_bits_64(x64, shape):
    assert_bits_equal(random.bits(random.PRNGKey(3), shape), jr.bits(jr.PRNGKey(3), shape))
    assert_bits_equal(random.uniform(random.PRNGKey(3), shape),
                      jr.uniform(jr.PRNGKey(3), shape))
    assert_bits_equal(random.normal(random.PRNGKey(4), shape, "float64"),
                      jr.normal(jr.PRNGKey(4), shape, "float64"))


def test_bits_errors():
    k = random.PRNGKey(0)
    with pytest.raises(ValueError, match="must be an unsigned int dtype"):
        random.bits(k, (3,), np.int32)
    with pytest.raises(ValueError, match="accepts a single key"):
        random.bits(random.split(k), (3,))
    with pytest.raises(TypeError, match="end with \\(2,\\)"):
        random.bits(np.zeros(3, np.uint32), (3,))
    with pytest.raises(TypeError, match="dtype = uint32"):
        random.bits(np.zeros(2, np.int32), (3,))
    with pytest.warns(UserWarning, match="truncated to dtype uint32"):
        assert random.bits(k, (2,), np.uint64).dtype == np.uint32


def test_derivations_under_jit_and_vmap():
    keys = random.split(random.PRNGKey(1), 4)
    jkeys = jr.split(jr.PRNGKey(1), 4)
    assert_bits_equal(jaxkit.jit(lambda k: random.split(k, 3))(keys[0]), jr.split(jkeys[0], 3))
    assert_bits_equal(vmap(lambda k: random.split(k, 3))(keys),
                      jax.vmap(lambda k: jr.split(k, 3))(jkeys))
    data = np.arange(4, dtype=np.uint32) * 1000
    assert_bits_equal(vmap(random.fold_in)(keys, data), jax.vmap(jr.fold_in)(jkeys, data))
    assert_bits_equal(vmap(random.fold_in, (None, 0))(keys[1], data),
                      jax.vmap(jr.fold_in, (None, 0))(jkeys[1], data))
    assert_bits_equal(vmap(lambda k: random.bits(k, (5,)))(keys),
                      jax.vmap(lambda k: jr.bits(k, (5,)))(jkeys))


# --------------------------------------------------------------------------------------------
# Typed keys
# --------------------------------------------------------------------------------------------


def test_typed_keys():
    k = random.key(42)
    assert repr(k) == repr(jr.key(42))
    assert k.shape == () and str(k.dtype) == "key<fry>"
    assert_bits_equal(random.key_data(k), jr.key_data(jr.key(42)))
    ks = random.split(k, 3)
    assert isinstance(ks, random.PRNGKeyArray) and ks.shape == (3,) and len(ks) == 3
    assert repr(ks) == repr(jr.split(jr.key(42), 3))
    assert_bits_equal(random.key_data(ks[1]), jr.key_data(jr.split(jr.key(42), 3)[1]))
    k1, k2 = random.split(k)
    assert_bits_equal(random.key_data(random.fold_in(k2, 9)),
                      jr.key_data(jr.fold_in(jr.split(jr.key(42))[1], 9)))
    assert_bits_equal(random.normal(k1, (4,)), jr.normal(jr.split(jr.key(42))[0], (4,)))
    assert bool(random.wrap_key_data(random.key_data(k)) == k)
    assert random.key_impl(k) == "threefry2x32"
    with pytest.raises(TypeError, match="cannot be converted to boolean"):
        bool(k)


def test_typed_keys_through_jit_and_vmap():
    ks = random.split(random.key(5), 4)
    jks = jr.split(jr.key(5), 4)

    @jaxkit.jit
    def f(k):
        k1, k2 = random.split(k)
        return k1, random.uniform(k2, (3,))

    (k1, u), (jk1, ju) = f(ks[0]), jax.jit(lambda k: (jr.split(k)[0],
                                                      jr.uniform(jr.split(k)[1], (3,))))(jks[0])
    assert isinstance(k1, random.PRNGKeyArray)
    assert_bits_equal(random.key_data(k1), jr.key_data(jk1))
    assert_bits_equal(u, ju)
    out = vmap(lambda k: random.normal(k, (2,)))(ks)
    assert_bits_equal(out, jax.vmap(lambda k: jr.normal(k, (2,)))(jks))
    split_keys = vmap(random.split)(ks)
    assert isinstance(split_keys, random.PRNGKeyArray) and split_keys.shape == (4, 2)
    assert_bits_equal(random.key_data(split_keys), jr.key_data(jax.vmap(jr.split)(jks)))


# --------------------------------------------------------------------------------------------
# Samplers: one row per call, compared eagerly, under jit and under vmap over keys
# --------------------------------------------------------------------------------------------

LOGITS = np.array([[0.5, -1.0, 2.0, 0.1], [1.0, 1.0, -3.0, 0.0]], np.float32)
PROBS = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
ALPHAS = np.array([0.3, 1.0, 2.5, 9.0], np.float32)
COV = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]], np.float32)

# (id, call(r, key) where r is the random module, whether the row needs float tolerance)
SAMPLERS = [
    ("uniform", lambda r, k: r.uniform(k, (7,))),
    ("uniform_2d_minmax", lambda r, k: r.uniform(k, (2, 3), minval=-2., maxval=3.)),
    ("uniform_bcast_bounds", lambda r, k: r.uniform(k, (2, 3), minval=np.zeros((2, 1)),
                                                    maxval=np.arange(1, 4.))),
    ("uniform_f16", lambda r, k: r.uniform(k, (5,), "float16")),
    ("uniform_bf16", lambda r, k: r.uniform(k, (5,), "bfloat16")),
    ("uniform_scalar", lambda r, k: r.uniform(k)),
    ("normal", lambda r, k: r.normal(k, (7,))),
    ("normal_2d", lambda r, k: r.normal(k, (2, 3))),
    ("normal_f16", lambda r, k: r.normal(k, (5,), "float16")),
    ("normal_complex", lambda r, k: r.normal(k, (3,), "complex64")),
    ("randint", lambda r, k: r.randint(k, (7,), -5, 17)),
    ("randint_uint8_full", lambda r, k: r.randint(k, (6,), 0, 256, "uint8")),
    ("randint_int8", lambda r, k: r.randint(k, (6,), -100, 100, "int8")),
    ("randint_bounds", lambda r, k: r.randint(k, (2, 3), np.array([0, 10, 20]), 30)),
    ("randint_empty_span", lambda r, k: r.randint(k, (4,), 5, 3)),
    ("bernoulli", lambda r, k: r.bernoulli(k, 0.3, (7,))),
    ("bernoulli_p_array", lambda r, k: r.bernoulli(k, PROBS)),
    ("bernoulli_high", lambda r, k: r.bernoulli(k, 0.3, (5,), mode="high")),
    ("truncated_normal", lambda r, k: r.truncated_normal(k, -1.5, 2., (7,))),
    ("exponential", lambda r, k: r.exponential(k, (7,))),
    ("cauchy", lambda r, k: r.cauchy(k, (7,))),
    ("laplace", lambda r, k: r.laplace(k, (7,))),
    ("logistic", lambda r, k: r.logistic(k, (7,))),
    ("gumbel", lambda r, k: r.gumbel(k, (7,))),
    ("gumbel_high", lambda r, k: r.gumbel(k, (5,), mode="high")),
    ("gumbel_highest", lambda r, k: r.gumbel(k, (5,), mode="highest")),
    ("rademacher", lambda r, k: r.rademacher(k, (7,))),
    ("maxwell", lambda r, k: r.maxwell(k, (5,))),
    ("double_sided_maxwell", lambda r, k: r.double_sided_maxwell(k, 1., 2., (5,))),
    ("weibull_min", lambda r, k: r.weibull_min(k, 2., 1.5, (5,))),
    ("pareto", lambda r, k: r.pareto(k, 3., (5,))),
    ("rayleigh", lambda r, k: r.rayleigh(k, 2., (5,))),
    ("wald", lambda r, k: r.wald(k, 1.5, (5,))),
    ("geometric", lambda r, k: r.geometric(k, 0.3, (7,))),
    ("triangular", lambda r, k: r.triangular(k, 0., 1., 3., (5,))),
    ("lognormal", lambda r, k: r.lognormal(k, 0.5, (5,))),
    ("categorical", lambda r, k: r.categorical(k, LOGITS)),
    ("categorical_axis0_shape", lambda r, k: r.categorical(k, LOGITS, axis=0, shape=(3, 4))),
    ("categorical_no_replace", lambda r, k: r.categorical(k, LOGITS[0], shape=(3,),
                                                          replace=False)),
    ("choice", lambda r, k: r.choice(k, 10, (4,))),
    ("choice_array_no_replace", lambda r, k: r.choice(k, np.arange(6.) * 2, (3,),
                                                      replace=False)),
    ("choice_p", lambda r, k: r.choice(k, 4, (5,), p=PROBS)),
    ("choice_p_no_replace", lambda r, k: r.choice(k, 4, (2,), replace=False, p=PROBS)),
    ("permutation_int", lambda r, k: r.permutation(k, 10)),
    ("permutation_array", lambda r, k: r.permutation(k, np.arange(12).reshape(3, 4), axis=1)),
    ("permutation_independent", lambda r, k: r.permutation(k, np.arange(12).reshape(3, 4),
                                                           axis=1, independent=True)),
    ("gamma", lambda r, k: r.gamma(k, ALPHAS)),
    ("gamma_shape", lambda r, k: r.gamma(k, 0.7, (5,))),
    ("loggamma", lambda r, k: r.loggamma(k, ALPHAS)),
    ("beta", lambda r, k: r.beta(k, 2., ALPHAS)),
    ("dirichlet", lambda r, k: r.dirichlet(k, ALPHAS)),
    ("t", lambda r, k: r.t(k, 4., (5,))),
    ("chisquare", lambda r, k: r.chisquare(k, 3., (5,))),
    ("f", lambda r, k: r.f(k, 3., 5., (4,))),
    ("generalized_normal", lambda r, k: r.generalized_normal(k, 1.5, (5,))),
    ("ball", lambda r, k: r.ball(k, 3, shape=(2,))),
    ("poisson", lambda r, k: r.poisson(k, 3.5, (7,))),
    ("poisson_large", lambda r, k: r.poisson(k, np.array([0., 2., 15., 300.]))),
    ("binomial", lambda r, k: r.binomial(k, 10., 0.3, (5,))),
    ("binomial_large", lambda r, k: r.binomial(k, np.array([5., 100., 1000.]), 0.6)),
    ("multinomial", lambda r, k: r.multinomial(k, 20., PROBS)),
    ("orthogonal", lambda r, k: r.orthogonal(k, 3)),
    ("orthogonal_rect", lambda r, k: r.orthogonal(k, 2, (2,), m=4)),
    ("multivariate_normal", lambda r, k: r.multivariate_normal(k, np.zeros(3, np.float32),
                                                               COV, (2,))),
]
SAMPLER_IDS = [row[0] for row in SAMPLERS]


def _pair(call, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(random, random.PRNGKey(seed)), call(jr, jr.PRNGKey(seed))


@pytest.mark.parametrize("seed", [0, 123])
@pytest.mark.parametrize("call", [row[1] for row in SAMPLERS], ids=SAMPLER_IDS)
def test_sampler_eager(call, seed):
    out, ref = _pair(call, seed)
    assert_close(out, ref)


# Under jit and vmap each sampler is held to its own eager numbers (jit vs eager, vmap vs a loop
# of eager calls), which test_sampler_eager holds to JAX's: the oracle's own jit and vmap
# programs would only repeat that comparison, at twice the compile time.
def _eager(call, key):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(random, key)


@pytest.mark.parametrize("call", [row[1] for row in SAMPLERS], ids=SAMPLER_IDS)
def test_sampler_jit(call):
    key = random.PRNGKey(11)
    assert_close(jaxkit.jit(lambda k: call(random, k))(key), _eager(call, key))


@pytest.mark.parametrize("call", [row[1] for row in SAMPLERS], ids=SAMPLER_IDS)
def test_sampler_vmap(call):
    keys = random.split(random.PRNGKey(5), 3)
    loop = np.stack([np.asarray(_eager(call, keys[i])) for i in range(3)])
    assert_close(vmap(lambda k: call(random, k))(keys), loop)


def test_samplers_under_x64(x64):
    for name, call in [("normal", lambda r, k: r.normal(k, (5,))),
                       ("randint", lambda r, k: r.randint(k, (5,), -3, 2 ** 40)),
                       ("exponential", lambda r, k: r.exponential(k, (4,))),
                       ("gamma", lambda r, k: r.gamma(k, np.array([0.5, 3.0])))]:
        out, ref = _pair(call, 2)
        assert_close(out, ref, rtol=1e-12, atol=1e-14)


def test_sampler_errors():
    k = random.PRNGKey(0)
    with pytest.raises(ValueError, match="must be a float dtype, got int32"):
        random.uniform(k, (3,), np.int32)
    with pytest.raises(ValueError, match="float or complex dtype"):
        random.normal(k, (3,), np.int32)
    with pytest.raises(TypeError, match="randint only accepts integer dtypes"):
        random.randint(k, (3,), 0, 5, np.float32)
    with pytest.raises(ValueError, match="accepts a single key"):
        random.normal(random.split(k), (3,))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        random.uniform(k, (3,), minval=np.zeros(4))
    with pytest.raises(ValueError, match="broadcast-compatible with shape"):
        random.uniform(k, (3,), minval=np.zeros((2, 3)))
    with pytest.raises(TypeError, match="Shapes must be 1D sequences"):
        random.normal(k, (2.5,))
    with pytest.raises(ValueError, match="Cannot take a larger sample"):
        random.choice(k, 3, (5,), replace=False)
    with pytest.raises(TypeError, match="must have a floating dtype"):
        random.bernoulli(k, 1)


def test_parameter_gradients():
    k, jk = random.PRNGKey(8), jr.PRNGKey(8)
    g = grad(lambda lo, hi: random.uniform(k, (5,), minval=lo, maxval=hi).sum(), (0, 1))
    jg = jax.grad(lambda lo, hi: jr.uniform(jk, (5,), minval=lo, maxval=hi).sum(), (0, 1))
    for a, b in zip(g(-1., 2.), jg(-1., 2.)):
        assert_close(a, b)
    g = grad(lambda lo: random.truncated_normal(k, lo, 1.5, (5,)).sum())
    jg = jax.grad(lambda lo: jr.truncated_normal(jk, lo, 1.5, (5,)).sum())
    assert_close(g(-0.5), jg(-0.5), rtol=1e-4)
    a = np.array([0.4, 1.0, 3.0], np.float32)
    assert_close(grad(lambda a: random.gamma(k, a).sum())(a),
                 jax.grad(lambda a: jr.gamma(jk, a).sum())(a), rtol=1e-4)


def test_jaxpr_is_compact():
    text = str(jaxkit.make_jaxpr(lambda k: random.split(k, 3))(random.PRNGKey(0)))
    # one random_split equation on the wrapped key, as JAX's: threefry's 20 rounds live in
    # its lowering only
    assert text.count("random_split[shape=(3,)]") == 1 and "random_wrap" in text
    assert text.count("shift_left") == 0 and "threefry2x32" not in text
