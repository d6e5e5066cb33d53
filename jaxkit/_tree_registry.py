"""The pytree node registry: which types are nodes, and how each flattens and unflattens.

Built-in nodes (tuples, lists, dicts, None, namedtuples) are marked by kind and handled inline
by ``tree_util``'s flatteners; registered types (``register_pytree_node`` and friends,
``OrderedDict``, ``defaultdict``, dataclasses) are ``_CUSTOM`` nodes that call their functions.
"""
from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from jaxkit._tree_keys import DictKey, GetAttrKey

T = TypeVar("T")


# Node kinds. Built-ins are handled inline by the flatteners; only _CUSTOM calls user code.
_TUPLE, _LIST, _DICT, _NONE, _NAMEDTUPLE, _CUSTOM = range(6)


class _Node:
    __slots__ = ("flatten", "flatten_with_keys", "kind", "unflatten")

    def __init__(self, kind: int, flatten: Callable | None = None,
                 unflatten: Callable | None = None,
                 flatten_with_keys: Callable | None = None):
        self.kind = kind
        self.flatten = flatten  # node -> (children, aux data)
        self.unflatten = unflatten  # (aux data, children tuple) -> node
        self.flatten_with_keys = flatten_with_keys  # node -> (((key, child), ...), aux data)


# Exact-type dispatch, as in JAX: a subclass of a registered type is a leaf unless registered.
_registry: dict[type, _Node] = {
    tuple: _Node(_TUPLE), list: _Node(_LIST), dict: _Node(_DICT), type(None): _Node(_NONE),
}
_NAMEDTUPLE_NODE = _Node(_NAMEDTUPLE)

def _node_of(t: type, reg: dict[type, _Node] = _registry) -> _Node | None:
    """The node handler for type ``t``, or None when values of ``t`` are leaves."""
    node = reg.get(t)
    if node is None and issubclass(t, tuple) and hasattr(t, "_fields"):
        return _NAMEDTUPLE_NODE
    return node


def is_tree_node(typ: type) -> bool:
    """Whether values of type ``typ`` are pytree nodes (registered, built-in or namedtuple)."""
    return _node_of(typ) is not None


def register_pytree_node(nodetype: type[T], flatten_func: Callable[[T], tuple[Iterable, Any]],
                         unflatten_func: Callable[[Any, Iterable], T],
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Make ``nodetype`` a pytree node: ``flatten_func(x) -> (children, aux_data)`` and
    ``unflatten_func(aux_data, children) -> x``; ``aux_data`` must be hashable."""
    if nodetype in _registry:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {nodetype}.")
    _registry[nodetype] = _Node(
        _CUSTOM, flatten_func, unflatten_func, flatten_with_keys_func)


def register_pytree_with_keys(nodetype: type[T], flatten_with_keys: Callable,
                              unflatten_func: Callable[[Any, Iterable], T],
                              flatten_func: Callable | None = None) -> None:
    """Register a node whose ``flatten_with_keys(x)`` returns ``(((key, child), ...), aux)``,
    so key paths through it name its children."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type[T]) -> type[T]:
    """Class decorator: ``cls`` defines ``tree_flatten(self) -> (children, aux)`` and the
    classmethod ``tree_unflatten(cls, aux, children)``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)  # type: ignore
    return cls


def register_pytree_with_keys_class(cls: type[T]) -> type[T]:
    """Class decorator: like ``register_pytree_node_class`` with ``tree_flatten_with_keys``."""
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(),
                              cls.tree_unflatten, flatten)  # type: ignore
    return cls


def register_static(cls: type[T]) -> type[T]:
    """Register ``cls`` as a node with no children whose instances are their own aux data."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


def register_dataclass(nodetype: type[T], data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None,
                       drop_fields: Sequence[str] = ()) -> type[T]:
    """Register a dataclass: ``data_fields`` are children, ``meta_fields`` are static aux data.
    Without field lists, fields with ``metadata={'static': True}`` are meta, the rest data."""
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: data_fields and meta_fields must both be "
                            "given when either is.")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype} is not a dataclass; pass "
                            "data_fields and meta_fields.")
        fields = dataclasses.fields(nodetype)
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data, meta = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if {*data, *meta} != init:
            raise ValueError("data_fields and meta_fields must include all dataclass fields "
                             f"with init=True and only them; fields: {sorted(init)}, given: "
                             f"{sorted({*data, *meta})}.")
    if overlap := set(data) & set(meta):
        raise ValueError(f"data_fields and meta_fields must not overlap: {overlap}.")

    def flatten(x):
        return [getattr(x, f) for f in data], tuple(getattr(x, f) for f in meta)

    def flatten_with_keys(x):
        return ([(GetAttrKey(f), getattr(x, f)) for f in data],
                tuple(getattr(x, f) for f in meta))

    def unflatten(aux, children):
        return nodetype(**dict(zip(meta, aux)), **dict(zip(data, children)))

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


def _sorted_keys(d: dict) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError as e:  # JAX refuses too: an arbitrary order would make treedefs unstable
        raise ValueError("Comparator raised exception while sorting pytree dictionary keys "
                         f"{list(d)!r:.200}: {e}") from None


register_pytree_with_keys(
    collections.OrderedDict,
    lambda d: ([(DictKey(k), v) for k, v in d.items()], tuple(d)),
    lambda keys, values: collections.OrderedDict(zip(keys, values)),
    lambda d: (list(d.values()), tuple(d)))


def _defaultdict_with_keys(d: collections.defaultdict) -> tuple[list, Any]:
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], (d.default_factory, keys)


def _defaultdict_flatten(d: collections.defaultdict) -> tuple[list, Any]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


register_pytree_with_keys(
    collections.defaultdict, _defaultdict_with_keys,
    lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values)),
    _defaultdict_flatten)
