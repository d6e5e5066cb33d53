"""One level of a pytree node (its children, aux data and key entries), and why one tree is
not a prefix of another, in JAX's words (``tree_map``'s and ``vmap``'s structure errors)."""
from __future__ import annotations

import difflib
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jaxkit._tree_keys import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, keystr
from jaxkit._tree_registry import (_CUSTOM, _DICT, _LIST, _NAMEDTUPLE, _NONE, _Node, _node_of,
                                   _sorted_keys)


def _children(node: _Node, x: Any) -> tuple[Sequence, Any]:
    """One level of flattening: ``(children, aux data)``."""
    kind = node.kind
    if kind <= _LIST:
        return x, None
    if kind == _NAMEDTUPLE:  # its fields, whatever __len__/__getitem__ a subclass defines
        return tuple(tuple.__iter__(x)), None
    if kind == _DICT:
        keys = _sorted_keys(x)
        return [x[k] for k in keys], keys
    if kind == _NONE:
        return (), None
    children, aux = node.flatten(x)  # type: ignore[misc]
    return (children if type(children) in (list, tuple) else list(children)), aux


def _children_with_keys(node: _Node, x: Any) -> tuple[Sequence, Any, list]:
    """One level of flattening with a key entry per child: ``(children, aux, keys)``."""
    kind = node.kind
    if kind == _CUSTOM and node.flatten_with_keys is not None:
        pairs, aux = node.flatten_with_keys(x)
        pairs = list(pairs)
        return [c for _, c in pairs], aux, [k for k, _ in pairs]
    children, aux = _children(node, x)
    if kind <= _LIST:
        keys: list = [SequenceKey(i) for i in range(len(children))]
    elif kind == _DICT:
        keys = [DictKey(k) for k in aux]
    elif kind == _NAMEDTUPLE:
        keys = [GetAttrKey(f) for f in type(x)._fields]
    else:
        keys = [FlattenedIndexKey(i) for i in range(len(children))]
    return children, aux, keys


def _root_node(tree: Any) -> _Node:
    node = _node_of(type(tree))
    if node is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return node


def flatten_one_level(tree: Any) -> tuple[Sequence, Any]:
    """The children and aux data of the root node of ``tree`` (not a leaf)."""
    children, aux = _children(_root_node(tree), tree)
    return tuple(children), aux


def flatten_one_level_with_keys(tree: Any) -> tuple[Sequence, Any]:
    """As ``flatten_one_level``, each child paired with its key entry."""
    children, aux, keys = _children_with_keys(_root_node(tree), tree)
    return tuple(zip(keys, children)), aux


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
    if (is_leaf is not None and is_leaf(prefix)) or _node_of(type(prefix)) is None:
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


class PytreeLeaf:
    """A leaf of a value's structure, in errors about specifications of it (as JAX's)."""

    def __repr__(self):
        return "pytree leaf"


def prefix_mismatch_error(what: str, spec: Any, treedef: Any, is_leaf=None
                          ) -> ValueError | None:
    """JAX's error for a specification (``vmap in_axes``, ...) that is no prefix of the
    value of structure ``treedef``: every place where they disagree. None where JAX's walk
    finds no disagreement (a leaf of the specification stands for any subtree)."""
    dummy = treedef.unflatten([PytreeLeaf()] * treedef.num_leaves)
    errors = list(_disagreements((), spec, dummy, is_leaf))
    if not errors:
        return None
    details = "\n  ".join(e(what).args[0] for e in errors)
    return ValueError(f"{what} specification must be a tree prefix of the corresponding value; "
                      f"\n  Mismatch details ({len(errors)} found):\n  {details}")
