"""The rejection samplers of ``jaxkit.random``: gamma (Marsaglia-Tsang) and what is drawn from
it (beta, dirichlet, t, chisquare, f, generalized_normal, ball), poisson (Knuth / Hormann's
transformed rejection) and binomial (inversion / BTRS), multinomial.

Each is JAX's algorithm with its ``while_loop``s, so the number of draws an element consumes
(and so every later number) is JAX's. ``random_gamma`` is a primitive as in JAX: one key per
element, each element's loop run in turn (``lax.map``); its JVP in ``a`` is the implicit
reparameterisation gradient ``lax.random_gamma_grad``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.interpreters import dispatch
from jaxkit.lax.sharding_rules import defsharding, named_elementwise_rule
from jaxkit import numpy as jnp
from jaxkit.numpy._promotion import promote_dtypes_inexact
from jaxkit.transforms.jit import jit
from jaxkit.transforms.vmap import vmap
from jaxkit.random.key_prims import (canonicalize_sharding,
                                     check_prng_key, check_sampler_args, laid_out,
                                     random_split_p, split, split_list)
from jaxkit.random.prng import (
    broadcast_shapes,
    canonicalize_shape,
    check_all_safe_to_cast,
    check_broadcast_shapes,
    check_shape,
    float_dtype,
    fry_dtype,
    iota_2x32_shape,
    threefry2x32,
    user_dtype,
)
from jaxkit.random.samplers import exponential, normal, rademacher, uniform
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.typing import Array, ArrayLike, DTypeLike

Shape = Sequence[int]

# --------------------------------------------------------------------------------------------
# gamma
# --------------------------------------------------------------------------------------------


def _gamma_one(key, alpha, log_space: bool):
    """One Gamma(alpha) sample by Marsaglia and Tsang's method (a scalar ``alpha``)."""
    dtype = dtypes.dtype(alpha)
    zero, one, two = (np.array(v, dtype) for v in (0, 1, 2))
    minus_one = np.array(-1, dtype)
    one_over_two = np.array(0.5, dtype)
    one_over_three = np.array(1. / 3., dtype)
    squeeze_const = np.array(0.0331, dtype)
    # For alpha < 1, sample Gamma(alpha + 1) * Uniform()^(1 / alpha), the boost computed in log
    # space when asked (small alpha underflows otherwise).
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, one_over_three)
    c = lax.div(one_over_three, lax.sqrt(d))

    def cond_fn(kxvu):
        _, x, v, u = kxvu
        return lax.bitwise_and(
            lax.ge(u, lax.sub(one, lax.mul(squeeze_const, lax.mul(x, x)))),
            lax.ge(lax.log(u), lax.add(lax.mul(x, one_over_two),
                                       lax.mul(d, lax.add(lax.sub(one, v), lax.log(v))))))

    def body_fn(kxvu):
        def next_kxv(kxv):
            k, subkey = split_list(kxv[0])
            x = normal(subkey, (), dtype=dtype)
            return k, x, lax.add(one, lax.mul(x, c))

        k, x_key, u_key = split_list(kxvu[0], 3)
        _, x, v = lax.while_loop(lambda kxv: lax.le(kxv[2], zero), next_kxv,
                                 (x_key, zero, minus_one))
        u = uniform(u_key, (), dtype=dtype)
        return k, lax.mul(x, x), lax.mul(lax.mul(v, v), v), u

    # The initial state makes cond_fn true.
    key, subkey = split_list(key)
    _, _, v, _ = lax.while_loop(cond_fn, body_fn, (key, zero, one, two))
    if log_space:
        log_samples = lax.neg(exponential(subkey, (), dtype=dtype))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_samples, zero)), zero,
                               lax.mul(log_samples, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(v)), log_boost)
    samples = lax.sub(one, uniform(subkey, (), dtype=dtype))
    boost = lax.select(boost_mask, one, lax.pow(samples, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, v), boost)


