"""Threefry-2x32, the key derivations built on it, and typed PRNG keys.

The bits are those of JAX 0.10.2 with its default ``jax_threefry_partitionable=True``:

* ``threefry2x32(k1, k2, x1, x2)`` is the 20-round Threefry-2x32 block cipher of Salmon et al.
  (key schedule with the constant ``0x1BD11BDA``, rotations 13 15 26 6 / 17 29 16 24). It is a
  primitive, like in JAX, so jaxprs stay small; its lowering traces the lax-op implementation
  (``mlir.lower_fun``), so XLA sees only additions, xors and shifts of ``uint32``.
* ``iota_2x32_shape(shape)`` numbers the elements of ``shape`` in row-major order as a 64-bit
  counter split into high and low ``uint32`` halves.
* ``random_bits(key, w, shape)`` hashes those counters with the key and combines the two output
  words (``hi ^ lo`` for 8/16/32 bits, ``hi << 32 | lo`` for 64); ``split(key, shape)`` stacks
  the two words as new keys; ``fold_in(key, d)`` hashes the counter ``(0, d)``.

Typed keys (``jaxkit.random.key``) have the extended dtype ``key<fry>`` (``KeyTy``), stored as
``uint32[..., 2]``: concrete ones are ``PRNGKeyArray``s, traced ones tracers of a
``key<fry>`` aval. The primitives on them are in ``jaxkit.random.key_prims``.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any
from functools import partial, reduce

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit._config import config
from jaxkit.interpreters import dispatch
from jaxkit.lax.sharding_rules import defsharding, keeps_operand_mesh, named_elementwise_rule, parts
from jaxkit.lax.standard import canonicalize_shape as lax_canonicalize_shape
from jaxkit import numpy as jnp
from jaxkit.numpy import _index_update as jnp_index_update
from jaxkit.numpy._array_methods import install_operators
from jaxkit.runtime.array import Array, PublicArray, Shard, abstract_member, device_put_value
from jaxkit.transforms.jit import jit
from jaxkit.runtime.sharding import NamedSharding, PartitionSpec
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir, mlir_calls
from jaxkit.interpreters.mlir import hlo
from jaxkit.typing import ArrayLike, DTypeLike

_u32 = np.dtype(np.uint32)

# --------------------------------------------------------------------------------------------
# threefry2x32
# --------------------------------------------------------------------------------------------


def threefry2x32(k1: ArrayLike, k2: ArrayLike, x1: ArrayLike, x2: ArrayLike
                 ) -> tuple[Array, Array]:
    """The Threefry-2x32 hash of the counter words ``(x1, x2)`` under the key ``(k1, k2)``.

    All operands are ``uint32`` of one shape (rank-0 operands broadcast)."""
    return tuple(threefry2x32_p.bind(k1, k2, x1, x2))


def _threefry2x32_abstract_eval(*avals):
    if any(a.dtype != _u32 for a in avals):
        raise TypeError("Arguments to threefry2x32 must have uint32 type, got "
                        f"{', '.join(a.str_short() for a in avals)}.")
    shapes = [a.shape for a in avals if a.shape]
    if any(s != shapes[0] for s in shapes[1:]):
        raise TypeError("threefry2x32 got incompatible shapes for broadcasting: "
                        f"{', '.join(str(a.shape) for a in avals)}.")
    aval = ShapedArray(shapes[0] if shapes else (), _u32)
    return [aval, aval]


def _rotate_left(x, d):
    """``x`` rotated left by ``d`` bits (a Python int, or a traced ``uint32`` scalar that is
    broadcast, as in JAX's rolled loop)."""
    if isinstance(d, int):
        return lax.bitwise_or(lax.shift_left(x, np.uint32(d)),
                              lax.shift_right_logical(x, np.uint32(32 - d)))
    left = lax.shift_left(x, _scalar_to(d, x))
    right = lax.shift_right_logical(x, _scalar_to(lax.sub(np.uint32(32), d), x))
    return lax.bitwise_or(left, right)


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _apply_round(v0, v1, rotation):
    v0 = lax.add(v0, v1)
    return v0, lax.bitwise_xor(v0, _rotate_left(v1, rotation))


def _scalar_to(x, like):
    """``x`` made the shape of ``like`` when it is a scalar (explicitly, as JAX's ``x + k``
    broadcasts it); key words of ``like``'s shape (a batched hash) stay as they are."""
    shape = core.get_aval(like).shape
    return lax.broadcast_in_dim(x, shape, ()) if shape and not np.shape(x) else x


def _threefry2x32_fun(k1, k2, x1, x2):
    """Threefry-2x32 in lax operations, unrolled: five groups of four rounds, a key injection
    after each group (JAX's lowering everywhere but on CPU)."""
    ks = [k1, k2, lax.bitwise_xor(lax.bitwise_xor(k1, k2), np.uint32(0x1BD11BDA))]
    v0, v1 = lax.add(x1, _scalar_to(ks[0], x1)), lax.add(x2, _scalar_to(ks[1], x2))
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            v0, v1 = _apply_round(v0, v1, r)
        v0 = lax.add(v0, _scalar_to(ks[(i + 1) % 3], v0))
        v1 = lax.add(lax.add(v1, _scalar_to(ks[(i + 2) % 3], v1)), np.uint32(i + 1))
    return [v0, v1]


def _threefry2x32_rolled(k1, k2, x1, x2):
    """Threefry-2x32 as a loop of five trips (four rounds and a key injection each), with the
    key words and rotations rotated between trips: JAX's CPU lowering, which compiles faster
    than the unrolled rounds."""
    ks = [k1, k2, lax.bitwise_xor(lax.bitwise_xor(k1, k2), np.uint32(0x1BD11BDA))]
    x = [lax.add(x1, _scalar_to(ks[0], x1)), lax.add(x2, _scalar_to(ks[1], x2))]
    rotations = [np.array(r, _u32) for r in _ROTATIONS]

    def trip(i, state):
        (v0, v1), ks, rotations = state
        for k in range(4):
            v0, v1 = _apply_round(v0, v1, lax.index_in_dim(rotations[0], k, keepdims=False))
        v0 = lax.add(v0, _scalar_to(ks[0], v0))
        v1 = lax.add(v1, _scalar_to(ks[1], v1))
        one = np.ones((), core.get_aval(i).dtype)[()]  # the loop index's type (int64 with x64)
        count = lax.convert_element_type(lax.add(i, one), _u32)
        v1 = lax.add(v1, _scalar_to(count, v1))
        return [v0, v1], ks[1:] + ks[:1], rotations[1:] + rotations[:1]

    x, _, _ = lax.fori_loop(0, 5, trip, (x, ks[1:] + ks[:1], rotations))
    return x


def _threefry2x32_batch(axis_data, args, dims):
    size = batching.batch_size(args, dims)
    unbatched = [x.shape[:d] + x.shape[d + 1:] if d is not batching.not_mapped else x.shape
                 for x, d in zip(args, dims)]
    shape = next((s for s in unbatched if s), ())
    out_shape = (size, *shape)
    new_args = []
    for x, d in zip(args, dims):
        if d is batching.not_mapped:
            if x.ndim:  # a rank-0 operand broadcasts by itself
                x = lax.broadcast_in_dim(x, out_shape, tuple(range(1, len(out_shape))))
        else:
            x = batching.moveaxis(x, d, 0)
            if x.ndim == 1 and shape:
                x = lax.broadcast_in_dim(x, out_shape, (0,))
        new_args.append(x)
    return threefry2x32_p.bind(*new_args), [0, 0]


threefry2x32_p = core.Primitive("threefry2x32")
threefry2x32_p.multiple_results = True
threefry2x32_p.def_impl(lambda *args: dispatch.apply_primitive(threefry2x32_p, *args))
threefry2x32_p.def_abstract_eval(_threefry2x32_abstract_eval)
defsharding(threefry2x32_p, lambda *avals: [named_elementwise_rule("threefry2x32")(*avals)] * 2)
ad.defjvp_zero(threefry2x32_p)
batching.defrule(threefry2x32_p, _threefry2x32_batch)
# Out of line, as JAX's: one private ``@threefry2x32`` per operand shapes in a program; on CPU
# the rolled loop (whose trips call the loop body, ``@closed_call``).
mlir.register_lowering(threefry2x32_p, mlir_calls.out_of_line(
    mlir.lower_fun(_threefry2x32_fun, multiple_results=True), "threefry2x32"))
mlir.register_lowering(threefry2x32_p, mlir_calls.out_of_line(
    mlir.lower_fun(_threefry2x32_rolled, multiple_results=True), "threefry2x32"),
    platform="cpu")


# --------------------------------------------------------------------------------------------
# iota_2x32_shape
# --------------------------------------------------------------------------------------------


def iota_2x32_shape(shape: Sequence[int]) -> tuple[Array, Array]:
    """The row-major index of every element of ``shape`` as a 64-bit count, split into
    ``(high, low)`` ``uint32`` words. Lowers to ``stablehlo.iota`` in ``uint64``."""
    shape = tuple(int(d) for d in shape)
    if not shape:
        zero = np.zeros((), _u32)
        return zero, zero
    return tuple(iota_2x32_shape_p.bind(shape=shape))


def _iota_2x32_shape_lowering(ctx, *, shape):
    u64 = ShapedArray(shape, np.uint64)
    u64_type = mlir.aval_to_ir_type(u64)

    def const(v):
        return mlir.broadcast_in_dim(mlir.ir_constant(np.array(v, np.uint64)), u64, ())

    # In JAX's order (the iotas, then each scaled by its stride; the low word converted
    # first), so that lowered text reads as JAX's.
    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    iotas = [hlo.IotaOp(u64_type, i).result for i in range(len(shape))]
    terms = [hlo.MulOp(const(s), iota).result for s, iota in zip(strides, iotas)]
    counts = reduce(lambda a, b: hlo.AddOp(a, b).result, terms)
    hi = hlo.ShiftRightLogicalOp(counts, const(32)).result
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    lo = hlo.ConvertOp(out_type, counts).result
    return [hlo.ConvertOp(out_type, hi).result, lo]


iota_2x32_shape_p = core.Primitive("iota_2x32_shape")
iota_2x32_shape_p.multiple_results = True
iota_2x32_shape_p.def_impl(
    lambda **params: dispatch.apply_primitive(iota_2x32_shape_p, **params))
iota_2x32_shape_p.def_abstract_eval(lambda *, shape: [ShapedArray(shape, _u32)] * 2)
ad.defjvp_zero(iota_2x32_shape_p)
mlir.register_lowering(iota_2x32_shape_p, _iota_2x32_shape_lowering)


# --------------------------------------------------------------------------------------------
# Key derivations on raw uint32[2] key data
# --------------------------------------------------------------------------------------------

UINT_DTYPES = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _u32,
               64: np.dtype(np.uint64)}


