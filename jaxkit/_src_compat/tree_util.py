"""``jax._src.tree_util`` (reached by Flax NNX's graph code for ``_registry``, by Orbax for
``flatten_one_level``, by Flax's struct_test for ``prefix_errors``): jaxkit's pytree registry,
a dict from node type to its flatten/unflatten entry, and JAX's private helpers over it."""
from __future__ import annotations

import collections
from typing import Any

from jaxkit.tree_util import *  # noqa: F401,F403
from jaxkit.random.prng import PRNGKeyArray, threefry_prng_impl
from jaxkit.tree_util import (_CUSTOM, PyTreeRegistry, _Node, _registry,  # noqa: F401
                              _tree_flatten, flatten_one_level, flatten_one_level_with_keys,
                              keystr, prefix_errors, tree_structure, treedef_is_strict_leaf)


class _DispatchRegistry(PyTreeRegistry):
    """JAX's registry for dispatch: the default one, where key arrays are also nodes (over
    their key data)."""

    flatten = staticmethod(lambda tree, is_leaf=None: _tree_flatten(tree, is_leaf,
                                                                    _dispatch_nodes))


_dispatch_nodes = collections.ChainMap(
    {PRNGKeyArray: _Node(_CUSTOM, lambda k: ((k._base_array,), threefry_prng_impl),
                         lambda impl, children: PRNGKeyArray(children[0]))},
    _registry)
dispatch_registry = _DispatchRegistry()


def broadcast_flattened_prefix_with_treedef(prefix_leaves: list, prefix_treedef: Any,
                                            full_treedef: Any) -> list:
    """The prefix tree's leaves repeated for each leaf of the subtree of ``full_treedef``
    they stand for; ValueError where the prefix is not a prefix of it."""
    out: list = []

    def walk(start: int, prefix: Any, full: Any) -> None:
        if treedef_is_strict_leaf(prefix):
            out.extend(prefix_leaves[start:start + 1] * full.num_leaves)
            return
        if treedef_is_strict_leaf(full):
            raise ValueError("`prefix_treedef` is not a prefix of `full_treedef`")
        if prefix.node_data() != full.node_data():
            raise ValueError(f"expected {full.node_data()}, got {prefix.node_data()}")
        prefix_kids, full_kids = prefix.children(), full.children()
        if len(prefix_kids) != len(full_kids):
            raise ValueError(f"expected {len(full_kids)} children, got {len(prefix_kids)}")
        for p, f in zip(prefix_kids, full_kids):
            walk(start, p, f)
            start += p.num_leaves

    walk(0, prefix_treedef, full_treedef)
    return out
