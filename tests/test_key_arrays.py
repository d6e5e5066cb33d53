"""Typed PRNG key arrays (``jax.random.key``) under ``jnp`` and Python operators, against the JAX
oracle: the shape and structure functions give key arrays with the same key data, the
comparisons compare whole keys, arithmetic raises JAX's TypeError with JAX's message.

Each record is ``(name, call)`` where ``call(m)`` runs the operation with module ``m`` (jaxkit or
jax). Flax nnx's rngs_test broadcasts, stacks and compares keys this way.
"""
import operator

import numpy as np
import pytest

import jaxkit


def _oracle():
    return pytest.importorskip("jax")


def _keys(m):
    return m.random.split(m.random.key(0), 4)


def _grid(m):
    return _keys(m).reshape(2, 2)


STRUCTURAL = [
    ("stack", lambda m: m.numpy.stack([m.random.key(0), m.random.key(1)])),
    ("stack_neg_axis", lambda m: m.numpy.stack([_keys(m), _keys(m)], axis=-1)),
    ("concatenate", lambda m: m.numpy.concatenate([_keys(m), _keys(m)[:2]])),
    ("concatenate_none", lambda m: m.numpy.concatenate([_grid(m), _grid(m)], axis=None)),
    ("vstack", lambda m: m.numpy.vstack([_keys(m), _keys(m)])),
    ("hstack", lambda m: m.numpy.hstack([_keys(m), _keys(m)])),
    ("dstack", lambda m: m.numpy.dstack([_keys(m), _keys(m)])),
    ("column_stack", lambda m: m.numpy.column_stack([_keys(m), _keys(m)])),
    ("reshape", lambda m: m.numpy.reshape(_keys(m), (2, 2))),
    ("reshape_neg", lambda m: m.numpy.reshape(_keys(m), (-1, 1))),
    ("method_reshape", lambda m: _keys(m).reshape(1, 4)),
    # to its own dtype (Optax's MultiSteps maps astype(where(...), x.dtype) over its state)
    ("astype_own_dtype", lambda m: m.numpy.astype(_keys(m), _keys(m).dtype)),
    ("astype_of_where", lambda m: m.numpy.astype(m.numpy.where(True, _keys(m), _keys(m)),
                                                 _keys(m).dtype)),
    ("ravel", lambda m: m.numpy.ravel(_grid(m))),
    ("index_slice", lambda m: _keys(m)[1:3]),
    ("index_int", lambda m: _grid(m)[1]),
    ("where", lambda m: m.numpy.where(m.numpy.array([True, False, True, False]), _keys(m),
                                      _keys(m)[::-1])),
    ("where_scalar", lambda m: m.numpy.where(False, m.random.key(0), m.random.key(1))),
    ("broadcast_to", lambda m: m.numpy.broadcast_to(m.random.key(3), (3, 2))),
    ("broadcast_to_rows", lambda m: m.numpy.broadcast_to(_keys(m), (2, 4))),
    ("expand_dims", lambda m: m.numpy.expand_dims(_keys(m), -1)),
    ("squeeze", lambda m: m.numpy.squeeze(_keys(m)[None])),
    ("squeeze_method", lambda m: _keys(m)[None].squeeze()),
    ("transpose", lambda m: m.numpy.transpose(_grid(m))),
    ("T", lambda m: _grid(m).T),
    ("swapaxes", lambda m: m.numpy.swapaxes(_grid(m), 0, 1)),
    ("moveaxis", lambda m: m.numpy.moveaxis(_grid(m), 0, -1)),
    ("take", lambda m: m.numpy.take(_keys(m), m.numpy.array([3, 0]))),
    ("take_axis", lambda m: m.numpy.take(_grid(m), m.numpy.array([1]), axis=1)),
    ("take_method", lambda m: _keys(m).take(m.numpy.array([2]))),
    ("flip", lambda m: m.numpy.flip(_keys(m))),
    ("flip_axis", lambda m: m.numpy.flip(_grid(m), axis=1)),
    ("tile", lambda m: m.numpy.tile(m.random.key(2), 3)),
    ("tile_2d", lambda m: m.numpy.tile(_keys(m), (2, 1))),
    ("repeat", lambda m: m.numpy.repeat(_keys(m), 2)),
    ("repeat_axis", lambda m: m.numpy.repeat(_grid(m), 2, axis=1)),
    ("roll", lambda m: m.numpy.roll(_keys(m), 1)),
    ("split", lambda m: m.numpy.split(_grid(m), 2, axis=1)),
    ("atleast_1d", lambda m: m.numpy.atleast_1d(m.random.key(0))),
    ("atleast_2d", lambda m: m.numpy.atleast_2d(m.random.key(0))),
    ("copy", lambda m: m.numpy.copy(_keys(m))),
    ("asarray", lambda m: m.numpy.asarray(_keys(m))),
    ("array_of_list", lambda m: m.numpy.array([m.random.key(0), m.random.key(1)])),
    ("asarray_of_list", lambda m: m.numpy.asarray([m.random.key(0), m.random.key(1)])),
    ("ones_like", lambda m: m.numpy.ones_like(_keys(m))),
    ("full_like", lambda m: m.numpy.full_like(_keys(m), 0)),
    ("zeros_like", lambda m: m.numpy.zeros_like(_keys(m))),
    ("jit_stack", lambda m: m.jit(lambda k: m.numpy.stack([k, k]))(m.random.key(5))),
    ("jit_broadcast_to", lambda m: m.jit(lambda k: m.numpy.broadcast_to(k, (2,)))(
        m.random.key(5))),
]