def _key_words(key) -> tuple:
    """The two ``uint32`` words of a single raw key ``uint32[2]``."""
    k1 = lax.reshape(lax.slice(key, (0,), (1,)), ())
    k2 = lax.reshape(lax.slice(key, (1,), (2,)), ())
    return k1, k2


def _stack_last(a, b):
    # With expand_dims (a broadcast_in_dim), as JAX's jnp.stack: lowered text reads as JAX's.
    ndim = len(core.get_aval(a).shape)
    return lax.concatenate([lax.expand_dims(a, (ndim,)), lax.expand_dims(b, (ndim,))], ndim)


def threefry_seed(seed) -> Array:
    """Raw key of an integer seed array (scalar): ``[seed >> 32, seed & 0xFFFFFFFF]``, the
    high word being 0 unless the seed has 64 bits."""
    aval = core.get_aval(seed)
    if aval.shape:
        raise TypeError(f"PRNG key seed must be a scalar; got {seed!r}.")
    if not np.issubdtype(aval.dtype, np.integer):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if aval.dtype.itemsize == 8:
        hi = lax.convert_element_type(
            lax.shift_right_logical(seed, np.array(32, aval.dtype)), _u32)
    else:  # a logical shift by >= the bit width gives 0
        hi = np.zeros((), _u32)
    lo = lax.convert_element_type(seed, _u32)  # integer conversion keeps the low 32 bits
    return _stack_last(hi, lo)


