"""Pallas TPU random numbers: the kernel's hardware PRNG (``prng_seed``, ``prng_random_bits``
and the samplers drawing from it, ``stateful_*``), ``stochastic_round``, and
``sample_block``, which draws a block of an array so that the values do not depend on the
block shape (one key per tile, folded in from a global key; the tiles are sampled with any
``jax.random`` sampler).

The hardware PRNG exists on TPUs only. On a CPU, as in JAX: eagerly these operations raise
JAX's missing evaluation rule error, in a kernel run with ``interpret=True`` the missing
lowering error; with ``interpret=pltpu.InterpretParams()`` (JAX's TPU interpreter)
``prng_seed`` does nothing and ``prng_random_bits`` gives zeros in the kernel's body
(``interpret_rewrite``), while the ``stateful_*`` samplers still fail, since they draw
their bits inside a call that interpreter does not enter.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit import random as jrandom
from jaxkit.experimental.pallas.device_only import device_only_primitive
from jaxkit.experimental.pallas.interpret_rewrite import tpu_interpreter_rules
from jaxkit.experimental.pallas.primitives import program_id
from jaxkit.interpreters import partial_eval as pe
from jaxkit.transforms.jit import jit

__all__ = ["prng_random_bits", "prng_seed", "sample_block", "stateful_bernoulli",
           "stateful_bits", "stateful_normal", "stateful_uniform", "stochastic_round",
           "to_pallas_key"]


def prng_seed(*seeds: Any) -> None:
    """Seed the kernel's PRNG (several seeds are mixed into one state)."""
    prng_seed_p.bind(*seeds)


prng_seed_p = device_only_primitive("prng_seed", multiple_results=True)
prng_seed_p.def_abstract_eval(lambda *avals: [])
pe.defeffectful(prng_seed_p)  # it sets the PRNG's state: kept though it has no outputs


def prng_random_bits(shape: Sequence[int]) -> Any:
    """``int32`` random bits of ``shape`` from the kernel's PRNG."""
    return prng_random_bits_p.bind(shape=tuple(shape))


prng_random_bits_p = device_only_primitive("prng_random_bits")
prng_random_bits_p.def_abstract_eval(
    lambda *, shape: core.ShapedArray(tuple(shape), np.dtype(np.int32)))
pe.defeffectful(prng_random_bits_p)  # each call draws new bits


def stochastic_round(x: Any, random_bits: Any, *, target_dtype: Any) -> Any:
    """``x`` rounded to ``target_dtype`` up or down at random, with the ``uint32``
    ``random_bits`` (of ``x``'s shape) deciding."""
    return stochastic_round_p.bind(x, random_bits, target_dtype=target_dtype)


def _stochastic_round_abstract_eval(x, random_bits, *, target_dtype):
    if random_bits.shape != x.shape:
        raise ValueError("The shape of `random_bits` must match the shape of `x` for "
                         f"stochastic_round, but got {random_bits.shape} and {x.shape}")
    if random_bits.dtype != np.dtype(np.uint32):
        raise ValueError("The dtype of `random_bits` must be uint32 for stochastic_round, "
                         f"but got {random_bits.dtype}")
    return core.ShapedArray(x.shape, np.dtype(target_dtype))


stochastic_round_p = device_only_primitive("stochastic_round")
stochastic_round_p.def_abstract_eval(_stochastic_round_abstract_eval)


def _zeros_bits(*, shape):
    return lax.full(shape, 0, np.dtype(np.int32))


# What JAX's TPU interpreter (interpret=InterpretParams()) does for these primitives.
tpu_interpreter_rules[prng_seed_p] = lambda *seeds: []
tpu_interpreter_rules[prng_random_bits_p] = _zeros_bits


# ---- samplers over the kernel's PRNG -----------------------------------------------------------


def _bits32(shape) -> Any:
    return lax.bitcast_convert_type(prng_random_bits(shape), np.dtype(np.uint32))


