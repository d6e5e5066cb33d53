"""Top-level and small-module names of JAX 0.10.2 (issue #22), each against the JAX oracle:
the config states (no_execution, thread_guard, ...), ``experimental.control_deps``,
``experimental.random`` (StatefulPRNG), ``jax.ad``/``jax.memory``, ``jax.ds`` in
NumPy indexing and updates, ``jax.errors.JaxRuntimeError``, ``tree_util.default_registry``,
``custom_derivatives.CustomVJPPrimal``, ``random.random_gamma_p``, ``nn.initializers.
Initializer``, the block-scaled products of ``jax.nn`` and jet's ``call_param_updaters``."""
import dataclasses
import gc
import weakref

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import _util
from jaxkit import custom_derivatives as kcd
from jaxkit.experimental import control_deps as kcd_deps
from jaxkit.experimental import jet as kjet
from jaxkit.experimental import random as krandom
from jaxkit.indexing import Slice
from jaxkit.transforms.jit import jit_p

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.experimental.control_deps  # noqa: E402
import jax.experimental.jet  # noqa: E402
import jax.experimental.random  # noqa: E402
import jax.numpy as ojnp  # noqa: E402

# ---- config states ----------------------------------------------------------------------

STATES = [("no_execution", False), ("thread_guard", False),
          ("jax2tf_associative_scan_reductions", False),
          ("array_garbage_collection_guard", None)]


@pytest.mark.parametrize("name,default", STATES)
def test_state_default_and_override(name, default):
    ours, theirs = getattr(jaxkit, name), getattr(jax, name)
    assert ours.value == theirs.value == default
    new = "allow" if default is None else True
    with ours(new), theirs(new):
        assert ours.value == theirs.value == new
    assert ours.value == default


def test_no_execution_blocks_running_not_tracing():
    x, ox = jnp.ones(3), ojnp.ones(3)
    jaxkit.jit(jnp.sin)(x), jax.jit(ojnp.sin)(ox)  # compiled and cached before: no_execution
    # must still stop the cached call (jaxkit's fast path skips Executable.__call__)
    with jaxkit.no_execution(True), jax.no_execution(True):
        for ours, theirs in [(lambda: x + 1, lambda: ox + 1),
                             (lambda: jaxkit.jit(jnp.sin)(x), lambda: jax.jit(ojnp.sin)(ox))]:
            with pytest.raises(RuntimeError) as e_ours:
                ours()
            with pytest.raises(RuntimeError) as e_theirs:
                theirs()
            assert str(e_ours.value) == str(e_theirs.value)
        assert str(jaxkit.make_jaxpr(lambda v: v * 2)(x)) == \
            str(jax.make_jaxpr(lambda v: v * 2)(ox))
    np.testing.assert_array_equal(x + 1, ox + 1)


@pytest.mark.parametrize("value,exc", [("x", ValueError), (3, ValueError)])
def test_gc_guard_bad_value(value, exc):
    with pytest.raises(exc) as ours, jaxkit.array_garbage_collection_guard(value):
        pass
    with pytest.raises(exc) as theirs, jax.array_garbage_collection_guard(value):
        pass
    assert str(ours.value) == str(theirs.value)


def test_gc_guard_log_not_implemented():
    with pytest.raises(NotImplementedError, match="array_garbage_collection_guard='log'"):
        with jaxkit.array_garbage_collection_guard("log"):
            pass


# ---- jax.ad, jax.memory -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["DontWant", "DidntWant", "GradRef", "GradValue"])
def test_ad_markers(name):
    ours, theirs = getattr(jaxkit.ad, name), getattr(jax.ad, name)
    assert repr(ours()) == repr(theirs()) and ours() == ours()
    assert dataclasses.is_dataclass(ours)
    leaves, tree = jaxkit.tree_util.tree_flatten(ours())
    oleaves, otree = jax.tree_util.tree_flatten(theirs())
    assert leaves == oleaves == ([] if name in ("GradRef", "DidntWant") else [ours()]) or \
        (len(leaves) == len(oleaves) == 1)
    assert jaxkit.tree_util.treedef_is_leaf(tree) == jax.tree_util.treedef_is_leaf(otree)


