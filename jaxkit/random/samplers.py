"""The samplers of ``jaxkit.random`` that transform uniform bits (``jaxkit.random`` is the
public module; the rejection samplers built on ``gamma`` are in ``_random_gamma``).

Each sampler checks its arguments like JAX, then calls a ``jit`` function with static shape
and dtype that is JAX's algorithm written in ``jaxkit.lax``/``jaxkit.numpy``, so the numbers
are JAX's for the same key and eager calls compile once.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from functools import partial

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import numpy as jnp
from jaxkit.lax.elementwise import _const
from jaxkit.transforms.jit import jit
from jaxkit.random.key_prims import (canonicalize_sharding,
                                     check_prng_key, check_sampler_args, laid_out,
                                     random_bits, split_list)
from jaxkit.random.prng import (
    UINT_DTYPES,
    broadcast_shapes,
    broadcast_to_rank,
    canonicalize_axis,
    canonicalize_shape,
    check_broadcast_shapes,
    check_shape,
    const_like,
    float_dtype,
    user_dtype,
)
from jaxkit.typing import Array, ArrayLike, DTypeLike

Shape = Sequence[int]
_ONE_F32 = np.float32(1)


def _standard_sampler(kinds=np.floating, what: str = "a float", dtype_last: bool = False):
    """The sampler of a standard distribution, ``name(key, shape=(), dtype=None, *,
    out_sharding=None)``, from its algorithm ``impl(key, shape, dtype)``: the checks every
    such sampler makes, in JAX's order (a PRNG key, a ``kinds`` dtype, a shape, the layout;
    ``dtype_last``: the dtype after the shape and layout, as ``normal``'s), then ``impl`` under
    ``jit`` with static shape and dtype, its result laid out as asked. The
    jitted function is named ``_name``, as JAX's are, so jaxprs print alike."""

    def wrap(impl):
        name = impl.__name__
        impl.__name__ = impl.__qualname__ = f"_{name}"
        jitted = jit(impl, static_argnums=(1, 2))

        def sampler(key, shape: Shape = (), dtype: DTypeLike | None = None, *,
                    out_sharding=None) -> Array:
            key, _ = check_prng_key(name, key)
            if not dtype_last:
                dtype = float_dtype(name, dtype, kinds, what)
            shape = canonicalize_shape(shape)
            out_sharding = canonicalize_sharding(out_sharding, name)
            if dtype_last:
                dtype = float_dtype(name, dtype, kinds, what)
            return laid_out(jitted, out_sharding, shape=shape, dtype=dtype)(key)

        sampler.__name__ = sampler.__qualname__ = name
        sampler.__doc__, sampler.__module__ = impl.__doc__, impl.__module__
        return sampler

    return wrap

# --------------------------------------------------------------------------------------------
# Uniform and integer samplers
# --------------------------------------------------------------------------------------------


def uniform(key, shape: Shape = (), dtype: DTypeLike | None = None, minval: ArrayLike = 0.,
            maxval: ArrayLike = 1., *, out_sharding=None) -> Array:
    """Uniform floats in ``[minval, maxval)``."""
    key, _ = check_prng_key("uniform", key)
    dtype = user_dtype(float if dtype is None else dtype)
    shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "uniform")
    if not dtypes.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype argument to `uniform` must be a float dtype, got {dtype}")
    return laid_out(_uniform, out_sharding, shape=shape, dtype=dtype)(key, minval,
                                                                            maxval)


@partial(jit, static_argnums=(3, 4))
def _uniform(key, minval, maxval, shape, dtype) -> Array:
    check_shape("uniform", shape, np.shape(minval), np.shape(maxval))
    minval, maxval = (lax.convert_element_type(v, dtype) for v in (minval, maxval))
    minval, maxval = (broadcast_to_rank(v, len(shape)) for v in (minval, maxval))
    finfo = dtypes.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    if nbits not in (8, 16, 32, 64):
        raise TypeError(f"uniform only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype}.")
    rng_bits = 8 if nmant < 8 else nbits
    bits = random_bits(key, rng_bits, shape)
    uint_dtype = UINT_DTYPES[nbits]
    if rng_bits != nbits:
        bits = lax.convert_element_type(bits, uint_dtype)
    # Random mantissa bits under the exponent of 1.0 give a float in [1, 2); subtract 1.
    float_bits = lax.shift_right_logical(bits, np.array(rng_bits - nmant, uint_dtype))
    float_bits = lax.bitwise_or(float_bits, np.array(1.0, dtype).view(uint_dtype))
    floats = lax.sub(lax.bitcast_convert_type(float_bits, dtype), np.array(1.0, dtype))
    return lax.max(minval, lax.reshape(floats * (maxval - minval) + minval, shape))


