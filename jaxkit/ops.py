"""``jax.ops``: segment reductions (``segment_sum`` and friends).

``segment_sum(data, segment_ids, num_segments)`` reduces the rows of ``data`` that share a
segment id into row ``id`` of the result: one scatter with the reduction. Ids outside
``[0, num_segments)`` (negative ones included) are dropped, as in JAX; empty segments hold
the reduction's identity (0, 1, -inf/the dtype's minimum for max, +inf/maximum for min).
"""
from __future__ import annotations

import numpy as np

from jaxkit import core, dtypes
from jaxkit import numpy as jnp

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(kind: str, dtype) -> object:
    dtype = np.dtype(dtype)
    if kind == "add":
        return 0
    if kind == "multiply":
        return 1
    if dtype == np.bool_:
        return kind == "min"
    if dtypes.issubdtype(dtype, np.inexact):
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


def _segment_reduce(kind: str, data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, mode):
    data = jnp.asarray(data)
    segment_ids = jnp.asarray(segment_ids)
    if not dtypes.issubdtype(segment_ids.dtype, np.integer):
        raise TypeError(f"segment_ids must be integers, got {segment_ids.dtype}")
    if segment_ids.ndim != 1 or data.ndim == 0 or segment_ids.shape[0] != data.shape[0]:
        raise ValueError(f"segment_ids must be one-dimensional with one id per row of data; "
                         f"got segment_ids of shape {segment_ids.shape} for data of shape "
                         f"{data.shape}")
    if kind in ("add", "multiply") and data.dtype == np.bool_:
        raise TypeError(f"{kind} does not accept dtype bool. Accepted dtypes are subtypes of "
                        "integer, floating, complexfloating.")
    if num_segments is None:
        if isinstance(segment_ids, core.Tracer):
            raise core.ConcretizationTypeError(
                "segment reductions need num_segments when segment_ids are traced (under jit, "
                "vmap or grad): the output's size must be known; pass num_segments=...")
        num_segments = int(np.max(np.asarray(segment_ids))) + 1 if segment_ids.size else 0
    num_segments = int(core.concrete_or_error(num_segments, "num_segments"))
    # Out-of-range ids (negative ones too) go to an index past the end, which 'drop' drops.
    ids = jnp.where((segment_ids < 0) | (segment_ids >= num_segments), num_segments,
                    segment_ids)
    out = jnp.full((num_segments,) + data.shape[1:], _identity(kind, data.dtype), data.dtype)
    at = out.at[ids]
    return getattr(at, kind)(data, mode="drop" if mode is None else mode,
                             indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """Sum of the rows of ``data`` in each segment. (``bucket_size`` only splits the work in
    JAX; the result is the same, and jaxkit does one scatter.)"""
    return _segment_reduce("add", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, mode)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """Product of the rows of ``data`` in each segment."""
    return _segment_reduce("multiply", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, mode)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """Maximum of the rows of ``data`` in each segment."""
    return _segment_reduce("max", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, mode)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """Minimum of the rows of ``data`` in each segment."""
    return _segment_reduce("min", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, mode)
