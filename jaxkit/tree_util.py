"""Pytrees: nested containers flattened to a list of leaves plus a structure, as in JAX.

Every transformation (jit, grad, vmap, control flow) works on flat lists of arrays; this module
converts between user values and those lists. Built-in nodes are tuples, lists, dicts
(children in sorted key order), ``None`` (a node with no children, not a leaf), namedtuples,
``OrderedDict`` (insertion order) and ``defaultdict`` (sorted, keeps ``default_factory``);
other types become nodes through ``register_pytree_node`` and friends. Everything else,
numbers, arrays and arbitrary objects alike, is a leaf.

A ``PyTreeDef`` stores the structure as a flat tuple of node records in post-order, as JAX's
C++ implementation does: flattening builds it with list appends and no per-node objects,
unflattening is one loop with a stack, and equality and hashing are those of a tuple. jit
flattens its arguments on every call, so ``tree_flatten`` dispatches on ``type(x)`` through a
single dict lookup and handles leaf children inline rather than through a call per leaf.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from jaxkit._tree_keys import (
    DictKey, FlattenedIndexKey, GetAttrKey, KeyPath, SequenceKey, keystr,
)
from jaxkit._tree_partial import Partial
from jaxkit._tree_prefix import (  # noqa: F401  (flatten_one_level*: JAX's names)
    _children, _children_with_keys, _disagreements, flatten_one_level,
    flatten_one_level_with_keys, prefix_errors,
)
from jaxkit._tree_registry import (  # noqa: F401  (re-exported: JAX's names)
    _CUSTOM, _DICT, _LIST, _NAMEDTUPLE, _NAMEDTUPLE_NODE, _NONE, _Node, _node_of,
    _registry, _sorted_keys, is_tree_node, register_dataclass, register_pytree_node,
    register_pytree_node_class, register_pytree_with_keys, register_pytree_with_keys_class,
    register_static,
)

__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "KeyEntry", "Partial", "PyTreeDef",
    "SequenceKey", "all_leaves", "flatten_one_level", "flatten_one_level_with_keys",
    "is_tree_node", "keystr", "register_dataclass", "register_pytree_node",
    "register_pytree_node_class", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "register_static", "tree_all", "tree_broadcast",
    "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path",
    "tree_map", "tree_map_with_path", "tree_reduce", "tree_reduce_associative",
    "tree_structure", "tree_transpose", "tree_unflatten", "treedef_children",
    "treedef_is_leaf", "treedef_tuple", "default_registry",
]

KeyEntry = TypeVar("KeyEntry", bound=Any)  # as JAX's: a key entry's type (DictKey, ...)
IsLeaf = Callable[[Any], bool] | None


# --------------------------------------------------------------------------------------------
# PyTreeDef
# --------------------------------------------------------------------------------------------

# A node record is (type, aux data, arity, leaves below, nodes below incl. itself); a leaf is
# (None, None, 0, 1, 1). Records are in post-order, so a node's children end right before it.
_LEAF = (None, None, 0, 1, 1)
_NoneType = type(None)
_NO_LEAF = object()  # (``walk``: the leaves ran out)
_NONE_RECORD = (_NoneType, None, 0, 0, 1)


class PyTreeDef:
    """The structure of a pytree: its node types and aux data, with leaves shown as ``*``.

    Hashable and comparable, so it can key caches (jit keys its cache on it)."""

    __slots__ = ("_hash", "_nodes")

    def __init__(self, nodes: tuple):
        self._nodes = nodes
        self._hash: int | None = None

    @property
    def num_leaves(self) -> int:
        """How many leaves a tree of this structure has."""
        return self._nodes[-1][3]

    @property
    def num_nodes(self) -> int:
        """How many nodes, leaves included, a tree of this structure has."""
        return len(self._nodes)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        a, b = self._nodes, other._nodes
        if len(a) != len(b):
            return False
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001  (aux whose == is no bool, e.g. arrays: go per record)
            return all(ra[0] is rb[0] and ra[2] == rb[2] and _aux_equal(ra[1], rb[1])
                       for ra, rb in zip(a, b))

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            try:
                h = hash(self._nodes)
            except TypeError:  # unhashable aux data: hash the shape only (still eq-consistent)
                h = hash(tuple((r[0], r[2]) for r in self._nodes))
            self._hash = h
        return h

    def _child_spans(self, i: int) -> list[int]:
        """Indices of the records of node ``i``'s children, in order."""
        nodes = self._nodes
        out = []
        j = i - 1
        for _ in range(nodes[i][2]):
            out.append(j)
            j -= nodes[j][4]
        out.reverse()
        return out

    def children(self) -> list[PyTreeDef]:
        """The structures of the root's immediate children."""
        nodes = self._nodes
        spans = self._child_spans(len(nodes) - 1)
        return [PyTreeDef(nodes[j - nodes[j][4] + 1:j + 1]) for j in spans]

    def node_data(self) -> tuple[type, Any] | None:
        """``(node type, aux data)`` of the root, or None for a leaf."""
        t, aux = self._nodes[-1][:2]
        if t is None:
            return None
        return (t, list(aux)) if t is dict else (t, aux)

    def unflatten(self, leaves: Iterable) -> Any:
        """Rebuild a value of this structure from ``leaves``."""
        return tree_unflatten(self, leaves)

    def walk(self, f_node: Callable[[tuple, Any], Any], f_leaf: Callable | None,
             leaves: Iterable, /) -> Any:
        """Fold the structure bottom-up: ``f_leaf(leaf)`` at each leaf (the leaf itself when
        ``f_leaf`` is None), ``f_node(children's results, node data)`` at each node; the node
        data is a dict's keys, a namedtuple's class, a custom node's aux data, else None."""
        it = iter(leaves)
        stack: list = []
        for t, aux, n, _, _ in self._nodes:
            if t is None:
                leaf = next(it, _NO_LEAF)
                if leaf is _NO_LEAF:
                    raise ValueError("Too few leaves for PyTreeDef")
                stack.append(leaf if f_leaf is None else f_leaf(leaf))
                continue
            kids = tuple(stack[len(stack) - n:])
            del stack[len(stack) - n:]
            node = _node_of(t)
            data = (list(aux) if t is dict else t if node is _NAMEDTUPLE_NODE
                    else aux if node.kind == _CUSTOM else None)
            stack.append(f_node(kids, data))
        if next(it, _NO_LEAF) is not _NO_LEAF:
            raise ValueError("Too many leaves for PyTreeDef")
        return stack[-1]

    def from_iterable_tree(self, tree: Any) -> Any:
        """A value of this structure from nested iterables: each node's children are the
        items of the iterable at its place (a None node's: an empty one)."""
        def build(i, value):
            rec = self._nodes[i]
            if rec[0] is None:
                return value
            items, spans = list(value), self._child_spans(i)
            if len(items) != len(spans):
                raise ValueError("Arity mismatch between trees")
            children = [build(j, x) for j, x in zip(spans, items)]
            return (tuple(children) if rec[0] is tuple else children if rec[0] is list
                    else _node_value(rec, children))
        return build(len(self._nodes) - 1, tree)

    @staticmethod
    def from_node_data_and_children(registry: Any, node_data: tuple[type, Any] | None,
                                    children: Iterable[PyTreeDef]) -> PyTreeDef:
        """The structure whose root is ``node_data`` (as ``node_data()`` gives it; None: a
        leaf) over ``children`` (as ``children()`` gives them)."""
        children = list(children)
        if node_data is None:
            return PyTreeDef((_LEAF,))
        t, aux = node_data
        if t is dict:
            if len(aux) != len(children):
                raise RuntimeError("Number of keys and entries does not match.")
            aux = tuple(aux)
        nodes = [rec for c in children for rec in c._nodes]
        nodes.append((t, aux, len(children), sum(c.num_leaves for c in children),
                      len(nodes) + 1))
        return PyTreeDef(tuple(nodes))

    def flatten_up_to(self, tree: Any) -> list:
        """The subtrees of ``tree`` at this structure's leaves; ``tree`` must match this
        structure down to those leaves, below which it may be deeper."""
        nodes = self._nodes
        if nodes[-1][0] is None:
            return [tree]
        out: list = []
        try:
            _flatten_up_to(nodes, len(nodes) - 1, tree, out)
        except _Mismatch as e:
            raise ValueError(f"pytree structure mismatch at key path "
                             f"{keystr(tuple(reversed(e.path))) or '(root)'}: {e.what}") from None
        out.reverse()
        return out

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """The structure of this tree with every leaf replaced by a tree of ``inner``."""
        leaves_in, nodes_in = inner.num_leaves, len(inner._nodes)
        out: list = []
        for t, aux, n, nl, nn in self._nodes:
            if t is None:
                out.extend(inner._nodes)
            else:  # a node with L leaves and N nodes below has L*(nodes_in-1) extra nodes
                out.append((t, aux, n, nl * leaves_in, nn + nl * (nodes_in - 1)))
        return PyTreeDef(tuple(out))

    def _repr(self, i: int) -> str:
        t, aux = self._nodes[i][:2]
        if t is None:
            return "*"
        kids = [self._repr(j) for j in self._child_spans(i)]
        if t is tuple:
            return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
        if t is list:
            return "[" + ", ".join(kids) + "]"
        if t is dict:
            return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(aux, kids)) + "}"
        if t is _NoneType:
            return "None"
        name = f"namedtuple[{t.__name__}]" if _node_of(t) is \
            _NAMEDTUPLE_NODE else \
            f"{t.__name__}[{aux}]"
        return f"CustomNode({name}, [{', '.join(kids)}])"

    def __repr__(self) -> str:
        return f"PyTreeDef({self._repr(len(self._nodes) - 1)})"

    def __reduce__(self):
        return (PyTreeDef, (self._nodes,))


