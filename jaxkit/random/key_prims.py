"""The primitives on typed PRNG keys (dtype ``key<fry>``) as JAX 0.10.2 has them, and the
``jax.random`` key functions built on them.

``random_seed``, ``random_split``, ``random_fold_in`` and ``random_bits`` take and make
``key<fry>`` values; ``random_wrap``/``random_unwrap`` convert between keys and their
``uint32[..., 2]`` data. Each takes key arrays of any shape and lowers to the threefry
computation on the physical data (``mlir.lower_fun(..., physical=True)``), mapped over the
keys; batching only moves the batch axis in front. Raw ``uint32[2]`` keys (``PRNGKey``) are
wrapped on entry and unwrapped on return, so jaxprs show what JAX's show.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit._config import config
from jaxkit import numpy as jnp
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.lax.sharding import lay_out
from jaxkit.lax.sharding_rules import (defsharding, elementwise_rule, parts,
                                       resolve_out_sharding)
from jaxkit.random.prng import (UINT_DTYPES, KeyTy, PRNGKeyArray, canonicalize_shape,
                                check_all_safe_to_cast, check_broadcast_shapes, float_dtype,
                                random_unwrap, random_wrap,
                                PRNGImpl, check_key_data, fry_dtype, threefry_fold_in,
                                threefry_prng_impl,
                                threefry_random_bits, threefry_seed, threefry_split, user_dtype)
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharding import (AxisType, Mesh, NamedSharding, PartitionSpec,
                                     current_abstract_mesh)
from jaxkit.transforms.vmap import vmap
from jaxkit.typing import ArrayLike, DTypeLike

_u32 = np.dtype(np.uint32)

# --------------------------------------------------------------------------------------------
# The physical computations: functions of uint32[*S, 2] key data
# --------------------------------------------------------------------------------------------


def _map_keys(fn, data, *per_key):
    """``fn`` applied to each raw key ``uint32[2]`` of ``data`` (``uint32[*S, 2]``) and the
    matching elements of ``per_key`` (arrays of shape ``S``), results stacked to ``S + ...``."""
    batch = tuple(data.shape[:-1])
    if not batch:
        return fn(data, *per_key)
    n = math.prod(batch)
    out = vmap(fn)(lax.reshape(data, (n, 2)), *[lax.reshape(x, (n,)) for x in per_key])
    return lax.reshape(out, (*batch, *out.shape[1:]))


def _is_key_aval(aval) -> bool:
    return isinstance(aval.dtype, KeyTy)


def _check_keys(name: str, aval) -> None:
    if not _is_key_aval(aval):
        raise TypeError(f"{name} takes a key array (dtype key<fry>), got {aval.str_short()}; "
                        "make one with jax.random.key or jax.random.wrap_key_data.")


def _key_primitive(name: str, abstract_eval, physical_fun) -> core.Primitive:
    """A primitive on key arrays: compiled eagerly, no derivative, lowered through the
    physical computation ``physical_fun`` (of the operands' data)."""
    prim = core.Primitive(name)
    prim.def_impl(lambda *args, **params: dispatch.apply_primitive(prim, *args, **params))
    prim.def_abstract_eval(abstract_eval)
    ad.defjvp_zero(prim)
    mlir.register_lowering(prim, mlir.lower_fun(physical_fun, physical=True), physical=True)
    return prim


# --------------------------------------------------------------------------------------------
# random_seed, random_bits, random_split, random_fold_in
# --------------------------------------------------------------------------------------------


def _seed_abstract_eval(seeds, *, impl):
    if not dtypes.issubdtype(seeds.dtype, np.integer):
        raise TypeError(f"random_seed takes integer seeds, got {seeds.str_short()}")
    return ShapedArray(seeds.shape, fry_dtype)


def _seed_physical(seeds, *, impl):
    if not seeds.shape:
        return threefry_seed(seeds)
    n = math.prod(seeds.shape)
    out = vmap(threefry_seed)(lax.reshape(seeds, (n,)))
    return lax.reshape(out, (*seeds.shape, 2))


random_seed_p = _key_primitive("random_seed", _seed_abstract_eval, _seed_physical)
batching.defvectorized(random_seed_p)
# (not ``keeps_operand_mesh``: keys made from host seeds under ``set_mesh`` carry its mesh)
defsharding(random_seed_p, lambda seeds, **params: parts(seeds)
            if seeds._sharding is not None else None)


def _per_key_rule(keys, *, shape, **params):
    """Each key's values (bits, new keys) along new unsplit trailing axes (typed over the
    mesh in context for keys that carry none, as in JAX)."""
    return (*parts(keys), *[None] * len(shape))


def _bits_abstract_eval(keys, *, bit_width, shape):
    _check_keys("random_bits", keys)
    if bit_width not in UINT_DTYPES:
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    return ShapedArray((*keys.shape, *shape), UINT_DTYPES[bit_width])


random_bits_p = _key_primitive(
    "random_bits", _bits_abstract_eval,
    lambda data, *, bit_width, shape: _map_keys(
        lambda k: threefry_random_bits(k, bit_width, shape), data))
batching.defleading(random_bits_p)
defsharding(random_bits_p, _per_key_rule)


def _split_abstract_eval(keys, *, shape):
    _check_keys("random_split", keys)
    return ShapedArray((*keys.shape, *shape), fry_dtype)


random_split_p = _key_primitive(
    "random_split", _split_abstract_eval,
    lambda data, *, shape: _map_keys(lambda k: threefry_split(k, shape), data))
batching.defleading(random_split_p)
defsharding(random_split_p, _per_key_rule)


def _fold_in_shape(keys, msgs) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(keys.shape, msgs.shape))
    except ValueError:
        raise TypeError("random_fold_in got incompatible shapes for broadcasting: "
                        f"{keys.shape}, {msgs.shape}.") from None