def _threefry_counts(key, counts) -> Array:
    """JAX's original ``threefry_2x32(key, counts)`` on a flat ``uint32`` counter array: the
    counters are split in two halves (padded with a zero when odd) that are hashed as the two
    words, and the two output words are concatenated back (the layout of every JAX release
    before ``jax_threefry_partitionable`` became the default)."""
    k1, k2 = _key_words(key)
    n = core.get_aval(counts).shape[0]
    if n % 2:
        counts = lax.concatenate([counts, np.zeros((1,), _u32)], 0)
    half = (n + 1) // 2
    x1, x2 = lax.slice(counts, (0,), (half,)), lax.slice(counts, (half,), (2 * half,))
    b1, b2 = threefry2x32(k1, k2, x1, x2)
    out = lax.concatenate([b1, b2], 0)
    return lax.slice(out, (0,), (n,)) if n % 2 else out


def threefry_split(key, shape: tuple[int, ...]) -> Array:
    """``shape`` new raw keys from one (``uint32[*shape, 2]``): a ``jit`` named
    ``_threefry_split`` with ``shape`` static, as JAX's (a private function in lowered
    programs)."""
    return _threefry_split(key, tuple(shape))


@partial(jit, static_argnums=(1,))
def _threefry_split(key, shape: tuple[int, ...]) -> Array:
    if not config.jax_threefry_partitionable:
        num = math.prod(shape)
        bits = _threefry_counts(key, lax.iota(_u32, num * 2))
        return lax.reshape(bits, (*shape, 2))
    k1, k2 = _key_words(key)
    c1, c2 = iota_2x32_shape(shape)
    b1, b2 = threefry2x32(k1, k2, c1, c2)
    return _stack_last(b1, b2)


