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

Typed keys (``jaxkit.random.key``) are ``PRNGKeyArray``: a small wrapper holding the raw
``uint32[..., 2]`` key data and registered as a pytree node whose single child is that data.
That is the whole trick by which they pass through ``jit``, ``vmap`` and control flow: the
transformations see an ordinary ``uint32`` array (one difference from JAX, where a key array
is a leaf with its own ``key<fry>`` dtype: ``tree_leaves(key)`` here is the data, and
``vmap``'s ``in_axes`` count the key data's axes, so negative axes are off by one).
"""
from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Sequence
from functools import partial, reduce

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import _tree_trace as tree_util
from jaxkit._config import config
from jaxkit.interpreters import dispatch
from jaxkit import numpy as jnp
from jaxkit.numpy._keys import register_key_array_type
from jaxkit.random._key_ops import KeyArrayOperators, _array_operand
from jaxkit.runtime.array import Array, PublicArray
from jaxkit.transforms.jit import jit
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir
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


def _rotate_left(x, d: int):
    return lax.bitwise_or(lax.shift_left(x, np.uint32(d)),
                          lax.shift_right_logical(x, np.uint32(32 - d)))


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _threefry2x32_fun(k1, k2, x1, x2):
    """Threefry-2x32 in lax operations: five groups of four rounds, a key injection after
    each group (unrolled: XLA fuses the 20 rounds into one elementwise loop)."""
    ks = [k1, k2, lax.bitwise_xor(lax.bitwise_xor(k1, k2), np.uint32(0x1BD11BDA))]
    v0, v1 = lax.add(x1, ks[0]), lax.add(x2, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            v0 = lax.add(v0, v1)
            v1 = lax.bitwise_xor(v0, _rotate_left(v1, r))
        v0 = lax.add(v0, ks[(i + 1) % 3])
        v1 = lax.add(lax.add(v1, ks[(i + 2) % 3]), np.uint32(i + 1))
    return [v0, v1]


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
ad.defjvp_zero(threefry2x32_p)
batching.defrule(threefry2x32_p, _threefry2x32_batch)
mlir.register_lowering(threefry2x32_p, mlir.lower_fun(_threefry2x32_fun, multiple_results=True))


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

    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]
    terms = [hlo.MulOp(const(s), hlo.IotaOp(u64_type, i).result).result
             for i, s in enumerate(strides)]
    counts = reduce(lambda a, b: hlo.AddOp(a, b).result, terms)
    hi = hlo.ShiftRightLogicalOp(counts, const(32)).result
    out_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    return [hlo.ConvertOp(out_type, hi).result, hlo.ConvertOp(out_type, counts).result]


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
    shape = tuple(core.get_aval(a).shape)
    return lax.concatenate([lax.reshape(a, (*shape, 1)), lax.reshape(b, (*shape, 1))],
                           len(shape))


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
    """``shape`` new raw keys from one (``uint32[*shape, 2]``)."""
    if not config.jax_threefry_partitionable:
        num = math.prod(shape)
        bits = _threefry_counts(key, lax.iota(_u32, num * 2))
        return lax.reshape(bits, (*shape, 2))
    k1, k2 = _key_words(key)
    c1, c2 = iota_2x32_shape(shape)
    b1, b2 = threefry2x32(k1, k2, c1, c2)
    return _stack_last(b1, b2)


def threefry_fold_in(key, data) -> Array:
    """The raw key of ``key`` with ``uint32`` scalar ``data`` folded in."""
    k1, k2 = _key_words(key)
    b1, b2 = threefry2x32(k1, k2, np.zeros((), _u32), data)
    return _stack_last(b1, b2)


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


class KeyTy:
    """The element type of typed keys, printed ``key<fry>`` as in JAX."""

    name = "key<fry>"
    type = dtypes.prng_key
    itemsize = 8
    impl_name = "threefry2x32"

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, KeyTy) or other == self.name

    def __hash__(self):
        return hash(self.name)


key_dtype = KeyTy()


class PRNGKeyArray(KeyArrayOperators):
    """An array of typed threefry keys of ``shape``, backed by ``uint32[*shape, 2]`` data.

    A pytree node whose one child is the key data, so it flows through ``jit``/``vmap`` as
    that array. It has no arithmetic (its operators raise JAX's TypeErrors); index, iterate,
    reshape and compare it like an array, and the structural ``jnp`` functions take it."""

    __slots__ = ("_base_array",)
    __array_priority__ = 100

    def __init__(self, key_data):
        self._base_array = key_data

    dtype = key_dtype
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

    # The structural methods are the jnp functions, which take keys (jaxkit.numpy._keys).
    T = property(lambda self: jnp.transpose(self))
    mT = property(lambda self: jnp.swapaxes(self, -1, -2))
    transpose = lambda self, *axes: jnp.transpose(  # noqa: E731
        self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))
    squeeze = lambda self, axis=None: jnp.squeeze(self, axis)  # noqa: E731
    swapaxes = lambda self, axis1, axis2: jnp.swapaxes(self, axis1, axis2)  # noqa: E731
    take = lambda self, indices, axis=None: jnp.take(self, indices, axis)  # noqa: E731
    repeat = lambda self, repeats, axis=None: jnp.repeat(self, repeats, axis)  # noqa: E731

    def _vmap_leaf_axes(self, axis: int, what: str) -> list[int]:
        """The axis of the key data when ``vmap`` maps these keys along ``axis`` ("vmap in_axes"
        or "vmap out_axes"): a negative axis counts from the last key axis, not from the
        data's trailing word axis (an output gains the batch axis)."""
        ndim = self.ndim + ("out" in what)
        return [axis + ndim if -ndim <= axis < 0 else axis]

    def astype(self, dtype):
        raise NotImplementedError("Cannot call abstract method astype")

    nbytes = property(lambda self: self.size * self.itemsize)

    def __eq__(self, other):
        return jnp.equal(self, other) if _array_operand(other) else NotImplemented

    def __ne__(self, other):
        return jnp.not_equal(self, other) if _array_operand(other) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

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


class KeyAval:
    """The abstract type of a key array, as ``jax.typeof`` gives it: its shape and the key
    element type, printed ``ShapedArray(key<fry>[...])`` as JAX prints it. jaxkit's
    transformations see keys as their ``uint32`` data (keys are pytree nodes), so this type
    only describes keys to user code; it never reaches a jaxpr."""

    __slots__ = ("shape",)
    dtype = key_dtype
    weak_type = False

    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def str_short(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def __repr__(self):
        return f"ShapedArray({self.str_short()})"

    def __eq__(self, other):
        return isinstance(other, KeyAval) and self.shape == other.shape

    def __hash__(self):
        return hash((KeyAval, self.shape))


def key_aval(key: PRNGKeyArray) -> KeyAval:
    """``jax.typeof`` of a key array."""
    return KeyAval(key.shape)


PublicArray.register(PRNGKeyArray)  # isinstance(key, jax.Array), as in JAX
register_key_array_type(PRNGKeyArray, data=lambda k: k._base_array, wrap=PRNGKeyArray)
# A leaf to users (tree_util.tree_leaves(key) == [key], as in JAX), a node over its data to
# jaxkit's transformations (see jaxkit._tree_trace).
tree_util.register_trace_node(PRNGKeyArray, lambda k: ((k._base_array,), None),
                              lambda _, children: PRNGKeyArray(children[0]))


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


def check_prng_key(name: str, key, *, allow_batched: bool = False) -> tuple[Array, bool]:
    """The raw key data of ``key`` and whether ``key`` was given raw (legacy uint32)."""
    if isinstance(key, PRNGKeyArray):
        data, raw = key._base_array, False
        shape = key.shape
    elif core.is_array_like(key) and not isinstance(key, (bool, int, float, complex)):
        check_key_data(key if hasattr(key, "ndim") else np.asarray(key))
        data, raw = key, True
        shape = tuple(np.shape(key))
    else:
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    if not allow_batched and len(data.shape) > 1:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{shape} != (). Use jax.vmap for batching.")
    return data, raw


def return_keys(raw: bool, data) -> Array | PRNGKeyArray:
    """Keys of the kind the caller gave: raw data, or wrapped as typed keys."""
    return data if raw else PRNGKeyArray(data)


def canonicalize_shape(shape, what: str = "shape") -> tuple[int, ...]:
    """A tuple of nonnegative ints from an int or a sequence of them (JAX's errors)."""
    if not isinstance(shape, (tuple, list)) and hasattr(shape, "__index__"):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except core.JaxkitTypeError:
        raise
    except TypeError:
        raise TypeError("Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{shape!r}.") from None
    if any(d < 0 for d in out):
        raise ValueError(f"{what} must have nonnegative dimensions, got {out}.")
    return out


def user_dtype(dtype: DTypeLike) -> np.dtype:
    """``dtype`` canonicalised, warning (like JAX) when x64 is off and it gets truncated.
    The Python types ``int``/``float``/``complex`` mean the default dtypes: no warning."""
    if any(dtype is t for t in (bool, int, float, complex)):
        return dtypes.python_scalar_dtype(dtype)
    requested = np.dtype(dtype)
    out = dtypes.canonicalize_dtype(requested)
    if out != requested:
        warnings.warn(f"Explicitly requested dtype {requested.name} is not available, and will "
                      f"be truncated to dtype {out.name}. To enable more dtypes, set the "
                      "jax_enable_x64 configuration option or the JAX_ENABLE_X64 shell "
                      "environment variable.", UserWarning, stacklevel=3)
    return out


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
                         f"{tuple(map(tuple, shapes))}") from None


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


def check_sampler_args(name: str, key, shape, dtype, *params, kinds=np.floating,
                       what: str = "a float") -> tuple[Array, tuple[int, ...], np.dtype]:
    """The checks of a sampler with array parameters, in JAX's order: the key, the dtype (a
    subtype of ``kinds``), ``shape`` against the parameters (their broadcast shape if None),
    and that every parameter casts to the dtype safely. Returns the raw key data, the shape
    and the dtype."""
    key, _ = check_prng_key(name, key)
    dtype = float_dtype(name, dtype, kinds, what)
    shape = check_broadcast_shapes(name, shape, *params)
    check_all_safe_to_cast(name, dtype, *params)
    return key, shape, dtype


def broadcast_to_rank(x, rank: int):
    """``x`` with leading unit axes up to ``rank``."""
    ndim = np.ndim(x)
    return x if ndim == rank else lax.reshape(x, (1,) * (rank - ndim) + tuple(np.shape(x)))


def canonicalize_axis(axis: int, ndim: int) -> int:
    """A nonnegative axis in ``range(ndim)``."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def const_like(x, value):
    """``value`` as a NumPy scalar of ``x``'s dtype."""
    return np.array(value, dtypes.dtype(x))


def split_list(key, num: int = 2) -> list:
    """``num`` raw keys split from ``key``, as a list (what ``k1, k2 = split(key)`` gives)."""
    keys = threefry_split(key, (num,))
    return [lax.reshape(lax.slice(keys, (i, 0), (i + 1, 2)), (2,)) for i in range(num)]


random_bits = threefry_random_bits  # the name the samplers use (JAX's ``_random_bits``)


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------


def _check_impl(impl) -> None:
    if impl is not None and str(impl) not in ("threefry2x32", "fry", "key<fry>"):
        raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: '
                         '"threefry2x32"?')