def _as_comparable(m, out):
    if isinstance(out, list):
        return [_as_comparable(m, o) for o in out]
    return (type(out).__name__, out.shape, str(out.dtype),
            np.asarray(m.random.key_data(out)).tolist())


@pytest.mark.parametrize("name,call", STRUCTURAL, ids=[r[0] for r in STRUCTURAL])
def test_structural_functions_give_key_arrays(name, call):
    jax = _oracle()
    assert _as_comparable(jaxkit, call(jaxkit)) == _as_comparable(jax, call(jax))


VALUES = [
    ("equal", lambda m: m.numpy.equal(_keys(m), _keys(m)[::-1])),
    ("eq_operator", lambda m: _keys(m) == _keys(m)[0]),
    ("not_equal", lambda m: m.numpy.not_equal(_keys(m), _keys(m)[::-1])),
    ("ne_operator", lambda m: _keys(m) != _keys(m)),
    ("array_equal_same", lambda m: m.numpy.array_equal(m.random.key(0), m.random.key(0))),
    ("array_equal_diff", lambda m: m.numpy.array_equal(m.random.key(0), m.random.key(1))),
    ("array_equal_shapes", lambda m: m.numpy.array_equal(_keys(m), _grid(m))),
    ("allclose", lambda m: m.numpy.allclose(m.random.key(0), m.random.key(1))),
    ("isclose", lambda m: m.numpy.isclose(_keys(m), _keys(m)[0])),
    ("isfinite", lambda m: m.numpy.isfinite(_keys(m))),
    ("shape_ndim_size", lambda m: (m.numpy.shape(_grid(m)), m.numpy.ndim(_grid(m)),
                                   m.numpy.size(_grid(m)), m.numpy.size(_grid(m), 1))),
    ("attributes", lambda m: (_keys(m).ndim, _keys(m).size, _keys(m).itemsize,
                              _keys(m).nbytes, len(_keys(m)))),
    ("pos", lambda m: m.random.key_data(+m.random.key(4))),
]


@pytest.mark.parametrize("name,call", VALUES, ids=[r[0] for r in VALUES])
def test_comparisons_and_queries(name, call):
    jax = _oracle()
    mine, theirs = call(jaxkit), call(jax)
    if not hasattr(theirs, "dtype"):  # a tuple of Python values
        assert mine == theirs
    else:
        assert np.asarray(mine).tolist() == np.asarray(theirs).tolist()
        assert mine.dtype == theirs.dtype


_BINARY_OPS = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "le", "gt",
               "ge", "and_", "or_", "xor", "lshift", "rshift"]
