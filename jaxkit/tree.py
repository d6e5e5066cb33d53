"""``jax.tree``: the short names of the pytree functions of ``jaxkit.tree_util``."""
from __future__ import annotations

import dataclasses
from typing import Any

from jaxkit.tree_util import (tree_all, tree_broadcast, tree_flatten, tree_flatten_with_path,
                              tree_leaves, tree_leaves_with_path, tree_map, tree_map_with_path,
                              tree_reduce, tree_reduce_associative, tree_structure,
                              tree_transpose, tree_unflatten)

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "static", "structure",
           "transpose", "unflatten"]

all = tree_all  # noqa: A001  (JAX's names shadow builtins in this namespace)
broadcast = tree_broadcast
flatten = tree_flatten
flatten_with_path = tree_flatten_with_path
leaves = tree_leaves
leaves_with_path = tree_leaves_with_path
map = tree_map  # noqa: A001
map_with_path = tree_map_with_path
reduce = tree_reduce
reduce_associative = tree_reduce_associative
structure = tree_structure
transpose = tree_transpose
unflatten = tree_unflatten


def static(**kwargs: Any) -> Any:
    """A ``dataclasses.field`` marked static (``metadata={'static': True}``), so
    ``register_dataclass`` makes it aux data instead of a child."""
    metadata = {"static": True, **(kwargs.pop("metadata", {}) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)