def _split_many(keys, num: int):
    """``split(k, num)`` of each raw key of ``keys`` (``uint32[n, 2]`` -> ``[n, num, 2]``)."""
    n = keys.shape[0]
    k1 = lax.broadcast_in_dim(lax.reshape(lax.slice(keys, (0, 0), (n, 1)), (n,)), (n, num),
                              (0,))
    k2 = lax.broadcast_in_dim(lax.reshape(lax.slice(keys, (0, 1), (n, 2)), (n,)), (n, num),
                              (0,))
    c1, c2 = (lax.broadcast_in_dim(c, (n, num), (1,)) for c in iota_2x32_shape((num,)))
    b1, b2 = threefry2x32(k1, k2, c1, c2)
    return lax.concatenate([lax.reshape(b1, (n, num, 1)), lax.reshape(b2, (n, num, 1))], 2)


def _gamma_impl(key, a, *, log_space: bool):
    """Split each key (of the keys' uint32[..., 2] data) into one key per element of ``a``
    it covers, then sample elementwise."""
    a_shape = tuple(np.shape(a))
    key_batch = tuple(key.shape[:-1])
    split_count = math.prod(a_shape[len(key_batch):])
    keys = _split_many(lax.reshape(key, (math.prod(key_batch), 2)), split_count)
    keys = lax.reshape(keys, (math.prod(a_shape), 2))
    alphas = lax.reshape(a, (math.prod(a_shape),))
    # All samples at once, as JAX lowers it: one rejection loop running until every element
    # is accepted (elementwise, so it is partitioned with the keys, where a loop over the
    # elements ran whole on every device). The numbers are those of one loop per element.
    samples = vmap(lambda k, a: _gamma_one(k, a, log_space))(keys, alphas)
    return lax.reshape(samples, a_shape)


def _gamma_abstract_eval(key, a, *, log_space):
    if key.dtype != fry_dtype:
        raise TypeError(f"random_gamma takes typed keys (key<fry>), got {key.str_short()}")
    return a.strip_weak_type()


def _gamma_grad(sample, a, *, log_space: bool):
    samples = jnp.reshape(sample, -1)
    alphas = jnp.reshape(a, -1)
    if log_space:
        # d[log(sample)] = d[sample] / sample; exp(log_sample) may round to 0: use tiny.
        samples = lax.exp(samples)
        tiny = lax.full_like(samples, dtypes.finfo(samples.dtype).tiny)
        samples = lax.select(lax.eq(samples, lax.full_like(samples, 0)), tiny, samples)
        grads = lax.random_gamma_grad(alphas, samples) / samples
    else:
        grads = lax.random_gamma_grad(alphas, samples)
    return jnp.reshape(grads, np.shape(a))


def _gamma_jvp(primals, tangents, *, log_space):
    key, a = primals
    _, a_dot = tangents
    ans = random_gamma_p.bind(key, a, log_space=log_space)
    if type(a_dot) is ad.Zero:
        return ans, ad.Zero(core.get_aval(ans).to_tangent_aval())
    return ans, a_dot * _gamma_grad(ans, a, log_space=log_space)


def _gamma_batch(axis_data, batched_args, batch_dims, *, log_space):
    k, a = batched_args
    bk, ba = batch_dims
    size = batching.batch_size(batched_args, batch_dims)
    k = batching.bdim_at_front(k, bk, size)
    a = batching.bdim_at_front(a, ba, size)
    return random_gamma_p.bind(k, a, log_space=log_space), 0


random_gamma_p = core.Primitive("random_gamma")
random_gamma_p.def_impl(partial(dispatch.apply_primitive, random_gamma_p))
random_gamma_p.def_abstract_eval(_gamma_abstract_eval)
defsharding(random_gamma_p, named_elementwise_rule("random_gamma"))
ad.defjvp_rule(random_gamma_p, _gamma_jvp)
batching.defrule(random_gamma_p, _gamma_batch)
# Lowered on the keys' uint32[..., 2] data.
mlir.register_lowering(random_gamma_p, mlir.lower_fun(_gamma_impl, physical=True), physical=True)


