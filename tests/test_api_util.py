"""``jax.api_util`` against the JAX oracle: each record runs the same code on both and compares
what it prints (results, tree structures, argument names, errors)."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit
import jaxkit.extend.linear_util

jax = pytest.importorskip("jax")
pytest.importorskip("jax.api_util")  # makes jax.api_util and jax.extend.linear_util attributes
pytest.importorskip("jax.extend.linear_util")


def _err(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  (the error is the result compared)
        return type(e).__name__, str(e).split(" for function")[0]


def _argnums_partial(J):
    au, lu = J.api_util, J.extend.linear_util
    f = lu.wrap_init(lambda x, y, z: x * y + z,
                     debug_info=au.debug_info("t", lambda x, y, z: 0, (1, 2, 3), {}))
    g, dyn = au.argnums_partial(f, (0, -1), (1.0, 2.0, 3.0))
    return dyn, g.call_wrapped(*dyn), _err(lambda: au.argnums_partial(f, 0, (1.0, [2], 3.0)))


def _flatten_fun(J):
    au, lu = J.api_util, J.extend.linear_util
    tree = J.tree_util.tree_structure(((1, 2), {"k": 3}))
    f = lu.wrap_init(lambda a, b, k: {"s": a + b, "k": [k]},
                     debug_info=au.debug_info("t", lambda a, b, k: 0, (1, 2), {"k": 3}))
    ff, out_tree = au.flatten_fun(f, tree)
    flat = ff.call_wrapped(1, 2, 3)
    g = lu.wrap_init(lambda a, b: (a, b), debug_info=au.debug_info("t", lambda a, b: 0,
                                                                     (1, 2), {}))
    gg, g_tree = au.flatten_fun_nokwargs(g, J.tree_util.tree_structure((1, (2, 3))))
    return flat, str(out_tree()), gg.call_wrapped(1, 2, 3), str(g_tree())


RECORDS = [
    ("rebase_donate_argnums", lambda J: [J.api_util.rebase_donate_argnums((3, 4), (0, 1)),
                                         J.api_util.rebase_donate_argnums((2, 0), ()),
                                         _err(lambda: J.api_util.rebase_donate_argnums(
                                             (1,), (1,)))[0]]),
    ("safe_map", lambda J: [J.api_util.safe_map(lambda a, b: a + b, [1, 2], (3, 4)),
                            _err(lambda: J.api_util.safe_map(lambda a, b: a, [1, 2], [1])),
                            _err(lambda: J.api_util.safe_map(lambda a, b: a, [1], [1, 2]))]),
    ("shaped_abstractify", lambda J: [
        str(J.api_util.shaped_abstractify(x)) for x in
        (J.numpy.ones((2,), "int32"), 1.0, True, J.ShapeDtypeStruct((3,), "float32"))]),
    ("donation_vector", lambda J: J.api_util.donation_vector(
        (1,), ("a",), J.tree_util.tree_structure(((1, (2, 3)), {"b": 4, "a": [5, 6]})))),
    ("flatten_axes", lambda J: [
        J.api_util.flatten_axes("vmap in_axes", J.tree_util.tree_structure((1, (2, 3))),
                                (0, None)),
        J.api_util.flatten_axes("vmap in_axes", J.tree_util.tree_structure(((1, 2), 3)),
                                ((1, 0), None)),
        _err(lambda: J.api_util.flatten_axes("vmap in_axes",
                                             J.tree_util.tree_structure((1, 2)),
                                             (0, 1, 2)))[0]]),
    ("debug_info", lambda J: [
        (d.traced_for, d.arg_names) for d in (
            J.api_util.debug_info("jit", lambda x, y: 0, (1, {"k": 2}), {}),
            J.api_util.debug_info("jit", lambda x, y, *, z: 0, (1, 2), {"z": [3]},
                                  static_argnums=(0,)))]),
    ("argnums_partial", _argnums_partial),
    ("flatten_fun", _flatten_fun),
]


@pytest.mark.parametrize("name,run", RECORDS, ids=[r[0] for r in RECORDS])
def test_api_util_matches_jax(name, run):
    assert repr(run(jaxkit)) == repr(run(jax))


def test_api_util_names_match_jax():
    assert sorted(jaxkit.api_util.__all__) == sorted(
        n for n in dir(jax.api_util) if not n.startswith("_"))


@pytest.mark.parametrize("argnums,has_aux,jitted", [((0, 1), False, True), (1, True, False)])
def test_fwd_and_bwd_matches_vjp_of_jax(argnums, has_aux, jitted):
    def run(J):
        jnp = J.numpy
        x = w = ct = jnp.arange(16.0).reshape(4, 4) / 10

        def f(x, w):
            y = jnp.sin(x @ w)
            return (y, 3) if has_aux else y

        fwd, bwd = J.fwd_and_bwd(f, argnums=argnums, has_aux=has_aux, jitted=jitted)
        results = []
        for _ in range(2):
            y, res, *aux = fwd(x, w)
            results.append((y, aux, bwd(res, ct)))
        return J.tree_util.tree_map(lambda a: a.tolist() if hasattr(a, "tolist") else a,
                                    results), bwd

    got, bwd = run(jaxkit)
    want, _ = run(jax)
    assert repr(got) == repr(want)
    if jitted:  # the backward pass is compiled once and reused
        assert bwd._cache_size() == 1


def test_no_tracing_refuses_a_jit_cache_miss_as_jax():
    @jaxkit.jit
    def f(x):
        return x * 2

    f(1.0)
    with jaxkit.no_tracing(True):
        assert float(f(2.0)) == 4.0  # cached: no tracing needed
        with pytest.raises(RuntimeError, match="re-tracing function f at .* for `jit`, but "
                                               "'no_tracing' is set"):
            f(np.ones(2, np.float32))
    assert jaxkit.no_tracing.value is False
    assert float(f(np.float32(3))) == 6.0


def test_make_user_context_retraces_jit_when_its_value_changes_as_jax():
    def run(J):
        traces = []
        ctx = J.make_user_context(default_value=None)

        @J.jit
        def f(x):
            traces.append(ctx.value)
            return x * 2

        f(1.0)
        with ctx(1):
            f(1.0)
            f(1.0)  # same value: cached
            inside = ctx.value
        with ctx(2):
            f(1.0)
        return traces, inside, ctx.value, ctx.get_global()

    assert run(jaxkit) == run(jax) == ([None, 1, 2], 1, None, None)


def _f16_reductions(J):
    x = J.numpy.ones((3, 1), J.numpy.float16)
    out = [J.lax.reduce_sum(x, (0,)).tolist()]
    with J.allow_f16_reductions(False):
        out.append(J.lax.reduce_sum(x, (1,)).tolist())  # over a length-1 axis: allowed
        for f in (lambda: J.lax.reduce_sum(x, (0,)),
                  lambda: J.jit(lambda y: J.lax.reduce_sum(y, (0,)))(x)):
            out.append(_err(f))
    out.append((J.lax.reduce_sum(x, (0,)).tolist(), J.allow_f16_reductions.value))
    return out


def test_allow_f16_reductions_as_jax():
    assert _f16_reductions(jaxkit) == _f16_reductions(jax)
