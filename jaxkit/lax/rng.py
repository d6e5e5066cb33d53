"""XLA's own random number generators: the stateless ``rng_bit_generator`` (a key in, a new
key and random bits out) and the stateful ``rng_uniform``. ``jaxkit.random`` does not use
them (its bits are threefry, written in lax); they are here for programs that call them, with
JAX's semantics, including its batching rule.
"""
from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np

from jaxkit import core, dtypes
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import sharding_rules as shr
from jaxkit.lax.slicing import dynamic_update_index_in_dim, index_in_dim
from jaxkit.lax.standard import as_tuple_of_ints
from jaxkit.typing import Array, ArrayLike, DTypeLike

__all__ = ["RandomAlgorithm", "rng_bit_generator", "rng_bit_generator_p", "rng_uniform",
           "rng_uniform_p"]


class RandomAlgorithm(enum.IntEnum):
    """Which XLA bit generator ``rng_bit_generator`` runs."""

    RNG_DEFAULT = 0
    "The platform's default algorithm."
    RNG_THREE_FRY = 1
    "Threefry-2x32."
    RNG_PHILOX = 2
    "Philox-4x32."

    def __str__(self):
        return self.name


_ALGORITHM_NAMES = {RandomAlgorithm.RNG_DEFAULT: "DEFAULT",
                    RandomAlgorithm.RNG_THREE_FRY: "THREE_FRY",
                    RandomAlgorithm.RNG_PHILOX: "PHILOX"}
_BIT_DTYPES = tuple(np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64"))


# ---- rng_bit_generator ---------------------------------------------------------------------
def rng_bit_generator(key: ArrayLike, shape: Sequence[int], dtype: DTypeLike = np.uint32,
                      algorithm: RandomAlgorithm = RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None) -> tuple[Array, Array]:
    """Random bits of ``shape`` and unsigned ``dtype`` from XLA's stateless generator, and
    the advanced key. ``key`` is ``uint32[4]`` (or ``uint64[2]``). Lowers to
    ``stablehlo.rng_bit_generator``."""
    shape = as_tuple_of_ints(shape, "rng_bit_generator shape")
    dtype = dtypes.check_and_canonicalize_user_dtype(dtype, "rng_bit_generator")
    if dtype not in _BIT_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype}")
    return tuple(rng_bit_generator_p.bind(key, shape=shape, dtype=dtype,
                                          algorithm=RandomAlgorithm(algorithm),
                                          out_sharding=out_sharding))


def _rng_bit_generator_abstract_eval(key, *, shape, dtype, algorithm, out_sharding):
    if (key.shape, key.dtype) not in (((4,), np.dtype("uint32")), ((2,), np.dtype("uint64"))):
        raise TypeError("rng_bit_generator requires a key of dtype uint32 and shape (4,) or "
                        f"of dtype uint64 and shape (2,), got {key.str_short()}")
    return [key, core.ShapedArray(shape, dtype)]


def _rng_bit_generator_batch(axis_data, args, dims, *, shape, dtype, algorithm,
                             out_sharding):
    # JAX's rule, kept for the same bits: the first key draws the bits of the whole batch,
    # and only that key advances (the others come back unchanged).
    (keys,), (d,) = args, dims
    keys = batching.bdim_at_front(keys, d, keys.shape[d])
    key = index_in_dim(keys, 0, 0, keepdims=False)
    new_key, bits = rng_bit_generator_p.bind(key, shape=(keys.shape[0], *shape), dtype=dtype,
                                             algorithm=algorithm, out_sharding=None)
    return [dynamic_update_index_in_dim(keys, new_key, 0, 0), bits], [0, 0]


def _rng_bit_generator_lowering(ctx, key, *, shape, dtype, algorithm, out_sharding):
    key_aval = ctx.avals_in[0]
    u32, u64 = ir.IntegerType.get_unsigned(32), ir.IntegerType.get_unsigned(64)
    if key_aval.dtype == np.uint32:  # XLA's key is u64[2]: the same 128 bits
        key = hlo.bitcast_convert(ir.RankedTensorType.get([2], u64),
                                  hlo.reshape(ir.RankedTensorType.get([2, 2], u32), key))
    out_key, bits = hlo.RngBitGeneratorOp(
        key.type, mlir.aval_to_ir_type(ctx.avals_out[1]),
        hlo.RngAlgorithmAttr.get(_ALGORITHM_NAMES[algorithm]), key).results
    if key_aval.dtype == np.uint32:
        out_key = hlo.reshape(ir.RankedTensorType.get([4], u32), hlo.bitcast_convert(
            ir.RankedTensorType.get([2, 2], u32), out_key))
    return [out_key, bits]


rng_bit_generator_p = core.Primitive("rng_bit_generator")
rng_bit_generator_p.multiple_results = True
rng_bit_generator_p.def_impl(
    lambda key, **params: dispatch.apply_primitive(rng_bit_generator_p, key, **params))
rng_bit_generator_p.def_abstract_eval(_rng_bit_generator_abstract_eval)
ad.defjvp_zero(rng_bit_generator_p)  # unsigned integers in and out: no tangent to carry
batching.defrule(rng_bit_generator_p, _rng_bit_generator_batch)
shr.defsharding(rng_bit_generator_p, shr.rng_bit_generator_rule)
mlir.register_lowering(rng_bit_generator_p, _rng_bit_generator_lowering)


# ---- rng_uniform ---------------------------------------------------------------------------
def rng_uniform(a: ArrayLike, b: ArrayLike, shape: Sequence[int]) -> Array:
    """Numbers uniform in ``[a, b)`` from XLA's stateful generator: each execution draws new
    values, and nothing fixes the seed. Prefer ``jaxkit.random``. Lowers to ``stablehlo.rng``."""
    return rng_uniform_p.bind(a, b, shape=as_tuple_of_ints(shape, "rng_uniform shape"))


def _rng_uniform_abstract_eval(a, b, *, shape):
    if a.dtype != b.dtype:
        raise ValueError("Arguments to rng_uniform must have identical dtypes, got "
                         f"{a.dtype} and {b.dtype}.")
    if a.shape != () or b.shape != ():
        raise ValueError("Arguments to rng_uniform must be scalars; got shapes "
                         f"{a.shape} and {b.shape}.")
    if not dtypes.issubdtype(a.dtype, np.floating) and not dtypes.issubdtype(a.dtype,
                                                                              np.integer):
        raise TypeError(f"rng_uniform does not accept dtype {a.dtype}: use a float or an "
                        "integer dtype")
    return a.update(shape=shape, weak_type=a.weak_type and b.weak_type)


def _rng_uniform_lowering(ctx, a, b, *, shape):
    dims = mlir.ir_constant(np.array(shape, np.int64))
    return hlo.rng(a, b, dims, hlo.RngDistributionAttr.get("UNIFORM"))


rng_uniform_p = core.Primitive("rng_uniform")
rng_uniform_p.def_impl(lambda a, b, **params: dispatch.apply_primitive(rng_uniform_p, a, b,
                                                                       **params))
rng_uniform_p.def_abstract_eval(_rng_uniform_abstract_eval)
mlir.register_lowering(rng_uniform_p, _rng_uniform_lowering)