def _check_32(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.itemsize != 4:
        # the kernel's PRNG gives 32-bit words only (JAX's stateful key asserts as much)
        raise AssertionError("Bit width must be 32")
    return dtype


@partial(jit, static_argnums=(0, 1))
def _uniform(shape, dtype, minval, maxval):
    nmant = np.finfo(dtype).nmant
    u32 = np.dtype(np.uint32)
    bits = lax.shift_right_logical(_bits32(shape), np.array(32 - nmant, u32))
    floats = lax.bitcast_convert_type(lax.bitwise_or(bits, np.array(1.0, dtype).view(u32)),
                                      dtype) - np.array(1.0, dtype)
    minval = lax.convert_element_type(minval, dtype)
    maxval = lax.convert_element_type(maxval, dtype)
    return lax.max(minval, floats * (maxval - minval) + minval)


def stateful_bits(shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Random unsigned 32-bit integers of ``shape`` from the kernel's PRNG."""
    _check_32(np.uint32 if dtype is None else dtype)
    return jit(_bits32, static_argnums=0)(tuple(shape))


def stateful_uniform(shape: Sequence[int] = (), dtype: Any = np.float32, minval: Any = 0.,
                     maxval: Any = 1.) -> Any:
    """Uniform floats in ``[minval, maxval)`` from the kernel's PRNG."""
    return _uniform(tuple(shape), _check_32(dtype), minval, maxval)


@partial(jit, static_argnums=(0, 1))
def _normal(shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(shape, dtype, lo, np.array(1.0, dtype))
    return lax.erf_inv(u) * np.array(np.sqrt(2), dtype)


def stateful_normal(shape: Sequence[int] = (), dtype: Any = np.float32) -> Any:
    """Standard normal floats from the kernel's PRNG."""
    return _normal(tuple(shape), _check_32(dtype))


def stateful_bernoulli(p: Any = 0.5, shape: Sequence[int] | None = None) -> Any:
    """Booleans, True with probability ``p``, from the kernel's PRNG."""
    shape = np.shape(p) if shape is None else tuple(shape)
    return _uniform(shape, np.dtype(np.float32), 0., 1.) < p


def to_pallas_key(key: Any) -> Any:
    """JAX converts a key into a ``key<pl>`` key of its Pallas TPU PRNG implementation."""
    raise NotImplementedError("pltpu.to_pallas_key is not implemented in jaxkit: its typed "
                              "keys are threefry keys only, and key<pl> (the pallas_tpu PRNG "
                              "implementation) needs the TPU's hardware PRNG")


# ---- block-invariant sampling -------------------------------------------------------------------


def _tile_keys(global_key, total_size, block_size, tile_size, block_index) -> Any:
    # One key per tile of the block: the global key folded in with the tile's row-major
    # index in the whole array (the number of tiles rounded up).
    per_block = tuple(b // t for b, t in zip(block_size, tile_size))
    total = tuple(-(-s // t) for s, t in zip(total_size, tile_size))

    def keys(prefix):
        axis = len(prefix)
        if axis == len(per_block):
            index, stride = 0, 1
            for i in reversed(range(axis)):
                index = index + (prefix[i] + block_index[i] * per_block[i]) * stride
                stride *= total[i]
            return jrandom.fold_in(global_key, index)
        return [keys((*prefix, i)) for i in range(per_block[axis])]

    return keys(())


def sample_block(sampler_fn: Callable, global_key: Any, block_size: Sequence[int],
                 tile_size: Sequence[int], total_size: Sequence[int],
                 block_index: tuple | None = None, **kwargs: Any) -> Any:
    """The ``block_size`` block at ``block_index`` (by default the kernel's program ids) of
    an array of ``total_size`` sampled with ``sampler_fn(key, shape=tile_size, **kwargs)``
    per tile, the same whatever the block shape (a multiple of ``tile_size``)."""
    if len(block_size) != len(tile_size):
        raise ValueError(f"block_size ({len(block_size)}) and tile_size ({len(tile_size)}) "
                         "must have the same length.")
    if block_index is None:
        block_index = tuple(program_id(axis) for axis in range(len(block_size)))
    keys = _tile_keys(global_key, tuple(total_size), tuple(block_size), tuple(tile_size),
                      block_index)
    per_block = tuple(b // t for b, t in zip(block_size, tile_size))

    def sample(axis, keys):
        if axis == len(per_block):
            return sampler_fn(keys, shape=tuple(tile_size), **kwargs)
        return jnp.concatenate([sample(axis + 1, k) for k in keys], axis=axis)

    return sample(0, keys)
