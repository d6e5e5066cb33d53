"""``ragged_dot_general`` and ``ragged_dot``: products in which one dimension of ``lhs`` is cut
into consecutive groups of the sizes in ``group_sizes``, as in ``jax.lax``.

Three modes, by what the ragged dimension of ``lhs`` is:

1. a free (non-contracting) dimension ``m``: each group of rows is multiplied by its own slice
   of ``rhs`` along the rhs group dimension, ``[b.., m, k], [g, b.., k, n] -> [b.., m, n]``;
2. a contracting dimension ``k``: each group of the contraction gives its own product,
   ``[b.., m, k], [b.., k, n] -> [g, b.., m, n]``;
3. a batch dimension: the groups only partition the batch, ``[b, m, k], [b, k, n] -> [b, m, n]``.

``group_sizes`` is ``[g]`` or, per leading index, ``[b.., x.., g]`` (the lhs batch dimensions,
then the dimensions of the ragged dimension's kind outer to it). Positions beyond the last
group belong to no group and contribute nothing.

JAX lowers these on CPU to dense products; so does jaxkit, composing existing primitives: the
operand is spread over a new leading group axis and masked to each group's positions (a
comparison of an iota with the cumulative group ends), then contracted by ``dot_general``
(mode 1 contracts the group axis with the rhs group dimension, mode 2 keeps it as a batch
axis). JVP, transpose and vmap therefore come from those primitives' rules.
"""
from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.lax.cumulative import cumsum
from jaxkit.lax.dot import (PrecisionLike, _dot_general_dtype_rule, _dot_general_shape_rule,
                            canonicalize_precision, dot_general)
from jaxkit.lax.elementwise import le, lt, select, sub
from jaxkit.lax.elementwise_bits import bitwise_and
from jaxkit.lax.standard import as_tuple_of_ints
from jaxkit.lax.structural import broadcast_in_dim, broadcasted_iota, full_like, transpose
from jaxkit.typing import Array, ArrayLike, DTypeLike


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """The dimension numbers of ``ragged_dot_general``: ``dot_dimension_numbers`` as for
    ``dot_general``, the ragged dimension of ``lhs`` (one), and the group dimension of ``rhs``
    (one when the ragged dimension is a free one, none otherwise)."""

    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: Sequence[int]
    rhs_group_dimensions: Sequence[int]

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        # Tuples throughout, so that the numbers are hashable and compare by value.
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(map(tuple, pair)) for pair in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(rhs_group_dimensions))


_RAGGED_DOT_DIMENSION_NUMBERS = RaggedDotDimensionNumbers(
    dot_dimension_numbers=(([1], [1]), ([], [])), lhs_ragged_dimensions=[0],
    rhs_group_dimensions=[0])


class _Mode(enum.Enum):
    NONCONTRACTING = 1
    CONTRACTING = 2
    BATCH = 3


def ragged_dot(lhs: ArrayLike, rhs: ArrayLike, group_sizes: ArrayLike,
               precision: PrecisionLike = None, preferred_element_type: DTypeLike | None = None,
               group_offset: ArrayLike | None = None, out_sharding: Any = None) -> Array:
    """``lhs[m, k]`` with its rows in groups of ``group_sizes[g]``, each group multiplied by
    its own ``rhs[i, k, n]``: the ``[m, n]`` result. Rows past the last group are zero.
    Computed by masked ``stablehlo.dot_general``."""
    return ragged_dot_general(lhs, rhs, group_sizes, _RAGGED_DOT_DIMENSION_NUMBERS,
                              precision=canonicalize_precision(precision),
                              preferred_element_type=preferred_element_type,
                              group_offset=group_offset, out_sharding=out_sharding)