@partial(jit, inline=True)
def _seed(seed):
    return threefry_seed(seed)


def _random_seed(ctor_name: str, seed, impl) -> Array:
    _check_impl(impl)
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given a PRNG key.")
    if np.ndim(seed):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (). Use jax.vmap for batching")
    if isinstance(seed, bool) or not isinstance(seed, (int, core.Tracer, Array)):
        seed = np.asarray(seed)
        if not np.issubdtype(seed.dtype, np.integer):
            raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
        seed = seed.astype(dtypes.canonicalize_dtype(seed.dtype))
    elif isinstance(seed, int):
        # Like JAX: a Python int goes through int64 (OverflowError beyond it), then is
        # truncated to the default int width (so seeds beyond 32 bits wrap without x64).
        seed = np.int64(seed).astype(dtypes.default_int_dtype())
    return _seed(seed)


def PRNGKey(seed: int | ArrayLike, *, impl=None) -> Array:
    """A legacy raw key, ``uint32[2]``, from an integer seed (64-bit seeds keep both words
    with x64; without it the seed is first truncated to 32 bits, as in JAX)."""
    return _random_seed("PRNGKey", seed, impl)


def key(seed: int | ArrayLike, *, impl=None, dtype=None) -> PRNGKeyArray:
    """A typed key (printed ``Array((), dtype=key<fry>)``) from an integer seed."""
    if dtype is not None and impl is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to jax.random.key")
    return PRNGKeyArray(_random_seed("key", seed, impl if dtype is None else dtype))