def test_memory_space():
    ours, theirs = jaxkit.memory.Space, jax.memory.Space
    assert [m.name for m in ours] == [m.name for m in theirs]
    assert [repr(m) for m in ours] == [repr(m) for m in theirs]
    assert len({ours.Device, ours.Host, ours.Any}) == 3


# ---- jax.ds ----------------------------------------------------------------------------

DS_ARGS = [(None,), (3,), (1, 2), (1, 4, 2), (0, 0)]


@pytest.mark.parametrize("args", DS_ARGS)
def test_ds_constructs_as_jax(args):
    assert repr(jaxkit.ds(*args)) == repr(jax.ds(*args))


@pytest.mark.parametrize("args,exc", [((1, 2, -1), ValueError), ((1, 2, 1.5), ValueError)])
def test_ds_errors(args, exc):
    with pytest.raises(exc) as ours:
        jaxkit.ds(*args)
    with pytest.raises(exc) as theirs:
        jax.ds(*args)
    assert str(ours.value) == str(theirs.value)


def test_ds_pytree():
    for s, os_ in [(jaxkit.ds(1, 2), jax.ds(1, 2)),
                   (jaxkit.ds(jnp.int32(1), 2), jax.ds(ojnp.int32(1), 2))]:
        leaves, tree = jaxkit.tree_util.tree_flatten(s)
        oleaves, _ = jax.tree_util.tree_flatten(os_)
        assert len(leaves) == len(oleaves)
        assert repr(jaxkit.tree_util.tree_unflatten(tree, leaves)) == repr(s)
    assert Slice(2, 3).is_dynamic_start is False
    assert jaxkit.jit(lambda i: jnp.asarray(Slice(i, 3).is_dynamic_start))(1)
    assert Slice.from_slice(slice(1, 9, 3), 10) == jaxkit.ds(1, 3, 3)


X10 = np.arange(10)
Y234 = np.arange(24).reshape(2, 3, 4)
GETS = [
    (X10, lambda m, x: x[m.ds(8, 4)]), (X10, lambda m, x: x[m.ds(2, 3, 2)]),
    (X10, lambda m, x: x[m.ds(7, 3, 2)]), (X10, lambda m, x: x[m.ds(-3, 2)]),
    (X10, lambda m, x: x[m.ds(4)]),
    (Y234, lambda m, x: x[1, m.ds(1, 2), None, m.ds(0, 2)]),
    (Y234, lambda m, x: x[..., m.ds(2, 2)]), (Y234, lambda m, x: x[m.ds(1, 1), 0]),
    (X10, lambda m, x: x.at[m.ds(8, 4)].set(0)), (X10, lambda m, x: x.at[m.ds(7, 3, 2)].set(0)),
    (X10, lambda m, x: x.at[m.ds(-3, 2)].add(100)), (X10, lambda m, x: x.at[m.ds(2, 3)].set(0)),
    (Y234, lambda m, x: x.at[:, m.ds(1, 2)].set(0)),
]


@pytest.mark.parametrize("i", range(len(GETS)))
def test_ds_indexing(i):
    x, f = GETS[i]
    np.testing.assert_array_equal(f(jaxkit, jnp.asarray(x)), f(jax, ojnp.asarray(x)))


@pytest.mark.parametrize("start", [0, 3, 7, -2])
def test_ds_traced_start(start):
    x = np.arange(10.)
    for stride in (1, 2):
        ours = jaxkit.jit(lambda v, i: v[jaxkit.ds(i, 3, stride)])(jnp.asarray(x), start)
        theirs = jax.jit(lambda v, i: v[jax.ds(i, 3, stride)])(ojnp.asarray(x), start)
        np.testing.assert_array_equal(ours, theirs)
    ours = jaxkit.jit(lambda v, i: v.at[jaxkit.ds(i, 3)].add(1))(jnp.asarray(x), start)
    theirs = jax.jit(lambda v, i: v.at[jax.ds(i, 3)].add(1))(ojnp.asarray(x), start)
    np.testing.assert_array_equal(ours, theirs)