def gamma(key, a: ArrayLike, shape: Shape | None = None,
          dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Gamma(a, 1) samples (Marsaglia-Tsang)."""
    key, _ = check_prng_key("gamma", key)
    dtype = float_dtype("gamma", dtype)
    if shape is not None:
        shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "gamma")
    return laid_out(_gamma, out_sharding, shape=shape, dtype=dtype)(key, a)


def loggamma(key, a: ArrayLike, shape: Shape | None = None,
             dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """``log`` of Gamma(a, 1) samples, accurate for small ``a``."""
    key, _ = check_prng_key("loggamma", key)
    dtype = float_dtype("gamma", dtype)
    if shape is not None:
        shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "loggamma")
    return laid_out(_gamma, out_sharding, shape=shape, dtype=dtype, log_space=True)(
        key, a)


@partial(jit, static_argnames=("shape", "dtype", "log_space"))
def _gamma(key, a, shape, dtype, log_space=False) -> Array:
    if shape is None:
        shape = tuple(np.shape(a))
    else:
        check_shape("gamma", shape, np.shape(a))
    a = lax.convert_element_type(a, dtype)
    if tuple(np.shape(a)) != shape:
        a = jnp.broadcast_to(a, shape)
    return random_gamma_p.bind(key, a, log_space=log_space)


# --------------------------------------------------------------------------------------------
# Samplers drawn from gamma
# --------------------------------------------------------------------------------------------


def beta(key, a: ArrayLike, b: ArrayLike, shape: Shape | None = None,
         dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Beta(a, b) samples: ``Ga / (Ga + Gb)`` computed from log-gamma samples."""
    key, _ = check_prng_key("beta", key)
    dtype = float_dtype("beta", dtype)
    check_all_safe_to_cast("beta", dtype, a, b)
    shape = check_broadcast_shapes("beta", shape, a, b)
    out_sharding = canonicalize_sharding(out_sharding, "beta")
    return laid_out(_beta, out_sharding, shape=shape, dtype=dtype)(key, a, b)


@partial(jit, static_argnums=(3, 4))
def _beta(key, a, b, shape, dtype) -> Array:
    a = lax.convert_element_type(a, dtype)
    b = lax.convert_element_type(b, dtype)
    key_a, key_b = split_list(key)
    a, b = jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape)
    log_gamma_a = loggamma(key_a, a, shape, dtype)
    log_gamma_b = loggamma(key_b, b, shape, dtype)
    # gamma_a / (gamma_a + gamma_b) without losing precision.
    log_max = lax.max(log_gamma_a, log_gamma_b)
    gamma_a_scaled = jnp.exp(log_gamma_a - log_max)
    gamma_b_scaled = jnp.exp(log_gamma_b - log_max)
    return gamma_a_scaled / (gamma_a_scaled + gamma_b_scaled)


