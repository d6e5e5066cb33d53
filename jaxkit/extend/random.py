"""``jax.extend.random``: PRNG implementations as JAX 0.10.2 describes them.

A ``PRNGImpl`` names a key shape and the four functions on raw ``uint32`` key data (``seed``,
``split``, ``fold_in``, ``random_bits``). ``threefry_prng_impl`` is made of the very functions
``jaxkit.random`` uses; ``rbg_prng_impl`` and ``unsafe_rbg_prng_impl`` are XLA's
``rng_bit_generator`` schemes with the bits JAX gives. jaxkit's typed keys
(``jax.random.key``) are threefry keys only, so ``random_seed`` makes keys of
``threefry_prng_impl`` and says so for any other implementation; the other implementations'
functions work on raw key data.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import NamedTuple

import numpy as np

from jaxkit import core, lax
from jaxkit import numpy as jnp
from jaxkit.random import key_prims, prng
from jaxkit.random.prng import threefry2x32_p
from jaxkit.transforms.vmap import vmap

__all__ = ["PRNGImpl", "define_prng_impl", "random_seed", "rbg_prng_impl", "seed_with_impl",
           "threefry2x32_p", "threefry_2x32", "threefry_prng_impl", "unsafe_rbg_prng_impl"]

Shape = tuple[int, ...]
_u32 = np.dtype(np.uint32)


class PRNGImpl(NamedTuple):
    """A PRNG implementation: keys are ``uint32[*key_shape]`` and

    ``seed(int[]) -> key``, ``split(key, shape) -> key[*shape]``,
    ``random_bits(key, bit_width, shape) -> uint<bit_width>[*shape]``,
    ``fold_in(key, uint32[]) -> key``. Printed as its ``tag``."""

    key_shape: Shape
    seed: Callable
    split: Callable
    random_bits: Callable
    fold_in: Callable
    name: str = "<unnamed>"
    tag: str = "?"

    def __hash__(self) -> int:
        return hash(self.tag)

    def __str__(self) -> str:
        return self.tag


class PRNGSpec:
    """What ``define_prng_impl`` returns: a hashable handle on a ``PRNGImpl`` (printed as
    its tag), the form JAX's ``impl=`` arguments take."""

    __slots__ = ("_impl",)

    def __init__(self, impl: PRNGImpl):
        self._impl = impl

    def __repr__(self) -> str:
        return f"PRNGSpec({self._impl.name!r})"

    def __str__(self) -> str:
        return str(self._impl)

    def __hash__(self) -> int:
        return hash(self._impl)

    def __eq__(self, other) -> bool:
        return isinstance(other, PRNGSpec) and self._impl == other._impl


def define_prng_impl(*, key_shape: Shape, seed: Callable, split: Callable,
                     random_bits: Callable, fold_in: Callable, name: str = "<unnamed>",
                     tag: str = "?") -> Hashable:
    """A PRNG implementation from its key shape and functions (see ``PRNGImpl``)."""
    return PRNGSpec(PRNGImpl(tuple(key_shape), seed, split, random_bits, fold_in,
                             name=name, tag=tag))


def _impl_of(impl) -> PRNGImpl:
    return impl._impl if isinstance(impl, PRNGSpec) else impl


# ---- threefry --------------------------------------------------------------------------------

threefry_prng_impl = PRNGImpl(key_shape=(2,), seed=prng.threefry_seed,
                              split=prng.threefry_split,
                              random_bits=prng.threefry_random_bits,
                              fold_in=prng.threefry_fold_in, name="threefry2x32", tag="fry")


