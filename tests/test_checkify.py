"""checkify through control flow (cond, while_loop, scan, pmap, checkpoint), its automatic
checks and batched errors, each case compared with JAX's messages and values; and
``jax.checking_leaks``."""
import importlib.util

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import lax
from jaxkit.experimental import checkify

HAVE_JAX = importlib.util.find_spec("jax") is not None


def _cases(jax, ck):
    """(name, function, arguments, errors) built from one library's modules."""
    jn, lx = jax.numpy, jax.lax

    def check_then(pred, msg, *args, value):
        ck.check(pred, msg, *args)
        return value

    return [
        ("nan", lambda x: jn.sin(x), (np.float32(np.inf),), ck.all_checks),
        ("nan_only_where_made", lambda x: jn.broadcast_to(x, (3,)), (np.float32(np.nan),),
         ck.all_checks),
        ("float_div", lambda x, y: x / y, (np.float32(1), np.float32(0)), ck.div_checks),
        ("int_rem_unchecked", lambda x, y: x % y, (np.int32(3), np.int32(0)), ck.div_checks),
        ("cond_check", lambda x: lx.cond(x > 0, lambda v: v,
                                         lambda v: check_then(v > -1, "neg {}", v, value=v),
                                         x), (np.float32(-3),), ck.user_checks),
        ("cond_nan", lambda x: lx.cond(x < 0, jn.log, jn.sin, x), (np.float32(-3),),
         ck.nan_checks),
        ("cond_ok", lambda x: lx.cond(x < 0, jn.log, jn.sin, x), (np.float32(3),),
         ck.all_checks),
        ("while_body", lambda x: lx.while_loop(
            lambda c: c < 5, lambda c: check_then(c < 3, "c={}", c, value=c + 1), x),
         (np.int32(0),), ck.user_checks),
        ("while_pred", lambda x: lx.while_loop(
            lambda c: check_then(c < 3, "cond c={}", c, value=c < 5), lambda c: c + 1, x),
         (np.int32(0),), ck.user_checks),
        ("while_div", lambda x: lx.while_loop(
            lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] // (3 - c[0])), (x, x + 7)),
         (np.int32(0),), ck.div_checks),
        ("scan_check", lambda xs: lx.scan(
            lambda c, x: (check_then(x < 2, "x={}", x, value=c + x), c), np.float32(0), xs),
         (np.arange(4, dtype=np.float32),), ck.user_checks),
        ("scan_oob", lambda xs: lx.scan(lambda c, i: (c + jn.ones(3)[i], c), np.float32(0), xs),
         (np.array([0, 1, 7, 9], np.int32),), ck.index_checks),
        ("scan_reverse_nan", lambda xs: lx.scan(lambda c, x: (c + jn.log(x), c), np.float32(0),
                                                xs, reverse=True),
         (np.array([1, -1, 2, -2], np.float32),), ck.nan_checks),
        ("jit_scan", jax.jit(lambda xs: lx.scan(
            lambda c, x: (check_then(x < 2, "x={}", x, value=c + x), c), np.float32(0), xs)),
         (np.arange(4, dtype=np.float32),), ck.user_checks),
        ("scan_of_cond", lambda xs: lx.scan(lambda c, x: (lx.cond(
            x > 1, lambda v: check_then(v < 3, "inner {}", v, value=v), lambda v: v, x) + c,
            c), np.float32(0), xs), (np.arange(5, dtype=np.float32),), ck.user_checks),
        ("vmap_of_scan", jax.vmap(lambda xs: lx.scan(
            lambda c, x: (check_then(x < 2, "x={}", x, value=c + x), c), np.float32(0), xs)),
         (np.arange(8, dtype=np.float32).reshape(2, 4) - 3,), ck.user_checks),
        ("checkpoint", jax.checkpoint(lambda x: check_then(x < 2, "r={}", x, value=jn.sin(x))),
         (np.float32(3),), ck.user_checks),
        ("grad_of_scan", jax.grad(lambda x: lx.scan(lambda c, _: (c * jn.log(x), c),
                                                    np.float32(1), None, length=3)[0]),
         (np.float32(-1),), ck.nan_checks),
        ("pmap", jax.pmap(lambda x: check_then(jn.all(x > 0), "p={}", x, value=x * 2)),
         (-np.ones((1, 2), np.float32),), ck.user_checks),
    ]


CASE_NAMES = [c[0] for c in _cases(jaxkit, checkify)]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_checkify_matches_jax(name):
    jax = pytest.importorskip("jax")
    from jax.experimental import checkify as jax_ck
    _, f, args, errors = next(c for c in _cases(jaxkit, checkify) if c[0] == name)
    _, jf, _, jerrors = next(c for c in _cases(jax, jax_ck) if c[0] == name)
    err, out = checkify.checkify(f, errors=errors)(*map(jnp.asarray, args))
    jerr, jout = jax_ck.checkify(jf, errors=jerrors)(*map(jax.numpy.asarray, args))
    assert err.get() == jerr.get()
    for a, b in zip(jaxkit.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(jout)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))