def dirichlet(key, alpha: ArrayLike, shape: Shape | None = None,
              dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Dirichlet(alpha) samples over the last axis of ``alpha``."""
    key, _ = check_prng_key("dirichlet", key)
    dtype = float_dtype("dirichlet", dtype)
    if shape is not None:
        shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "dirichlet")
    return laid_out(_dirichlet, out_sharding, shape=shape, dtype=dtype)(key, alpha)


@partial(jit, static_argnums=(2, 3))
def _dirichlet(key, alpha, shape, dtype) -> Array:
    if not np.ndim(alpha) >= 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                         f"{np.ndim(alpha)}")
    if shape is None:
        shape = tuple(np.shape(alpha)[:-1])
    else:
        check_shape("dirichlet", shape, np.shape(alpha)[:-1])
    alpha = lax.convert_element_type(alpha, dtype)
    # Gamma in log space (small alpha behaves badly otherwise), normalised by a softmax
    # (jax.nn.softmax's default formula; nn sits beside random, so it is written here).
    log_gamma_samples = loggamma(key, alpha, shape + np.shape(alpha)[-1:], dtype)
    x_max = jnp.max(log_gamma_samples, -1, initial=-np.inf, keepdims=True)
    unnormalized = jnp.exp(log_gamma_samples - lax.stop_gradient(x_max))
    return unnormalized / jnp.sum(unnormalized, -1, keepdims=True)


def t(key, df: ArrayLike, shape: Shape | None = None, dtype: DTypeLike | None = None, *,
      out_sharding=None) -> Array:
    """Student's t samples with ``df`` degrees of freedom."""
    key, shape, dtype, out_sharding = check_sampler_args(
        "t", key, shape, dtype, df, out_sharding=out_sharding, cast_first=False)
    return laid_out(_t, out_sharding, shape=shape, dtype=dtype)(key, df)


@partial(jit, static_argnums=(2, 3))
def _t(key, df, shape, dtype) -> Array:
    df = lax.convert_element_type(df, dtype)
    key_n, key_g = split_list(key)
    n = normal(key_n, shape, dtype)
    half_df = lax.div(df, np.array(2, dtype))
    g = gamma(key_g, half_df, shape, dtype)
    return n * jnp.sqrt(half_df / g)


def chisquare(key, df: ArrayLike, shape: Shape | None = None,
              dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Chi-square samples with ``df`` degrees of freedom: ``2 * Gamma(df / 2)``."""
    key, shape, dtype, out_sharding = check_sampler_args("chisquare", key, shape, dtype, df,
                                                         out_sharding=out_sharding)
    return _chisquare(key, df, shape, dtype, out_sharding)


@partial(jit, static_argnums=(2, 3, 4))
def _chisquare(key, df, shape, dtype, out_sharding) -> Array:
    df = lax.convert_element_type(df, dtype)
    two = np.array(2, dtype)
    log_g = loggamma(key, a=lax.div(df, two), shape=shape, dtype=dtype,
                     out_sharding=out_sharding)
    return lax.mul(jnp.exp(log_g), two)


def f(key, dfnum: ArrayLike, dfden: ArrayLike, shape: Shape | None = None,
      dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """F-distribution samples: a ratio of scaled chi-squares."""
    key, shape, dtype, out_sharding = check_sampler_args(
        "f", key, shape, dtype, dfnum, dfden, out_sharding=out_sharding, cast_first=False)
    return _f(key, dfnum, dfden, shape, dtype, out_sharding)


@partial(jit, static_argnums=(3, 4, 5))
def _f(key, dfnum, dfden, shape, dtype, out_sharding) -> Array:
    dfden = lax.convert_element_type(dfden, dtype)
    dfnum = lax.convert_element_type(dfnum, dtype)
    key_dfd, key_dfn = split_list(key)
    chi2_dfn = chisquare(key_dfn, dfnum, shape, dtype, out_sharding=out_sharding)
    chi2_dfd = chisquare(key_dfd, dfden, shape, dtype, out_sharding=out_sharding)
    return lax.div(lax.div(chi2_dfn, dfnum), lax.div(chi2_dfd, dfden))


def generalized_normal(key, p: float, shape: Shape = (),
                       dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Generalized normal samples with exponent ``p`` (a signed power of a gamma)."""
    shape = canonicalize_shape(shape)
    key, _ = check_prng_key("generalized_normal", key)
    dtype = user_dtype(float if dtype is None else dtype)
    out_sharding = canonicalize_sharding(out_sharding, "generalized_normal")
    return laid_out(_generalized_normal, out_sharding, shape=shape, dtype=dtype)(key, p)


@partial(jit, static_argnums=(2, 3))
def _generalized_normal(key, p, shape, dtype):
    # Indexed (not unpacked) keys: each key is sliced out just before its sampler, as JAX's.
    keys = split(key)
    g = gamma(keys[0], 1 / p, shape, dtype)
    r = rademacher(keys[1], shape, dtype)
    return r * g ** (1 / p)


def ball(key, d: int, p: float = 2, shape: Shape = (), dtype: DTypeLike | None = None, *,
         out_sharding=None):
    """Samples uniform in the ``d``-dimensional unit ``p``-norm ball."""
    shape = canonicalize_shape(shape)
    key, _ = check_prng_key("ball", key)
    dtype = user_dtype(float if dtype is None else dtype)
    d = int(core.concrete_or_error(d, "The error occurred in jax.random.ball()"))
    out_sharding = canonicalize_sharding(out_sharding, "ball")
    return laid_out(_ball, out_sharding, d=d, shape=shape, dtype=dtype)(key, p)


@partial(jit, static_argnums=(2, 3, 4))
def _ball(key, p, d, shape, dtype):
    k1, k2 = split_list(key)
    g = generalized_normal(k1, p, (*shape, d), dtype)
    e = exponential(k2, shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


# --------------------------------------------------------------------------------------------
# poisson
# --------------------------------------------------------------------------------------------


def poisson(key, lam: ArrayLike, shape: Shape | None = None,
            dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Poisson(lam) integer samples: Knuth's method for ``lam < 10``, else Hormann's
    transformed rejection (as TensorFlow and NumPy)."""
    key, _ = check_prng_key("poisson", key)
    dtype = user_dtype(int if dtype is None else dtype)
    shape = canonicalize_shape(shape) if shape is not None else tuple(np.shape(lam))
    out_sharding = canonicalize_sharding(out_sharding, "poisson")
    lam = jnp.broadcast_to(lam, shape)
    lam = lax.convert_element_type(lam, np.float32)
    return laid_out(_poisson, out_sharding, shape=shape, dtype=dtype)(key, lam)


@partial(jit, static_argnums=(2, 3, 4))
def _poisson_knuth(key, lam, shape, dtype, max_iters) -> Array:
    def body_fn(carry):
        i, k, rng, log_prod = carry
        rng, subkey = split_list(rng)
        k = lax.select(log_prod > -lam, k + 1, k)
        u = uniform(subkey, shape, np.float32)
        return i + 1, k, rng, log_prod + jnp.log(u)

    def cond_fn(carry):
        i, log_prod = carry[0], carry[3]
        return (log_prod > -lam).any() & (i < max_iters)

    k_init = lax.full_like(lam, 0, dtype, shape)
    log_rate_init = lax.full_like(lam, 0, np.float32, shape)
    k = lax.while_loop(cond_fn, body_fn, (0, k_init, key, log_rate_init))[1]
    return (k - 1).astype(dtype)


@partial(jit, static_argnums=(2, 3, 4))
def _poisson_rejection(key, lam, shape, dtype, max_iters) -> Array:
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body_fn(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = split_list(key, 3)
        u = uniform(subkey_0, shape, lam.dtype) - 0.5
        v = uniform(subkey_1, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t_ = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept2 = s <= t_
        accept = accept1 | (~reject & accept2)
        k_out = lax.select(accept, k, k_out)
        accepted = accepted | accept
        return i + 1, k_out, accepted, key

    def cond_fn(carry):
        i, _, accepted, _ = carry
        return (~accepted).any() & (i < max_iters)

    k_init = lax.full_like(lam, -1, lam.dtype, shape)
    accepted = lax.full_like(lam, False, np.dtype("bool"), shape)
    k = lax.while_loop(cond_fn, body_fn, (0, k_init, accepted, key))[1]
    return k.astype(dtype)


@partial(jit, static_argnums=(2, 3))
def _poisson(key, lam, shape, dtype) -> Array:
    use_knuth = lax.ne(lam, lam) | (lam < 10)
    lam_knuth = lax.select(use_knuth, lam, lax.full_like(lam, 0.0))
    # The rejection method's acceptance rate tops out at 89%: any large value will do.
    lam_rejection = lax.select(use_knuth, lax.full_like(lam, 1e5), lam)
    max_iters = dtype.type(dtypes.iinfo(dtype).max)  # insanely conservative
    result = lax.select(use_knuth,
                        _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                        _poisson_rejection(key, lam_rejection, shape, dtype, max_iters))
    return lax.select(lam == 0, jnp.zeros_like(result), result)


# --------------------------------------------------------------------------------------------
# binomial and multinomial
# --------------------------------------------------------------------------------------------

_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.010411265261972, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_approx_tail(k):
    tail_vals = jnp.array(_STIRLING_TAIL, dtype=k.dtype)
    use_tail_values = k <= 9
    k = lax.clamp(np.array(0.0, k.dtype), k, np.array(9.0, k.dtype))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    k = jnp.floor(k)
    return lax.select(use_tail_values, tail_vals[jnp.asarray(k, dtype="int32")], approx)


@partial(jit, static_argnums=(3, 4, 5), inline=True)
def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    log1minusprob = jnp.log1p(-prob)

    def body_fn(carry):
        i, num_geom, geom_sum, key = carry
        subkey, key = split_list(key)
        num_geom_out = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = uniform(subkey, shape, prob.dtype)
        geom = jnp.ceil(jnp.log(u) / log1minusprob)
        geom_sum = geom_sum + geom  # before the counter's increment: JAX's equation order
        return i + 1, num_geom_out, geom_sum, key

    def cond_fn(carry):
        i, geom_sum = carry[0], carry[2]
        return (geom_sum <= count).any() & (i < max_iters)

    num_geom_init = lax.full_like(prob, 0, prob.dtype, shape)
    geom_sum_init = lax.full_like(prob, 0, prob.dtype, shape)
    k = lax.while_loop(cond_fn, body_fn, (0, num_geom_init, geom_sum_init, key))[1]
    return (k - 1).astype(dtype)


@partial(jit, static_argnums=(3, 4, 5), inline=True)
def _btrs(key, count, prob, shape, dtype, max_iters):
    # Hormann's BTRS, as in TensorFlow.
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body_fn(carry):
        i, k_out, accepted, key = carry
        key, subkey_0, subkey_1 = split_list(key, 3)
        u = uniform(subkey_0, shape, prob.dtype)
        v = uniform(subkey_1, shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept2 = v <= ub
        accept = accept1 | (~reject & accept2)
        k_out = lax.select(accept, k, k_out)
        accepted = accepted | accept  # before the counter's increment: JAX's equation order
        return i + 1, k_out, accepted, key

    def cond_fn(carry):
        i, accepted = carry[0], carry[2]
        return (~accepted).any() & (i < max_iters)

    k_init = lax.full_like(prob, -1, prob.dtype, shape)
    carry = (0, k_init, jnp.full(shape, False, bool), key)
    return lax.while_loop(cond_fn, body_fn, carry)[1].astype(dtype)


@partial(jit, static_argnums=(3, 4), inline=True)
def _binomial(key, count, prob, shape, dtype) -> Array:
    if shape is None:
        shape = broadcast_shapes(np.shape(count), np.shape(prob))
    else:
        check_shape("binomial", shape, np.shape(count), np.shape(prob))
    (prob,) = promote_dtypes_inexact(jnp.asarray(prob))  # a weak literal for a Python p
    count = lax.convert_element_type(count, prob.dtype)
    count = jnp.broadcast_to(count, shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = lax.ne(count, count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan = lax.ne(q, q)
    q_l_0 = q < 0.0
    q = lax.select(q_is_nan | q_l_0, lax.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = lax.select(use_inversion, count, lax.full_like(count, 0.0))
    count_btrs = lax.select(use_inversion, lax.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, lax.full_like(q, 0.5), q)
    max_iters = dtype.type(dtypes.finfo(dtype).max)
    samples = lax.select(use_inversion,
                         _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                         _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = lax.select(invalid, jnp.full_like(samples, np.nan, dtype), samples)
    samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf, dtype), samples)
    return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                      count.astype(dtype) - samples)


def binomial(key, n: ArrayLike, p: ArrayLike, shape: Shape | None = None,
             dtype: DTypeLike | None = None) -> Array:
    """Binomial(n, p) samples (as floats): inversion for small ``n * p``, else BTRS."""
    key, _ = check_prng_key("binomial", key)
    dtype = float_dtype("binomial", dtype)
    if shape is not None:
        shape = canonicalize_shape(shape)
    # n and p go in as given (Python scalars stay weakly typed literals, as in JAX's jaxprs).
    return _binomial(key, n, p, shape, dtype)


def multinomial(key, n: ArrayLike, p: ArrayLike, *, shape: Shape | None = None,
                dtype: DTypeLike | None = None, unroll: int | bool = 1):
    """Multinomial counts of ``n`` draws over the last axis of ``p``, by a scan of
    conditional binomials."""
    key, _ = check_prng_key("multinomial", key)
    n, p = jnp.asarray(n), jnp.asarray(p)
    inexact = dtypes.to_inexact_dtype(dtypes.result_type(n, p))
    n, p = n.astype(inexact), p.astype(inexact)
    dtype = float_dtype("multinomial", dtype)
    if shape is None:
        shape = p.shape
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.broadcast_to(p, shape)

    def step(remainder, ratio_key):
        ratio, key = ratio_key
        count = binomial(key, remainder, ratio.clip(0, 1), dtype=remainder.dtype)
        return remainder - count, count

    p = jnp.moveaxis(p, -1, 0)
    remaining_probs = lax.cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining_probs == 0, 1, remaining_probs)
    keys = random_split_p.bind(key, shape=(ratios.shape[0],))
    _, counts = lax.scan(step, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(dtype)
