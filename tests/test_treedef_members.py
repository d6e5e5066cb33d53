"""``PyTreeDef.walk``, ``from_iterable_tree`` and ``from_node_data_and_children`` against JAX
0.10.2, over built-in, namedtuple, registered and OrderedDict nodes, with JAX's errors."""
from __future__ import annotations

import collections

import numpy as np
import pytest

import jaxkit

jax = pytest.importorskip("jax")

P = collections.namedtuple("P", "x y")


class C:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __repr__(self):
        return f"C({self.a}, {self.b})"


for _j in (jax, jaxkit):
    _j.tree_util.register_pytree_node(C, lambda c: ((c.a, c.b), "aux"), lambda aux, ch: C(*ch))

TREES = [{"a": (1, 2), "b": [3, None]}, 1, None, P(1, (2, 3)), C(1, [2, 3]),
         collections.OrderedDict(z=1, a=2), (), [[]], {"k": C(5, 6)}]


def _nested(treedef, leaves):
    """The tree as nested lists (each node its children's list), for from_iterable_tree."""
    if treedef.num_nodes == 1 and treedef.num_leaves == 1:
        return next(leaves)
    return [_nested(c, leaves) for c in treedef.children()]


def _report(j, tree):
    tu = j.tree_util
    leaves, t = tu.tree_flatten(tree)
    return (repr(t.walk(lambda c, n: ("N", c, n), lambda x: x * 10, leaves)),
            t.walk(lambda c, n: len(c), lambda x: 1, leaves),
            t.from_node_data_and_children(tu.default_registry, t.node_data(),
                                          t.children()) == t,
            repr(t.from_iterable_tree(_nested(t, iter(leaves)))))


@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_treedef_members_as_jax(tree):
    assert _report(jaxkit, tree) == _report(jax, tree)


def _errors(j):
    tu = j.tree_util
    t = tu.tree_structure({"a": (1, 2), "b": [3, None]})
    out = []
    calls = [lambda: t.from_iterable_tree([[1, 2], [3]]),
             lambda: t.from_iterable_tree([[1, 2], [3, [], 4]]),
             lambda: t.walk(lambda c, n: c, lambda x: x, [1, 2]),
             lambda: t.walk(lambda c, n: c, lambda x: x, [1, 2, 3, 4]),
             lambda: t.from_node_data_and_children(tu.default_registry, (dict, ["a"]),
                                                   t.children()),
             lambda: t.from_node_data_and_children(tu.default_registry, (list, None),
                                                   t.children()),
             lambda: t.from_node_data_and_children(tu.default_registry, None, [])]
    for call in calls:
        try:
            out.append(repr(call()))
        except Exception as e:  # noqa: BLE001  (the outcome is what is compared)
            out.append((type(e).__name__, str(e)))
    return out


def test_treedef_member_errors_as_jax():
    assert _errors(jaxkit) == _errors(jax)


def test_walk_without_a_leaf_function_passes_leaves_through():
    # (JAX's signature allows None, though its binding refuses it)
    t = jaxkit.tree_util.tree_structure({"a": (1, 2), "b": [3, None]})
    assert t.walk(lambda c, n: sum(c), None, [1, 2, 3]) == 6


def _broadcast_cases(j, tree_util_src):
    out = []
    for prefix, full in [((1, 2), ((3, 4), 5)), (1, {"a": [2, 3]}), ({"a": 7}, {"a": (1, 2)}),
                         ((1, 2), (3, 4, 5)), ([1], (2,)), ((1, (2, 3)), (4, 5))]:
        leaves, prefix_def = j.tree_util.tree_flatten(prefix)
        try:
            out.append(tree_util_src.broadcast_flattened_prefix_with_treedef(
                leaves, prefix_def, j.tree_util.tree_structure(full)))
        except ValueError:
            out.append("ValueError")
    return out


def test_broadcast_flattened_prefix_with_treedef_as_jax():
    from jax._src import tree_util as jax_src

    from jaxkit._src_compat import tree_util as kit_src
    assert _broadcast_cases(jaxkit, kit_src) == _broadcast_cases(jax, jax_src)
    keys = {"k": jaxkit.random.split(jaxkit.random.key(0), 2), "x": 1}
    leaves, treedef = kit_src.dispatch_registry.flatten(keys)
    want_leaves, want_def = jax_src.dispatch_registry.flatten(
        {"k": jax.random.split(jax.random.key(0), 2), "x": 1})
    assert repr(treedef) == repr(want_def)
    assert [np.asarray(x).tolist() for x in leaves] == [np.asarray(x).tolist()
                                                        for x in want_leaves]
    assert repr(treedef.unflatten(leaves)) == repr(keys)
