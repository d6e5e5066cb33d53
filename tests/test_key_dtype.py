"""Typed keys as values of the extended dtype ``key<fry>``, against the JAX 0.10.2 oracle: the
jaxprs of the random primitives and of structural primitives on keys print as JAX's (golden
text from the oracle), and keys flow through jit, vmap, scan, ``.at[]`` and grad with JAX's
results.

Each record is ``(name, make)``: ``make(m)`` gives ``(function, args)`` for module ``m``
(jaxkit or jax); the test compares ``str(m.make_jaxpr(function)(*args))``.
"""
import numpy as np
import pytest

import jaxkit


def _oracle():
    return pytest.importorskip("jax")


def _split2(m):
    return m.random.split(m.random.key(0))


JAXPRS = [
    ("split", lambda m: (lambda k: m.random.split(k), (m.random.key(0),))),
    ("split_raw", lambda m: (lambda k: m.random.split(k), (m.random.PRNGKey(0),))),
    ("split_shape", lambda m: (lambda k: m.random.split(k, (2, 3)), (m.random.key(0),))),
    ("normal", lambda m: (lambda k: m.random.normal(k, (3,)), (m.random.key(0),))),
    ("normal_raw", lambda m: (lambda k: m.random.normal(k, (3,)), (m.random.PRNGKey(0),))),
    ("index", lambda m: (lambda k: k[0], (_split2(m),))),
    ("at_set", lambda m: (lambda ks, k: ks.at[0].set(k),
                          (m.random.split(m.random.key(0), 3), m.random.key(1)))),
    ("vmap_normal", lambda m: (m.vmap(m.random.normal), (m.random.split(m.random.key(0), 3),))),
    ("scan_carry", lambda m: (lambda k: m.lax.scan(
        lambda c, _: (m.random.split(c)[0], None), k, None, length=2), (m.random.key(0),))),
    ("grad", lambda m: (m.grad(lambda x, k: (x * m.random.normal(k, (2,))).sum()),
                        (1.0, m.random.key(0)))),
    ("fold_in", lambda m: (lambda k: m.random.fold_in(k, 3), (m.random.key(0),))),
    ("key_data", lambda m: (m.random.key_data, (m.random.key(0),))),
    ("wrap_key_data", lambda m: (m.random.wrap_key_data, (m.random.PRNGKey(0),))),
    ("key_seed", lambda m: (m.random.key, (0,))),
    ("prngkey_seed", lambda m: (m.random.PRNGKey, (0,))),
    ("bits", lambda m: (lambda k: m.random.bits(k, (2,)), (m.random.key(0),))),
    ("select", lambda m: (lambda p, ks: m.lax.select(p, ks, ks[::-1]),
                          (np.array([True, False]), _split2(m)))),
    ("broadcast_reshape", lambda m: (lambda k: m.lax.broadcast(k, (2, 3)).reshape(6),
                                     (m.random.key(0),))),
    ("cond", lambda m: (lambda p, k: m.lax.cond(p, lambda k: k, lambda k: m.random.split(k)[1], k),
                        (True, m.random.key(0)))),
    # jnp's structural functions bind the ordinary primitives on key<fry> operands
    ("jnp_stack", lambda m: (lambda k: m.numpy.stack([k, k]), (m.random.key(0),))),
    ("jnp_concatenate", lambda m: (lambda ks: m.numpy.concatenate([ks, ks[:1]]), (_split2(m),))),
    ("jnp_where", lambda m: (lambda p, ks: m.numpy.where(p, ks, ks[::-1]),
                             (np.array([True, False]), _split2(m)))),
    ("jnp_where_scalar", lambda m: (lambda p, a, b: m.numpy.where(p, a, b),
                                    (True, m.random.key(0), m.random.key(1)))),
    ("jnp_reshape_ravel", lambda m: (lambda ks: m.numpy.ravel(m.numpy.reshape(ks, (2, 1))),
                                     (_split2(m),))),
    ("jnp_expand_squeeze", lambda m: (lambda ks: m.numpy.squeeze(m.numpy.expand_dims(ks, -1)),
                                      (_split2(m),))),
    ("jnp_broadcast_to", lambda m: (lambda ks: m.numpy.broadcast_to(ks, (3, 2)), (_split2(m),))),
    ("jnp_transpose", lambda m: (lambda ks: m.numpy.swapaxes(ks.reshape(1, 2), 0, 1),
                                 (_split2(m),))),
    ("jnp_repeat_copy", lambda m: (lambda ks: m.numpy.copy(m.numpy.repeat(ks, 2)),
                                   (_split2(m),))),
    ("jnp_array_of_keys", lambda m: (lambda k: m.numpy.array([k, k]), (m.random.key(0),))),
    ("jnp_zeros_like", lambda m: (m.numpy.zeros_like, (_split2(m),))),
    ("index_array", lambda m: (lambda ks, i: ks[i], (_split2(m), np.array([1, 0])))),
    # keys compare whole (eq/ne on key<fry>); array_equal reduces that, isfinite is all True
    ("eq_ne", lambda m: (lambda a, b: (a == b, a != b[0]), (_split2(m), _split2(m)[::-1]))),
    ("array_equal", lambda m: (m.numpy.array_equal, (_split2(m), _split2(m)))),
    ("isfinite", lambda m: (m.numpy.isfinite, (_split2(m),))),
]