def threefry_fold_in(key, data) -> Array:
    """The raw key of ``key`` with ``uint32`` scalar ``data`` folded in: a ``jit`` named
    ``_threefry_fold_in``, as JAX's."""
    return _threefry_fold_in(key, data)


@jit
def _threefry_fold_in(key, data) -> Array:
    # As JAX's: the hash of the counters ``[data >> 32, data & 0xFFFFFFFF]`` (``0`` and
    # ``data`` for a uint32 ``data``: XLA's logical shift by the bit width gives 0).
    hi = lax.expand_dims(lax.shift_right_logical(data, np.array(32, _u32)), (0,))
    lo = lax.expand_dims(lax.bitwise_and(data, np.array(0xFFFFFFFF, _u32)), (0,))
    return _threefry_counts(key, lax.concatenate([hi, lo], 0))


def threefry_random_bits(key, bit_width: int, shape: tuple[int, ...]) -> Array:
    """Uniform random bits of ``uint{bit_width}`` and ``shape`` from one raw key."""
    if bit_width not in UINT_DTYPES:
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    if math.prod(shape) > 2 ** 64:
        raise NotImplementedError("random bits array of size exceeding 2 ** 64")
    if not config.jax_threefry_partitionable:
        return _threefry_random_bits_original(key, bit_width, shape)
    k1, k2 = _key_words(key)
    c1, c2 = iota_2x32_shape(shape)
    b1, b2 = threefry2x32(k1, k2, c1, c2)
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        hi = lax.convert_element_type(b1, dtype)
        lo = lax.convert_element_type(b2, dtype)
        return lax.bitwise_or(lax.shift_left(hi, np.array(32, dtype)), lo)
    bits = lax.bitwise_xor(b1, b2)
    return bits if bit_width == 32 else lax.convert_element_type(bits, dtype)


