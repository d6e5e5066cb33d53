"""Indexed updates: ``x.at[idx].set(y)`` and its siblings, through the lax scatter family.

The index is parsed and turned into gather dimension numbers by ``_indexing`` (the same
analysis as ``x[idx]``); an update scatters with those numbers, as JAX's does.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax, tree_util
from jaxkit.indexing import Slice
from jaxkit.lax.sharding_axes import auto_axes_out
from jaxkit.lax.sharding_rules import resolve_out_sharding
from jaxkit.runtime.array import Array
from jaxkit.numpy._indexing import (
    _as_tuple,
    _dslice_update_index,
    _expand_bool_indices,
    _index_to_gather,
    _parse,
    getitem,
)
from jaxkit.lax.convert import convert_formed
from jaxkit.numpy._promotion import asarray, broadcast_to_shape, promote_dtypes
from jaxkit.numpy._ufuncs import power, true_divide
from jaxkit.typing import ArrayLike


def scatter_update(x: ArrayLike, idx: Any, y: ArrayLike, scatter_op: Callable,
                   indices_are_sorted: bool, unique_indices: bool, mode: Any = None,
                   normalize_indices: bool = True, out_sharding: Any = None) -> Any:
    """``x`` with ``y`` combined into ``x[idx]`` by the lax scatter function ``scatter_op``.

    The result keeps the dtype and weak type of ``x``; ``y`` is converted to it. With
    ``out_sharding`` (over Explicit mesh axes) it runs under ``auto_axes`` over the operand,
    the updates and the index arrays, laid out so, as JAX's."""
    sharding = resolve_out_sharding("scatter", out_sharding)
    if sharding is not None:
        leaves, tree = tree_util.tree_flatten(idx)
        dynamic = [i for i, leaf in enumerate(leaves)
                   if isinstance(leaf, (Array, core.Tracer, np.ndarray))]

        def body(x, y, *arrays):
            index = list(leaves)
            for i, a in zip(dynamic, arrays):
                index[i] = a
            return scatter_update(x, tree_util.tree_unflatten(tree, index), y, scatter_op,
                                  indices_are_sorted, unique_indices, mode, normalize_indices)

        return auto_axes_out(body, sharding)(x, y, *[leaves[i] for i in dynamic])
    x = asarray(x)
    if isinstance(y, int) and dtypes.issubdtype(x.dtype, np.integer) and \
            int(dtypes.iinfo(x.dtype).min) <= y <= int(dtypes.iinfo(x.dtype).max):
        y = asarray(np.asarray(y, x.dtype))
    else:
        y = asarray(y)
    dtype, weak = x.dtype, x.weak_type
    if any(isinstance(i, Slice) for i in _as_tuple(idx)):
        idx = _dslice_update_index(idx, x.shape)
    parsed = _expand_bool_indices(_parse(idx, x.shape), x.shape)
    indexer = _index_to_gather(parsed, x.shape, normalize_indices)
    if 0 in indexer.slice_shape:
        return x
    x_p, y_p = promote_dtypes(x, y)
    y_p = broadcast_to_shape(y_p, indexer.slice_shape) if np.shape(y_p) != \
        indexer.slice_shape else y_p
    if indexer.newaxis_dims:
        y_p = lax.squeeze(y_p, indexer.newaxis_dims)
    if indexer.reversed_y_dims:
        y_p = lax.rev(y_p, indexer.reversed_y_dims)
    if indexer.scalar_bool_dims:
        x_p = lax.expand_dims(x_p, indexer.scalar_bool_dims)
    dnums = lax.ScatterDimensionNumbers(
        update_window_dims=indexer.dnums.offset_dims,
        inserted_window_dims=indexer.dnums.collapsed_slice_dims,
        scatter_dims_to_operand_dims=indexer.dnums.start_index_map)
    out = scatter_op(x_p, indexer.gather_indices, y_p, dnums,
                     indices_are_sorted=indexer.indices_are_sorted or indices_are_sorted,
                     unique_indices=indexer.unique_indices or unique_indices, mode=mode)
    if indexer.scalar_bool_dims:
        out = lax.squeeze(out, indexer.scalar_bool_dims)
    return convert_formed(out, dtype, weak_type=weak)