def test_ds_grad_and_vmap():
    x = np.arange(12.).reshape(3, 4)
    g = jaxkit.grad(lambda v: v[jaxkit.ds(1, 2)].sum())(jnp.asarray(x[0]))
    og = jax.grad(lambda v: v[jax.ds(1, 2)].sum())(ojnp.asarray(x[0]))
    np.testing.assert_array_equal(g, og)
    i = np.array([0, 1, 2])
    ours = jaxkit.vmap(lambda v, s: v[jaxkit.ds(s, 2)])(jnp.asarray(x), jnp.asarray(i))
    theirs = jax.vmap(lambda v, s: v[jax.ds(s, 2)])(ojnp.asarray(x), ojnp.asarray(i))
    np.testing.assert_array_equal(ours, theirs)


def test_ds_update_with_other_indices_not_implemented():
    with pytest.raises(NotImplementedError, match="jax.ds"):
        jnp.asarray(Y234).at[1, jaxkit.ds(1, 2)].set(0)


# ---- errors, tree_util, custom_derivatives, random, nn ---------------------------------

def test_jax_runtime_error_is_jaxlibs():
    assert jaxkit.errors.JaxRuntimeError is jax.errors.JaxRuntimeError
    assert issubclass(jaxkit.errors.JaxRuntimeError, RuntimeError)


TREES = [[1, (2, None)], {"a": 1, "b": (2, 3)}, 3, None, ()]


@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_default_registry(tree):
    ours, theirs = jaxkit.tree_util.default_registry, jax.tree_util.default_registry
    leaves, t = ours.flatten(tree)
    oleaves, ot = theirs.flatten(tree)
    assert leaves == oleaves and repr(t) == repr(ot)
    one, oone = ours.flatten_one_level(tree), theirs.flatten_one_level(tree)
    assert (one is None) == (oone is None)
    if one is not None:
        assert list(one[0]) == list(oone[0]) and one[1] == oone[1]
    assert ours.is_node(type(tree)) == theirs.is_node(type(tree))
    p, op = ours.flatten_with_path(tree), theirs.flatten_with_path(tree)
    assert [(str(k), v) for k, v in p[0]] == [(str(k), v) for k, v in op[0]]


def test_default_registry_leaf_predicate_and_register():
    tree = [1, (2, None)]
    is_tuple = lambda x: isinstance(x, tuple)  # noqa: E731
    assert jaxkit.tree_util.default_registry.flatten(tree, is_tuple)[0] == \
        jax.tree_util.default_registry.flatten(tree, is_tuple)[0]

    class Box:
        def __init__(self, v):
            self.v = v

    jaxkit.tree_util.default_registry.register_node(Box, lambda b: ((b.v,), None),
                                                    lambda _, c: Box(*c))
    assert jaxkit.tree_util.tree_leaves([Box(1), Box(2)]) == [1, 2]


def test_custom_vjp_primal_tree_values():
    P = kcd.CustomVJPPrimal
    tree = {"a": P(1.0, True), "b": [P(2, False)]}
    otree = {"a": jax.custom_derivatives.CustomVJPPrimal(1.0, True),
             "b": [jax.custom_derivatives.CustomVJPPrimal(2, False)]}
    assert kcd.custom_vjp_primal_tree_values(tree) == \
        jax.custom_derivatives.custom_vjp_primal_tree_values(otree)
    assert repr(P(1.0, True)).replace("jaxkit", "jax") == \
        repr(otree["a"]).replace("jax._src.custom_derivatives.", "")
    with pytest.raises(TypeError, match="unexpected leaf type"):
        kcd.custom_vjp_primal_tree_values([1.0])


def test_random_gamma_p():
    a = np.array([1.0, 2.0, 0.5], np.float32)
    ours = jaxkit.random.random_gamma_p.bind(jaxkit.random.key(0), jnp.asarray(a),
                                             log_space=False)
    theirs = jax.random.random_gamma_p.bind(jax.random.key(0), ojnp.asarray(a),
                                            log_space=False)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert str(jaxkit.random.random_gamma_p) == str(jax.random.random_gamma_p)


def test_initializer_protocol():
    Init = jaxkit.nn.initializers.Initializer
    for name in ("zeros", "ones"):
        assert isinstance(getattr(jaxkit.nn.initializers, name), Init)
    assert isinstance(jaxkit.nn.initializers.glorot_uniform(), Init)
    assert not isinstance(3, Init) and not isinstance(3, jax.nn.initializers.Initializer)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_config(mode):
    ours = jaxkit.nn.get_scaled_dot_general_config(mode)
    theirs = jax.nn.get_scaled_dot_general_config(mode)
    for f in ("mode", "block_size", "data_type", "scale_type", "infer_only"):
        assert getattr(ours, f) == getattr(theirs, f), f
    if theirs.global_scale is None:
        assert ours.global_scale is None
    else:
        np.testing.assert_array_equal(ours.global_scale, theirs.global_scale)