def _aux_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001  (e.g. arrays as aux data: fall back to identity)
        return a is b


def _short(x: Any) -> str:
    """``repr(x)`` cut short: error messages may be about very large values."""
    r = repr(x)
    return r if len(r) <= 120 else r[:117] + "..."


# --------------------------------------------------------------------------------------------
# Flatten / unflatten
# --------------------------------------------------------------------------------------------


def tree_flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list, PyTreeDef]:
    """The leaves of ``tree`` in order, and its structure. ``is_leaf(x)`` returning True makes
    ``x`` a leaf even if it is a node."""
    return _tree_flatten(tree, is_leaf, _registry)


def _tree_flatten(tree: Any, is_leaf: IsLeaf, reg: dict[type, _Node]
                  ) -> tuple[list, PyTreeDef]:
    leaves: list = []
    nodes: list = []
    if is_leaf is None:
        _flatten(tree, leaves, nodes, reg)
    else:
        _flatten_general(tree, leaves, nodes, lambda _, x: is_leaf(x), None, None, reg)
    return leaves, PyTreeDef(tuple(nodes))


def _flatten(x: Any, leaves: list, nodes: list, reg: dict[type, _Node]) -> None:
    """The hot path: no is_leaf, no key paths. The built-in containers are tested by identity
    before the registry lookup, and leaf children are appended inline (a Python call per leaf
    would double the cost of flattening a tuple of arrays)."""
    t = type(x)
    if t is tuple or t is list:
        children: Iterable = x
        aux = None
        n = len(x)
    elif t is dict:
        n = len(x)
        if x:
            try:
                aux = tuple(sorted(x))
            except TypeError:
                aux = _sorted_keys(x)  # raises the explanatory error
            children = map(x.__getitem__, aux)  # no list: a comprehension costs a frame
        else:
            aux = children = ()
    else:
        node = reg.get(t)
        if node is None:
            if not (issubclass(t, tuple) and hasattr(t, "_fields")):
                leaves.append(x)
                nodes.append(_LEAF)
                return
            # a namedtuple: its own tuple length (a subclass may define __len__, as Rotation)
            children, aux, n = tuple.__iter__(x), None, tuple.__len__(x)
        elif node.kind == _NONE:
            nodes.append(_NONE_RECORD)
            return
        else:
            children, aux = node.flatten(x)  # type: ignore[misc]
            if type(children) is not list and type(children) is not tuple:
                children = list(children)  # generators too: the arity is needed below
            n = len(children)
    nl0, nn0 = len(leaves), len(nodes)
    for c in children:
        ct = type(c)
        if ct in reg or (issubclass(ct, tuple) and hasattr(ct, "_fields")):
            _flatten(c, leaves, nodes, reg)
        else:
            leaves.append(c)
            nodes.append(_LEAF)
    nodes.append((t, aux, n, len(leaves) - nl0, len(nodes) - nn0 + 1))


