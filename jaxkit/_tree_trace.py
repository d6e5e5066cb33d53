"""The pytree functions as jaxkit's own transformations use them (imported there as
``tree_util``): the same functions as ``jaxkit.tree_util``, except that the types registered with
``register_trace_node`` (typed key arrays) are nodes, not leaves.

Why two views: in JAX a key array is a leaf with an extended dtype (``key<fry>``) that every
transformation understands. jaxkit's key array is a wrapper over ``uint32[..., 2]`` key data, so
its transformations must see that data: flattening a key here gives its data as the leaf, and
unflattening rebuilds the key around whatever stands for the data (a tracer, a batched value,
an output buffer). Users and libraries (Flax, Optax, chex) flatten with ``jaxkit.tree_util``,
where the key is one leaf as in JAX. Treedefs of both views unflatten with either.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from jaxkit.tree_util import *  # noqa: F401,F403  (everything not flattening is shared)
from jaxkit.tree_util import (_CUSTOM, IsLeaf, KeyPath, PyTreeDef, _Node, _trace_registry,
                              _tree_broadcast, _tree_flatten, _tree_flatten_with_path, _tree_map,
                              _tree_map_with_path)
from jaxkit.tree_util import _node_of as _user_node_of

T = TypeVar("T")

__all__ = ["register_trace_node", "tree_broadcast", "tree_flatten", "tree_flatten_with_path",
           "tree_leaves", "tree_leaves_with_path", "tree_map", "tree_map_with_path",
           "tree_structure"]


def register_trace_node(nodetype: type[T], flatten_func: Callable[[T], tuple[Iterable, Any]],
                        unflatten_func: Callable[[Any, Iterable], T]) -> None:
    """Make ``nodetype`` a leaf to pytree users and a node to jaxkit's transformations, as
    typed key arrays: ``tree_leaves(key)`` is ``[key]`` as in JAX, while ``jit``/``vmap``/
    ``grad`` trace the key's data."""
    if nodetype in _trace_registry:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {nodetype}.")
    _trace_registry[nodetype] = _Node(_CUSTOM, flatten_func, unflatten_func)


def tree_flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list, PyTreeDef]:
    """``jaxkit.tree_util.tree_flatten``, key arrays flattened to their data."""
    return _tree_flatten(tree, is_leaf, _trace_registry)


def tree_leaves(tree: Any, is_leaf: IsLeaf = None) -> list:
    """``jaxkit.tree_util.tree_leaves``, key arrays flattened to their data."""
    return _tree_flatten(tree, is_leaf, _trace_registry)[0]


def tree_structure(tree: Any, is_leaf: IsLeaf = None) -> PyTreeDef:
    """``jaxkit.tree_util.tree_structure``, key arrays as nodes over their data."""
    return _tree_flatten(tree, is_leaf, _trace_registry)[1]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """``jaxkit.tree_util.tree_map``, ``f`` applied to key arrays' data."""
    return _tree_map(f, tree, rest, is_leaf, _trace_registry)


def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False
                           ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """``jaxkit.tree_util.tree_flatten_with_path``, key arrays flattened to their data."""
    return _tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path, _trace_registry)


def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    """``jaxkit.tree_util.tree_leaves_with_path``, key arrays flattened to their data."""
    return _tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path, _trace_registry)[0]


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any,
                       is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    """``jaxkit.tree_util.tree_map_with_path``, ``f`` applied to key arrays' data."""
    return _tree_map_with_path(f, tree, rest, is_leaf, is_leaf_takes_path, _trace_registry)


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf = None) -> Any:
    """``jaxkit.tree_util.tree_broadcast`` over key arrays' data."""
    return _tree_broadcast(prefix_tree, full_tree, is_leaf, _trace_registry)


def _node_of(t: type) -> _Node | None:
    """The node handler of ``t`` in this view (for treedef records of either view)."""
    return _user_node_of(t, _trace_registry)