def _threefry_random_bits_original(key, bit_width: int, shape: tuple[int, ...]) -> Array:
    """``random_bits`` with ``jax_threefry_partitionable=False``: enough 32-bit words from
    counters ``0..n-1`` (JAX's original layout); 64-bit values join the first and second
    halves, 8/16-bit values are the words' little-endian pieces."""
    size = math.prod(shape)
    max_count = -(-bit_width * size // 32)
    if max_count >= np.iinfo(np.uint32).max:
        raise NotImplementedError("random bits of more than 2**32 words with "
                                  "jax_threefry_partitionable=False")
    bits = _threefry_counts(key, lax.iota(_u32, max_count))
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        half = max_count // 2
        hi = lax.convert_element_type(lax.slice(bits, (0,), (half,)), dtype)
        lo = lax.convert_element_type(lax.slice(bits, (half,), (2 * half,)), dtype)
        bits = lax.bitwise_or(lax.shift_left(hi, np.array(32, dtype)), lo)
    elif bit_width in (8, 16):
        per_word = 32 // bit_width
        shifts = lax.mul(np.uint32(bit_width),
                         lax.broadcasted_iota(_u32, (per_word, max_count), 0))
        pieces = lax.shift_right_logical(lax.broadcast(bits, (per_word,)), shifts)
        pieces = lax.bitwise_and(np.uint32(np.iinfo(dtype).max), pieces)
        pieces = lax.reshape(lax.transpose(pieces, (1, 0)), (max_count * per_word,))
        bits = lax.slice(lax.convert_element_type(pieces, dtype), (0,), (size,))
    return lax.reshape(bits, shape)


# --------------------------------------------------------------------------------------------
# Typed keys
# --------------------------------------------------------------------------------------------


class KeyTy(dtypes.ExtendedDType):
    """The element type of typed threefry keys, printed ``key<fry>`` as in JAX: an extended
    dtype whose values are stored as ``uint32[..., 2]`` (``physical_shape``/``physical_dtype``),
    so every primitive and lowering meets key-typed values as ordinary values."""

    name = "key<fry>"
    type = dtypes.prng_key
    itemsize = 8
    impl_name = "threefry2x32"
    physical_shape = (2,)
    physical_dtype = _u32

    def to_physical(self, value: PRNGKeyArray) -> Array:
        return value._base_array

    def from_physical(self, buf) -> PRNGKeyArray:
        """Keys over a program's result buffer, or over an array of key data (a sharded
        array's, from a partitioned program or a ``device_put`` with a sharding)."""
        return PRNGKeyArray(buf if isinstance(buf, Array) else Array(buf))

    def full(self, shape: tuple[int, ...], fill_value) -> Any:
        """Keys of ``shape`` all equal to ``fill_value`` (a key), or with data
        ``fill_value`` (0: the buffers ``scan`` fills, as JAX's ``empty`` keys)."""
        if isinstance(getattr(fill_value, "dtype", None), KeyTy):
            return lax.broadcast_in_dim(fill_value, shape, ())
        return random_wrap(lax.full((*shape, 2), fill_value, _u32))

    def __eq__(self, other):
        return isinstance(other, KeyTy) or other == self.name

    def __hash__(self):
        return hash(self.name)


fry_dtype = KeyTy()


class PRNGImpl:
    """The ``impl`` parameter of ``random_seed``/``random_wrap``: the threefry2x32
    implementation, printed ``fry`` in jaxprs as JAX prints it."""

    name = "threefry2x32"
    tag = "fry"

    key_shape = (2,)

    def __repr__(self):
        return self.tag

    def __eq__(self, other):
        return isinstance(other, PRNGImpl)

    def pprint(self) -> str:
        """JAX's description of the implementation: its fields, one per line."""
        fields = dict(key_shape=self.key_shape, seed=threefry_seed, split=threefry_split,
                      random_bits=threefry_random_bits, fold_in=threefry_fold_in,
                      name=self.name, tag=self.tag)
        return "\n".join([f"PRNGImpl [{self.tag}] {{{self.name}}}:",
                          *(f"  {k} = {v}" for k, v in fields.items())])

    def __hash__(self):
        return hash(PRNGImpl)


threefry_prng_impl = PRNGImpl()


class PRNGKeyArray:
    """An array of typed threefry keys of ``shape``, backed by ``uint32[*shape, 2]`` data.

    The concrete value of dtype ``key<fry>``: a pytree leaf, whose aval is
    ``ShapedArray(shape, key<fry>)``; programs take and give it as its data. Inside a
    transformation a key is a tracer of that aval. It has no arithmetic (its operators raise
    JAX's TypeErrors); index, iterate, reshape and compare it like an array, and the
    structural ``jnp`` functions take it."""

    __slots__ = ("_base_array",)
    __array_priority__ = 100

    def __init__(self, key_data):
        self._base_array = key_data

    dtype = fry_dtype
    shape = property(lambda self: tuple(self._base_array.shape[:-1]))
    ndim = property(lambda self: len(self._base_array.shape) - 1)
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    itemsize = KeyTy.itemsize

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if Ellipsis not in idx:
            idx = (*idx, Ellipsis)
        return PRNGKeyArray(self._base_array[(*idx, slice(None))])

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return PRNGKeyArray(self._base_array.reshape((*shape, 2)))

    def ravel(self):
        return self.reshape(-1)

    def copy(self) -> PRNGKeyArray:
        """A key array over a copy of the key data (Flax nnx copies its stream keys)."""
        return PRNGKeyArray(self._base_array.copy())

    flatten = ravel

    # The structural methods are the jnp functions: they bind the lax primitives on keys.
    T = property(lambda self: jnp.transpose(self))
    mT = property(lambda self: jnp.swapaxes(self, -1, -2))
    transpose = lambda self, *axes: jnp.transpose(  # noqa: E731
        self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))
    squeeze = lambda self, axis=None: jnp.squeeze(self, axis)  # noqa: E731
    swapaxes = lambda self, axis1, axis2: jnp.swapaxes(self, axis1, axis2)  # noqa: E731
    take = lambda self, indices, axis=None: jnp.take(self, indices, axis)  # noqa: E731
    repeat = lambda self, repeats, axis=None: jnp.repeat(self, repeats, axis)  # noqa: E731

    def astype(self, dtype):
        raise NotImplementedError("Cannot call abstract method astype")

    nbytes = property(lambda self: self.size * self.itemsize)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    aval = property(lambda self: ShapedArray(self.shape, fry_dtype))
    weak_type = False
    # keys.at[i].set(k): a scatter of keys, as on any array
    at = property(lambda self: jnp_index_update._IndexUpdateHelper(self))

    # Where the keys live: where their data does (its trailing word axis is never split).
    device = property(lambda self: self._base_array.device)
    committed = property(lambda self: self._base_array.committed)
    is_fully_addressable = property(lambda self: self._base_array.is_fully_addressable)
    is_fully_replicated = property(lambda self: self._base_array.is_fully_replicated)

    def devices(self) -> set:
        return self._base_array.devices()

    @property
    def sharding(self):
        """The data's layout; a ``NamedSharding``'s spec names one entry per key axis (the
        word axis dropped, unsplit axes ``None``), as JAX reports a key array's layout."""
        s = self._base_array.sharding
        if not isinstance(s, NamedSharding):
            return s
        parts = (*s.spec, *[None] * self.ndim)[:self.ndim]
        return NamedSharding(s.mesh, PartitionSpec(*parts), memory_kind=s.memory_kind)

    @property
    def addressable_shards(self) -> list[Shard]:
        return [Shard(s.device, s.index[:self.ndim], s.replica_id, PRNGKeyArray(s.data))
                for s in self._base_array.addressable_shards]

    def block_until_ready(self) -> PRNGKeyArray:
        self._base_array.block_until_ready()
        return self

    def __repr__(self):
        return f"Array({self.shape}, dtype={self.dtype.name}) overlaying:\n{self._base_array}"

    __str__ = __repr__

    def __array__(self, dtype=None, copy=None):
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. "
                        "Use jaxkit.random.key_data(arr) if you wish to extract the "
                        "underlying integer array.")

    def pprint(self) -> str:
        """JAX's description of the key array: its shape and implementation."""
        impl = threefry_prng_impl.pprint().replace("\n", "\n  ")
        return f"PRNGKeyArray:\n  shape = {self.shape}\n  impl = {impl}"

    # The buffer-level members are the data's (one key per two words).
    def addressable_data(self, index: int) -> PRNGKeyArray:
        return PRNGKeyArray(self._base_array.addressable_data(index))

    global_shards = property(lambda self: self.addressable_shards)  # (one process)
    on_device_size_in_bytes = lambda self: self._base_array.on_device_size_in_bytes()  # noqa: E731
    unsafe_buffer_pointer = lambda self: self._base_array.unsafe_buffer_pointer()  # noqa: E731
    copy_to_host_async = lambda self: self._base_array.copy_to_host_async()  # noqa: E731
    delete = lambda self: self._base_array.delete()  # noqa: E731
    is_deleted = lambda self: self._base_array.is_deleted()  # noqa: E731