def threefry_2x32(keypair, count):
    """The Threefry-2x32 hash of the ``uint32`` array ``count`` under the key ``keypair``
    (two ``uint32`` scalars): a ``uint32`` array of ``count``'s shape. The counters are hashed
    as two halves (the first padded with a zero when their number is odd)."""
    key1, key2 = keypair
    dts = [core.get_aval(x).dtype for x in (key1, key2, count)]
    if any(dt != _u32 for dt in dts):
        raise TypeError(f"threefry_2x32 requires uint32 arguments, got {dts}")
    shape = core.get_aval(count).shape
    flat = lax.reshape(count, (math.prod(shape),))
    n = math.prod(shape)
    if n % 2:
        flat = lax.concatenate([flat, np.zeros((1,), _u32)], 0)
    half = (n + 1) // 2
    x1 = lax.slice_in_dim(flat, 0, half)
    x2 = lax.slice_in_dim(flat, half, 2 * half)
    out = lax.concatenate(list(threefry2x32_p.bind(key1, key2, x1, x2)), 0)
    return lax.reshape(lax.slice_in_dim(out, 0, n), shape)


# ---- RBG: XLA's rng_bit_generator, keyed by threefry-derived 4-word keys ----------------------


def _rbg_seed(seed):
    half = prng.threefry_seed(seed)
    return lax.concatenate([half, half], 0)


def _rbg_split(key, shape: Shape):
    halves = lax.reshape(key, (2, 2))
    keys = vmap(prng.threefry_split, (0, None), len(shape))(halves, tuple(shape))
    return lax.reshape(keys, (*shape, 4))


def _rbg_fold_in(key, data):
    halves = lax.reshape(key, (2, 2))
    return lax.reshape(vmap(prng.threefry_fold_in, (0, None), 0)(halves, data), (4,))


def _rbg_random_bits(key, bit_width: int, shape: Shape):
    aval = core.get_aval(key)
    if aval.shape != (4,) or aval.dtype != _u32:
        raise TypeError("_rbg_random_bits got invalid prng key.")
    if bit_width not in prng.UINT_DTYPES:
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    _, bits = lax.rng_bit_generator(key, tuple(shape), dtype=prng.UINT_DTYPES[bit_width])
    return bits


def _unsafe_rbg_split(key, shape: Shape):
    # Ten draws of the generator per key serve as the hash (JAX's scheme, so the same keys).
    num = math.prod(shape)
    _, keys = lax.rng_bit_generator(key, (10 * num, 4), dtype=_u32)
    return lax.reshape(lax.slice_in_dim(keys, None, None, stride=10), (*shape, 4))


def _unsafe_rbg_fold_in(key, data):
    _, bits = lax.rng_bit_generator(_rbg_seed(data), (10, 4), dtype=_u32)
    return lax.bitwise_xor(key, bits[-1])


rbg_prng_impl = PRNGImpl(key_shape=(4,), seed=_rbg_seed, split=_rbg_split,
                         random_bits=_rbg_random_bits, fold_in=_rbg_fold_in, name="rbg",
                         tag="rbg")
unsafe_rbg_prng_impl = PRNGImpl(key_shape=(4,), seed=_rbg_seed, split=_unsafe_rbg_split,
                                random_bits=_rbg_random_bits, fold_in=_unsafe_rbg_fold_in,
                                name="unsafe_rbg", tag="urbg")


# ---- typed keys ------------------------------------------------------------------------------


def random_seed(seeds, impl) -> prng.PRNGKeyArray:
    """Typed keys of implementation ``impl``, one per element of the integer array ``seeds``
    (a Python int goes through int64 first, as in JAX)."""
    impl = _impl_of(impl)
    if impl != threefry_prng_impl:
        raise NotImplementedError(
            f"random_seed: jaxkit's typed keys are threefry2x32 keys only, not "
            f"{impl.name!r}; call {impl.name}'s own functions on raw key data instead "
            f"(impl.seed(seed), impl.split(key, shape), impl.random_bits(key, bits, shape))")
    seeds_arr = jnp.asarray(np.int64(seeds)) if isinstance(seeds, int) else jnp.asarray(seeds)
    seed = impl.seed
    for _ in range(seeds_arr.ndim):
        seed = vmap(seed)
    return key_prims.wrap_key_data(seed(seeds_arr))


def seed_with_impl(impl, seed) -> prng.PRNGKeyArray:
    """``random_seed(seed, impl=impl)``."""
    return random_seed(seed, impl=impl)
