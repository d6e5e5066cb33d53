"""``jaxkit.nn.initializers``: weight initialisers with JAX's numbers for the same key.

An initialiser is a function ``init(key, shape, dtype=None, out_sharding=None) -> Array``;
the constructors below (``normal(stddev)``, ``variance_scaling(scale, mode, distribution)``,
``glorot_uniform()``, ...) return one. ``zeros`` and ``ones`` are initialisers themselves,
as in JAX.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from jaxkit import dtypes, random
from jaxkit import numpy as jnp
from jaxkit.random.key_prims import canonicalize_sharding, laid_out
from jaxkit.typing import Array, ArrayLike, DTypeLike

RealNumeric = Any


@runtime_checkable
class Initializer(Protocol):
    """What the constructors below return: ``init(key, shape, dtype=None,
    out_sharding=None) -> Array`` (``isinstance(f, Initializer)`` checks for a callable)."""

    def __call__(self, key: Array, shape: Sequence[int], dtype: DTypeLike | None = None,
                 out_sharding: Any = None) -> Array:
        raise NotImplementedError


def _default(dtype) -> Any:
    return dtypes.default_float_dtype() if dtype is None else dtype


def zeros(key, shape: Sequence[int], dtype: DTypeLike | None = None,
          out_sharding: Any = None) -> Array:
    """An initializer returning zeros (laid out as ``out_sharding``, as ``jnp.zeros``)."""
    return jnp.zeros(shape, _default(dtype), out_sharding=out_sharding)


def ones(key, shape: Sequence[int], dtype: DTypeLike | None = None,
         out_sharding: Any = None) -> Array:
    """An initializer returning ones (laid out as ``out_sharding``, as ``jnp.ones``)."""
    return jnp.ones(shape, _default(dtype), out_sharding=out_sharding)


def constant(value: ArrayLike, dtype: DTypeLike | None = None) -> Initializer:
    """An initializer returning arrays full of ``value``."""
    def init(key, shape: Sequence[int], dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        dtype = _default(dtype)
        out_sharding = canonicalize_sharding(out_sharding, "nn.initializers.constant")
        # JAX places it with ``device=``: over Explicit axes the type says the layout.
        return laid_out(jnp.full, out_sharding, dtype=dtype)(shape, value)
    return init


def uniform(scale: RealNumeric = 1e-2, dtype: DTypeLike | None = None) -> Initializer:
    """An initializer drawing uniformly from ``[0, scale)``."""
    def init(key, shape: Sequence[int], dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        dtype = _default(dtype)
        return random.uniform(key, shape, dtype, out_sharding=out_sharding) * jnp.array(
            scale, dtype)
    return init


def normal(stddev: RealNumeric = 1e-2, dtype: DTypeLike | None = None) -> Initializer:
    """An initializer drawing from a normal distribution of standard deviation ``stddev``."""
    def init(key, shape: Sequence[int], dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        dtype = _default(dtype)
        return random.normal(key, shape, dtype, out_sharding=out_sharding) * jnp.array(
            stddev, dtype)
    return init


def truncated_normal(stddev: RealNumeric = 1e-2, dtype: DTypeLike | None = None,
                     lower: RealNumeric = -2.0, upper: RealNumeric = 2.0) -> Initializer:
    """An initializer drawing from a normal truncated to ``[lower, upper]`` times
    ``stddev`` (``stddev`` is that of the untruncated normal)."""
    def init(key, shape: Sequence[int], dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        dtype = _default(dtype)
        return random.truncated_normal(key, lower, upper, shape, dtype,
                                       out_sharding=out_sharding) * jnp.array(stddev, dtype)
    return init


def _compute_fans(shape: Sequence[int], in_axis: int | Sequence[int] = -2,
                  out_axis: int | Sequence[int] = -1,
                  batch_axis: int | Sequence[int] = ()) -> tuple[float, float]:
    """Fan-in and fan-out of a weight of ``shape``: the sizes of the input and output axes
    times the receptive field (the product of the other, non-batch, axes)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")

    def size(axes):
        return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)

    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive_field_size = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field_size, out_size * receptive_field_size


def _complex_uniform(key, shape: Sequence[int], dtype) -> Array:
    """Complex numbers uniform in the unit disk, scaled so the variance is 1."""
    key_r, key_theta = random.split(key)
    real_dtype = np.array(0, dtype).real.dtype
    dtype = dtypes.to_complex_dtype(real_dtype)
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real_dtype)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real_dtype).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key, upper: ArrayLike, shape: Sequence[int], dtype) -> Array:
    """Complex numbers of a truncated 2-D normal of radius at most ``upper``."""
    key_r, key_theta = random.split(key)
    real_dtype = np.array(0, dtype).real.dtype
    dtype = dtypes.to_complex_dtype(real_dtype)
    t = ((1 - jnp.exp(jnp.array(-(upper ** 2), dtype)))
         * random.uniform(key_r, shape, real_dtype).astype(dtype))
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real_dtype).astype(dtype)
    return r * jnp.exp(1j * theta)