def _fold_in_abstract_eval(keys, msgs):
    _check_keys("random_fold_in", keys)
    if msgs.dtype != _u32:
        raise TypeError(f"random_fold_in takes uint32 data, got {msgs.str_short()}")
    return ShapedArray(_fold_in_shape(keys, msgs), fry_dtype)


def _fold_in_physical(data, msgs):
    shape = tuple(np.broadcast_shapes(data.shape[:-1], msgs.shape))
    data = lax.broadcast_in_dim(data, (*shape, 2),
                                tuple(range(len(shape) + 1 - data.ndim, len(shape) + 1)))
    msgs = lax.broadcast_in_dim(msgs, shape, tuple(range(len(shape) - msgs.ndim, len(shape))))
    return _map_keys(threefry_fold_in, data, msgs)


def _fold_in_batch(axis_data, args, dims):
    """A batched operand's batch axis in front (its other axes broadcast to the result's
    rank); an unbatched one as it is, broadcast by the primitive against the trailing axes
    (as JAX's rule: ``vmap(lambda k: fold_in(k, 1))`` binds ``fold_in(keys, 1)``)."""
    size = batching.batch_size(args, dims)
    unbatched = [core.get_aval(x).shape if d is batching.not_mapped else
                 tuple(np.delete(core.get_aval(x).shape, d)) for x, d in zip(args, dims)]
    shape = tuple(np.broadcast_shapes(*unbatched))
    out = []
    for x, d, s in zip(args, dims, unbatched):
        if d is batching.not_mapped:
            out.append(x)
            continue
        x = batching.moveaxis(x, d, 0)
        if len(s) < len(shape):  # the trailing axes line up with the result's
            trailing = tuple(range(len(shape) + 1 - len(s), len(shape) + 1))
            x = lax.broadcast_in_dim(x, (size, *shape), (0, *trailing))
        out.append(x)
    return random_fold_in_p.bind(*out), 0


random_fold_in_p = _key_primitive("random_fold_in", _fold_in_abstract_eval, _fold_in_physical)
batching.defrule(random_fold_in_p, _fold_in_batch)


