"""``jax.experimental.sparse.util``: the static description of a sparse array (``SparseInfo``)
and helpers shared by the sparse formats: counting stored elements, vmapping a function over
leading batch dimensions, and checking a (data, indices) pair against a shape."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from jaxkit import numpy as jnp
from jaxkit._util import safe_zip
from jaxkit.transforms.vmap import vmap
from jaxkit.tree_util import tree_leaves, tree_map, tree_unflatten
from jaxkit.typing import Array

__all__ = ["SparseEfficiencyError", "SparseEfficiencyWarning", "CuSparseEfficiencyWarning",
           "SparseInfo", "nfold_vmap", "broadcasting_vmap",
           "Array", "flatten_axes", "safe_zip"]  # the last three: re-exported, as in JAX


class SparseEfficiencyError(ValueError):
    """An operation would make a sparse array dense (raised where JAX raises it)."""


class SparseEfficiencyWarning(UserWarning):
    """An operation on a sparse array is much slower than its dense counterpart."""


class CuSparseEfficiencyWarning(SparseEfficiencyWarning):
    """JAX's warning for cuSPARSE fallbacks; kept for name compatibility (no GPU path here)."""


class SparseInfo(NamedTuple):
    """The static part of a sparse array: its shape and what is known of its indices.
    A hashable primitive parameter, as in JAX."""

    shape: tuple[int, ...]
    indices_sorted: bool = False
    unique_indices: bool = False


def nfold_vmap(fun, N: int, *, broadcasted: bool = True, in_axes: Any = 0):
    """``fun`` vmapped ``N`` times over leading axes. With ``broadcasted``, an argument whose
    leading axis has size 1 is broadcast (the batch dimensions of BCOO indices may be 1)."""
    in_axes_ = in_axes
    if N == 0:
        return fun
    inner = nfold_vmap(fun, N - 1, broadcasted=broadcasted, in_axes=in_axes_)
    if broadcasted:
        return broadcasting_vmap(inner, in_axes=in_axes_)
    return vmap(inner, in_axes=in_axes_)


def broadcasting_vmap(fun, in_axes: Any = 0, out_axes: Any = 0):
    """vmap that treats a size-1 mapped axis as unmapped (broadcast against the others)."""

    def batched(*args):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        sizes = {np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None}
        size = max(sizes - {1}, default=1)
        fixed = []
        new_axes = []
        for a, ax in zip(args, axes):
            if ax is not None and np.shape(a)[ax] == 1 and size != 1:
                fixed.append(jnp.squeeze(a, ax))
                new_axes.append(None)
            else:
                fixed.append(a)
                new_axes.append(ax)
        if all(ax is None for ax in new_axes):
            # Every argument had size 1: map over that one element so the output keeps the axis.
            return vmap(fun, in_axes=axes, out_axes=out_axes)(*args)
        return vmap(fun, in_axes=tuple(new_axes), out_axes=out_axes)(*fixed)

    return batched


def flatten_axes(name: str, treedef, axis_tree, *, kws: bool = False,
                 tupled_args: bool = False) -> list:
    """The axis of each leaf of ``treedef`` given ``axis_tree``, a tree prefix of it whose
    leaves are ints or None (as ``vmap`` reads ``in_axes``)."""
    del kws, tupled_args  # they only shape JAX's error hint
    # Number the leaves, then give every leaf under each prefix leaf that prefix's axis.
    numbered = tree_unflatten(treedef, list(range(treedef.num_leaves)))
    axes: list = [None] * treedef.num_leaves

    def assign(axis, subtree):
        for i in tree_leaves(subtree):
            axes[i] = axis

    try:
        tree_map(assign, axis_tree, numbered, is_leaf=lambda x: x is None)
    except ValueError as e:
        raise ValueError(f"{name} specification must be a tree prefix of the corresponding "
                         f"value, got specification {axis_tree!r}: {e}") from None
    return axes


def _count_stored_elements_per_batch(mat, n_batch: int = 0, n_dense: int = 0):
    """Per batch entry, how many sparse positions hold a nonzero (any nonzero over the dense
    dimensions counts once)."""
    mat = jnp.asarray(mat)
    mask = mat != 0
    if n_dense > 0:
        mask = mask.any(tuple(range(-n_dense, 0)))
    mask = mask.sum(tuple(range(n_batch, mask.ndim)))
    return mask


def _count_stored_elements(mat, n_batch: int = 0, n_dense: int = 0) -> Any:
    """The ``nse`` ``fromdense`` needs: the largest count over the batch entries."""
    return _count_stored_elements_per_batch(mat, n_batch, n_dense).max(initial=0)


def _dot_general_validated_shape(lhs_shape, rhs_shape, dimension_numbers) -> tuple[int, ...]:
    """The output shape of ``lax.dot_general`` for these shapes, after checking them."""
    (lc, rc), (lb, rb) = dimension_numbers
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError("dot_general requires equal numbers of lhs and rhs contracting and "
                        f"batch dimensions, got {dimension_numbers}")
    for a, b in zip(lc, rc):
        if lhs_shape[a] != rhs_shape[b]:
            raise TypeError("dot_general requires contracting dimensions to have the same "
                            f"shape, got {lhs_shape} and {rhs_shape} with {dimension_numbers}")
    for a, b in zip(lb, rb):
        if lhs_shape[a] != rhs_shape[b]:
            raise TypeError("dot_general requires lhs batch dimensions and rhs batch "
                            "dimensions to have the same shape, got "
                            f"{lhs_shape} and {rhs_shape} with {dimension_numbers}")
    batch = tuple(lhs_shape[d] for d in lb)
    lhs_free = tuple(s for d, s in enumerate(lhs_shape) if d not in lc and d not in lb)
    rhs_free = tuple(s for d, s in enumerate(rhs_shape) if d not in rc and d not in rb)
    return batch + lhs_free + rhs_free