def _convert_and_clip_integer(val, dtype) -> Array:
    """``val`` converted to integer ``dtype``, clipping to its range instead of wrapping."""
    val_dtype = dtypes.dtype(val)
    # Bounds typed like ``val`` (weak when it is a weak scalar), so ``clip`` stages no
    # conversion inside and the ``astype`` after it does, as JAX's.
    min_val = _const(val, max(dtypes.iinfo(dtype).min, dtypes.iinfo(val_dtype).min))
    max_val = _const(val, min(dtypes.iinfo(dtype).max, dtypes.iinfo(val_dtype).max))
    return jnp.clip(val, min_val, max_val).astype(dtype)


def randint(key, shape: Shape, minval: ArrayLike, maxval: ArrayLike,
            dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Uniform integers in ``[minval, maxval)`` (JAX's modulus method on 2x the bits)."""
    key, _ = check_prng_key("randint", key)
    dtype = user_dtype(int if dtype is None else dtype)
    shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "randint")
    if not dtypes.issubdtype(dtype, np.integer):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    info = dtypes.iinfo(dtype)
    dtype_for_sampling = dtype
    if info.bits < 32:  # sample in 32 bits to avoid biased results
        dtype_for_sampling = np.dtype("int32")
        minval = jnp.clip(jnp.asarray(minval).astype("int32"), int(info.min), int(info.max))
        maxval = jnp.clip(jnp.asarray(maxval).astype("int32"), int(info.min),
                          int(info.max) + 1)
    out = laid_out(_randint, out_sharding, shape=shape, dtype=dtype_for_sampling)(
        key, minval, maxval)
    return out if out.dtype == dtype else lax.convert_element_type(out, dtype)


@partial(jit, static_argnums=(3, 4))
def _randint(key, minval, maxval, shape, dtype) -> Array:
    check_shape("randint", shape, np.shape(minval), np.shape(maxval))
    minval = jnp.asarray(minval)
    maxval = jnp.asarray(maxval)
    if not dtypes.issubdtype(minval.dtype, np.integer):
        minval = minval.astype(int)
    if not dtypes.issubdtype(maxval.dtype, np.integer):
        maxval = maxval.astype(int)
    # maxval beyond the dtype's range (randint(key, shape, 0, 256, 'uint8')) widens the span.
    maxval_out_of_range = lax.gt(
        maxval, _convert_and_clip_integer(np.array(dtypes.iinfo(dtype).max, dtype),
                                          maxval.dtype))
    # Ranks (not shapes) broadcast, and the span's steps, as JAX's: the lax ops broadcast the
    # size-1 axes, so jaxprs read as JAX's.
    minval = _convert_and_clip_integer(minval, dtype)
    maxval = _convert_and_clip_integer(maxval, dtype)
    minval, maxval = broadcast_to_rank(minval, len(shape)), broadcast_to_rank(maxval, len(shape))
    nbits = dtypes.iinfo(dtype).bits
    if nbits not in (8, 16, 32, 64):
        raise TypeError(f"randint only accepts 8-, 16-, 32-, or 64-bit dtypes, got {dtype}")
    k1, k2 = split_list(key)
    higher_bits = random_bits(k1, nbits, shape)
    lower_bits = random_bits(k2, nbits, shape)
    unsigned_dtype = UINT_DTYPES[nbits]
    span = lax.convert_element_type(maxval - minval, unsigned_dtype)
    # span=1 when maxval <= minval, so minval is returned (jax issue 222).
    span = lax.select(maxval <= minval, lax.full_like(span, 1), span)
    span = lax.select(maxval_out_of_range & (maxval > minval),
                      lax.add(span, np.array(1, unsigned_dtype)[()]), span)
    # (hi * 2**nbits + lo) % span without overflow: multiplier = 2**nbits % span.
    multiplier = lax.rem(np.array(2 ** (nbits // 2), unsigned_dtype)[()], span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    random_offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier),
                            lax.rem(lower_bits, span))
    random_offset = lax.rem(random_offset, span)
    return lax.add(minval, lax.convert_element_type(random_offset, dtype))


def permutation(key, x: int | ArrayLike, axis: int = 0, independent: bool = False, *,
                out_sharding=None) -> Array:
    """A random permutation of ``arange(x)`` or of ``x`` along ``axis``."""
    key, _ = check_prng_key("permutation", key)
    if not (isinstance(x, (int, np.integer)) or core.is_array_like(x)):
        raise TypeError(f"permutation requires ndarray or scalar arguments, got {type(x)}")
    ndim = np.ndim(x)
    axis = canonicalize_axis(axis, ndim or 1)
    out_sharding = canonicalize_sharding(out_sharding, "permutation")
    if not ndim:
        if not np.issubdtype(dtypes.dtype(x), np.integer):
            raise TypeError("x must be an integer or at least 1-dimensional")
        r = int(core.concrete_or_error(x, "argument x of jax.random.permutation()"))
        return laid_out(lambda key: _shuffle(key, jnp.arange(r), axis),
                               out_sharding)(key)
    return laid_out(_permutation, out_sharding, axis=axis,
                           independent=independent)(key, x)


def _permutation(key, x, axis, independent) -> Array:
    ndim = np.ndim(x)
    if independent or ndim == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, jnp.arange(np.shape(x)[axis]), 0)
    return jnp.take(x, ind, axis, unique_indices=True)


@partial(jit, static_argnums=(2,))
def _shuffle(key, x, axis) -> Array:
    # Sort by random 32-bit keys, repeated enough rounds that ties become unlikely
    # (tjablin's static criterion, as in JAX and TensorFlow).
    exponent = 3
    uint32max = np.iinfo(np.uint32).max
    size = int(np.prod(np.shape(x)))
    num_rounds = int(np.ceil(exponent * np.log(max(1, size)) / np.log(uint32max)))
    for _ in range(num_rounds):
        key, subkey = split_list(key)
        sort_keys = random_bits(subkey, 32, tuple(np.shape(x)))
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


def choice(key, a: int | ArrayLike, shape: Shape = (), replace: bool = True,
           p: ArrayLike | None = None, axis: int = 0, mode: str | None = None) -> Array:
    """A random sample from ``a`` (or ``arange(a)``), with or without replacement, with
    optional probabilities ``p``."""
    key, _ = check_prng_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError("shape argument of jax.random.choice must be a sequence, "
                        f"got {shape}")
    arr = jnp.asarray(a)
    if arr.ndim == 0:
        n_inputs = int(core.concrete_or_error(a, "The error occurred in jax.random.choice()"))
    else:
        axis = canonicalize_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
        else:
            perm = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=axis)
    else:
        p_arr = jnp.asarray(p)
        if not dtypes.issubdtype(p_arr.dtype, np.inexact):
            p_arr = p_arr.astype(dtypes.to_inexact_dtype(p_arr.dtype))
        if p_arr.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as "
                             f"a.shape[axis]. p has shape {p_arr.shape} and a.shape[axis] is "
                             f"{n_inputs}.")
        if replace:
            p_cuml = jnp.cumsum(p_arr)
            r = p_cuml[-1] * (1 - uniform(key, shape, dtype=p_cuml.dtype))
            ind = jnp.searchsorted(p_cuml, r).astype(int)
        else:
            # The Gumbel top-k trick.
            g = gumbel(key, (n_inputs,), dtype=p_arr.dtype, mode=mode) + jnp.log(p_arr)
            ind = lax.top_k(g, n_draws)[1].astype(int)
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    return result.reshape(tuple(shape) if arr.ndim == 0 else
                          arr.shape[0:axis] + tuple(shape) + arr.shape[axis + 1:])


