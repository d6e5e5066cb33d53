"""Pytrees: nested containers of arrays, flattened to leaves and a structure, as in JAX.

Built-in nodes are tuples, lists, dicts (children in sorted key order), ``None`` (a node with
no children, not a leaf), namedtuples, ``OrderedDict`` and ``defaultdict``; other types become
nodes through ``register_pytree_node`` / ``register_pytree_node_class``. Everything else is a
leaf. Flattening dispatches on ``type(x)`` through one dict, because jit flattens its
arguments on every call.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Hashable, Iterable
from typing import Any, NamedTuple

__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "Partial", "PyTreeDef", "SequenceKey",
    "all_leaves", "keystr", "register_dataclass", "register_pytree_node",
    "register_pytree_node_class", "register_pytree_with_keys", "tree_all", "tree_flatten",
    "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path", "tree_map",
    "tree_map_with_path", "tree_reduce", "tree_structure", "tree_transpose", "tree_unflatten",
    "treedef_children", "treedef_is_leaf", "treedef_tuple",
]


# --------------------------------------------------------------------------------------------
# Key paths
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    key: Hashable

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def keystr(keys: Iterable) -> str:
    """A key path as text: ``['a'][0].x``."""
    return "".join(map(str, keys))


# --------------------------------------------------------------------------------------------
# Node registry
# --------------------------------------------------------------------------------------------


class _NodeType(NamedTuple):
    flatten: Callable[[Any], tuple[Iterable, Any]]  # node -> (children, aux data)
    unflatten: Callable[[Any, Iterable], Any]  # (aux data, children) -> node
    keys: Callable[[Any, Any], list]  # (node, aux data) -> key per child


_registry: dict[type, _NodeType] = {}


def _flat_index_keys(node, aux, n):
    return [FlattenedIndexKey(i) for i in range(n)]


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Make ``nodetype`` a pytree node: ``flatten_func(x) -> (children, aux_data)`` and
    ``unflatten_func(aux_data, children) -> x``."""
    if nodetype in _registry:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {nodetype}.")
    if flatten_with_keys_func is not None:
        def keys(node, aux):
            return [k for k, _ in flatten_with_keys_func(node)[0]]
    else:
        def keys(node, aux):
            return None
    _registry[nodetype] = _NodeType(flatten_func, unflatten_func, keys)


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable,
                              unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Register a node whose flatten function returns ``((key, child), ...), aux``."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: the class defines ``tree_flatten(self)`` and the classmethod
    ``tree_unflatten(cls, aux_data, children)``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype: type, data_fields: list[str] | None = None,
                       meta_fields: list[str] | None = None) -> type:
    """Register a dataclass: ``data_fields`` are children, ``meta_fields`` static aux data."""
    if data_fields is None or meta_fields is None:
        fields = [f.name for f in dataclasses.fields(nodetype) if f.init]
        meta_fields = [f.name for f in dataclasses.fields(nodetype)
                       if f.metadata.get("static", False)] if meta_fields is None else meta_fields
        data_fields = [f for f in fields if f not in meta_fields] if data_fields is None \
            else data_fields

    def flatten(x):
        return [getattr(x, f) for f in data_fields], tuple(getattr(x, f) for f in meta_fields)

    def unflatten(aux, children):
        return nodetype(**dict(zip(data_fields, children)), **dict(zip(meta_fields, aux)))

    def flatten_with_keys(x):
        return [(GetAttrKey(f), getattr(x, f)) for f in data_fields], tuple(
            getattr(x, f) for f in meta_fields)

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def _sorted_keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:  # keys of mixed types: JAX sorts; fall back to a stable order by repr
        return sorted(d, key=repr)


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))
_registry[tuple] = _registry[tuple]._replace(
    keys=lambda node, aux: [SequenceKey(i) for i in range(len(node))])
register_pytree_node(list, lambda t: (t, None), lambda _, c: list(c))
_registry[list] = _registry[list]._replace(
    keys=lambda node, aux: [SequenceKey(i) for i in range(len(node))])
register_pytree_node(dict, lambda d: (lambda ks: ([d[k] for k in ks], tuple(ks)))(
    _sorted_keys(d)), lambda ks, c: dict(zip(ks, c)))