def test_scaled_config_bad_mode():
    with pytest.raises(ValueError) as ours:
        jaxkit.nn.get_scaled_dot_general_config("int8")
    with pytest.raises(ValueError) as theirs:
        jax.nn.get_scaled_dot_general_config("int8")
    assert str(ours.value) == str(theirs.value)


def test_scaled_dot_general_without_configs_is_dot_general():
    lhs = np.random.RandomState(0).randn(3, 8, 4).astype(np.float32)
    rhs = np.random.RandomState(1).randn(3, 5, 4).astype(np.float32)
    dn = (((2,), (2,)), ((0,), (0,)))
    np.testing.assert_allclose(jaxkit.nn.scaled_dot_general(lhs, rhs, dn),
                               jax.nn.scaled_dot_general(lhs, rhs, dn), rtol=1e-5)


SHAPES = [((1, 1, 3), (1, 1, 3), (1, 1, 1), (1, 1, 1)),   # fine shapes: cuDNN-only on CPU
          ((1, 1, 3), (2, 1, 3), (1, 1, 1), (1, 1, 1)),   # batch mismatch
          ((1, 2, 4), (1, 3, 4), (1, 2, 2), (1, 3, 1)),   # scale K mismatch
          ((1, 2, 4), (1, 3, 4), (1, 1, 2), (1, 3, 2)),   # scale M mismatch
          ((1, 3), (1, 3), (1, 1), (1, 1))]               # not 3-D


@pytest.mark.parametrize("shapes", SHAPES)
def test_scaled_matmul_checks_then_cudnn_only(shapes):
    args = [np.ones(s, np.float32) for s in shapes]
    with pytest.raises((ValueError, NotImplementedError)) as theirs:
        jax.nn.scaled_matmul(*[ojnp.asarray(a) for a in args])
    with pytest.raises(type(theirs.value)) as ours:
        jaxkit.nn.scaled_matmul(*[jnp.asarray(a) for a in args])
    if isinstance(theirs.value, ValueError):
        assert str(ours.value) == str(theirs.value)
    else:
        assert "cuDNN" in str(ours.value)


def test_scaled_dot_general_with_configs_is_cudnn_only():
    cfg = [jaxkit.nn.get_scaled_dot_general_config("mxfp8")] * 3
    x = jnp.ones((1, 32, 64))
    with pytest.raises(NotImplementedError, match="cuDNN"):
        jaxkit.nn.scaled_dot_general(x, x, (((2,), (2,)), ((0,), (0,))), configs=cfg)


def test_jet_call_param_updaters():
    upd = kjet.call_param_updaters[jit_p]
    assert upd({"donated_invars": (True,), "name": "f"}, 3)["donated_invars"] == \
        (True, False, False)
    f = jaxkit.jit(jnp.sin)
    ours = kjet.jet(f, (0.5,), ((1.0, 0.0),))
    theirs = jax.experimental.jet.jet(jax.jit(ojnp.sin), (0.5,), ((1.0, 0.0),))
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


# ---- control_deps ----------------------------------------------------------------------

def _with_deps(cd):
    def f(x):
        a, b, c = x + 1, x * 2, x - 3
        cd.schedule([a, b, c])
        cd.control_dep(a, c)
        return a, b, c
    return f


def test_control_deps_jaxpr_hlo_and_values():
    ours = _with_deps(kcd_deps)
    theirs = _with_deps(jax.experimental.control_deps)
    assert str(jaxkit.make_jaxpr(jaxkit.jit(ours))(1.0)) == \
        str(jax.make_jaxpr(jax.jit(theirs))(1.0))
    assert jaxkit.jit(ours).lower(1.0).as_text().count("custom_call @control_dep") == 3
    np.testing.assert_array_equal(jaxkit.jit(ours)(1.0), jax.jit(theirs)(1.0))


# ---- experimental.random ---------------------------------------------------------------