# The members of arrays that key arrays lack (no arithmetic, reductions or conversions): JAX's
# error on use.
for _name in ("all", "any", "argmax", "argmin", "argpartition", "argsort", "byteswap", "choose",
              "clip", "compress", "conj", "conjugate", "cumprod", "cumsum", "diagonal", "dot",
              "item", "max", "mean", "min", "nonzero", "prod", "ptp", "round", "searchsorted",
              "sort", "std", "sum", "to_device", "trace", "var", "view"):
    setattr(PRNGKeyArray, _name, abstract_member(_name))
for _name in ("flat", "real", "imag"):
    setattr(PRNGKeyArray, _name, abstract_member(_name, is_property=True))


# The operators of arrays: ``==``/``!=`` compare whole keys (``eq``/``ne`` take key<fry>);
# the others raise the TypeError the jnp function or the primitive's type rule raises.
install_operators(PRNGKeyArray)
PublicArray.register(PRNGKeyArray)  # isinstance(key, jax.Array), as in JAX
def _key_aval(keys: PRNGKeyArray) -> ShapedArray:
    """``key<fry>[...]``, split as the data is over Explicit mesh axes (``u32[8@x,2]`` data:
    ``key<fry>[8@x]``)."""
    typed = getattr(core.get_aval(keys._base_array), "_sharding", None)
    if typed is not None:
        typed = typed.update(spec=type(typed.spec)(*typed.spec[:keys.ndim]))
    return ShapedArray(keys.shape, fry_dtype, sharding=typed)