def _flatten_general(x: Any, leaves: list, nodes: list, is_leaf: Callable | None,
                     path: KeyPath | None, paths: list | None,
                     reg: dict[type, _Node] = _registry) -> None:
    """Flatten with ``is_leaf(path, x)`` and/or key paths (collected when ``paths`` is a
    list; ``path`` is then the key path of ``x``)."""
    node = _node_of(type(x), reg)
    # is_leaf sees leaves too, as in JAX: Flax's tree-mode checks run in it (shared refs,
    # pytree=False objects raise there).
    if (is_leaf is not None and is_leaf(path, x)) or node is None:
        leaves.append(x)
        nodes.append(_LEAF)
        if paths is not None:
            paths.append(path)
        return
    nl0, nn0 = len(leaves), len(nodes)
    if paths is None:
        children, aux = _children(node, x)
        for c in children:
            _flatten_general(c, leaves, nodes, is_leaf, None, None, reg)
    else:
        children, aux, keys = _children_with_keys(node, x)
        for k, c in zip(keys, children):
            _flatten_general(c, leaves, nodes, is_leaf, path + (k,), paths,  # type: ignore
                             reg)
    nodes.append((type(x), aux, len(children), len(leaves) - nl0, len(nodes) - nn0 + 1))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable) -> Any:
    """Rebuild a pytree of ``treedef``'s structure from ``leaves``."""
    if type(leaves) is not list:
        leaves = list(leaves)
    expected = treedef._nodes[-1][3]
    if len(leaves) < expected:  # (JAX's words)
        raise ValueError(f"Too few leaves for PyTreeDef; expected {expected}, got "
                         f"{len(leaves)}")
    if len(leaves) > expected:
        raise ValueError(f"Too many leaves for PyTreeDef; expected {expected}.")
    return _unflatten(treedef._nodes, leaves)