REFUSED = [
    *[(f"{op}_{side}", op, side) for op in _BINARY_OPS for side in ("kk", "k1", "1k")],
    *[(op, op, None) for op in ("neg", "abs", "invert")],
]


@pytest.mark.parametrize("name,op,side", REFUSED, ids=[r[0] for r in REFUSED])
def test_operators_refuse_keys_as_jax(name, op, side):
    """Eagerly and on a traced key (under jit, the number a constant), with JAX's TypeError
    and message (JAX's is the same under its jit)."""
    jax = _oracle()

    def call(k):
        args = {"kk": (k, k), "k1": (k, 1), "1k": (1, k), None: (k,)}[side]
        return getattr(operator, op)(*args)

    errors = []
    for f, m in ((call, jaxkit), (jaxkit.jit(call), jaxkit), (call, jax)):
        with pytest.raises(TypeError) as e:
            f(m.random.key(0))
        errors.append(str(e.value))
    assert errors[0] == errors[1] == errors[2]


MIXED = [
    ("stack", lambda m: m.numpy.stack([m.random.key(0), m.numpy.zeros((), m.numpy.uint32)])),
    ("concatenate", lambda m: m.numpy.concatenate([_keys(m), m.numpy.zeros(4, "uint32")])),
    ("where", lambda m: m.numpy.where(True, m.random.key(0), 0)),
    ("equal", lambda m: m.numpy.equal(_keys(m), 1)),
    ("eq_operator", lambda m: _keys(m) == 1),
    ("array_equal", lambda m: m.numpy.array_equal(m.random.key(0), m.numpy.zeros(()))),
    ("broadcast_to", lambda m: m.numpy.broadcast_to(_keys(m), (3,))),
    ("astype", lambda m: _keys(m).astype("uint32")),
    ("jnp_astype", lambda m: m.numpy.astype(_keys(m), m.numpy.float32)),
]


@pytest.mark.parametrize("name,call", MIXED, ids=[r[0] for r in MIXED])
def test_errors_as_jax(name, call):
    jax = _oracle()
    errors = []
    for m in (jaxkit, jax):
        with pytest.raises(Exception) as e:
            call(m)
        errors.append((type(e.value).__name__, str(e.value)))
    assert errors[0] == errors[1]


def test_plain_arrays_unchanged():
    """The key-aware jnp functions still take ordinary arrays as before."""
    x = jaxkit.numpy.arange(6).reshape(2, 3)
    assert jaxkit.numpy.stack([x, x], axis=-1).shape == (2, 3, 2)
    assert jaxkit.numpy.where(x > 2, x, 0).tolist() == [[0, 0, 0], [3, 4, 5]]
    assert bool(jaxkit.numpy.array_equal(x, x)) and jaxkit.numpy.size(x) == 6
    assert jaxkit.numpy.asarray([1, 2]).tolist() == [1, 2]


# --------------------------------------------------------------------------------------------
# Key arrays are pytree leaves, as in JAX (chex assert_trees_all_equal with keys, Flax nnx
# Rngs keeping its key object through tree_map), while jit/vmap/grad/scan/cond still take and
# return them
# --------------------------------------------------------------------------------------------


def _tree(m):
    return {"a": m.numpy.ones(2), "k": _keys(m), "s": (m.random.key(7), 3.0)}


TREE_VIEWS = [
    ("num_leaves", lambda m: len(m.tree_util.tree_leaves(_tree(m)))),
    ("structure", lambda m: repr(m.tree_util.tree_structure(_tree(m)))),
    ("leaf_types", lambda m: [str(getattr(x, "dtype", type(x).__name__))
                              for x in m.tree.leaves(_tree(m))]),
    ("paths", lambda m: [m.tree_util.keystr(p)
                         for p, _ in m.tree_util.tree_flatten_with_path(_tree(m))[0]]),
    ("map_shapes", lambda m: m.tree.map(lambda x: getattr(x, "shape", ()), _tree(m))),
    ("all_leaves", lambda m: m.tree_util.all_leaves([m.random.key(0), m.numpy.ones(1)])),
    ("key_is_leaf", lambda m: m.tree_util.treedef_is_leaf(
        m.tree_util.tree_structure(m.random.key(0)))),
]


