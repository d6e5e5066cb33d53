"""Pytrees: flatten/unflatten, structures, key paths, registration, errors; checked against
jax.tree_util as an oracle where it is installed."""
import collections
import dataclasses
import functools
import pickle
import re
import typing

import numpy as np
import pytest

import jaxkit
from jaxkit import tree_util as tu

# ---- example trees ------------------------------------------------------------------------


@tu.register_pytree_node_class
class Point:
    """A registered class with two children and no aux data."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def tree_flatten(self):
        return (self.x, self.y), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    def __eq__(self, other):
        return type(other) is Point and (self.x, self.y) == (other.x, other.y)

    def __repr__(self):
        return f"Point({self.x!r}, {self.y!r})"


@tu.register_pytree_node_class
class Scaled:
    """A registered class whose aux data (the scale name) is part of the structure."""

    def __init__(self, value, scale):
        self.value, self.scale = value, scale

    def tree_flatten(self):
        return [self.value], self.scale

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], aux)

    def __eq__(self, other):
        return type(other) is Scaled and (self.value, self.scale) == (other.value, other.scale)


Pair = collections.namedtuple("Pair", "first second")
Other = collections.namedtuple("Other", "first second")
LEAF = object()  # an arbitrary object is a leaf
ARR = np.arange(3.0)

EXAMPLES = {
    "int": 1,
    "object": LEAF,
    "array": ARR,
    "none": None,
    "empty_tuple": (),
    "empty_list": [],
    "empty_dict": {},
    "tuple1": (1,),
    "tuple": (1, "s", LEAF),
    "list": [1, [2, 3]],
    "dict_unsorted": {"b": 1, "a": 2, "c": 3},
    "int_keys": {3: "x", 1: "y"},
    "nested": {"w": [ARR, (ARR, None)], "b": {"z": 1, "y": (2,)}},
    "none_inside": [None, 1, (None,), {"k": None}],
    "namedtuple": Pair(1, (2, 3)),
    "ordered_dict": collections.OrderedDict([("b", 1), ("a", [2])]),
    "defaultdict": collections.defaultdict(list, {"b": 1, "a": 2}),
    "point": Point(1, (2, 3)),
    "point_nested": [Point(Point(1, 2), {"a": None}), Point(3, 4)],
    "scaled": Scaled(ARR, "k"),
    "deep": [[[[[[1]]]]], ((((2,),),),)],
}


@pytest.fixture(scope="module")
def jtu():
    """jax.tree_util with this module's classes registered there too."""
    jax = pytest.importorskip("jax")
    for cls in (Point, Scaled):
        try:
            jax.tree_util.register_pytree_node_class(cls)
        except ValueError:  # already registered by an earlier module-scoped fixture run
            pass
    return jax.tree_util