def key_data(keys) -> Array:
    """The raw ``uint32[..., 2]`` data of a key array (raw keys are returned as they are)."""
    data, _ = check_prng_key("key_data", keys, allow_batched=True)
    return data


def wrap_key_data(key_bits_array: ArrayLike, *, impl=None, dtype=None) -> PRNGKeyArray:
    """A typed key array over raw ``uint32[..., 2]`` data."""
    if dtype is not None and impl is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                         "jax.random.wrap_key_data")
    _check_impl(impl if dtype is None else dtype)
    if not hasattr(key_bits_array, "ndim"):
        key_bits_array = jnp.asarray(key_bits_array)
    check_key_data(key_bits_array)
    return PRNGKeyArray(key_bits_array)


def key_impl(keys) -> str:
    """The name of the keys' implementation (always ``"threefry2x32"``)."""
    check_prng_key("key_impl", keys, allow_batched=True)
    return "threefry2x32"


def key_dtype(impl=None) -> KeyTy:
    """The dtype of typed keys, ``key<fry>``."""
    _check_impl(impl)
    return key_dtype


def clone(key):
    """A copy of ``key`` (keys are immutable values here, so the key itself)."""
    return key


@partial(jit, static_argnums=(1,))
def _split_keys(key, shape):
    return threefry_split(key, shape)