def variance_scaling(
        scale: RealNumeric,
        mode: Literal["fan_in", "fan_out", "fan_avg", "fan_geo_avg"],
        distribution: Literal["truncated_normal", "normal", "uniform"],
        in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
        batch_axis: int | Sequence[int] = (), dtype: DTypeLike | None = None) -> Initializer:
    """An initializer whose samples have variance ``scale / n``, ``n`` the fan chosen by
    ``mode``, from a (truncated) normal or uniform ``distribution``."""
    def init(key, shape: Sequence[int], dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        shape = tuple(int(d) for d in ((shape,) if isinstance(shape, int) else shape))
        dtype = _default(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dtype)
        if distribution == "truncated_normal":
            if dtypes.issubdtype(dtype, np.floating):
                # constant is stddev of standard normal truncated to (-2, 2)
                stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dtype)
                return random.truncated_normal(key, -2, 2, shape, dtype,
                                               out_sharding=out_sharding) * stddev
            # constant is stddev of complex standard normal truncated to 2
            stddev = jnp.sqrt(variance) / jnp.array(.95311164380491208, dtype)
            return _complex_truncated_normal(key, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype,
                                 out_sharding=out_sharding) * jnp.sqrt(variance)
        if distribution == "uniform":
            if dtypes.issubdtype(dtype, np.floating):
                return random.uniform(key, shape, dtype, -1,
                                      out_sharding=out_sharding) * jnp.sqrt(3 * variance)
            return _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
        raise ValueError("invalid distribution for variance scaling initializer: "
                         f"{distribution}")
    return init


def glorot_uniform(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                   batch_axis: int | Sequence[int] = (),
                   dtype: DTypeLike | None = None) -> Initializer:
    """Glorot (Xavier) uniform: ``variance_scaling(1.0, "fan_avg", "uniform")``."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


xavier_uniform = glorot_uniform


def glorot_normal(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                  batch_axis: int | Sequence[int] = (),
                  dtype: DTypeLike | None = None) -> Initializer:
    """Glorot (Xavier) normal: ``variance_scaling(1.0, "fan_avg", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis=in_axis,
                            out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)


xavier_normal = glorot_normal


def lecun_uniform(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                  batch_axis: int | Sequence[int] = (),
                  dtype: DTypeLike | None = None) -> Initializer:
    """LeCun uniform: ``variance_scaling(1.0, "fan_in", "uniform")``."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def lecun_normal(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                 batch_axis: int | Sequence[int] = (),
                 dtype: DTypeLike | None = None) -> Initializer:
    """LeCun normal: ``variance_scaling(1.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis=in_axis,
                            out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)


def he_uniform(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
               batch_axis: int | Sequence[int] = (),
               dtype: DTypeLike | None = None) -> Initializer:
    """He (Kaiming) uniform: ``variance_scaling(2.0, "fan_in", "uniform")``."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


kaiming_uniform = he_uniform


def he_normal(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
              batch_axis: int | Sequence[int] = (),
              dtype: DTypeLike | None = None) -> Initializer:
    """He (Kaiming) normal: ``variance_scaling(2.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis=in_axis,
                            out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)


kaiming_normal = he_normal


def orthogonal(scale: RealNumeric = 1.0, column_axis: int = -1,
               dtype: DTypeLike | None = None) -> Initializer:
    """An initializer of (semi-)orthogonal matrices: the weight reshaped to a 2-D matrix
    with ``column_axis`` as columns is orthogonal, times ``scale``."""
    def init(key, shape: Sequence[int], dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        if out_sharding is not None:  # as JAX 0.10.2
            raise NotImplementedError
        dtype = _default(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(dim == 0 for dim in shape):
            return jnp.zeros(shape, dtype=dtype)
        n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
        q = random.orthogonal(key, n_rows, (), dtype, n_cols)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
        q = jnp.moveaxis(q, -1, column_axis)
        return jnp.array(scale, dtype) * q
    return init


def delta_orthogonal(scale: RealNumeric = 1.0, column_axis: int = -1,
                     dtype: DTypeLike | None = None) -> Initializer:
    """An initializer for 3-5-D convolution kernels: zeros except an orthogonal matrix at
    the kernel's centre."""
    def init(key, shape: Sequence[int], dtype: DTypeLike | None = dtype,
             out_sharding: Any = None) -> Array:
        if out_sharding is not None:  # as JAX 0.10.2
            raise NotImplementedError
        dtype = _default(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        ortho_matrix = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(
            key, shape[-2:])
        w = jnp.zeros(shape, dtype=dtype)
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return w.at[centre + (Ellipsis,)].set(ortho_matrix)
    return init


__all__ = [
    "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
    "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
    "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
    "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
]
