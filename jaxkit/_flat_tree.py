"""``FlatTree``: a pytree held as its structure and its flat leaves (JAX's
``tree_util.FlatTree``, exported by ``jax.experimental.scheduling_groups``).

Mapping over the leaves never calls a node type's flatten/unflatten again, and a map whose
function returns pairs can be split back (``unzip2``) because the structure is kept apart from
the values. Static parts (``flatten_static_argnums``) are held as ``Static`` nodes, which have
no leaves; ``statics`` records where they are (False: none, True: this whole subtree, or a
tuple/dict of those for the children of a tuple/dict) so ``unflatten`` gives them back
unwrapped.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jaxkit import tree_util
from jaxkit._util import unzip2
from jaxkit.tree_util import PyTreeDef

__all__ = ["FlatTree", "Static"]


@tree_util.register_static
@dataclasses.dataclass(frozen=True, slots=True)
class Static:
    """A value held in a tree as structure, not as a leaf."""

    val: Any

    def __eq__(self, other):
        return (type(other) is Static and type(self.val) is type(other.val)
                and self.val == other.val)

    def __hash__(self):
        return hash((type(self.val), self.val))


class FlatTree:
    """A tree structure ``tree`` and its leaves ``vals`` (a tuple). Build one with
    ``FlatTree.flatten`` (or ``pack``/``flatten_args``/``flatten_static_argnums``...)."""

    def __init__(self, vals, treedef: PyTreeDef, statics: Any, registry: Any = None):
        self.vals = vals if isinstance(vals, tuple) else tuple(vals)
        if not isinstance(treedef, PyTreeDef):
            raise TypeError(f"FlatTree needs a PyTreeDef, got {type(treedef).__name__}")
        self.tree = treedef
        self.statics = statics
        self.registry = registry  # jaxkit has one registry; kept for JAX's signature

    def __eq__(self, other):
        return (isinstance(other, FlatTree) and self.vals == other.vals
                and self.tree == other.tree and self.statics == other.statics
                and self.registry is other.registry)

    def __hash__(self):
        return hash((self.vals, self.tree))

    def __repr__(self):
        return f"FlatTree({self.vals})"

    # -- mapping over the leaves ---------------------------------------------------------

    def update(self, new_vals) -> FlatTree:
        """The same structure with leaves ``new_vals`` (as many as before)."""
        new = FlatTree(new_vals, self.tree, self.statics, self.registry)
        if len(new.vals) != len(self.vals):
            raise ValueError(f"FlatTree.update: {len(new.vals)} values for a tree of "
                             f"{len(self.vals)} leaves")
        return new

    def map(self, f: Callable) -> FlatTree:
        return self.update(f(x) for x in self.vals)

    def map2(self, f: Callable, t2: Sequence) -> FlatTree:
        return self.update(itertools.starmap(f, _zip_same(self.vals, list(t2))))

    def map3(self, f: Callable, t2: Sequence, t3: Sequence) -> FlatTree:
        return self.update(itertools.starmap(f, _zip_same(self.vals, list(t2), list(t3))))

    def unzip2(self) -> tuple[FlatTree, FlatTree]:
        ys, zs = unzip2(self.vals)
        return self.update(ys), self.update(zs)

    def enumerate(self) -> FlatTree:
        return self.update(enumerate(self.vals))

    def filter(self, f: Callable) -> FlatTree:
        """The leaves ``f`` keeps, as a flat list tree; ``unfilter`` puts them back."""
        return self.filter_with_mask(map(f, self.vals))

    def filter_with_mask(self, mask) -> FlatTree:
        keep = [bool(m) for m in mask]
        kept = [x for x, k in zip(self.vals, keep) if k]
        rejected = [x for x, k in zip(self.vals, keep) if not k]
        return FlatTree.flatten_list(kept).with_aux((self.map(lambda _: None), keep, rejected))

    def unfilter(self) -> FlatTree:
        kept_ft, (ft, keep, rejected) = self.unpack_aux()
        kept, others = iter(kept_ft.unflatten()), iter(rejected)
        return ft.update(next(kept) if k else next(others) for k in keep)

    def __len__(self) -> int:
        return self.tree.num_leaves

    @property
    def len(self) -> int:
        return self.tree.num_leaves

    def __iter__(self) -> Iterator:
        return iter(self.vals)

    @functools.cached_property
    def paths(self) -> FlatTree:
        """The key path of each leaf (empty paths where the tree cannot say)."""
        try:
            paths = [p for p, _ in tree_util.tree_flatten_with_path(self.unflatten())[0]]
        except Exception:  # noqa: BLE001  (a user node without keys: as JAX, no paths)
            paths = []
        return self.update(paths if len(paths) == len(self.vals) else [()] * len(self.vals))

    # -- building and taking apart ----------------------------------------------------------

    @staticmethod
    def flatten(tree: Any, is_leaf: Callable | None = None, registry: Any = None) -> FlatTree:
        vals, treedef = tree_util.tree_flatten(tree, is_leaf)
        return FlatTree(vals, treedef, False, registry)

    @staticmethod
    def flatten_args(*arg_trees: Any, registry: Any = None) -> FlatTree:
        return FlatTree.flatten((arg_trees, {}), registry=registry)

    @staticmethod
    def flatten_list(xs: Sequence) -> FlatTree:
        """``xs`` with each element a leaf."""
        return FlatTree.pack(tuple(FlatTree.singleton(x) for x in xs))

    @staticmethod
    def singleton(x: Any) -> FlatTree:
        return FlatTree([x], tree_util.tree_structure(0), False)

    @staticmethod
    def flatten_static_argnums(args: tuple, static_argnums: Sequence[int],
                               registry: Any = None) -> FlatTree:
        if not static_argnums:
            return FlatTree.flatten(args, registry=registry)
        n = len(args)
        chosen = {i % n if i < 0 else i for i in static_argnums}
        statics = tuple(i in chosen for i in range(n))
        vals, treedef = tree_util.tree_flatten(
            tuple(Static(x) if s else x for s, x in zip(statics, args)))
        return FlatTree(vals, treedef, statics, registry)

    @staticmethod
    def flatten_static_argnames(kwargs: dict, static_argnames: Sequence[str],
                                registry: Any = None) -> FlatTree:
        if not static_argnames:
            return FlatTree.flatten(kwargs, registry=registry)
        statics = {k: k in static_argnames for k in kwargs}
        vals, treedef = tree_util.tree_flatten(
            {k: Static(v) if statics[k] else v for k, v in kwargs.items()})
        return FlatTree(vals, treedef, statics, registry)

    @staticmethod
    def flatten_static_argnums_argnames(args: tuple, kwargs: dict,
                                        static_argnums: Sequence[int],
                                        static_argnames: Sequence[str],
                                        registry: Any = None) -> FlatTree:
        return FlatTree.pack((FlatTree.flatten_static_argnums(args, static_argnums, registry),
                              FlatTree.flatten_static_argnames(kwargs, static_argnames,
                                                               registry)), registry)

    @staticmethod
    def pack(tree: Any, registry: Any = None) -> FlatTree:
        """One FlatTree from a tuple of FlatTrees (nested tuples too; ``{}`` is empty)."""
        if isinstance(tree, FlatTree):
            return tree
        if isinstance(tree, tuple):
            children = [FlatTree.pack(c, registry) for c in tree]
            return FlatTree([v for c in children for v in c.vals],
                            tree_util.treedef_tuple(c.tree for c in children),
                            tuple(c.statics for c in children), registry)
        if isinstance(tree, dict) and not tree:
            return FlatTree.flatten({}, registry=registry)
        raise TypeError("FlatTree.pack takes FlatTrees in (nested) tuples or an empty dict, "
                        f"got {type(tree).__name__}")

    @staticmethod
    def pack_args(*args: FlatTree, **kwargs: FlatTree) -> FlatTree:
        return FlatTree.pack((args, kwargs))

    def unpack(self) -> tuple[FlatTree, ...]:
        """The FlatTrees of the root tuple's children."""
        out, start = [], 0
        for i, child in enumerate(tree_util.treedef_children(self.tree)):
            statics = False if isinstance(self.statics, bool) else self.statics[i]
            out.append(FlatTree(self.vals[start:start + child.num_leaves], child, statics,
                                self.registry))
            start += child.num_leaves
        return tuple(out)

    def with_aux(self, aux: Any) -> FlatTree:
        """``(self, aux)``, the auxiliary value held as structure."""
        return FlatTree.pack((self, FlatTree.flatten(Static(aux))))

    def unpack_aux(self) -> tuple[FlatTree, Any]:
        x, aux = self.unpack()
        return x, aux.unflatten().val

    def unflatten(self) -> Any:
        """The pytree, static parts unwrapped."""
        return _unwrap_statics(self.tree.unflatten(self.vals), self.statics)

    @property
    def tree_without_statics(self) -> PyTreeDef:
        """The structure with the static parts left out."""
        marked = self.tree.unflatten([_LEAF] * len(self.vals))
        return tree_util.tree_structure(_drop_statics(marked, self.statics))

    def __getitem__(self, i):
        raise NotImplementedError("FlatTree is not indexable (as in JAX); iterate over it or "
                                  "use .vals")


_LEAF = object()  # a placeholder leaf


def _zip_same(*seqs: Sequence) -> zip:
    if len({len(s) for s in seqs}) != 1:
        raise ValueError(f"FlatTree.map2/map3: lengths differ: {[len(s) for s in seqs]}")
    return zip(*seqs)


def _unwrap_statics(pytree: Any, statics: Any) -> Any:
    if statics is False:
        return pytree
    if statics is True:
        return pytree.val
    if isinstance(pytree, tuple):
        return tuple(_unwrap_statics(p, s) for p, s in zip(pytree, statics))
    return {k: _unwrap_statics(p, statics[k]) for k, p in pytree.items()}


def _drop_statics(pytree: Any, statics: Any) -> Any:
    if statics is False:
        return pytree
    if isinstance(statics, tuple):
        return tuple(_drop_statics(p, s) for p, s in zip(pytree, statics) if s is not True)
    return {k: _drop_statics(p, statics[k]) for k, p in pytree.items() if statics[k] is not True}