def _unflatten(nodes: tuple, leaves: list) -> Any:
    """Post-order rebuild: leaves push, nodes pop their children."""
    root = nodes[-1]
    if root[0] is None:  # a single leaf: the usual jit output
        return leaves[0]
    if root[4] == root[2] + 1 and root[3] == root[2]:  # a tuple or list of leaves
        if root[0] is tuple:
            return tuple(leaves)
        if root[0] is list:
            return list(leaves)
    stack: list = []
    push = stack.append
    it = iter(leaves)
    for rec in nodes:
        t = rec[0]
        if t is None:
            push(next(it))
            continue
        n = rec[2]
        if n:
            children = stack[-n:]
            del stack[-n:]
        else:
            children = []
        if t is tuple:
            push(tuple(children))
        elif t is list:
            push(children)
        else:
            push(_node_value(rec, children))
    return stack[0]


def _node_value(rec: tuple, children: list) -> Any:
    """The value of a node record (not a tuple's or a list's) with these children."""
    t = rec[0]
    if t is dict:
        return dict(zip(rec[1], children))
    if t is _NoneType:
        return None
    node = _registry.get(t)
    return t(*children) if node is None else node.unflatten(rec[1], tuple(children))


class _Mismatch(Exception):
    """Internal: a structure mismatch; frames add key entries on the way out."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what
        self.path: list = []  # innermost key first


def _flatten_up_to(nodes: tuple, i: int, x: Any, out: list) -> None:
    """Append the subtrees of ``x`` at the leaves of the structure rooted at record ``i``, in
    reverse order: walking the children last to first lets the post-order records be read
    backwards with no index bookkeeping. The caller reverses ``out``."""
    t, aux, n = nodes[i][:3]
    if type(x) is not t:
        extra = ""
        if t is _NoneType:
            extra = (" (None is a node with no children, not a leaf; to treat it as one, pass "
                     "is_leaf=lambda x: x is None)")
        raise _Mismatch(f"expected a node of type {t}, got a value of type {type(x)}: "
                        f"{_short(x)}{extra}.")
    if t is tuple or t is list:  # the common containers skip _children's dispatch
        children: Sequence = x
    elif t is dict:
        try:
            keys = tuple(sorted(x))
        except TypeError:
            keys = _sorted_keys(x)  # raises the explanatory error
        if keys != aux:
            raise _Mismatch(f"dict keys differ: expected {list(aux)}, got {list(keys)}.")
        children = list(map(x.__getitem__, keys))
    else:
        children, aux2 = _children(_node_of(t), x)  # type: ignore
        if aux2 is not aux and not _aux_equal(aux, aux2):
            raise _Mismatch(f"{t.__name__} node metadata differs: expected {_short(aux)}, "
                            f"got {_short(aux2)}.")
    if len(children) != n:
        raise _Mismatch(f"{t.__name__} of length {n} expected, got length "
                        f"{len(children)}: {_short(x)}.")
    j = i - 1
    k = n
    for c in reversed(children):
        k -= 1
        rec = nodes[j]
        if rec[0] is None:
            out.append(c)
            j -= 1
            continue
        try:
            _flatten_up_to(nodes, j, c, out)
        except _Mismatch as e:  # only now pay for computing the key of this child
            e.path.append(_children_with_keys(_node_of(t),  # type: ignore
                                              x)[2][k])
            raise
        j -= rec[4]


def tree_leaves(tree: Any, is_leaf: IsLeaf = None) -> list:
    """The leaves of ``tree`` in flattening order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: IsLeaf = None) -> PyTreeDef:
    """The structure of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether ``treedef`` is a single node (a leaf, or a childless node such as None)."""
    return len(treedef._nodes) == 1


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of the root's immediate children."""
    return treedef.children()


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple whose children have the given structures."""
    treedefs = list(treedefs)
    nodes: list = []
    for td in treedefs:
        nodes.extend(td._nodes)
    nodes.append((tuple, None, len(treedefs), sum(td.num_leaves for td in treedefs),
                  len(nodes) + 1))
    return PyTreeDef(tuple(nodes))


def all_leaves(iterable: Iterable, is_leaf: IsLeaf = None) -> bool:
    """Whether every element of ``iterable`` is a leaf (None is not)."""
    if is_leaf is None:
        return all(_node_of(type(x)) is None for x in iterable)
    items = list(iterable)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """Apply ``f`` to each leaf of ``tree`` and the corresponding subtrees of ``rest``, which
    must have ``tree``'s structure (or be deeper at its leaves)."""
    return _tree_map(f, tree, rest, is_leaf, _registry)