core.pytype_aval_mappings[PRNGKeyArray] = _key_aval


# --------------------------------------------------------------------------------------------
# random_wrap, random_unwrap: keys from their data and back (no computation)
# --------------------------------------------------------------------------------------------


def _wrap_abstract_eval(data, *, impl):
    if data.dtype != _u32 or data.shape[-1:] != (2,):
        raise TypeError("random_wrap takes uint32[..., 2] key data, got "
                        f"{data.str_short()}.")
    return ShapedArray(data.shape[:-1], fry_dtype)


def _wrap_impl(data, *, impl):
    # Host data is put on the default device, uncommitted, even under jax.set_mesh: JAX's
    # wrap_key_data of a NumPy array is a SingleDeviceSharding there. Device data stays as
    # it is laid out.
    return PRNGKeyArray(data if isinstance(data, Array)
                        else device_put_value(np.asarray(data, _u32)))


random_wrap_p = core.Primitive("random_wrap")
random_wrap_p.def_impl(_wrap_impl)
random_wrap_p.def_abstract_eval(_wrap_abstract_eval)
defsharding(random_wrap_p, keeps_operand_mesh(lambda data, *, impl: parts(data)[:-1]))
ad.defjvp_zero(random_wrap_p)
batching.defleading(random_wrap_p)
mlir.register_lowering(random_wrap_p, lambda ctx, data, *, impl: data, physical=True)


def _unwrap_abstract_eval(keys):
    if not isinstance(keys.dtype, KeyTy):
        raise TypeError(f"random_unwrap takes a key array (dtype key<fry>), got "
                        f"{keys.str_short()}.")
    return ShapedArray((*keys.shape, 2), _u32)


def _unwrap_impl(keys):
    """The keys' data, laid out as they hold it (see ``KeyTy.from_physical``)."""
    return keys._base_array


random_unwrap_p = core.Primitive("random_unwrap")
random_unwrap_p.def_impl(_unwrap_impl)
random_unwrap_p.def_abstract_eval(_unwrap_abstract_eval)
defsharding(random_unwrap_p, keeps_operand_mesh(lambda keys: (*parts(keys), None)))
ad.defjvp_zero(random_unwrap_p)
batching.defleading(random_unwrap_p)
mlir.register_lowering(random_unwrap_p, lambda ctx, keys: keys, physical=True)


def random_wrap(data: ArrayLike) -> Any:
    """Typed keys over ``uint32[..., 2]`` data (``random_wrap``)."""
    return random_wrap_p.bind(data, impl=threefry_prng_impl)