# --------------------------------------------------------------------------------------------
# Continuous samplers by transformation of uniforms
# --------------------------------------------------------------------------------------------


@_standard_sampler(np.inexact, "a float or complex", dtype_last=True)
def normal(key, shape, dtype) -> Array:
    """Standard normal samples: ``sqrt(2) * erf_inv(u)`` for ``u`` uniform in (-1, 1)."""
    if dtypes.issubdtype(dtype, np.complexfloating):
        sqrt2 = np.array(np.sqrt(2), dtype)
        key_re, key_im = split_list(key)
        real_dtype = np.array(0, dtype).real.dtype
        re = _normal_real(key_re, shape, real_dtype).astype(dtype)
        im = _normal_real(key_im, shape, real_dtype).astype(dtype)
        return (re + 1j * im) / sqrt2
    return _normal_real(key, shape, dtype)


@partial(jit, static_argnums=(1, 2))
def _normal_real(key, shape, dtype) -> Array:
    lo = np.nextafter(np.array(-1., dtype), np.array(0., dtype), dtype=dtype)
    hi = np.array(1., dtype)
    u = uniform(key, shape, dtype, lo, hi)
    return lax.mul(np.array(np.sqrt(2), dtype), lax.erf_inv(u))


def truncated_normal(key, lower: ArrayLike, upper: ArrayLike, shape: Shape | None = None,
                     dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Standard normal samples truncated to the open interval ``(lower, upper)``."""
    if shape is not None:
        shape = canonicalize_shape(shape)
    key, _ = check_prng_key("truncated_normal", key)
    out_sharding = canonicalize_sharding(out_sharding, "truncated_normal")
    dtype = float_dtype("truncated_normal", dtype)
    return laid_out(_truncated_normal, out_sharding, shape=shape, dtype=dtype)(
        key, lower, upper)


@partial(jit, static_argnums=(3, 4))
def _truncated_normal(key, lower, upper, shape, dtype) -> Array:
    if shape is None:
        shape = broadcast_shapes(np.shape(lower), np.shape(upper))
    else:
        check_shape("truncated_normal", shape, np.shape(lower), np.shape(upper))
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(lower / sqrt2)
    b = lax.erf(upper / sqrt2)
    u = uniform(key, shape, dtype, minval=a, maxval=b)
    out = sqrt2 * lax.erf_inv(u)
    # Clamp to the open interval: rounding may land on the bounds.
    return jnp.clip(out,
                    lax.nextafter(lax.stop_gradient(lower), np.array(np.inf, dtype)),
                    lax.nextafter(lax.stop_gradient(upper), np.array(-np.inf, dtype)))


def bernoulli(key, p: ArrayLike = 0.5, shape: Shape | None = None, mode: str = "low", *,
              out_sharding=None) -> Array:
    """Booleans that are True with probability ``p``."""
    if shape is not None:
        shape = canonicalize_shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got {mode=}, expected 'high' or 'low'")
    key, _ = check_prng_key("bernoulli", key)
    out_sharding = canonicalize_sharding(out_sharding, "bernoulli")
    dtype = dtypes.dtype(p, canonicalize=True)
    if not dtypes.issubdtype(dtype, np.floating):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    p = lax.convert_element_type(p, dtype)
    return laid_out(_bernoulli, out_sharding, shape=shape, mode=mode)(key, p)


@partial(jit, static_argnames=("shape", "mode"))
def _bernoulli(key, p, shape, mode) -> Array:
    if shape is None:
        shape = np.shape(p)
    else:
        check_shape("bernoulli", shape, np.shape(p))
    dtype = dtypes.dtype(p)
    if mode == "high":
        u12 = uniform(key, (2, *shape), dtype)
        u1, u2 = u12[0], u12[1]
        u2 = u2 * (2 ** -dtypes.finfo(dtype).nmant)  # resolution of the uniform samples
        return u2 < p - u1
    return uniform(key, shape, dtype) < p


@_standard_sampler()
def cauchy(key, shape, dtype) -> Array:
    """Standard Cauchy samples: ``tan(pi * (u - 1/2))``."""
    u = uniform(key, shape, dtype, minval=dtypes.finfo(dtype).eps, maxval=1.)
    return lax.tan(lax.mul(const_like(u, np.pi), lax.sub(u, const_like(u, 0.5))))


@_standard_sampler()
def exponential(key, shape, dtype) -> Array:
    """Standard exponential samples: ``-log1p(-u)``."""
    u = uniform(key, shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))  # 1 - u moves log's domain to (0, 1]


def gumbel(key, shape: Shape = (), dtype: DTypeLike | None = None,
           mode: str | None = None, *, out_sharding=None) -> Array:
    """Standard Gumbel samples (``mode`` "low", "high" or "highest" sets the resolution)."""
    key, _ = check_prng_key("gumbel", key)
    dtype = float_dtype("gumbel", dtype)
    shape = canonicalize_shape(shape)
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    out_sharding = canonicalize_sharding(out_sharding, "gumbel")
    return laid_out(_gumbel, out_sharding, shape=shape, dtype=dtype, mode=mode)(key)


def _safe_int_to_float(hi, lo):
    """Two ``uint32`` words of a 64-bit fixed-point fraction -> float32 in (0, 1)."""
    finfo = dtypes.finfo(np.float32)
    u32 = partial(np.array, dtype=np.uint32)
    hiclz, loclz = lax.clz(hi), lax.clz(lo)
    hi_is_zero = lax.eq(hiclz, u32(32))
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hiclz),
        lax.select(hi_is_zero, lax.shift_left(lo, loclz),
                   lax.shift_right_logical(lo, lax.sub(u32(finfo.bits), hiclz))))
    mantissa = lax.shift_right_logical(mantissa, u32(finfo.bits - finfo.nmant - 1))
    mantissa = lax.bitwise_and(mantissa, u32((1 << finfo.nmant) - 1))
    lead = lax.select(hi_is_zero, lax.add(u32(32), loclz), hiclz)
    exp = lax.shift_left(lax.sub(u32(-finfo.minexp), lead), u32(finfo.nmant))
    exp = lax.bitwise_and(exp, u32((1 << (finfo.bits - 2)) - (1 << (finfo.nmant - 1))))
    return lax.bitcast_convert_type(lax.bitwise_or(exp, mantissa), np.float32)


@partial(jit, static_argnums=(1, 2, 3))
def _gumbel(key, shape, dtype, mode) -> Array:
    info = dtypes.finfo(dtype)
    if dtype == np.float32 and mode == "highest":
        bits = random_bits(key, 32, (2, *shape))
        hi, lo = bits[0], bits[1]
        neg_hi, neg_lo = lax.bitwise_not(hi), lax.bitwise_not(lo)
        # 1 - bits in 64-bit fixed point.
        carry = lax.convert_element_type(lax.eq(neg_lo, np.uint32(0xFFFFFFFF)), np.uint32)
        neg_hi, neg_lo = lax.add(neg_hi, carry), lax.add(neg_lo, np.uint32(1))
        flip_mask = lax.lt(hi, np.uint32(1 << 31))
        x = _safe_int_to_float(lax.select(flip_mask, hi, neg_hi),
                               lax.select(flip_mask, lo, neg_lo))
        # log1p for (0, 0.5), log for [0.5, 1).
        return jnp.where(flip_mask, -jnp.log(-jnp.log1p(-x)), -jnp.log(-jnp.log(x)))
    if mode in ("high", "highest"):
        u = _uniform(key, 0., 1., (2, *shape), dtype)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high, high + 2 ** -(info.nmant) * low + info.tiny)
        return -jnp.log(-jnp.log1p(-x))
    # Keywords, as JAX's call (its jit passes them in sorted order: maxval, minval).
    return -jnp.log(-jnp.log(_uniform(key, minval=info.tiny, maxval=1., shape=shape,
                                      dtype=dtype)))


def categorical(key, logits: ArrayLike, axis: int = -1, shape: Shape | None = None,
                replace: bool = True, mode: str | None = None, *,
                out_sharding=None) -> Array:
    """Samples of categories with log-probabilities ``logits`` along ``axis`` (the Gumbel-max
    trick, or Gumbel top-k without replacement)."""
    key, _ = check_prng_key("categorical", key)
    logits_arr = jnp.asarray(logits)
    batch_shape = tuple(np.delete(logits_arr.shape, axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = canonicalize_shape(shape)
        check_shape("categorical", shape, batch_shape)
    out_sharding = canonicalize_sharding(out_sharding, "categorical")
    return laid_out(_categorical, out_sharding, shape=shape, batch_shape=batch_shape,
                           axis=axis, replace=replace, mode=mode)(key, logits_arr)


def _categorical(key, logits_arr, shape, batch_shape, axis, replace, mode) -> Array:
    shape_prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        if axis >= 0:
            axis -= len(logits_arr.shape)
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis % len(logits_arr.shape), logits_arr.shape[axis])
        expanded = lax.reshape(logits_arr, (1,) * len(shape_prefix) + logits_arr.shape)
        return jnp.argmax(gumbel(key, (*shape_prefix, *logits_shape), logits_arr.dtype,
                                 mode=mode) + expanded, axis=axis)
    logits_arr = logits_arr + gumbel(key, logits_arr.shape, logits_arr.dtype, mode=mode)
    k = math.prod(shape_prefix)
    if k > logits_arr.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number "
                         f"of categories ({logits_arr.shape[axis]}).")
    _, indices = lax.top_k(jnp.moveaxis(logits_arr, axis, -1), k)
    # indices is batch_shape + (k,); the samples go first.
    indices = lax.transpose(indices, (indices.ndim - 1, *range(indices.ndim - 1)))
    return lax.reshape(indices, shape)


@_standard_sampler()
def laplace(key, shape, dtype) -> Array:
    """Standard Laplace samples."""
    u = uniform(key, shape, dtype, minval=-1. + dtypes.finfo(dtype).epsneg, maxval=1.)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


@_standard_sampler()
def logistic(key, shape, dtype) -> Array:
    """Standard logistic samples: ``log(u) - log1p(-u)``."""
    x = uniform(key, shape, dtype, minval=dtypes.finfo(dtype).tiny, maxval=1.)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def pareto(key, b: ArrayLike, shape: Shape | None = None,
           dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Pareto samples with shape parameter ``b``: ``exp(e / b)``, ``e`` exponential."""
    key, shape, dtype, out_sharding = check_sampler_args("pareto", key, shape, dtype, b,
                                                         out_sharding=out_sharding)
    return laid_out(_pareto, out_sharding, shape=shape, dtype=dtype)(key, b)


@partial(jit, static_argnums=(2, 3))
def _pareto(key, b, shape, dtype) -> Array:
    b = lax.convert_element_type(b, dtype)
    e = exponential(key, shape, dtype)
    return lax.exp(e / b)


def rademacher(key, shape: Shape = (), dtype: DTypeLike | None = None, *,
               out_sharding=None) -> Array:
    """-1 or +1 with equal probability."""
    key, _ = check_prng_key("rademacher", key)
    dtype = user_dtype(int if dtype is None else dtype)
    shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "rademacher")
    return _rademacher(key, shape, dtype, out_sharding)