def test_batched_error_lists_every_index_and_throws_one():
    f = checkify.checkify(lambda x: (checkify.check(x > 0, "x={}", x), x)[1])
    err, _ = jaxkit.vmap(f)(jnp.array([-1.0, 2.0, -3.0]))
    assert err.get() == ("at mapped index 0: x=-1.0 (`check` failed)\n"
                         "at mapped index 2: x=-3.0 (`check` failed)")
    with pytest.raises(checkify.JaxRuntimeError, match=r"^x=-3.0 \(`check` failed\)$"):
        checkify.check_error(err)


def test_failed_check_is_a_value_error():
    err, _ = checkify.checkify(lambda x: checkify.check(x > 0, "bad"))(jnp.float32(-1))
    with pytest.raises(ValueError, match="bad"):
        err.throw()


def test_check_in_an_unsupported_body_says_which():
    @jaxkit.custom_jvp
    def g(x):
        checkify.check(x > 0, "in custom_jvp")
        return x
    g.defjvp(lambda p, t: (g(p[0]), t[0]))
    with pytest.raises(NotImplementedError, match="'custom_jvp_call'"):
        checkify.checkify(g)(jnp.float32(1))


def test_while_loop_predicate_is_checked_before_the_first_step():
    f = checkify.checkify(lambda x: lax.while_loop(
        lambda c: (checkify.check(c < 3, "c={}", c), c < 5)[1], lambda c: c + 1, x))
    err, out = jaxkit.jit(f)(jnp.int32(4))
    assert err.get() == "c=4 (`check` failed)" and int(out) == 5


# --------------------------------------------------------------------------------------------
# jax.checking_leaks
# --------------------------------------------------------------------------------------------


def test_checking_leaks_reports_a_tracer_kept_by_jit_or_vmap():
    saved = []

    def keep(x):
        saved.append(x * 2)
        return x
    with jaxkit.checking_leaks():
        with pytest.raises(Exception, match=r"Leaked trace DynamicJaxprTrace(.|\n)*keep"):
            jaxkit.jit(keep)(1.0)
        with pytest.raises(Exception, match="Leaked trace BatchTrace"):
            jaxkit.vmap(keep)(jnp.ones(2))
    saved.clear()


def test_checking_leaks_passes_clean_transformations():
    def f(x):
        y = lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x)
        return lax.scan(lambda c, v: (c + v, c), 0.0, y)[0]
    with jaxkit.checking_leaks():
        assert jaxkit.config.jax_check_tracer_leaks
        jaxkit.jit(jaxkit.vmap(jaxkit.grad(f)))(jnp.ones((2, 3)))
        jaxkit.pmap(lambda x: x * 2)(jnp.ones((1, 2)))
        checkify.checkify(jaxkit.jit(f))(jnp.ones(3))
    assert not jaxkit.config.jax_check_tracer_leaks


def test_eager_op_on_an_array_sharded_over_one_device():
    mesh = jaxkit.sharding.Mesh(np.array(jaxkit.local_devices()[:1]), ("d",))
    x = jaxkit.device_put(np.ones((1, 2)), jaxkit.sharding.NamedSharding(
        mesh, jaxkit.sharding.PartitionSpec("d")))
    np.testing.assert_allclose(np.asarray(x + x), 2 * np.ones((1, 2)))


def test_init_error_is_the_error_of_no_check():
    # JAX's starting value when errors are combined by hand: nothing failed, a pytree that
    # passes through jit, and check_error of it raises nothing (eagerly or traced)
    err = checkify.init_error
    assert err.get() is None and err.get_exception() is None
    assert jaxkit.jit(lambda e: e)(err).get() is None
    checkify.check_error(err)
    checked = checkify.checkify(lambda x: (checkify.check_error(checkify.init_error), x)[1])
    e, out = checked(jnp.ones(2))
    assert e.get() is None and np.asarray(out).tolist() == [1.0, 1.0]


def test_error_flattens_through_its_methods_as_jax():
    """``Error.tree_flatten``/``tree_unflatten`` round-trip it (JAX's class has them)."""
    err = checkify.checkify(lambda x: checkify.check(x > 0, "bad {}", x))(jnp.float32(-1))[0]
    children, aux = err.tree_flatten()
    again = type(err).tree_unflatten(aux, children)
    assert str(again) == str(err) == "Error(bad -1.0 (`check` failed))"
