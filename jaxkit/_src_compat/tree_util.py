"""``jax._src.tree_util`` (reached by Flax NNX's graph code for ``_registry``, by Orbax for
``flatten_one_level``, by Flax's struct_test for ``prefix_errors``): jaxkit's pytree registry,
a dict from node type to its flatten/unflatten entry, and JAX's private helpers over it."""
from __future__ import annotations

import collections
import difflib
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

from jaxkit.tree_util import *  # noqa: F401,F403
from jaxkit.random.prng import PRNGKeyArray, threefry_prng_impl
from jaxkit.tree_util import (_CUSTOM, PyTreeRegistry, _Node, _registry,  # noqa: F401
                              _tree_flatten, flatten_one_level, flatten_one_level_with_keys,
                              keystr, tree_structure)


def treedef_is_strict_leaf(treedef: Any) -> bool:
    """A single leaf (a childless node such as None is not one)."""
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


def prefix_errors(prefix_tree: Any, full_tree: Any,
                  is_leaf: Callable[[Any], bool] | None = None
                  ) -> list[Callable[[str], ValueError]]:
    """Why ``prefix_tree`` is not a pytree prefix of ``full_tree``: one function per place
    where they disagree, giving the ``ValueError`` to raise when called with the prefix
    tree's argument name (``in_axes``, ...); empty when it is a prefix. Each disagreement is
    reported at its key path, and the subtree under it is not searched further."""
    return list(_disagreements((), prefix_tree, full_tree, is_leaf))


def _key_names(keys) -> str:
    return " ".join(str(getattr(k, "key", k)) for k in keys)


def _at(name: str, path: tuple) -> str:
    return f"    {name}{keystr(path)}\n"


def _disagreements(path: tuple, prefix: Any, full: Any, is_leaf
                   ) -> Iterator[Callable[[str], ValueError]]:
    if treedef_is_strict_leaf(tree_structure(prefix, is_leaf=is_leaf)):
        return  # a leaf stands for any subtree
    if type(prefix) is not type(full):
        yield lambda name: ValueError(
            "pytree structure error: different types at key path\n" + _at(name, path) +
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix)}\n"
            "but at the same key path the full pytree has a subtree of different type\n"
            f"    {type(full)}.")
        return
    # Same type and not a leaf: both flatten one level.
    p_keyed, p_meta = flatten_one_level_with_keys(prefix)
    f_keyed, f_meta = flatten_one_level_with_keys(full)
    p_keys, f_keys = tuple(k for k, _ in p_keyed), tuple(k for k, _ in f_keyed)
    if isinstance(prefix, (list, tuple)):
        # Sequences: say the lengths differ rather than list integer keys.
        if len(prefix) != len(full):
            kind = type(prefix).__name__
            yield lambda name: ValueError(
                f"pytree structure error: different lengths of {kind} at key path\n" +
                _at(name, path) +
                f"At that key path, the prefix pytree {name} has a subtree of type {kind} of "
                f"length {len(prefix)}, but the full pytree has a subtree of the same type "
                f"but of length {len(full)}.")
            return
    elif len(p_keys) != len(f_keys):
        try:
            diff = set(p_keys) ^ set(f_keys)
        except TypeError:  # unhashable keys: no key-set difference to show
            diff = None
        yield lambda name: ValueError(
            "pytree structure error: different numbers of pytree children at key path\n" +
            _at(name, path) +
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix)}\n"
            f"with {len(p_keys)} child keys\n"
            f"    {_key_names(p_keys)}\n"
            "but at the same key path the full pytree has a subtree of the same type but "
            f"with {len(f_keys)} child keys\n"
            f"    {_key_names(f_keys)}\n" +
            ("" if diff is None else
             f"so the symmetric difference on key sets is\n    {_key_names(diff)}"))
        return
    if p_meta != f_meta:
        p_str, f_str = str(p_meta), str(f_meta)
        lines = difflib.ndiff(p_str.splitlines(), f_str.splitlines())
        meta_diff = textwrap.indent("\n".join(lines), prefix="    ")
        yield lambda name: ValueError(
            "pytree structure error: different pytree metadata at key path\n" +
            _at(name, path) +
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix)}\n"
            f"with metadata\n    {p_str}\n"
            "but at the same key path the full pytree has a subtree of the same type but "
            f"with metadata\n    {f_str}\n"
            f"so the diff in the metadata at these pytree nodes is\n{meta_diff}")
        return
    # The roots agree, so the disagreement is further down.
    for key, (_, p_child), (_, f_child) in zip(p_keys, p_keyed, f_keyed):
        yield from _disagreements((*path, key), p_child, f_child, None)


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