class _IndexUpdateRef:
    """``x.at[idx]``: the methods that return an updated copy of ``x``."""

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any):
        self.array = array
        self.index = index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, fill_value: Any = None, out_sharding: Any = None) -> Any:
        """``x[idx]``, with ``mode`` ('fill', 'clip', 'promise_in_bounds') and
        ``fill_value`` for out-of-bounds indices; ``out_sharding`` lays a gather's result
        out."""
        return getitem(self.array, self.index, indices_are_sorted=indices_are_sorted,
                       unique_indices=unique_indices, mode=mode, fill_value=fill_value,
                       out_sharding=out_sharding)

    def _scatter(self, op: Callable, values: Any, indices_are_sorted: bool,
                 unique_indices: bool, mode: Any, out_sharding: Any = None) -> Any:
        return scatter_update(self.array, self.index, values, op, indices_are_sorted,
                              unique_indices, mode, out_sharding=out_sharding)

    def _ones_times(self, values: Any, indices_are_sorted: bool, unique_indices: bool,
                    mode: Any, out_sharding: Any = None) -> Any:
        # divide and power apply ``values`` through an operand of ones (the divisor, the
        # exponent) with ``values`` multiplied in at the index, as JAX's do.
        ones = lax.full_like(asarray(self.array), 1)
        return scatter_update(ones, self.index, values, lax.scatter_mul, indices_are_sorted,
                              unique_indices, mode, out_sharding=out_sharding)

    def set(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None,
            out_sharding: Any = None) -> Any:
        """``x[idx] = values``, out of place."""
        return self._scatter(lax.scatter, values, indices_are_sorted, unique_indices, mode,
                             out_sharding)

    def add(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None,
            out_sharding: Any = None) -> Any:
        """``x[idx] += values`` (repeated indices all add), out of place."""
        return self._scatter(lax.scatter_add, values, indices_are_sorted, unique_indices, mode,
                             out_sharding)

    def subtract(self, values: ArrayLike, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: Any = None,
                 out_sharding: Any = None) -> Any:
        """``x[idx] -= values``, out of place."""
        return self._scatter(lax.scatter_sub, values, indices_are_sorted, unique_indices, mode,
                             out_sharding)

    def multiply(self, values: ArrayLike, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: Any = None,
                 out_sharding: Any = None) -> Any:
        """``x[idx] *= values``, out of place."""
        return self._scatter(lax.scatter_mul, values, indices_are_sorted, unique_indices, mode,
                             out_sharding)

    mul = multiply

    def divide(self, values: ArrayLike, *, indices_are_sorted: bool = False,
               unique_indices: bool = False, mode: Any = None,
               out_sharding: Any = None) -> Any:
        """``x[idx] /= values``, out of place."""
        return true_divide(self.array, self._ones_times(values, indices_are_sorted,
                                                        unique_indices, mode, out_sharding))

    def power(self, values: ArrayLike, *, indices_are_sorted: bool = False,
              unique_indices: bool = False, mode: Any = None,
              out_sharding: Any = None) -> Any:
        """``x[idx] **= values``, out of place."""
        return power(self.array, self._ones_times(values, indices_are_sorted, unique_indices,
                                                  mode, out_sharding))

    def min(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None,
            out_sharding: Any = None) -> Any:
        """``x[idx] = minimum(x[idx], values)``, out of place."""
        return self._scatter(lax.scatter_min, values, indices_are_sorted, unique_indices, mode,
                             out_sharding)

    def max(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None,
            out_sharding: Any = None) -> Any:
        """``x[idx] = maximum(x[idx], values)``, out of place."""
        return self._scatter(lax.scatter_max, values, indices_are_sorted, unique_indices, mode,
                             out_sharding)

    def apply(self, func: Callable, *, indices_are_sorted: bool = False,
              unique_indices: bool = False, mode: Any = None) -> Any:
        """``x[idx] = func(x[idx])``, out of place, by ``lax.scatter_apply``: ``func`` maps a
        scalar to a scalar of the same type, and is applied once per occurrence of an index
        (``x.at[[0, 0]].apply(f)`` sets ``x[0]`` to ``f(f(x[0]))``)."""
        def scatter_apply(x, indices, y, dnums, **kwargs):
            return lax.scatter_apply(x, indices, func, dnums, update_shape=np.shape(y), **kwargs)

        zero = np.zeros((), asarray(self.array).dtype)[()]
        return scatter_update(self.array, self.index, zero, scatter_apply, indices_are_sorted,
                              unique_indices, mode)


class _IndexUpdateHelper:
    """``x.at``: indexing it gives an ``_IndexUpdateRef``."""

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"