def _draws(m, random):
    rng = random.stateful_rng(42)
    out = [rng.uniform(), rng.uniform()]
    ju = m.jit(rng.uniform)
    out += [ju(), ju()]
    out += [m.random.key_data(rng.key()), m.random.key_data(rng.key((2,)))]
    out += [rng.normal(1., 2., 3), rng.integers(10, size=(2,)), rng.random(2),
            rng.uniform(m.numpy.zeros(2), 3.)]
    out.append(m.vmap(lambda r, x: x + r.uniform())(random.stateful_rng(123).split(3),
                                                    m.numpy.zeros(3)))
    out += [r.integers(0, 10, 2) for r in random.stateful_rng(7).spawn(2)]
    out.append(m.jit(lambda: random.stateful_rng(3).uniform())())
    return out


def test_stateful_rng_matches_jax_bits():
    for a, b in zip(_draws(jaxkit, krandom), _draws(jax, jax.experimental.random),
                    strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("make", [
    lambda m, r: r.StatefulPRNG(1, 2),
    lambda m, r: r.StatefulPRNG(m.random.key(0), 2),
    lambda m, r: m.jit(lambda: r.stateful_rng().uniform())(),
    lambda m, r: r.stateful_rng(1).split(2).key(),
])
def test_stateful_rng_errors(make):
    with pytest.raises((ValueError, TypeError)) as theirs:
        make(jax, jax.experimental.random)
    with pytest.raises(type(theirs.value)) as ours:
        make(jaxkit, krandom)
    assert str(ours.value) == str(theirs.value)


# ---- vjp(...)[1].with_refs and the jax.ad markers ----------------------------------------

def _with_refs(m):
    np_ = m.numpy
    out = []
    _, f = m.vjp(lambda x, y: (x * y).sum(), np_.arange(3.), np_.ones(3))
    r = m.new_ref(np_.ones(3))
    out.append(f.with_refs(m.ad.GradValue(), m.ad.DontWant())(1.))
    out.append(f.with_refs(r, m.ad.GradValue())(1.))
    out.append(f.with_refs(r, r)(2.))
    out.append(m.jit(lambda r: f.with_refs(r, m.ad.DontWant())(1.))(r))
    out.append(r[...])
    _, g = m.vjp(lambda d: d["a"] * 2, {"a": np_.ones(2), "b": 1.})
    out.append(g.with_refs({"a": m.ad.DontWant(), "b": m.ad.GradValue()})(np_.ones(2)))
    return out


def test_vjp_with_refs_matches_jax():
    for ours, theirs in zip(_with_refs(jaxkit), _with_refs(jax), strict=True):
        ol, tl = jaxkit.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
        assert len(ol) == len(tl)
        for a, b in zip(ol, tl):
            np.testing.assert_array_equal(a, b)
        assert [type(x).__name__ for x in jaxkit.tree_util.tree_flatten(
            ours, is_leaf=lambda x: type(x).__name__ in ("GradRef", "DidntWant"))[0]] == \
            [type(x).__name__ for x in jax.tree_util.tree_flatten(
                theirs, is_leaf=lambda x: type(x).__name__ in ("GradRef", "DidntWant"))[0]]


# ---- the jax._src.util helpers JAX's modules expose (jaxkit/_util.py) ----------------------

def test_util_helpers():
    assert _util.safe_zip([1, 2], "ab") == [(1, "a"), (2, "b")]
    with pytest.raises(ValueError, match=r"safe_map\(\) argument 2 is longer than argument 1"):
        _util.safe_map(lambda a, b: a, [1], [1, 2])
    assert _util.unzip2([(1, "a"), (2, "b")]) == ((1, 2), ("a", "b"))
    assert _util.split_list(range(6), [1, 2]) == [[0], [1, 2], [3, 4, 5]]
    assert _util.subs_list([None, 0, None], ["x"], [1, 2]) == [1, "x", 2]


def test_weakref_lru_cache():
    calls = []

    @_util.weakref_lru_cache
    def traced(f, n):
        calls.append(n)
        return f(n)

    def double(n):
        return 2 * n

    assert traced(double, 3) == traced(double, 3) == 6 and calls == [3]
    assert traced(double, 4) == 8 and calls == [3, 4]
    ref = weakref.ref(double)
    del double
    gc.collect()
    assert ref() is None  # the cache does not keep the function alive
