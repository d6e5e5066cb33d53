"""Dimension numbers of gather and scatter, their modes, and the checks both share.

``GatherDimensionNumbers``/``ScatterDimensionNumbers`` and ``GatherScatterMode`` as in
``jax.lax``, their canonical forms, and the validation helpers that the shape rules of
``gather_scatter.py`` use to name a bad argument the way JAX does.
"""
from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from jaxkit import dtypes
from jaxkit.lax.standard import as_tuple_of_indices


class GatherDimensionNumbers(NamedTuple):
    """How the operand, the start indices and the output of a gather relate (XLA's gather).

    ``offset_dims``: output axes that index into a slice; ``collapsed_slice_dims``: operand
    axes of slice size 1 dropped from the output; ``start_index_map``: the operand axis each
    entry of the index vector starts; ``operand_batching_dims`` / ``start_indices_batching_dims``:
    paired batch axes of the operand and the indices.
    """

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """How the operand, the indices and the updates of a scatter relate (XLA's scatter); the
    mirror image of ``GatherDimensionNumbers``."""

    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    """What to do with out-of-bounds indices.

    ``CLIP``: clamp them so that the whole slice is in bounds. ``FILL_OR_DROP``: a gather
    returns ``fill_value`` for a slice that is partly out of bounds, a scatter drops it.
    ``PROMISE_IN_BOUNDS``: the caller promises they are in bounds (XLA clamps gathers and
    drops scatters; gradients are wrong otherwise).
    """

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(s: str | GatherScatterMode | None) -> GatherScatterMode:
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f'Unknown gather mode "{s}"')


def _canonical_gather_dnums(d: GatherDimensionNumbers) -> GatherDimensionNumbers:
    # Tuples of ints keep the parameters hashable, so that eager calls hit the compile cache;
    # NumPy integers stay (JAX binds them as given: its batching rules' np.add results print
    # as ``np.int64(1)``).
    return GatherDimensionNumbers(*(as_tuple_of_indices(f, "gather dimension_numbers")
                                    for f in d))


def _canonical_scatter_dnums(d: ScatterDimensionNumbers) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(*(as_tuple_of_indices(f, "scatter dimension_numbers")
                                     for f in d))


def _is_sorted(dims, op_name, name):
    if any(dims[i] < dims[i - 1] for i in range(1, len(dims))):
        raise TypeError(f"{name} in {op_name} op must be sorted; got {dims}")


def _dims_in_range(dims, rank, op_name, name):
    for dim in dims:
        if dim < 0 or dim >= rank:
            raise TypeError(f"Invalid {name} set in {op_name} op; valid range is [0, {rank}); "
                            f"got: {dim}.")


def _sorted_dims_in_range(dims, rank, op_name, name):
    if len(dims) and (dims[0] < 0 or dims[-1] >= rank):
        bad = dims[0] if dims[0] < 0 else dims[-1]
        raise TypeError(f"Invalid {name} set in {op_name} op; valid range is [0, {rank}); "
                        f"got: {bad}.")


def _no_duplicate_dims(dims, op_name, name):
    if len(set(dims)) != len(dims):
        raise TypeError(f"{name} in {op_name} op must not repeat; got: {dims}.")


def _disjoint_dims(dims1, dims2, op_name, name1, name2):
    if not set(dims1).isdisjoint(dims2):
        raise TypeError(f"{name1} and {name2} in {op_name} op must be disjoint; got: {dims1} "
                        f"and {dims2}.")


def _index_dtype_rule(indices):
    if not dtypes.issubdtype(indices.dtype, np.integer):
        raise ValueError("indices must have an integer type")


def _shift(dims, by: int = 1) -> tuple[int, ...]:
    return tuple(int(d) + by for d in dims)


def check_batching_dims(op: str, operand_shape, indices_shape, window, window_name: str,
                        index_map, index_map_name: str, operand_bdims, indices_bdims,
                        indices_bdims_name: str) -> tuple[int, ...]:
    """The checks gather and scatter share, with JAX's messages: the operand dimensions a
    window leaves out (``collapsed_slice_dims``/``inserted_window_dims``), the batching
    dimensions of operand and indices, and how they agree. ``op`` is "Gather" or "Scatter".
    Returns the operand's batch shape."""
    name = op.lower()
    _is_sorted(window, name, window_name)
    _sorted_dims_in_range(window, len(operand_shape), name, window_name)
    _no_duplicate_dims(window, name, window_name)
    _is_sorted(operand_bdims, name, "operand_batching_dims")
    _sorted_dims_in_range(operand_bdims, len(operand_shape), name, "operand_batching_dims")
    _no_duplicate_dims(operand_bdims, name, "operand_batching_dims")
    _disjoint_dims(window, operand_bdims, name, window_name, "operand_batching_dims")
    _disjoint_dims(index_map, operand_bdims, name, index_map_name, "operand_batching_dims")
    _no_duplicate_dims(indices_bdims, name, indices_bdims_name)
    _dims_in_range(indices_bdims, len(indices_shape), name, indices_bdims_name)
    if len(indices_shape) - 1 in indices_bdims:
        raise TypeError(f"{op} op cannot have the index vector dimension as a batching "
                        f"dimension; got {indices_bdims}.")
    if len(operand_bdims) != len(indices_bdims):
        raise TypeError(f"{op} op requires equal numbers of operand_batching_dims and "
                        f"{indices_bdims_name}, got {operand_bdims} and {indices_bdims}.")
    operand_batch_shape = tuple(operand_shape[i] for i in operand_bdims)
    indices_batch_shape = tuple(indices_shape[i] for i in indices_bdims)
    if operand_batch_shape != indices_batch_shape:
        raise TypeError(f"{op} op requires operand batching dimensions and indices batching "
                        f"dimensions to have the same shape, got {operand_batch_shape} and "
                        f"{indices_batch_shape}.")
    return operand_batch_shape