def _fold_in_sharding(keys, msgs):
    """The elementwise rule over the operands broadcast against the result's trailing axes."""
    ndim = len(_fold_in_shape(keys, msgs))
    padded = [core.ShapedArray((1,) * (ndim - len(a.shape)) + a.shape, a.dtype, sharding=(
        None if a._sharding is None else a._sharding.update(spec=type(a._sharding.spec)(
            *[None] * (ndim - len(a.shape)), *a._sharding.spec)))) for a in (keys, msgs)]
    return elementwise_rule(*padded, _name="random_fold_in")


defsharding(random_fold_in_p, _fold_in_sharding)




# --------------------------------------------------------------------------------------------
# Argument checking shared by the samplers
# --------------------------------------------------------------------------------------------


def is_typed_key(x: Any) -> bool:
    """Whether ``x`` is a typed key array: a ``PRNGKeyArray`` or a tracer of dtype
    ``key<fry>``."""
    return isinstance(x, PRNGKeyArray) or (isinstance(x, core.Tracer)
                                           and _is_key_aval(x.aval))


def check_prng_key(name: str, key: Any, *, allow_batched: bool = False) -> tuple[Any, bool]:
    """``key`` as typed keys (raw ``uint32[..., 2]`` data is wrapped), and whether it was
    given raw (then results that are keys go back raw)."""
    if is_typed_key(key):
        typed, raw = key, False
    elif core.is_array_like(key) and not isinstance(key, (bool, int, float, complex)):
        check_key_data(key if hasattr(key, "ndim") else np.asarray(key))
        typed, raw = random_wrap(key), True
    else:
        raise TypeError("JAX encountered invalid PRNG key data: expected key_data to have "
                        f"ndim, shape, and dtype attributes. Got {key}")
    if not allow_batched and typed.shape:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{typed.shape} != (). Use jax.vmap for batching.")
    return typed, raw


def check_sampler_args(name: str, key, shape, dtype, *params, kinds=np.floating,
                       what: str = "a float", out_sharding: Any = None,
                       cast_first: bool = True
                       ) -> tuple[Array, tuple[int, ...], np.dtype, NamedSharding | None]:
    """The checks of a sampler with array parameters, in JAX's order: the key, the dtype (a
    subtype of ``kinds``), ``shape`` against the parameters (their broadcast shape if None),
    then that every parameter casts to the dtype safely and the ``out_sharding`` argument (in
    the other order unless ``cast_first``). Returns the (typed) key, the shape, the dtype and
    the layout asked for."""
    key, _ = check_prng_key(name, key)
    dtype = float_dtype(name, dtype, kinds, what)
    shape = check_broadcast_shapes(name, shape, *params)
    if cast_first:
        check_all_safe_to_cast(name, dtype, *params)
    out_sharding = canonicalize_sharding(out_sharding, name)
    if not cast_first:
        check_all_safe_to_cast(name, dtype, *params)
    return key, shape, dtype, out_sharding


def return_keys(raw: bool, keys: Any) -> Any:
    """Keys of the kind the caller gave: typed, or unwrapped to raw data."""
    return random_unwrap(keys) if raw else keys


def canonicalize_sharding(out_sharding: Any, name: str) -> NamedSharding | None:
    """A sampler's ``out_sharding=`` argument checked as JAX's ``canonicalize_sharding``
    checks it (its type, that a ``NamedSharding``'s mesh is the one in context, and, through
    ``resolve_out_sharding``, a spec's axes), as a ``NamedSharding``; None asks for nothing
    (also a sharding over a mesh with no axes, or ``P()`` with no mesh at all, which jaxkit
    lets through as ``lay_out`` does)."""
    if out_sharding is None:
        return None
    if isinstance(out_sharding, NamedSharding) and out_sharding.mesh.empty:
        return None
    if not isinstance(out_sharding, (NamedSharding, PartitionSpec)):
        raise TypeError(f"`out_sharding` argument of {name} only supports instances of "
                        f"`NamedSharding` or `PartitionSpec`. Got {out_sharding} of type: "
                        f"{type(out_sharding)}")
    context = current_abstract_mesh()
    if isinstance(out_sharding, NamedSharding):
        given = out_sharding.mesh.abstract_mesh
        all_auto = lambda m: all(t is AxisType.Auto for t in m.axis_types)  # noqa: E731
        if not context.empty and given != context and not (all_auto(given)
                                                            and all_auto(context)):
            raise ValueError(f"Context mesh {context} should match the mesh of sharding "
                             f"{given} passed to {name}.")
    resolved = resolve_out_sharding(name, out_sharding)
    if resolved is None or isinstance(out_sharding, PartitionSpec):
        return resolved
    # A sharding over a concrete mesh keeps it: the result is laid out there also with no
    # mesh in context (JAX asks for one).
    return out_sharding if isinstance(out_sharding.mesh, Mesh) else resolved


