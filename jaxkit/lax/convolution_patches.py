"""Image patches and unshared (locally connected) convolution, as in ``jax.lax``:
``conv_general_dilated_patches`` and ``conv_general_dilated_local``.

Neither is a primitive. Extracting patches is a grouped ``conv_general_dilated`` whose kernel
is a stack of one-hot windows: with ``feature_group_count`` equal to the number of input
channels, output channel ``c * prod(filter_shape) + s`` copies input channel ``c`` at window
position ``s`` (flattened in the order of the kernel's spatial dimensions). A local
convolution is then a ``dot_general`` of the patches with a kernel that has one filter per
output position, batched over the spatial dimensions. So differentiation, ``vmap`` and
lowering all come from the convolution's, the dot's and the shape ops' own rules.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jaxkit import core
from jaxkit.lax import elementwise as ew
from jaxkit.lax.convolution import conv_dimension_numbers, conv_general_dilated
from jaxkit.lax.dot import Precision, PrecisionLike, canonicalize_precision, dot_general
from jaxkit.lax.structural import (
    broadcast_in_dim,
    broadcasted_iota,
    convert_element_type,
    reshape,
    transpose,
)
from jaxkit.typing import Array, ArrayLike, DTypeLike


def _one_hot_window_kernel(dtype, n_channels: int, filter_shape: tuple[int, ...],
                           rhs_spec: Sequence[int]) -> Array:
    """The patch-extracting kernel, laid out as ``rhs_spec`` says: (out feature, in feature,
    spatial...) = (n_channels * window size, 1, *filter_shape), where out feature
    ``c * size + s`` is 1 at flat window position ``s`` and 0 elsewhere. Built as JAX builds
    it (an identity broadcast over the channels), so the staged programs print alike."""
    size = math.prod(filter_shape)
    eye = ew.eq(ew.add(broadcasted_iota(np.int32, (size, size), 0), np.int32(0)),
                broadcasted_iota(np.int32, (size, size), 1))
    kernel = broadcast_in_dim(convert_element_type(eye, dtype), (n_channels, size, size), (1, 2))
    kernel = reshape(kernel, (n_channels * size, 1, *filter_shape))
    # (O, I) move to where rhs_spec puts them; the window axes keep their relative order.
    perm = list(range(2, len(filter_shape) + 2))
    for d, s in sorted(zip(rhs_spec[:2], (0, 1))):
        perm.insert(d, s)
    return transpose(kernel, perm)


def conv_general_dilated_patches(lhs: ArrayLike, filter_shape: Sequence[int],
                                 window_strides: Sequence[int],
                                 padding: str | Sequence[tuple[int, int]],
                                 lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None,
                                 dimension_numbers=None, precision: Precision | None = None,
                                 preferred_element_type: DTypeLike | None = None) -> Array:
    """The patches a ``conv_general_dilated`` with these parameters would see, flattened into
    the output's feature dimension in the order (input channel, then the kernel's spatial
    dimensions in ``dimension_numbers[1]`` order); its size is
    ``prod(filter_shape) * input channels``. Lowers to ``stablehlo.convolution``."""
    filter_shape = tuple(int(d) for d in filter_shape)
    lhs_shape = np.shape(lhs)
    dnums = conv_dimension_numbers(lhs_shape, (1, 1) + filter_shape, dimension_numbers)
    n_channels = lhs_shape[dnums.lhs_spec[1]]
    kernel = _one_hot_window_kernel(core.get_aval(lhs).dtype, n_channels, filter_shape,
                                    dnums.rhs_spec)
    # The kernel is exact (zeros and ones), so only the input's precision is the caller's.
    return conv_general_dilated(
        lhs, kernel, window_strides=window_strides, padding=padding,
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=dnums,
        feature_group_count=n_channels,
        precision=None if precision is None else (precision, Precision.DEFAULT),
        preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                               padding: str | Sequence[tuple[int, int]],
                               filter_shape: Sequence[int],
                               lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None,
                               dimension_numbers=None,
                               precision: PrecisionLike = None) -> Array:
    """Unshared convolution (a locally connected layer): a separate kernel at every output
    position. ``rhs``'s spatial dimensions index output positions and its in-feature
    dimension holds the flattened patch (input channel, then window positions in
    ``dimension_numbers[1]`` order). Lowers to ``stablehlo.convolution`` (patches) and
    ``stablehlo.dot_general``."""
    pair = canonicalize_precision(precision)  # None or (lhs, rhs); the patches take lhs's
    patches = conv_general_dilated_patches(
        lhs, filter_shape, window_strides, padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
        precision=None if pair is None else pair[0])
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(
        np.shape(lhs), (1, 1) + tuple(filter_shape), dimension_numbers)
    # Batch over spatial positions, the patches' axes in increasing order (each paired with
    # the kernel's axis for the same spatial dimension), so that the product keeps the
    # output's spatial order: (spatial..., N, O).
    pairs = sorted(zip(out_spec[2:], rhs_spec[2:]))
    batch = ([p for p, _ in pairs], [r for _, r in pairs])
    out = dot_general(patches, rhs, (([out_spec[1]], [rhs_spec[1]]), batch), precision=precision)
    # Put N and O back where out_spec wants them.
    ndim = len(out_spec)
    order: list[int | None] = [None] * ndim
    order[out_spec[0]], order[out_spec[1]] = ndim - 2, ndim - 1
    spatial = iter(range(ndim - 2))
    return transpose(out, [next(spatial) if o is None else o for o in order])


__all__ = ["conv_general_dilated_local", "conv_general_dilated_patches"]
