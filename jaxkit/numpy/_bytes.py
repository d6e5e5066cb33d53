"""Arrays to and from bytes and files: ``load``, ``frombuffer``, ``fromfile``, ``fromiter``,
``fromstring`` (NumPy reads, then the array goes to the device), ``packbits``/``unpackbits``,
and NumPy's own ``save``/``savez``/``array_repr``/``array_str``."""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import dtypes, lax
from jaxkit.numpy._jitted import jitted
from jaxkit.runtime.array import Array
from jaxkit.numpy._creation import arange, asarray
from jaxkit.numpy._promotion import (
    broadcast_to_shape,
    ensure_arraylike,
)
from jaxkit.numpy._shape import expand_dims, ravel, swapaxes
from jaxkit.typing import ArrayLike


@jitted(static_argnames=("axis", "bitorder"), inline=False)
def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big") -> Array:
    """``jnp.packbits``: booleans packed 8 to a uint8."""
    arr = ensure_arraylike("packbits", a)
    if not (dtypes.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise TypeError("Expected an input array of integer or boolean data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    arr = lax.ne(arr, np.asarray(0, arr.dtype)[()]).astype("uint8")
    bits = arange(8, dtype="uint8")
    if bitorder == "big":
        bits = bits[::-1]
    if axis is None:
        arr = ravel(arr)
        axis = 0
    arr = swapaxes(arr, axis, -1)
    rem = arr.shape[-1] % 8
    if rem:
        arr = lax.pad(arr, np.uint8(0), [(0, 0, 0)] * (arr.ndim - 1) + [(0, 8 - rem, 0)])
    arr = arr.reshape(arr.shape[:-1] + (arr.shape[-1] // 8, 8))
    bits = expand_dims(bits, tuple(range(arr.ndim - 1)))
    packed = (arr << bits).sum(-1).astype("uint8")
    return swapaxes(packed, axis, -1)


@jitted(static_argnames=("axis", "count", "bitorder"), inline=False)
def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None,
               bitorder: str = "big") -> Array:
    """``jnp.unpackbits``: each uint8 unpacked to 8 bits."""
    arr = ensure_arraylike("unpackbits", a)
    if arr.dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    bits = (np.uint8(1) << np.arange(8, dtype=np.uint8)).astype(np.uint8)
    if bitorder == "big":
        bits = bits[::-1].copy()
    if axis is None:
        arr = ravel(arr)
        axis = 0
    arr = swapaxes(arr, axis, -1)
    full_shape = arr.shape + (8,)
    expanded = broadcast_to_shape(lax.expand_dims(arr, (arr.ndim,)), full_shape)
    masked = lax.bitwise_and(expanded, broadcast_to_shape(asarray(bits), full_shape))
    unpacked = lax.convert_element_type(lax.gt(masked, np.uint8(0)), np.uint8)
    unpacked = lax.reshape(unpacked, unpacked.shape[:-2] + (unpacked.shape[-2] * 8,))
    if count is not None:
        size = unpacked.shape[-1]
        if count > size:
            unpacked = lax.pad(unpacked, np.uint8(0),
                               [(0, 0, 0)] * (unpacked.ndim - 1) + [(0, count - size, 0)])
        else:
            unpacked = lax.slice_in_dim(unpacked, 0, count, axis=unpacked.ndim - 1)
    return swapaxes(unpacked, axis, -1)


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """``jnp.load``: ``np.load``, arrays converted to jaxkit arrays."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == "V2":
            out = out.view(dtypes.bfloat16)
        try:
            out = asarray(out)
        except (TypeError, AssertionError):
            pass
    return out


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Array:
    """``jnp.frombuffer``: ``np.frombuffer`` as a jaxkit array."""
    return asarray(np.frombuffer(buffer=buffer, dtype=dtype, count=count, offset=offset))


def fromiter(iterable: Any, dtype: Any, count: int = -1) -> Array:
    """``jnp.fromiter``: ``np.fromiter`` as a jaxkit array."""
    return asarray(np.fromiter(iterable, dtype=dtype, count=count))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Array:
    """``jnp.fromstring``: ``np.fromstring`` (text mode) as a jaxkit array."""
    return asarray(np.fromstring(string=string, dtype=dtype, count=count, sep=sep))


def fromfile(*args: Any, **kwargs: Any) -> Array:
    """``jnp.fromfile`` is not supported (as in JAX): load with NumPy, then ``jnp.asarray``."""
    raise NotImplementedError("jnp.fromfile() is not implemented because it may be non-pure "
                              "and thus unsafe for use with JIT and other JAX transformations. "
                              "Consider using jnp.asarray(np.fromfile(...)) instead, although "
                              "care should be taken if np.fromfile is used within jax "
                              "transformations.")


save, savez, iterable = np.save, np.savez, np.iterable


array_repr, array_str = np.array_repr, np.array_str