def ragged_dot_general(lhs: ArrayLike, rhs: ArrayLike, group_sizes: ArrayLike,
                       ragged_dot_dimension_numbers: RaggedDotDimensionNumbers,
                       precision: PrecisionLike = None,
                       preferred_element_type: DTypeLike | None = None,
                       group_offset: ArrayLike | None = None,
                       out_sharding: Any = None) -> Array:
    """A ``dot_general`` whose ``lhs`` has one ragged dimension cut into groups of sizes
    ``group_sizes`` (see the module docstring for the three modes and their shapes),
    laid out as ``out_sharding`` says over Explicit mesh axes. Computed by masked
    ``stablehlo.dot_general`` (the last one gives the result and takes ``out_sharding``)."""
    _check_group_offset(group_offset)
    dnums = ragged_dot_dimension_numbers
    (l_contract, r_contract), (l_batch, r_batch) = dnums.dot_dimension_numbers
    dot_dnums = ((as_tuple_of_ints(l_contract, "lhs_contracting_dimensions"),
                  as_tuple_of_ints(r_contract, "rhs_contracting_dimensions")),
                 (as_tuple_of_ints(l_batch, "lhs_batch_dimensions"),
                  as_tuple_of_ints(r_batch, "rhs_batch_dimensions")))
    (l_contract, r_contract), (l_batch, r_batch) = dot_dnums
    lhs_aval, rhs_aval, gs_aval = (core.ShapedArray(np.shape(x), dtypes.dtype(x))
                                   for x in (lhs, rhs, group_sizes))
    mode, ragged_dim = _check(lhs_aval, rhs_aval, gs_aval, dnums, dot_dnums)
    precision = canonicalize_precision(precision)
    if preferred_element_type is not None:
        preferred_element_type = dtypes.canonicalize_dtype(preferred_element_type)
    _dot_general_dtype_rule(lhs_aval, rhs_aval, dimension_numbers=dot_dnums,
                            precision=precision, preferred_element_type=preferred_element_type)
    product = dict(precision=precision, preferred_element_type=preferred_element_type,
                   out_sharding=out_sharding)
    if mode is _Mode.BATCH:
        # Every batch index is in exactly one group or in none; as in JAX, the product is the
        # plain batched one.
        return dot_general(lhs, rhs, dot_dnums, **product)
    l_prefix = _prefix_dims(mode, lhs_aval.ndim, ragged_dim, l_batch, l_contract)
    lhs_groups = _spread_over_groups(lhs, ragged_dim, group_sizes, l_prefix)
    shift = lambda dims: tuple(d + 1 for d in dims)  # noqa: E731  (past the new group axis)
    if mode is _Mode.NONCONTRACTING:
        (rhs_group,) = dnums.rhs_group_dimensions
        return dot_general(lhs_groups, rhs,
                           ((shift(l_contract) + (0,), r_contract + (rhs_group,)),
                            (shift(l_batch), r_batch)), **product)
    rhs_ragged = r_contract[l_contract.index(ragged_dim)]
    r_prefix = _prefix_dims(mode, rhs_aval.ndim, rhs_ragged, r_batch, r_contract)
    rhs_groups = _spread_over_groups(rhs, rhs_ragged, group_sizes, r_prefix)
    return dot_general(lhs_groups, rhs_groups,
                       ((shift(l_contract), shift(r_contract)),
                        ((0,) + shift(l_batch), (0,) + shift(r_batch))), **product)


def _check_group_offset(group_offset) -> None:
    if group_offset is None:
        return
    try:
        hash(group_offset)
    except TypeError:
        # JAX passes group_offset as a primitive parameter, which must be hashable, so an
        # array fails there, before reaching the lowering that refuses any offset.
        raise TypeError("parameters of ragged_dot_general must be hashable; the value of "
                        f"group_offset was not: {group_offset!r}") from None
    raise NotImplementedError("Unimplemented group_offset support.")


def _mode_of(ragged_dim: int, l_contract, l_batch) -> _Mode:
    if ragged_dim in l_contract:
        return _Mode.CONTRACTING
    if ragged_dim in l_batch:
        return _Mode.BATCH
    return _Mode.NONCONTRACTING


def _prefix_dims(mode: _Mode, ndim: int, ragged_dim: int, batch, contract) -> tuple[int, ...]:
    """The operand dimensions ``group_sizes`` may be indexed by, in its order: the batch
    dimensions, then those of the ragged dimension's kind before it."""
    if mode is _Mode.BATCH:
        return tuple(batch[:batch.index(ragged_dim)])
    if mode is _Mode.CONTRACTING:
        return tuple(batch) + tuple(contract[:contract.index(ragged_dim)])
    free = [d for d in range(ndim) if d not in contract and d not in batch]
    return tuple(batch) + tuple(free[:free.index(ragged_dim)])