def laid_out(f: Callable, out_sharding: NamedSharding | None, **static: Any) -> Callable:
    """``f`` with the keywords ``static``, its result laid out as ``out_sharding`` (checked
    by ``canonicalize_sharding``; over Explicit axes its type says so). JAX runs the body
    under ``auto_axes`` instead (``maybe_auto_axes``): the values, layout and type are the
    same."""
    f = partial(f, **static)
    if out_sharding is None:
        return f

    def sample(*args, **kwargs):
        out = f(*args, **kwargs)
        spec = out_sharding.spec  # spelled for the result's rank, as JAX's reshard spells it
        spec = spec.update(partitions=(*spec, *[None] * (np.ndim(out) - len(spec))))
        return lay_out(out, "sampler", out_sharding.update(spec=spec))
    return sample


def random_bits(key: Any, bit_width: int, shape: Sequence[int]) -> Any:
    """``uint{bit_width}`` bits of ``shape`` from typed keys (``random_bits``); the name the
    samplers use (JAX's ``_random_bits``)."""
    return random_bits_p.bind(key, bit_width=bit_width, shape=tuple(shape))


def split_list(key: Any, num: int = 2) -> list:
    """``num`` keys split from ``key``, as a list (what ``k1, k2 = split(key)`` gives): typed
    keys from typed, raw ``uint32[2]`` data from raw data (the gamma samplers' loops)."""
    if not is_typed_key(key):
        keys = threefry_split(key, (num,))
        return [lax.reshape(lax.slice(keys, (i, 0), (i + 1, 2)), (2,)) for i in range(num)]
    keys = random_split_p.bind(key, shape=(num,))
    # Rows as JAX's iteration takes them (index_in_dim: unit strides, then a squeeze).
    return [lax.index_in_dim(keys, i, keepdims=False) for i in range(num)]


# --------------------------------------------------------------------------------------------
# The key functions of jax.random
# --------------------------------------------------------------------------------------------


# The implementations JAX 0.10.2 registers, by name; jaxkit has threefry2x32 only.
_JAX_PRNG_NAMES = ("philox2x32", "philox4x32", "threefry2x32", "rbg", "unsafe_rbg",
                   "threefry4x32")


def _check_impl(impl_spec) -> None:
    """JAX's ``resolve_prng_impl`` checks: None (the default), the implementation, a key
    dtype, or an implementation's name."""
    if impl_spec is None or isinstance(impl_spec, (PRNGImpl, KeyTy)):
        return
    if type(impl_spec) is str:
        if impl_spec == "threefry2x32":
            return
        if impl_spec in _JAX_PRNG_NAMES:
            raise NotImplementedError(f'the PRNG implementation "{impl_spec}" is not '
                                      'implemented in jaxkit; only "threefry2x32" is')
        names = ", ".join(f'"{n}"' for n in _JAX_PRNG_NAMES)
        raise ValueError(f'unrecognized PRNG implementation "{impl_spec}". '
                         f'Did you mean one of: {names}?')
    raise TypeError(f"unrecognized type {type(impl_spec)} for specifying PRNG "
                    "implementation.")