@pytest.mark.parametrize("name,make", JAXPRS, ids=[r[0] for r in JAXPRS])
def test_jaxpr_prints_as_jax(name, make):
    jax = _oracle()
    f, args = make(jaxkit)
    jf, jargs = make(jax)
    assert str(jaxkit.make_jaxpr(f)(*args)) == str(jax.make_jaxpr(jf)(*jargs))


# Values: each call runs in both modules; key results compare by their data and repr.
VALUES = [
    ("jit_index", lambda m: m.jit(lambda k: k[0])(_split2(m))),
    ("at_set", lambda m: m.random.split(m.random.key(0), 3).at[1].set(m.random.key(7))),
    ("vmap_normal", lambda m: m.vmap(m.random.normal)(m.random.split(m.random.key(0), 3))),
    ("vmap_split", lambda m: m.vmap(m.random.split)(m.random.split(m.random.key(0), 3))),
    ("vmap_fold_in", lambda m: m.vmap(m.random.fold_in, (None, 0))(
        m.random.key(0), np.arange(3, dtype=np.uint32))),
    ("scan_carry", lambda m: m.lax.scan(
        lambda c, _: (m.random.split(c)[0], m.random.bits(c)), m.random.key(0), None,
        length=3)),
    ("while_carry", lambda m: m.lax.fori_loop(
        0, 3, lambda i, k: m.random.fold_in(k, i), m.random.key(0))),
    ("jit_split_normal", lambda m: m.jit(lambda k: m.random.normal(m.random.split(k)[1], (2,)))(
        m.random.key(3))),
    ("grad_through_key", lambda m: m.grad(lambda x, k: (x * m.random.normal(k, (2,))).sum())(
        2.0, m.random.key(0))),
    ("key_cotangent", lambda m: m.grad(lambda x, k: x * m.random.uniform(k), (0, 1),
                                       allow_int=True)(2.0, m.random.key(0))[1]),
    ("vjp_key", lambda m: m.vjp(lambda k, x: x * m.random.uniform(k), m.random.key(0),
                                1.0)[1](1.0)[0]),
    ("typeof", lambda m: str(m.typeof(m.random.split(m.random.key(0))))),
    ("eval_shape", lambda m: repr(m.eval_shape(m.random.split, m.random.key(0)))),
    ("jit_eq_ne", lambda m: m.jit(lambda a, b: (a == b, a != b[1], m.numpy.isclose(a, b)))(
        _split2(m), _split2(m)[::-1])),
    ("vmap_eq", lambda m: m.vmap(lambda a, b: a == b, (0, None))(_split2(m), _split2(m)[1])),
    ("jit_take_where", lambda m: m.jit(lambda ks, p: (m.numpy.take(ks, np.array([1, 5])),
                                                     m.numpy.where(p, ks, ks[0])))(
        _split2(m), np.array([False, True]))),
]


def _comparable(m, out):
    def leaf(x):
        if isinstance(x, str):
            return x
        if getattr(x, "dtype", None) == m.random.key(0).dtype:
            return ("key", repr(x), np.asarray(m.random.key_data(x)).tolist())
        x = np.asarray(x)
        return (str(x.dtype), x.shape, x.tolist())
    return [leaf(x) for x in m.tree_util.tree_leaves(out)]


@pytest.mark.parametrize("name,call", VALUES, ids=[r[0] for r in VALUES])
def test_values_as_jax(name, call):
    jax = _oracle()
    assert _comparable(jaxkit, call(jaxkit)) == _comparable(jax, call(jax))




def test_random_primitives_refuse_raw_data():
    with pytest.raises(TypeError, match="random_split takes a key array"):
        jaxkit.random.key_prims.random_split_p.bind(jaxkit.random.PRNGKey(0), shape=(2,))