def _check(lhs, rhs, group_sizes, dnums: RaggedDotDimensionNumbers, dot_dnums
           ) -> tuple[_Mode, int]:
    """JAX's checks of a ragged product's shapes; the mode and the ragged dimension."""
    def in_range(dim, rank, what, arg):
        if not 0 <= dim < rank:
            raise TypeError(f"ragged_dot_general requires {what} numbers to be nonnegative and "
                            f"less than the number of axes of the {arg} value, got {dim} for "
                            f"{arg} of rank {rank}.")

    if len(dnums.lhs_ragged_dimensions) != 1:
        raise TypeError("ragged_dot_general expects exactly one lhs ragged dimension.")
    (ragged_dim,) = dnums.lhs_ragged_dimensions
    in_range(ragged_dim, lhs.ndim, "lhs ragged dimension", "lhs")
    (l_contract, r_contract), (l_batch, r_batch) = dot_dnums
    _dot_general_shape_rule(lhs, rhs, dimension_numbers=dot_dnums, precision=None,
                            preferred_element_type=None)
    mode = _mode_of(ragged_dim, l_contract, l_batch)
    if group_sizes.ndim == 0:
        raise TypeError("expected rank of group_sizes to be >=1.")
    if group_sizes.ndim != 1:
        prefix = _prefix_dims(mode, lhs.ndim, ragged_dim, l_batch, l_contract)
        expected = tuple(lhs.shape[d] for d in prefix) + group_sizes.shape[-1:]
        if group_sizes.shape != expected:
            raise TypeError(f"expected group_sizes to have shape {expected}, got "
                            f"{group_sizes.shape}.")
    num_groups = group_sizes.shape[-1]
    rhs_group = dnums.rhs_group_dimensions
    if mode is _Mode.NONCONTRACTING:
        if len(rhs_group) != 1:
            raise TypeError("ragged_dot_general requires exactly one rhs group dimension when "
                            "lhs ragged dimension is noncontracting.")
        in_range(rhs_group[0], rhs.ndim, "rhs group dimension", "rhs")
        if rhs_group[0] in r_batch or rhs_group[0] in r_contract:
            raise TypeError("ragged_dot_general requires rhs group dimension numbers to be "
                            "distinct from contracting and batch dimensions.")
        if rhs.shape[rhs_group[0]] != num_groups:
            raise TypeError(f"expected rhs group dimension size to be {num_groups}, got "
                            f"{rhs.shape[rhs_group[0]]}.")
    elif rhs_group:
        raise TypeError("ragged_dot_general requires zero group dimensions in the rhs when lhs "
                        "ragged dimension is contracting or batch.")
    if not dtypes.issubdtype(group_sizes.dtype, np.integer):
        raise TypeError("ragged_dot_general requires that group_sizes.dtype is subtype of "
                        "np.integer.")
    return mode, ragged_dim


def _spread_over_groups(x: ArrayLike, dim: int, group_sizes: ArrayLike,
                        prefix: tuple[int, ...]) -> Array:
    """``x`` with a leading group axis: entry ``i`` is ``x`` where ``dim`` is in group ``i``
    (at the prefix index, when ``group_sizes`` has prefix axes) and zero elsewhere."""
    shape = np.shape(group_sizes)[-1:] + np.shape(x)
    ends = cumsum(group_sizes, axis=len(np.shape(group_sizes)) - 1)
    starts = sub(ends, group_sizes)
    if len(np.shape(group_sizes)) == 1:
        perm, dims = (0,), (0,)
    else:
        # Group axis first, then the prefix axes in the operand's order (broadcast_in_dim
        # wants increasing target dimensions).
        order = [int(i) for i in np.argsort(prefix)]
        perm = (len(prefix),) + tuple(order)
        dims = (0,) + tuple(prefix[i] + 1 for i in order)
    starts, ends = (broadcast_in_dim(transpose(v, perm), shape, dims) for v in (starts, ends))
    position = broadcasted_iota(dtypes.dtype(group_sizes), shape, dim + 1)
    in_group = bitwise_and(le(starts, position), lt(position, ends))
    x = broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
    return select(in_group, x, full_like(x, 0))


__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]