def _random_seed(ctor_name: str, seed, impl) -> Any:
    _check_impl(impl)
    if is_typed_key(seed):
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
    elif not dtypes.issubdtype(seed.dtype, np.integer):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    if config.jax_random_seed_offset:  # JAX adds it to every seed, in the seed's dtype
        seed = jnp.asarray(seed) + config.jax_random_seed_offset
    return random_seed_p.bind(seed, impl=threefry_prng_impl)


def PRNGKey(seed: int | ArrayLike, *, impl=None) -> Array:
    """A legacy raw key, ``uint32[2]``, from an integer seed (64-bit seeds keep both words
    with x64; without it the seed is first truncated to 32 bits, as in JAX)."""
    return random_unwrap(_random_seed("PRNGKey", seed, impl))


def key(seed: int | ArrayLike, *, impl=None, dtype=None) -> PRNGKeyArray:
    """A typed key (printed ``Array((), dtype=key<fry>)``) from an integer seed."""
    if dtype is not None and impl is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to jax.random.key")
    return _random_seed("key", seed, impl if dtype is None else dtype)


def key_data(keys) -> Array:
    """The raw ``uint32[..., 2]`` data of a key array (raw keys are returned as they are)."""
    if not is_typed_key(keys):
        check_prng_key("key_data", keys, allow_batched=True)
        return keys
    return random_unwrap(keys)


def wrap_key_data(key_bits_array: ArrayLike, *, impl=None, dtype=None) -> PRNGKeyArray:
    """A typed key array over raw ``uint32[..., 2]`` data."""
    if dtype is not None and impl is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                         "jax.random.wrap_key_data")
    _check_impl(impl if dtype is None else dtype)
    if not hasattr(key_bits_array, "ndim"):
        key_bits_array = jnp.asarray(key_bits_array)
    check_key_data(key_bits_array)
    return random_wrap(key_bits_array)


def key_impl(keys) -> str:
    """The name of the keys' implementation (always ``"threefry2x32"``)."""
    check_prng_key("key_impl", keys, allow_batched=True)
    return "threefry2x32"


def key_dtype(impl_spec=None) -> KeyTy:
    """The dtype of typed keys of the implementation ``impl_spec`` (None: the default; its
    name, or the implementation or key dtype itself): ``key<fry>``."""
    _check_impl(impl_spec)
    return fry_dtype


def clone(key):
    """A copy of ``key`` (keys are immutable values here, so the key itself)."""
    return key


def split(key, num: int | tuple[int, ...] = 2):
    """``num`` new keys (``num`` may be a shape) stacked along a new leading axis."""
    typed, raw = check_prng_key("split", key)
    shape = tuple(num) if isinstance(num, Sequence) else (operator.index(num),)  # (as JAX)
    shape = canonicalize_shape(shape, "split num")
    return return_keys(raw, random_split_p.bind(typed, shape=shape))


def fold_in(key, data: ArrayLike):
    """A new key from ``key`` and the 32-bit integer ``data``."""
    typed, raw = check_prng_key("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of"
                        f"shape {np.shape(data)} != (). Use jax.vmap for batching.")
    if isinstance(data, (core.Tracer, Array)):
        data = lax.convert_element_type(data, np.uint32)
    else:
        data = np.asarray(data, dtype=np.uint32)
    return return_keys(raw, random_fold_in_p.bind(typed, data))


def bits(key, shape: Sequence[int] = (), dtype: DTypeLike | None = None, *,
         out_sharding=None) -> Array:
    """Uniform random bits as unsigned integers (default uint32, uint64 with x64)."""
    typed, _ = check_prng_key("bits", key)
    dtype = dtypes.default_uint_dtype() if dtype is None else user_dtype(dtype)
    if not dtypes.issubdtype(dtype, np.unsignedinteger):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    shape = canonicalize_shape(shape)
    out_sharding = canonicalize_sharding(out_sharding, "bits")
    return laid_out(random_bits, out_sharding, bit_width=dtype.itemsize * 8,
                    shape=shape)(typed)