@partial(jit, static_argnums=(1, 2, 3))
def _rademacher(key, shape, dtype, out_sharding) -> Array:
    bernoulli_samples = bernoulli(key=key, p=0.5, shape=shape,
                                  out_sharding=out_sharding).astype(dtype)
    return (2 * bernoulli_samples - 1).astype(dtype)


def maxwell(key, shape: Shape = (), dtype: DTypeLike | None = None, *,
            out_sharding=None) -> Array:
    """One-sided Maxwell samples: the norm of three standard normals."""
    key, _ = check_prng_key("maxwell", key)
    dtype = float_dtype("maxwell", dtype)
    shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "maxwell")
    return _maxwell(key, shape, dtype, out_sharding)


@partial(jit, static_argnums=(1, 2, 3))
def _maxwell(key, shape, dtype, out_sharding) -> Array:
    if out_sharding is not None:  # the normals' layout: the result's, the 3 unsplit
        spec = out_sharding.spec
        out_sharding = out_sharding.update(spec=spec.update(partitions=(*spec, None)))
    norm_rvs = normal(key=key, shape=(*shape, 3), dtype=dtype, out_sharding=out_sharding)
    return jnp.linalg.norm(norm_rvs, axis=-1)  # a jit named norm, as JAX's


def double_sided_maxwell(key, loc: ArrayLike, scale: ArrayLike, shape: Shape = (),
                         dtype: DTypeLike | None = None) -> Array:
    """Double-sided Maxwell samples centred at ``loc`` with ``scale``."""
    key, _ = check_prng_key("double_sided_maxwell", key)
    dtype = float_dtype("double_sided_maxwell", dtype)
    return _double_sided_maxwell(key, loc, scale, canonicalize_shape(shape), dtype)