def same_tree(a, b) -> bool:
    """Equality that also checks node types and dict key order, and compares arrays."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a is b or bool(np.array_equal(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_tree(a[k], b[k]) for k in a) and (
            getattr(a, "default_factory", None) is getattr(b, "default_factory", None))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(map(same_tree, a, b))
    if isinstance(a, Point):
        return same_tree(a.x, b.x) and same_tree(a.y, b.y)
    if isinstance(a, Scaled):
        return a.scale == b.scale and same_tree(a.value, b.value)
    return a is b or a == b


def sort_dicts(x):
    """What unflatten(flatten(x)) gives for x: dicts and defaultdicts come back sorted."""
    if type(x) is dict:
        return {k: sort_dicts(x[k]) for k in sorted(x)}
    if type(x) is collections.defaultdict:
        return collections.defaultdict(x.default_factory, sort_dicts(dict(x)))
    if type(x) in (list, tuple):
        return type(x)(map(sort_dicts, x))
    return x


# ---- flatten / unflatten -------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLES)
def test_roundtrip(name):
    tree = EXAMPLES[name]
    leaves, treedef = tu.tree_flatten(tree)
    assert len(leaves) == treedef.num_leaves
    assert same_tree(tu.tree_unflatten(treedef, leaves), sort_dicts(tree))
    assert same_tree(treedef.unflatten(iter(leaves)), sort_dicts(tree))  # any iterable


@pytest.mark.parametrize("name", EXAMPLES)
def test_matches_jax_leaves_structure_and_paths(name, jtu):
    tree = EXAMPLES[name]
    leaves, treedef = tu.tree_flatten(tree)
    jleaves, jtreedef = jtu.tree_flatten(tree)
    assert len(leaves) == len(jleaves) and all(a is b for a, b in zip(leaves, jleaves))
    assert (treedef.num_leaves, treedef.num_nodes) == (jtreedef.num_leaves, jtreedef.num_nodes)
    assert repr(treedef) == repr(jtreedef)
    assert [repr(c) for c in treedef.children()] == [repr(c) for c in jtreedef.children()]
    assert tu.treedef_is_leaf(treedef) == jtu.treedef_is_leaf(jtreedef)
    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)]
    assert paths == [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree)]
    assert [repr(p) for p, _ in tu.tree_leaves_with_path(tree)] == \
        [repr(p) for p, _ in jtu.tree_leaves_with_path(tree)]


@pytest.mark.parametrize("is_leaf", [
    lambda x: x is None,
    lambda x: isinstance(x, tuple),
    lambda x: isinstance(x, Point),
    lambda x: isinstance(x, dict) and "w" in x,
])
@pytest.mark.parametrize("name", ["nested", "none_inside", "point_nested", "namedtuple"])
def test_is_leaf_matches_jax(name, is_leaf, jtu):
    tree = EXAMPLES[name]
    leaves, treedef = tu.tree_flatten(tree, is_leaf=is_leaf)
    jleaves, jtreedef = jtu.tree_flatten(tree, is_leaf=is_leaf)
    assert len(leaves) == len(jleaves) and all(a is b for a, b in zip(leaves, jleaves))
    assert repr(treedef) == repr(jtreedef)
    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree, is_leaf=is_leaf)]
    assert paths == [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree, is_leaf=is_leaf)]
    assert same_tree(tu.tree_unflatten(treedef, leaves), jtu.tree_unflatten(jtreedef, jleaves))


def test_dict_children_sorted_and_rebuilt_sorted():
    leaves, treedef = tu.tree_flatten({"b": 1, "c": 2, "a": 3})
    assert leaves == [3, 1, 2]
    assert list(tu.tree_unflatten(treedef, [7, 8, 9])) == ["a", "b", "c"]


def test_ordered_dict_keeps_insertion_order_and_defaultdict_its_factory():
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    assert tu.tree_leaves(od) == [1, 2]
    back = tu.tree_map(lambda x: x * 10, od)
    assert type(back) is collections.OrderedDict and list(back.items()) == [("b", 10), ("a", 20)]
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    assert tu.tree_leaves(dd) == [2, 1]
    back = tu.tree_map(lambda x: x + 1, dd)
    assert type(back) is collections.defaultdict and back.default_factory is list
    assert dict(back) == {"a": 3, "b": 2}


def test_none_is_an_empty_node_not_a_leaf():
    assert tu.tree_leaves([None, 1, None]) == [1]
    treedef = tu.tree_structure(None)
    assert (treedef.num_leaves, treedef.num_nodes, repr(treedef)) == (0, 1, "PyTreeDef(None)")
    assert tu.tree_unflatten(treedef, []) is None
    assert tu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]


def test_subclasses_of_builtin_containers_are_leaves():
    class MyDict(dict):
        pass

    class MyList(list):
        pass

    for x in (MyDict(a=1), MyList([1, 2])):
        assert tu.tree_leaves(x) == [x]


def test_namedtuple_types_are_distinct_nodes():
    assert tu.tree_leaves(Pair(1, 2)) == [1, 2]
    assert type(tu.tree_map(lambda x: x, Pair(1, 2))) is Pair
    assert tu.tree_structure(Pair(1, 2)) != tu.tree_structure((1, 2))
    assert tu.tree_structure(Pair(1, 2)) != tu.tree_structure(Other(1, 2))


def test_custom_children_may_be_any_iterable():
    class Gen:
        def __init__(self, items):
            self.items = items

    tu.register_pytree_node(Gen, lambda g: ((x for x in g.items), None),
                            lambda _, children: Gen(list(children)))
    leaves, treedef = tu.tree_flatten(Gen([1, (2, 3)]))
    assert leaves == [1, 2, 3] and treedef.num_nodes == 5
    assert tu.tree_unflatten(treedef, [4, 5, 6]).items == [4, (5, 6)]


@pytest.mark.parametrize("n_leaves", [1, 3, 0])
def test_unflatten_wrong_leaf_count_as_jax(jtu, n_leaves):
    tree = (1, {"a": 2})
    with pytest.raises(ValueError) as theirs:
        jtu.tree_unflatten(jtu.tree_structure(tree), list(range(n_leaves)))
    with pytest.raises(ValueError) as ours:
        tu.tree_unflatten(tu.tree_structure(tree), list(range(n_leaves)))
    assert str(ours.value) == str(theirs.value)


def test_unsortable_dict_keys_raise():
    with pytest.raises(ValueError, match="sorting pytree dictionary keys"):
        tu.tree_flatten({1: "a", "b": 2})


def test_deep_tree():
    tree = 0
    for _ in range(300):
        tree = [tree, None]
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [0] and treedef.num_nodes == 601
    assert tu.tree_unflatten(treedef, [5]) == tu.tree_map(lambda _: 5, tree)


# ---- PyTreeDef ------------------------------------------------------------------------------


STRUCTURE_PAIRS = [
    ((1, 2), (3, 4)),
    ((1, 2), [1, 2]),
    ((1, 2), (1, 2, 3)),
    ({"a": 1, "b": 2}, {"b": 3, "a": 4}),
    ({"a": 1}, {"b": 1}),
    ({"a": 1}, collections.OrderedDict(a=1)),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=1, a=2)),
    (None, ()),
    (None, None),
    (1, None),
    (1, "leaf"),
    (Pair(1, 2), (1, 2)),
    (Pair(1, 2), Other(1, 2)),
    (Point(1, 2), Point(3, 4)),
    (Point(1, 2), Point(1, (2,))),
    (Scaled(1, "a"), Scaled(2, "a")),
    (Scaled(1, "a"), Scaled(1, "b")),
    ([1, (2, None)], [3, (4, None)]),
]


@pytest.mark.parametrize("a, b", STRUCTURE_PAIRS)
def test_treedef_equality_and_hash_match_jax(a, b, jtu):
    ta, tb = tu.tree_structure(a), tu.tree_structure(b)
    equal = jtu.tree_structure(a) == jtu.tree_structure(b)
    assert (ta == tb) is equal and (ta != tb) is not equal
    if equal:
        assert hash(ta) == hash(tb)
        assert len({ta, tb}) == 1


def test_treedef_is_usable_as_cache_key():
    cache = {tu.tree_structure(((1, 2), {"k": 3})): "hit"}
    assert cache[tu.tree_structure((("x", "y"), {"k": "z"}))] == "hit"
    assert tu.tree_structure(1) != 1 and tu.tree_structure(1) != "PyTreeDef(*)"


def test_treedef_with_unhashable_array_aux_data():
    a, b = Scaled(1, np.arange(3)), Scaled(2, np.arange(3))
    ta, tb = tu.tree_structure(a), tu.tree_structure(b)
    assert isinstance(hash(ta), int)
    assert ta == tu.tree_structure(Scaled(5, a.scale))  # the same aux object
    assert ta != tb  # equal-valued arrays with an ambiguous == compare by identity
    assert hash(ta) == hash(tb)  # hashing ignored the aux data, consistently


def test_treedef_children_tuple_and_compose(jtu):
    x = [(1, 2), 3, {"a": 4}, None]
    treedef = tu.tree_structure(x)
    assert tu.treedef_children(treedef) == [tu.tree_structure(c) for c in x]
    assert tu.treedef_children(tu.tree_structure(1)) == []
    assert tu.treedef_tuple(tu.treedef_children(treedef)) == tu.tree_structure(tuple(x))
    inner = tu.tree_structure({"p": 0, "q": (0, 0)})
    composed = tu.tree_structure((1, [2])).compose(inner)
    expected = jtu.tree_structure((1, [2])).compose(jtu.tree_structure({"p": 0, "q": (0, 0)}))
    assert repr(composed) == repr(expected)
    assert (composed.num_leaves, composed.num_nodes) == (expected.num_leaves, expected.num_nodes)
    assert composed == tu.tree_structure(({"p": 0, "q": (0, 0)}, [{"p": 0, "q": (0, 0)}]))


def test_treedef_node_data_and_pickle():
    assert tu.tree_structure(1).node_data() is None
    assert tu.tree_structure({"b": 1, "a": 2}).node_data() == (dict, ["a", "b"])
    assert tu.tree_structure(Scaled(1, "k")).node_data() == (Scaled, "k")
    treedef = tu.tree_structure({"a": [1, Pair(2, None)], "b": Point(3, 4)})
    back = pickle.loads(pickle.dumps(treedef))
    assert back == treedef and hash(back) == hash(treedef) and repr(back) == repr(treedef)


def test_treedef_is_leaf():
    assert tu.treedef_is_leaf(tu.tree_structure(ARR))
    assert tu.treedef_is_leaf(tu.tree_structure(None))  # one node, as in JAX
    assert not tu.treedef_is_leaf(tu.tree_structure([1]))


def test_all_leaves(jtu):
    cases = [[1, ARR, "s"], [None], [1, [2]], [], [Point(1, 2)]]
    for items in cases:
        assert tu.all_leaves(items) == jtu.all_leaves(items), items
    assert tu.all_leaves([Point(1, 2)], is_leaf=lambda x: isinstance(x, Point))
    assert not tu.all_leaves([Point(1, 2)], is_leaf=lambda x: x is None)


# ---- tree_map and structure-mismatch errors -----------------------------------------------


def test_tree_map_one_and_several_trees():
    tree = {"a": [1, 2], "b": (3, None)}
    assert tu.tree_map(lambda x: x * 2, tree) == {"a": [2, 4], "b": (6, None)}
    assert tu.tree_map(lambda x, y, z: x + y + z, tree, tree, tree) == \
        {"a": [3, 6], "b": (9, None)}
    assert tu.tree_map(lambda p: p.x + p.y, [Point(1, 2), Point(3, 4)],
                       is_leaf=lambda x: isinstance(x, Point)) == [3, 7]


def test_tree_map_rest_may_be_deeper_at_leaves():
    out = tu.tree_map(lambda x, y: (x, y), [1, 2], [(3, 4), {"k": 5}])
    assert out == [(1, (3, 4)), (2, {"k": 5})]


def test_tree_map_custom_nodes():
    out = tu.tree_map(lambda a, b: a + b, Point(1, (2, 3)), Point(10, (20, 30)))
    assert out == Point(11, (22, 33))
    assert tu.tree_map(lambda v: v * 2, Scaled(3, "k")) == Scaled(6, "k")


MISMATCHES = [
    # (tree, other, key path named in the message, regex for what it says differs)
    ((1, 2), [1, 2], "(root)", "<class 'tuple'>.*<class 'list'>"),
    ({"a": (1, 2)}, {"a": (1, 2, 3)}, "['a']", "tuple of length 2.*length 3"),
    ({"a": 1}, {"b": 1}, "(root)", r"dict keys differ: expected \['a'\], got \['b'\]"),
    ([None], [1], "[0]", "NoneType.*<class 'int'>.*is_leaf"),
    ([1, (2, 3)], [1, 5], "[1]", "<class 'tuple'>.*<class 'int'>: 5"),
    ({"x": [1, {"y": (1,)}]}, {"x": [1, {"y": [1]}]}, "['x'][1]['y']",
     "<class 'tuple'>.*<class 'list'>"),
    (Pair(1, (2, 3)), Pair(1, (2,)), ".second", "tuple of length 2.*length 1"),
    (Pair(1, 2), Other(1, 2), "(root)", "Pair.*Other"),
    (Point(1, (2, 3)), Point(1, [2, 3]), "[<flat index 1>]", "tuple.*list"),
    (Scaled(1, "a"), Scaled(1, "b"), "(root)", "Scaled node metadata differs.*'a'.*'b'"),
    (collections.OrderedDict(a=1, b=2), collections.OrderedDict(b=1, a=2), "(root)",
     "OrderedDict node metadata differs"),
]


@pytest.mark.parametrize("tree, other, path, what", MISMATCHES)
def test_flatten_up_to_mismatch_names_path_and_difference(tree, other, path, what):
    where = rf"key path {re.escape(path)}: .*{what}"
    with pytest.raises(ValueError, match=rf"^pytree structure mismatch at {where}"):
        tu.tree_structure(tree).flatten_up_to(other)


@pytest.mark.parametrize("tree, other, path, what", MISMATCHES)
def test_tree_map_mismatch_error_as_in_jax(jtu, tree, other, path, what):
    """JAX's words: the key path where the first tree is no prefix of the other, and how
    they differ there (types, lengths, keys or metadata). One departure: inside a
    namedtuple JAX 0.10.2 names the wrong field (``.first`` for the mismatch under
    ``Pair(...).second``); jaxkit names the right one."""
    if isinstance(tree, Pair) and isinstance(other, Pair):
        with pytest.raises(ValueError, match=r"tree_map tree\.second\n"):
            tu.tree_map(lambda *xs: xs[0], tree, other)
        return
    for fn, args in [("tree_map", (tree, other)), ("tree_map", (tree, tree, other)),
                     ("tree_map_with_path", (tree, other))]:
        with pytest.raises(ValueError) as theirs:
            getattr(jtu, fn)(lambda *xs: xs[0], *args)
        with pytest.raises(ValueError) as ours:
            getattr(tu, fn)(lambda *xs: xs[0], *args)
        assert str(ours.value) == str(theirs.value)


def test_flatten_up_to():
    treedef = tu.tree_structure([0, {"a": 0}])
    assert treedef.flatten_up_to([(1, 2), {"a": [3]}]) == [(1, 2), [3]]
    assert tu.tree_structure(0).flatten_up_to({"x": 1}) == [{"x": 1}]


# ---- reductions and transpose ---------------------------------------------------------------


def test_tree_reduce_and_tree_all():
    tree = [1, (2, {"a": 3}), None]
    assert tu.tree_reduce(lambda a, b: a + b, tree) == 6
    assert tu.tree_reduce(lambda a, b: a + b, tree, 10) == 16
    assert tu.tree_reduce(lambda a, b: a + [b], tree, []) == [1, 2, 3]
    assert tu.tree_reduce(lambda a, b: (a, b), [], None) is None  # None is a real initializer
    with pytest.raises(TypeError):
        tu.tree_reduce(lambda a, b: a + b, [])
    assert tu.tree_all([1, (True, "s")]) and not tu.tree_all([1, (0, "s")])
    assert tu.tree_all([None])  # no leaves


def test_tree_transpose(jtu):
    outer, inner = tu.tree_structure([0, 0, 0]), tu.tree_structure({"a": 0, "b": 0})
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
    expected = {"a": [1, 3, 5], "b": [2, 4, 6]}
    assert tu.tree_transpose(outer, inner, tree) == expected
    assert tu.tree_transpose(outer, None, tree) == expected
    assert expected == jtu.tree_transpose(jtu.tree_structure([0, 0, 0]),
                                          jtu.tree_structure({"a": 0, "b": 0}), tree)
    with pytest.raises(TypeError, match="Mismatch"):
        tu.tree_transpose(outer, inner, tree[:2] + [{"a": 5, "b": (6, 7)}])


# ---- key paths --------------------------------------------------------------------------------


def test_key_entries():
    keys = [tu.SequenceKey(0), tu.DictKey("a"), tu.DictKey(1), tu.GetAttrKey("x"),
            tu.FlattenedIndexKey(2)]
    assert [str(k) for k in keys] == ["[0]", "['a']", "[1]", ".x", "[<flat index 2>]"]
    assert repr(keys[1]) == "DictKey(key='a')" and repr(keys[3]) == "GetAttrKey(name='x')"
    assert tu.SequenceKey(0) == tu.SequenceKey(0) != tu.FlattenedIndexKey(0)
    assert len({tu.DictKey("a"), tu.DictKey("a"), tu.DictKey("b")}) == 2
    match keys[3]:
        case tu.GetAttrKey(name=name):
            assert name == "x"
        case _:
            pytest.fail("GetAttrKey did not match its pattern")


def test_keystr(jtu):
    path = (tu.DictKey("a"), tu.SequenceKey(0), tu.GetAttrKey("x"))
    jpath = (jtu.DictKey("a"), jtu.SequenceKey(0), jtu.GetAttrKey("x"))
    assert tu.keystr(path) == jtu.keystr(jpath) == "['a'][0].x"
    assert tu.keystr(path, simple=True, separator="/") == \
        jtu.keystr(jpath, simple=True, separator="/") == "a/0/x"
    assert tu.keystr(()) == ""


def test_flatten_with_path_returns_structure_and_pairs():
    tree = {"a": [1, Pair(2, 3)], "b": None}
    pairs, treedef = tu.tree_flatten_with_path(tree)
    assert treedef == tu.tree_structure(tree)
    assert [(tu.keystr(p), x) for p, x in pairs] == \
        [("['a'][0]", 1), ("['a'][1].first", 2), ("['a'][1].second", 3)]
    pairs, treedef = tu.tree_flatten_with_path(tree, is_leaf=lambda p, x: len(p) == 2,
                                               is_leaf_takes_path=True)
    assert [(tu.keystr(p), x) for p, x in pairs] == [("['a'][0]", 1), ("['a'][1]", Pair(2, 3))]
    assert repr(treedef) == "PyTreeDef({'a': [*, *], 'b': None})"


def test_tree_map_with_path():
    out = tu.tree_map_with_path(lambda p, x, y: f"{tu.keystr(p)}={x + y}",
                                {"a": [1, 2], "p": Point(3, 4)}, {"a": [10, 20], "p": Point(30, 40)})
    assert out == {"a": ["['a'][0]=11", "['a'][1]=22"],
                   "p": Point("['p'][<flat index 0>]=33", "['p'][<flat index 1>]=44")}


def test_register_pytree_with_keys_names_children():
    class Box:
        def __init__(self, lo, hi):
            self.lo, self.hi = lo, hi

    tu.register_pytree_with_keys(
        Box, lambda b: (((tu.GetAttrKey("lo"), b.lo), (tu.GetAttrKey("hi"), b.hi)), None),
        lambda _, children: Box(*children))
    tree = [Box(1, (2, 3))]
    assert tu.tree_leaves(tree) == [1, 2, 3]
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)] == \
        ["[0].lo", "[0].hi[0]", "[0].hi[1]"]
    with pytest.raises(ValueError, match=r"(?s)different types at key path\n"
                                         r"    tree_map tree\[0\]\.hi\n"):
        tu.tree_map(lambda a, b: a, tree, [Box(1, [2, 3])])


def test_register_pytree_with_keys_class():
    @tu.register_pytree_with_keys_class
    class Named:
        def __init__(self, v):
            self.v = v

        def tree_flatten_with_keys(self):
            return ((tu.GetAttrKey("v"), self.v),), "aux"

        @classmethod
        def tree_unflatten(cls, aux, children):
            assert aux == "aux"
            return cls(*children)

    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Named((1, 2)))] == [".v[0]", ".v[1]"]
    assert tu.tree_map(lambda x: -x, Named(5)).v == -5


# ---- registration -------------------------------------------------------------------------------


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="Duplicate"):
        tu.register_pytree_node_class(Point)
    with pytest.raises(ValueError, match="Duplicate"):
        tu.register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))


def test_registered_class():
    leaves, treedef = tu.tree_flatten(Point(1, (2, 3)))
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(CustomNode(Point[None], [*, (*, *)]))"
    assert tu.tree_unflatten(treedef, ["a", "b", "c"]) == Point("a", ("b", "c"))
    assert tu.is_tree_node(Point) and tu.is_tree_node(Pair) and tu.is_tree_node(type(None))
    assert not tu.is_tree_node(int)


def test_register_dataclass(jtu):
    @dataclasses.dataclass
    class Params:
        w: object
        b: object
        name: str = dataclasses.field(default="p", metadata={"static": True})

    tu.register_dataclass(Params)
    p = Params([1, 2], 3, "layer")
    leaves, treedef = tu.tree_flatten(p)
    assert leaves == [1, 2, 3]
    assert [tu.keystr(k) for k, _ in tu.tree_leaves_with_path(p)] == [".w[0]", ".w[1]", ".b"]
    assert tu.tree_unflatten(treedef, [4, 5, 6]) == Params([4, 5], 6, "layer")
    assert treedef != tu.tree_structure(Params([1, 2], 3, "other"))
    jtu.register_dataclass(Params)
    assert repr(treedef) == repr(jtu.tree_structure(p))

    @dataclasses.dataclass
    class Explicit:
        x: object
        y: object

    tu.register_dataclass(Explicit, data_fields=["y"], meta_fields=["x"])
    assert tu.tree_leaves(Explicit(1, 2)) == [2]
    with pytest.raises(ValueError, match="init=True"):
        tu.register_dataclass(dataclasses.make_dataclass("M", ["x", "y"]), ["x"], [])


def test_register_static():
    @tu.register_static
    @dataclasses.dataclass(frozen=True)
    class Config:
        mode: str

    tree = {"c": Config("train"), "x": 1}
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [1]
    assert tu.tree_unflatten(treedef, [2]) == {"c": Config("train"), "x": 2}
    assert treedef != tu.tree_structure({"c": Config("eval"), "x": 1})


# ---- Partial ------------------------------------------------------------------------------------


def test_partial_is_a_pytree():
    p = tu.Partial(lambda a, b, *, c: a + b + c, 1, c=10)
    assert p(2) == 13
    leaves, treedef = tu.tree_flatten(p)
    assert leaves == [1, 10]
    q = tu.tree_unflatten(treedef, [100, 1000])
    assert isinstance(q, tu.Partial) and q(2) == 1102
    doubled = tu.tree_map(lambda x: 2 * x, p)
    assert doubled(0) == 22
    assert tu.tree_structure(p) == tu.tree_structure(tu.Partial(p.func, 5, c=6))
    assert tu.tree_structure(p) != tu.tree_structure(tu.Partial(max, 5, c=6))


def test_partial_of_partial_keeps_inner_arguments_static():
    inner = functools.partial(lambda a, b, c: (a, b, c), "static")
    p = tu.Partial(inner, "dynamic")
    assert p("x") == ("static", "dynamic", "x")
    assert tu.tree_leaves(p) == ["dynamic"]
    assert tu.tree_map(lambda s: s.upper(), p)("x") == ("static", "DYNAMIC", "x")
    assert p.func.func is inner.func  # the shim exposes the wrapped partial's parts


def test_partial_matches_jax_structure(jtu):
    p = tu.Partial(max, 1, key=None)
    jp = jtu.Partial(max, 1, key=None)
    assert repr(tu.tree_structure(p)) == repr(jtu.tree_structure(jp))
    assert [tu.keystr(k) for k, _ in tu.tree_leaves_with_path(p)] == \
        [jtu.keystr(k) for k, _ in jtu.tree_leaves_with_path(jp)]


def test_jit_outputs_of_namedtuples_keep_their_registration():
    # a namedtuple registered with its fields in another order, and one redefining __len__
    class Swapped(typing.NamedTuple):
        a: object
        b: object

    jaxkit.tree_util.register_pytree_node(Swapped, lambda s: ((s.b, s.a), None),
                                          lambda _, c: Swapped(c[1], c[0]))

    class Sized(typing.NamedTuple):
        x: object

        def __len__(self):
            return 99

    one, two = jaxkit.numpy.ones(2), 2 * jaxkit.numpy.ones(3)
    out = jaxkit.jit(lambda a, b: Swapped(a, b))(one, two)
    assert out.a.shape == (2,) and out.b.shape == (3,)
    sized = jaxkit.jit(lambda x: Sized(x + 1))(one)
    assert type(sized) is Sized and sized.x.shape == (2,)
    assert jaxkit.tree_util.tree_leaves(sized)[0].shape == (2,)