def random_unwrap(keys: Any) -> Any:
    """The ``uint32[..., 2]`` data of typed keys (``random_unwrap``)."""
    return random_unwrap_p.bind(keys)



def check_key_data(key_data) -> None:
    """Raise JAX's errors for data that cannot back threefry keys."""
    if not all(hasattr(key_data, a) for a in ("ndim", "shape", "dtype")):
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data to have "
                        f"ndim, shape, and dtype attributes. Got {key_data}")
    if key_data.ndim < 1:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.ndim >= 1; "
                        f"got ndim={key_data.ndim}")
    if tuple(key_data.shape[-1:]) != (2,):
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.shape to "
                        f"end with (2,); got shape={tuple(key_data.shape)} for "
                        "impl=threefry2x32")
    if key_data.dtype != _u32:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data.dtype = "
                        f"uint32; got dtype={key_data.dtype}")


# --------------------------------------------------------------------------------------------
# Argument checking shared by the samplers
# --------------------------------------------------------------------------------------------


def canonicalize_shape(shape, what: str = "shape") -> tuple[int, ...]:
    """A tuple of nonnegative ints from an int or a sequence of them (JAX's errors)."""
    if not isinstance(shape, (tuple, list)) and hasattr(shape, "__index__"):
        shape = (shape,)
    out = lax_canonicalize_shape(shape)
    if any(d < 0 for d in out):
        raise ValueError(f"{what} must have nonnegative dimensions, got {out}.")
    return out


def user_dtype(dtype: DTypeLike) -> np.dtype:
    """``dtype`` canonicalised, warning (like JAX, which names no function for the samplers)
    when x64 is off and it gets truncated."""
    return dtypes.check_and_canonicalize_user_dtype(dtype)


def float_dtype(name: str, dtype, kinds=np.floating, what: str = "a float") -> np.dtype:
    """The sampler dtype (default float), which must be a subtype of ``kinds``."""
    dtype = user_dtype(float if dtype is None else dtype)
    if not dtypes.issubdtype(dtype, kinds):
        raise ValueError(f"dtype argument to `{name}` must be {what} dtype, got {dtype}")
    return dtype


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """NumPy broadcasting of shapes, with JAX's error message."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError("Incompatible shapes for broadcasting: "
                         f"shapes={list(map(tuple, shapes))}") from None


def check_shape(name: str, shape: tuple, *param_shapes) -> None:
    """Parameters must broadcast to exactly the requested ``shape``."""
    if param_shapes:
        shape_ = broadcast_shapes(shape, *param_shapes)
        if tuple(shape) != shape_:
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             "argument, and the result of broadcasting the shapes must equal "
                             f"the shape argument, but got result {shape_} for shape argument "
                             f"{tuple(shape)}.")


def check_broadcast_shapes(name: str, shape, *args) -> tuple[int, ...]:
    """``shape``, checked against the parameters, or their broadcast shape if None."""
    arg_shapes = [np.shape(a) for a in args]
    if shape is None:
        return broadcast_shapes(*arg_shapes) if arg_shapes else ()
    shape = canonicalize_shape(shape)
    check_shape(name, shape, *arg_shapes)
    return shape


def check_all_safe_to_cast(name: str, dtype, *args) -> None:
    """Parameters must cast to ``dtype`` without promotion (JAX's TypePromotionError)."""
    for arg in args:
        if not dtypes.safe_to_cast(arg, dtype):
            raise dtypes.TypePromotionError(
                f"In arguments to {name}, cannot safely cast argument of type "
                f"{jnp.asarray(arg).dtype} to {dtype}")


def broadcast_to_rank(x, rank: int):
    """``x`` with leading unit axes up to ``rank`` (a ``broadcast_in_dim``, as JAX's)."""
    ndim = np.ndim(x)
    return x if ndim == rank else lax.broadcast(x, (1,) * (rank - ndim))


def canonicalize_axis(axis: int, ndim: int) -> int:
    """A nonnegative axis in ``range(ndim)``."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def const_like(x, value):
    """``value`` as a NumPy scalar of ``x``'s dtype."""
    return np.array(value, dtypes.dtype(x))