@partial(jit, static_argnums=(3, 4))
def _double_sided_maxwell(key, loc, scale, shape, dtype) -> Array:
    params_shapes = broadcast_shapes(np.shape(loc), np.shape(scale))
    if not shape:
        shape = params_shapes
    shape = shape + params_shapes
    maxwell_key, rademacher_key = split_list(key)
    maxwell_rvs = maxwell(maxwell_key, shape=shape, dtype=dtype)
    random_sign = rademacher(rademacher_key, shape=shape, dtype=dtype)
    return random_sign * maxwell_rvs * scale + loc


def weibull_min(key, scale: ArrayLike, concentration: ArrayLike, shape: Shape = (),
                dtype: DTypeLike | None = None) -> Array:
    """Weibull samples by the inverse CDF."""
    key, _ = check_prng_key("weibull_min", key)
    dtype = float_dtype("weibull_min", dtype)
    return _weibull_min(key, scale, concentration, canonicalize_shape(shape), dtype)


@partial(jit, static_argnums=(3, 4))
def _weibull_min(key, scale, concentration, shape, dtype) -> Array:
    random_uniform = uniform(key=key, shape=shape, minval=0, maxval=1, dtype=dtype)
    return jnp.power(-jnp.log1p(-random_uniform), 1.0 / concentration) * scale


