"""Small helpers ``jax.lax`` exports over shapes and dtypes: ``broadcast_shapes``,
``broadcast_to_rank``, ``broadcast_like``, ``dtype``, ``shape_as_value``, ``index_take``,
and the type aliases ``DotDimensionNumbers``, ``PrecisionLike`` and
``ConvGeneralDilatedDimensionNumbers``. None of them is a primitive: they compose
``broadcast_in_dim``, ``gather`` and constants.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from jaxkit import dtypes
from jaxkit.lax.convolution import ConvDimensionNumbers
from jaxkit.lax.dot import PrecisionLike  # noqa: F401  (re-exported)
from jaxkit.lax.gather_scatter import gather
from jaxkit.lax.gather_scatter_dims import GatherDimensionNumbers
from jaxkit.lax.structural import broadcast_in_dim, concatenate, convert_element_type
from jaxkit.lax.structural import expand_dims
from jaxkit.typing import Array, ArrayLike

__all__ = ["ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers", "PrecisionLike",
           "broadcast_like", "broadcast_shapes", "broadcast_to_rank", "dtype", "index_take",
           "shape_as_value"]

DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]
ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], ConvDimensionNumbers, None]


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape NumPy's broadcasting gives ``shapes`` (ranks aligned at the right)."""
    shapes = [tuple(int(d) for d in s) for s in shapes]
    if not shapes:
        raise ValueError("broadcast_shapes needs at least one shape.")
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    out = []
    for sizes in zip(*padded):
        big = {d for d in sizes if d != 1}
        if len(big) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={shapes}")
        out.append(big.pop() if big else 1)
    return tuple(out)


def broadcast_to_rank(x: ArrayLike, rank: int) -> Array:
    """``x`` with leading axes of size 1 up to ``rank`` (unchanged if already that rank)."""
    ndim = np.ndim(x)
    if ndim >= rank:
        return x
    return broadcast_in_dim(x, (1,) * (rank - ndim) + tuple(np.shape(x)),
                            tuple(range(rank - ndim, rank)))


def broadcast_like(arr: ArrayLike, like_arr: ArrayLike) -> Array:
    """``arr`` broadcast (NumPy's rules, no rank promotion beyond the leading axes) to the
    shape of ``like_arr``."""
    shape, target = tuple(np.shape(arr)), tuple(np.shape(like_arr))
    if broadcast_shapes(shape, target) != target:
        raise ValueError(f"broadcast_like: shape {shape} cannot be broadcast to {target}.")
    offset = len(target) - len(shape)
    return broadcast_in_dim(arr, target, tuple(range(offset, len(target))))


def dtype(x: Any) -> np.dtype:
    """The canonical dtype of a value (``float`` is float32 unless x64 is on)."""
    return dtypes.canonicalize_dtype(dtypes.dtype(x))


def shape_as_value(shape: Sequence[int]) -> Array:
    """A shape as a 1-D array of its sizes (int32, or int64 under x64)."""
    int_dtype = dtypes.canonicalize_dtype(np.int64)
    return convert_element_type(np.asarray(shape, int_dtype), int_dtype)


def index_take(src: ArrayLike, idxs: Sequence[ArrayLike], axes: Sequence[int]) -> Array:
    """``src`` indexed along ``axes`` by the arrays ``idxs`` (one per axis, of one shape):
    ``src[idxs[0], idxs[1], ...]`` over those axes, the other axes kept in order after."""
    idxs = list(idxs)
    axes = tuple(int(a) for a in axes)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: one index array per axis, got {len(idxs)} arrays for "
                         f"axes {axes}.")
    indices = concatenate([expand_dims(i, (np.ndim(i),)) for i in idxs], np.ndim(idxs[0]))
    shape = np.shape(src)
    slice_sizes = tuple(1 if i in axes else d for i, d in enumerate(shape))
    offset_dims = tuple(range(np.ndim(idxs[0]), np.ndim(idxs[0]) + len(shape) - len(axes)))
    dnums = GatherDimensionNumbers(offset_dims=offset_dims, collapsed_slice_dims=axes,
                                   start_index_map=axes)
    return gather(src, indices, dnums, slice_sizes)