def split(key, num: int | tuple[int, ...] = 2):
    """``num`` new keys (``num`` may be a shape) stacked along a new leading axis."""
    data, raw = check_prng_key("split", key)
    shape = tuple(num) if isinstance(num, Sequence) else (num,)
    shape = canonicalize_shape(shape, "split num")
    return return_keys(raw, _split_keys(data, shape))


@jit
def _fold_in(key, data):
    return threefry_fold_in(key, data)


def fold_in(key, data: ArrayLike):
    """A new key from ``key`` and the 32-bit integer ``data``."""
    key_arr, raw = check_prng_key("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of"
                        f"shape {np.shape(data)} != (). Use jax.vmap for batching.")
    if isinstance(data, (core.Tracer, Array)):
        data = lax.convert_element_type(data, np.uint32)
    else:
        data = np.asarray(data, dtype=np.uint32)
    return return_keys(raw, _fold_in(key_arr, data))


@partial(jit, static_argnums=(1, 2))
def _bits(key, bit_width, shape):
    return threefry_random_bits(key, bit_width, shape)


def bits(key, shape: Sequence[int] = (), dtype: DTypeLike | None = None) -> Array:
    """Uniform random bits as unsigned integers (default uint32, uint64 with x64)."""
    key, _ = check_prng_key("bits", key)
    dtype = dtypes.default_uint_dtype() if dtype is None else user_dtype(dtype)
    if not dtypes.issubdtype(dtype, np.unsignedinteger):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    shape = canonicalize_shape(shape)
    return _bits(key, dtype.itemsize * 8, shape)