_registry[dict] = _registry[dict]._replace(keys=lambda node, aux: [DictKey(k) for k in aux])
register_pytree_node(type(None), lambda n: ((), None), lambda _, c: None)
register_pytree_node(collections.OrderedDict,
                     lambda d: (list(d.values()), tuple(d.keys())),
                     lambda ks, c: collections.OrderedDict(zip(ks, c)))
_registry[collections.OrderedDict] = _registry[collections.OrderedDict]._replace(
    keys=lambda node, aux: [DictKey(k) for k in aux])
register_pytree_node(
    collections.defaultdict,
    lambda d: (lambda ks: ([d[k] for k in ks], (d.default_factory, tuple(ks))))(_sorted_keys(d)),
    lambda aux, c: collections.defaultdict(aux[0], zip(aux[1], c)))
_registry[collections.defaultdict] = _registry[collections.defaultdict]._replace(
    keys=lambda node, aux: [DictKey(k) for k in aux[1]])


def _namedtuple_node(t: type) -> _NodeType:
    return _NodeType(lambda x: (x, None), lambda _, c: t(*c),
                     lambda node, aux: [GetAttrKey(f) for f in t._fields])


def _node_type(t: type) -> _NodeType | None:
    node = _registry.get(t)
    if node is None and issubclass(t, tuple) and hasattr(t, "_fields"):
        node = _namedtuple_node(t)
    return node


# --------------------------------------------------------------------------------------------
# PyTreeDef
# --------------------------------------------------------------------------------------------


class PyTreeDef:
    """The structure of a pytree: node types, aux data and children; leaves are ``*``."""

    __slots__ = ("node_type", "node_data", "children_defs", "num_leaves", "num_nodes", "_hash")

    def __init__(self, node_type: type | None, node_data: Any,
                 children_defs: tuple[PyTreeDef, ...]):
        self.node_type = node_type  # None for a leaf
        self.node_data = node_data
        self.children_defs = children_defs
        if node_type is None:
            self.num_leaves, self.num_nodes = 1, 1
        else:
            self.num_leaves = sum(c.num_leaves for c in children_defs)
            self.num_nodes = 1 + sum(c.num_nodes for c in children_defs)
        try:
            self._hash = hash((node_type, node_data, children_defs))
        except TypeError:
            self._hash = hash((node_type, children_defs))

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not PyTreeDef or self._hash != other._hash:
            return False
        return (self.node_type is other.node_type and self.children_defs == other.children_defs
                and _aux_equal(self.node_data, other.node_data))

    def __hash__(self):
        return self._hash

    def children(self) -> list[PyTreeDef]:
        return list(self.children_defs)

    def unflatten(self, leaves: Iterable) -> Any:
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree: Any) -> list:
        """The subtrees of ``tree`` at this structure's leaves (``tree`` may be deeper)."""
        out: list = []
        _flatten_up_to(self, tree, out, ())
        return out

    def _repr(self) -> str:
        if self.node_type is None:
            return "*"
        kids = [c._repr() for c in self.children_defs]
        if self.node_type is tuple:
            return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
        if self.node_type is list:
            return "[" + ", ".join(kids) + "]"
        if self.node_type is dict:
            return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(self.node_data, kids)) + "}"
        if self.node_type is type(None):
            return "None"
        data = "" if self.node_data is None else f"[{self.node_data!r}]"
        return f"CustomNode({self.node_type.__name__}{data}, [{', '.join(kids)}])"

    def __repr__(self):
        return f"PyTreeDef({self._repr()})"


def _aux_equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays as aux data
        return a is b


_LEAF = PyTreeDef(None, None, ())


# --------------------------------------------------------------------------------------------
# Flatten / unflatten
# --------------------------------------------------------------------------------------------


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                 ) -> tuple[list, PyTreeDef]:
    """Leaves of ``tree`` in order, and its structure."""
    leaves: list = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _flatten(x, leaves: list, is_leaf) -> PyTreeDef:
    t = type(x)
    node = _registry.get(t)
    if node is None:
        if not (issubclass(t, tuple) and hasattr(t, "_fields")) or (
                is_leaf is not None and is_leaf(x)):
            leaves.append(x)
            return _LEAF
        node = _namedtuple_node(t)
    elif is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    children, aux = node.flatten(x)
    return PyTreeDef(t, aux, tuple(_flatten(c, leaves, is_leaf) for c in children))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable) -> Any:
    """Rebuild a pytree of ``treedef``'s structure from ``leaves``."""
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"Too {'few' if len(leaves) < treedef.num_leaves else 'many'} leaves "
                         f"for PyTreeDef; expected {treedef.num_leaves}, got {len(leaves)}.")
    it = iter(leaves)
    return _unflatten(treedef, it)