def rayleigh(key, scale: ArrayLike, shape: Shape | None = None,
             dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Rayleigh samples: ``scale * sqrt(-2 log u)``."""
    key, shape, dtype, out_sharding = check_sampler_args(
        "rayleigh", key, shape, dtype, scale, out_sharding=out_sharding, cast_first=False)
    return laid_out(_rayleigh, out_sharding, shape=shape, dtype=dtype)(key, scale)


@partial(jit, static_argnums=(2, 3))
def _rayleigh(key, scale, shape, dtype) -> Array:
    u = uniform(key, shape, dtype)
    scale = jnp.broadcast_to(jnp.asarray(scale).astype(dtype), shape)
    sqrt_u = lax.sqrt(lax.mul(lax.log(u), const_like(scale, -2)))
    return lax.mul(scale, sqrt_u)


def wald(key, mean: ArrayLike, shape: Shape | None = None,
         dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Wald (inverse Gaussian) samples with ``mean``."""
    key, shape, dtype, out_sharding = check_sampler_args(
        "wald", key, shape, dtype, mean, out_sharding=out_sharding, cast_first=False)
    return laid_out(_wald, out_sharding, shape=shape, dtype=dtype)(key, mean)


@partial(jit, static_argnums=(2, 3))
def _wald(key, mean, shape, dtype) -> Array:
    k1, k2 = split_list(key)
    mean = jnp.broadcast_to(jnp.asarray(mean).astype(dtype), shape)
    v = normal(k1, shape, dtype)
    z = uniform(k2, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def geometric(key, p: ArrayLike, shape: Shape | None = None,
              dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Geometric samples (number of trials to the first success) with probability ``p``."""
    key, _ = check_prng_key("geometric", key)
    dtype = user_dtype(int if dtype is None else dtype)
    if not dtypes.issubdtype(dtype, np.integer):
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = check_broadcast_shapes("geometric", shape, p)
    out_sharding = canonicalize_sharding(out_sharding, "geometric")
    return _geometric(key, p, shape, dtype, out_sharding)


@partial(jit, static_argnums=(2, 3, 4))
def _geometric(key, p, shape, dtype, out_sharding) -> Array:
    p = jnp.asarray(p)
    if not dtypes.issubdtype(p.dtype, np.inexact):
        p = p.astype(dtypes.to_inexact_dtype(p.dtype))
    u = uniform(key, shape, p.dtype, out_sharding=out_sharding)
    u = jnp.where(u == 0, 1, u)
    log_u = lax.log(u)  # before log1p(-p), as JAX's: jaxprs in its order
    log_one_minus_p = jnp.broadcast_to(lax.log1p(-p), shape, out_sharding=out_sharding)
    g = lax.floor(lax.div(log_u, log_one_minus_p)) + 1
    return g.astype(dtype)


def triangular(key, left: ArrayLike, mode: ArrayLike, right: ArrayLike,
               shape: Shape | None = None, dtype: DTypeLike | None = None, *,
               out_sharding=None) -> Array:
    """Triangular samples on ``[left, right]`` peaking at ``mode``."""
    key, shape, dtype, out_sharding = check_sampler_args(
        "triangular", key, shape, dtype, left, mode, right, out_sharding=out_sharding,
        cast_first=False)
    return laid_out(_triangular, out_sharding, shape=shape, dtype=dtype)(
        key, left, mode, right)


@partial(jit, static_argnums=(4, 5), inline=True)
def _triangular(key, left, mode, right, shape, dtype) -> Array:
    left = jnp.broadcast_to(lax.convert_element_type(left, dtype), shape)
    right = jnp.broadcast_to(lax.convert_element_type(right, dtype), shape)
    mode = jnp.broadcast_to(lax.convert_element_type(mode, dtype), shape)
    fc = (mode - left) / (right - left)
    u = uniform(key, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, out1, out2)


def lognormal(key, sigma: ArrayLike = _ONE_F32, shape: Shape | None = None,
              dtype: DTypeLike | None = None, *, out_sharding=None) -> Array:
    """Log-normal samples: ``exp(sigma * normal)``."""
    key, shape, dtype, out_sharding = check_sampler_args(
        "lognormal", key, shape, dtype, sigma, kinds=np.inexact, what="a float or complex",
        out_sharding=out_sharding, cast_first=False)
    return laid_out(_lognormal, out_sharding, shape=shape, dtype=dtype)(key, sigma)


@partial(jit, static_argnums=(2, 3), inline=True)
def _lognormal(key, sigma, shape, dtype) -> Array:
    sigma = lax.convert_element_type(sigma, dtype)
    return lax.exp(normal(key, shape, dtype) * sigma)


# --------------------------------------------------------------------------------------------
# Matrix samplers
# --------------------------------------------------------------------------------------------


def multivariate_normal(key, mean: ArrayLike, cov: ArrayLike, shape: Shape | None = None,
                        dtype: DTypeLike | None = None, method: str = "cholesky", *,
                        out_sharding=None) -> Array:
    """Multivariate normal samples: ``mean + factor @ normal`` with ``factor`` from the
    Cholesky, SVD or eigen-decomposition of ``cov``."""
    key, _ = check_prng_key("multivariate_normal", key)
    mean, cov = jnp.asarray(mean), jnp.asarray(cov)
    inexact = dtypes.to_inexact_dtype(dtypes.result_type(mean, cov))
    mean, cov = mean.astype(inexact), cov.astype(inexact)
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    dtype = mean.dtype if dtype is None else user_dtype(dtype)
    if not dtypes.issubdtype(dtype, np.floating):
        raise ValueError("dtype argument to `multivariate_normal` must be a float dtype, "
                         f"got {dtype}")
    if shape is not None:
        shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "multivariate_normal")
    return laid_out(_multivariate_normal, out_sharding, shape=shape, dtype=dtype)(
        key, mean, cov, method=method)


@partial(jit, static_argnums=(3, 4, 5))
def _multivariate_normal(key, mean, cov, shape, dtype, method) -> Array:
    if not np.ndim(mean) >= 1:
        raise ValueError("multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{np.ndim(mean)}")
    if not np.ndim(cov) >= 2:
        raise ValueError("multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{np.ndim(cov)}")
    n = mean.shape[-1]
    if np.shape(cov)[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {np.shape(cov)}.")
    if shape is None:
        shape = broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    else:
        check_shape("normal", shape, mean.shape[:-1], cov.shape[:-2])
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = jnp.linalg.cholesky(cov)
    normal_samples = normal(key, shape + mean.shape[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, normal_samples)


def orthogonal(key, n: int, shape: Shape = (), dtype: DTypeLike | None = None,
               m: int | None = None, *, out_sharding=None) -> Array:
    """A matrix uniformly distributed on the orthogonal group O(n) (semi-orthogonal
    ``n x m`` if ``m`` is given), batched over ``shape``."""
    _m = n if m is None else m
    shape = canonicalize_shape(shape)
    key, _ = check_prng_key("orthogonal", key)
    dtype = user_dtype(float if dtype is None else dtype)
    n = operator.index(core.concrete_or_error(n, "The error occurred in jax.random.orthogonal()"))
    _m = operator.index(core.concrete_or_error(_m,
                                               "The error occurred in jax.random.orthogonal()"))
    out_sharding = canonicalize_sharding(out_sharding, "orthogonal")
    return laid_out(_orthogonal, out_sharding, n=n, _m=_m, shape=shape, dtype=dtype)(key)


@partial(jit, static_argnums=(1, 2, 3, 4))
def _orthogonal(key, n, _m, shape, dtype):
    z = normal(key, (*shape, max(n, _m), min(n, _m)), dtype)
    q, r = jnp.linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)
    return jnp.swapaxes(x, -1, -2) if n < _m else x