def _tree_map(f: Callable[..., Any], tree: Any, rest: tuple, is_leaf: IsLeaf,
              reg: dict[type, _Node]) -> Any:
    leaves, treedef = _tree_flatten(tree, is_leaf, reg)
    if not rest:
        return _unflatten(treedef._nodes, [f(x) for x in leaves])
    others = [_up_to_for_map(treedef, r, i, "tree_map", tree, is_leaf)
              for i, r in enumerate(rest, 1)]
    return _unflatten(treedef._nodes, [f(*xs) for xs in zip(leaves, *others)])


def _up_to_for_map(treedef: PyTreeDef, tree: Any, position: int, fn: str, first: Any,
                   is_leaf: IsLeaf) -> list:
    try:
        return treedef.flatten_up_to(tree)
    except ValueError as e:
        # JAX's words where the first tree is no prefix of this one; else jaxkit's
        err = next(_disagreements((), first, tree, is_leaf), None)
        if err is not None:
            raise err(f"{fn} tree") from None
        raise ValueError(f"{fn}: tree #{position} does not match the structure of tree #0 "
                         f"(the first tree); {e}") from None


def treedef_is_strict_leaf(treedef: Any) -> bool:
    """A single leaf (a childless node such as None is not one)."""
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


def tree_reduce(function: Callable[[Any, Any], Any], tree: Any, initializer: Any = ...,
                is_leaf: IsLeaf = None) -> Any:
    """``functools.reduce`` over the leaves of ``tree``."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is ...:  # ... stands for "not given": None is a valid initializer
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation: Callable[[Any, Any], Any], tree: Any, *,
                            identity: Any = ..., is_leaf: IsLeaf = None) -> Any:
    """Reduce the leaves pairwise in a balanced tree (``operation`` must be associative)."""
    xs = tree_leaves(tree, is_leaf)
    if not xs:
        if identity is ...:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    while len(xs) > 1:
        xs = [operation(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i]
              for i in range(0, len(xs), 2)]
    return xs[0]


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf = None) -> Any:
    """``prefix_tree`` with each leaf repeated over the subtree of ``full_tree`` under it."""
    return _tree_broadcast(prefix_tree, full_tree, is_leaf, _registry)


def broadcast_prefix(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf = None) -> list:
    """One leaf of ``prefix_tree`` per leaf of ``full_tree``: each prefix leaf repeated over
    the subtree under it (JAX's ``tree_util.broadcast_prefix``; a structure mismatch raises
    ``ValueError``)."""
    leaves, prefix_def = _tree_flatten(prefix_tree, is_leaf, _registry)
    subtrees = prefix_def.flatten_up_to(full_tree)
    return [v for v, sub in zip(leaves, subtrees)
            for _ in range(_tree_flatten(sub, None, _registry)[1].num_leaves)]


def _tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf,
                    reg: dict[type, _Node]) -> Any:
    leaves, prefix_def = _tree_flatten(prefix_tree, is_leaf, reg)
    subtrees = prefix_def.flatten_up_to(full_tree)
    return tree_unflatten(prefix_def, [_tree_map(lambda _, v=v: v, sub, (), is_leaf, reg)
                                       for v, sub in zip(leaves, subtrees)])


def tree_all(tree: Any, *, is_leaf: IsLeaf = None) -> bool:
    """Whether every leaf of ``tree`` is truthy."""
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """Turn a tree of ``outer`` structure of trees of ``inner`` structure inside out."""
    flat, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    inner_n, outer_n = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != inner_n * outer_n:  # JAX checks only the count, so do we
        raise TypeError(f"Mismatch\n{treedef}\n != \n{outer_treedef.compose(inner_treedef)}")
    rows = [flat[i * inner_n:(i + 1) * inner_n] for i in range(outer_n)]
    subtrees = [_unflatten(outer_treedef._nodes, list(col)) for col in zip(*rows)]
    return tree_unflatten(inner_treedef, subtrees)


# --------------------------------------------------------------------------------------------
# With key paths
# --------------------------------------------------------------------------------------------


def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False
                           ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """``[(key_path, leaf), ...]`` and the structure; ``is_leaf`` takes ``(path, x)`` when
    ``is_leaf_takes_path``."""
    return _tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path, _registry)


def _tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None,
                            is_leaf_takes_path: bool, reg: dict[type, _Node]
                            ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    leaves: list = []
    nodes: list = []
    paths: list = []
    pred = is_leaf
    if is_leaf is not None and not is_leaf_takes_path:
        def pred(_, x):
            return is_leaf(x)
    _flatten_general(tree, leaves, nodes, pred, (), paths, reg)
    return list(zip(paths, leaves)), PyTreeDef(tuple(nodes))


def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    """``[(key_path, leaf), ...]`` in flattening order."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any,
                       is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    """Like ``tree_map`` but calls ``f(key_path, leaf, *other_subtrees)``."""
    return _tree_map_with_path(f, tree, rest, is_leaf, is_leaf_takes_path, _registry)


def _tree_map_with_path(f: Callable[..., Any], tree: Any, rest: tuple,
                        is_leaf: Callable[..., bool] | None, is_leaf_takes_path: bool,
                        reg: dict[type, _Node]) -> Any:
    pairs, treedef = _tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path, reg)
    others = [_up_to_for_map(treedef, r, i, "tree_map_with_path", tree, is_leaf)
              for i, r in enumerate(rest, 1)]
    return _unflatten(treedef._nodes, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]))


class PyTreeRegistry:
    """The pytree registry (JAX's ``default_registry``); a leaf flattens one level to None."""
    flatten, flatten_with_path = staticmethod(tree_flatten), staticmethod(tree_flatten_with_path)
    is_node, register_node = staticmethod(is_tree_node), staticmethod(register_pytree_node)
    register_dataclass_node = staticmethod(register_dataclass)
    flatten_one_level = staticmethod(lambda t: flatten_one_level(t) if _node_of(type(t)) else None)
    flatten_one_level_with_keys = staticmethod(
        lambda t: flatten_one_level_with_keys(t) if is_tree_node(type(t)) else None)


default_registry = PyTreeRegistry()