def _unflatten(td: PyTreeDef, it) -> Any:
    if td.node_type is None:
        return next(it)
    children = [_unflatten(c, it) for c in td.children_defs]
    return _node_type(td.node_type).unflatten(td.node_data, children)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.node_type is None


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return list(treedef.children_defs)


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    return PyTreeDef(tuple, None, tuple(treedefs))


def all_leaves(iterable: Iterable, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element of ``iterable`` is a leaf."""
    return all(treedef_is_leaf(tree_structure(x, is_leaf)) for x in iterable)


def _flatten_up_to(td: PyTreeDef, tree, out: list, path: tuple) -> None:
    if td.node_type is None:
        out.append(tree)
        return
    node = _node_type(type(tree))
    if type(tree) is not td.node_type or node is None:
        expected = td.node_type.__name__ if td.node_type is not type(None) else "None"
        raise ValueError(f"pytree structure mismatch at {keystr(path) or 'the root'}: expected "
                         f"a {expected} node, got a value of type {type(tree).__name__}: "
                         f"{tree!r:.80}")
    children, aux = node.flatten(tree)
    children = list(children)
    if len(children) != len(td.children_defs) or not _aux_equal(aux, td.node_data):
        what = (f"keys {list(aux)} vs {list(td.node_data)}" if td.node_type is dict else
                f"{len(children)} children vs {len(td.children_defs)}")
        raise ValueError(f"pytree structure mismatch at {keystr(path) or 'the root'}: "
                         f"{td.node_type.__name__} nodes differ ({what}).")
    keys = node.keys(tree, aux) or _flat_index_keys(tree, aux, len(children))
    for k, c, ctd in zip(keys, children, td.children_defs):
        _flatten_up_to(ctd, c, out, path + (k,))


def tree_map(f: Callable, tree: Any, *rest: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Apply ``f`` to corresponding leaves of ``tree`` and of every tree in ``rest`` (which
    must have ``tree``'s structure, or be deeper)."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten([f(x, *xs) for x, *xs in zip(leaves, *others)])


def tree_reduce(function: Callable, tree: Any, initializer: Any = ...,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    leaves = tree_leaves(tree, is_leaf)
    if initializer is ...:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """Turn a tree of ``outer`` structure of trees of ``inner`` structure inside out."""
    flat = outer_treedef.flatten_up_to(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(flat[0])
    inner_leaves = [inner_treedef.flatten_up_to(x) for x in flat]
    transposed = [outer_treedef.unflatten(col) for col in zip(*inner_leaves)]
    return inner_treedef.unflatten(transposed)


# --------------------------------------------------------------------------------------------
# With key paths
# --------------------------------------------------------------------------------------------


def tree_flatten_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                           ) -> tuple[list[tuple[tuple, Any]], PyTreeDef]:
    """``[(key_path, leaf), ...]`` and the structure."""
    out: list = []
    _flatten_with_path(tree, (), out, is_leaf)
    return out, tree_structure(tree, is_leaf)


def _flatten_with_path(x, path: tuple, out: list, is_leaf) -> None:
    node = _node_type(type(x))
    if node is None or (is_leaf is not None and is_leaf(x)):
        out.append((path, x))
        return
    children, aux = node.flatten(x)
    children = list(children)
    keys = node.keys(x, aux) or _flat_index_keys(x, aux, len(children))
    for k, c in zip(keys, children):
        _flatten_with_path(c, path + (k,), out, is_leaf)


def tree_leaves_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f: Callable, tree: Any, *rest: Any,
                       is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Like ``tree_map`` but ``f(key_path, leaf, *other_leaves)``."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten([f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


# --------------------------------------------------------------------------------------------
# Partial
# --------------------------------------------------------------------------------------------


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: the function is static, the bound arguments
    are children, so it can be passed through jit and other transformations."""

    def __new__(cls, func, *args, **kw):
        if isinstance(func, functools.partial):
            original = func
            func = lambda *a, **k: original(*a, **k)  # noqa: E731
            func.func = original.func
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]))