@pytest.mark.parametrize("name,call", TREE_VIEWS, ids=[r[0] for r in TREE_VIEWS])
def test_key_arrays_are_pytree_leaves(name, call):
    jax = _oracle()
    assert call(jaxkit) == call(jax)


def test_tree_map_keeps_the_key_object():
    k = jaxkit.random.key(0)
    tree = {"k": k, "x": jaxkit.numpy.zeros(1)}
    assert jaxkit.tree_util.tree_map(lambda x: x, tree)["k"] is k
    assert jaxkit.tree_util.tree_leaves(tree)[0] is k


TRANSFORMS = [
    ("jit_identity", lambda m: m.jit(lambda t: t)(_tree(m))["k"]),
    ("jit_split", lambda m: m.jit(lambda k: m.random.split(k, 3))(m.random.key(2))),
    ("jit_key_inside", lambda m: m.jit(lambda s: m.random.key(s))(5)),
    ("vmap_keys", lambda m: m.vmap(lambda k: m.random.fold_in(k, 1))(_keys(m))),
    ("vmap_neg_axis", lambda m: m.vmap(lambda k: k, in_axes=-1, out_axes=-1)(_grid(m))),
    ("vmap_uniform", lambda m: m.vmap(lambda k: m.random.uniform(k))(_keys(m))),
    ("grad_with_key", lambda m: m.grad(lambda x, k: x * m.random.normal(k))(1.0,
                                                                              m.random.key(1))),
    ("value_and_grad_aux", lambda m: m.value_and_grad(
        lambda x, k: (x * 2.0, m.random.split(k)), has_aux=True)(1.0, m.random.key(1))[0][1]),
    ("scan_carry", lambda m: m.lax.scan(lambda c, _: (m.random.split(c)[0], None),
                                        m.random.key(3), None, length=3)[0]),
    ("scan_out", lambda m: m.lax.scan(lambda c, _: (c, c), m.random.key(3), None, length=2)[1]),
    ("cond", lambda m: m.lax.cond(True, lambda k: m.random.split(k)[1], lambda k: k,
                                  m.random.key(4))),
    ("fori_loop", lambda m: m.lax.fori_loop(0, 2, lambda i, k: m.random.fold_in(k, i),
                                            m.random.key(4))),
    ("device_put", lambda m: m.device_put(_tree(m))["k"]),
]


def _comparable(m, out):
    if isinstance(out, (list, tuple)):
        return [_comparable(m, o) for o in out]
    if m.dtypes.issubdtype(out.dtype, m.dtypes.prng_key):
        return ("key", out.shape, np.asarray(m.random.key_data(out)).tolist())
    return ("array", out.shape, np.asarray(out).tolist())


@pytest.mark.parametrize("name,call", TRANSFORMS, ids=[r[0] for r in TRANSFORMS])
def test_transformations_take_and_return_keys(name, call):
    jax = _oracle()
    assert _comparable(jaxkit, call(jaxkit)) == _comparable(jax, call(jax))


def test_key_array_repr_as_jax():
    jax = _oracle()
    for make in (lambda m: m.random.key(0), _keys, lambda m: m.jit(lambda k: k)(_grid(m))):
        assert repr(make(jaxkit)) == repr(make(jax))


def test_transformations_see_keys_as_key_typed_leaves():
    """A key is one pytree leaf, and transformations trace it as a value of dtype key<fry>
    (as JAX does), not as its uint32 data."""
    k = jaxkit.random.split(jaxkit.random.key(0), 2)
    leaves, treedef = jaxkit.tree_util.tree_flatten({"k": k})
    assert len(leaves) == 1 and leaves[0] is k
    assert jaxkit.tree_util.tree_unflatten(treedef, leaves)["k"] is k
    seen = []
    jaxkit.jit(lambda k: seen.append(str(jaxkit.typeof(k))) or k)(k)
    assert seen == ["key<fry>[2]"]
