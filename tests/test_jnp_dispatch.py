"""jnp functions are ``jit(..., inline=True)``: cached dispatch eagerly, traced in place under a
transformation; jit's fast path for Arrays, Python scalars, NumPy values and static args."""
import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit._config import config
from jaxkit.transforms.jit import jit_p


def _prims(jaxpr) -> list[str]:
    return [e.primitive.name for e in jaxpr.jaxpr.eqns]


def test_inline_jit_leaves_no_jit_equation():
    x = np.ones((3, 4), np.float32)
    f = jaxkit.jit(lambda a: a * 2.0, inline=True)
    assert _prims(jaxkit.make_jaxpr(f)(x)) == ["mul"]
    assert _prims(jaxkit.make_jaxpr(jaxkit.jit(lambda a: a * 2.0))(x)) == [jit_p.name]
    closed = jaxkit.make_jaxpr(lambda a: jnp.sum(jnp.dot(a, a.T), axis=0))(x)
    assert jit_p.name not in _prims(closed)


def test_eager_calls_reuse_one_compilation_per_signature():
    x = jnp.arange(6.0).reshape(2, 3)
    jnp.sum.clear_cache()  # earlier tests may have seen either signature
    jnp.sum(x, axis=0)
    n = jnp.sum._cache_size()
    for _ in range(3):
        np.testing.assert_allclose(jnp.sum(x, axis=0), [3.0, 5.0, 7.0])
        np.testing.assert_allclose(x.sum(axis=1), [3.0, 12.0])
    assert jnp.sum._cache_size() == n + 1  # axis=1 is a second static value, nothing else


@pytest.mark.parametrize("other", [2.0, 2, True, np.float32(2.0), np.full(3, 2.0, np.float32)])
def test_scalar_and_numpy_operands(other):
    x = jnp.arange(3.0)
    for _ in range(2):  # miss, then fast path
        got = jnp.multiply(x, other)
        want = np.multiply(np.arange(3.0, dtype=np.float32), other)
        np.testing.assert_allclose(got, want)
        assert got.dtype == np.float32


def test_signed_zero_and_nan_scalars():
    x = jnp.ones(2)
    assert np.all(np.isneginf(np.asarray(x / -0.0)))
    assert np.all(np.isposinf(np.asarray(x / 0.0)))
    assert np.all(np.isnan(np.asarray(x * float("nan"))))


def test_arguments_jit_cannot_take_run_the_function_directly():
    with pytest.raises(TypeError, match="sum requires ndarray or scalar arguments"):
        jnp.sum([1.0, 2.0])
    x = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(jnp.sum(x, axis=[0, 1]), 15.0)  # unhashable static value


def test_array_iteration():
    rows = list(jnp.arange(250.0).reshape(125, 2))
    assert len(rows) == 125 and float(rows[101][1]) == 203.0
    assert [float(r) for r in jnp.arange(3.0)] == [0.0, 1.0, 2.0]


def test_disable_jit_bypasses_the_fast_path():
    calls = []

    def f(a):
        calls.append(1)
        return a + 1

    jf, x = jaxkit.jit(f), jnp.arange(3.0)
    jf(x)
    jf(x)
    assert len(calls) == 1
    config.update("jax_disable_jit", True)
    try:
        jf(x)
        np.testing.assert_allclose(jnp.sin(x), np.sin(np.arange(3.0)), rtol=1e-6)
    finally:
        config.update("jax_disable_jit", False)
    assert len(calls) == 2


@pytest.mark.parametrize("nargs", [0, 1, 2, 3, 4])
def test_fast_path_for_every_argument_count(nargs):
    f = jaxkit.jit(lambda *xs: sum(xs, 1.0))
    args = [jnp.full((2,), float(i)) for i in range(nargs)]
    want = 1.0 + sum(range(nargs))
    for _ in range(3):  # the first call compiles, later ones take the fast path
        np.testing.assert_allclose(f(*args), want)
    assert f._cache_size() == 1


@pytest.mark.parametrize("fn", [
    lambda a: (a, a + 1),                         # two outputs
    lambda a: a + np.arange(3, dtype=np.float32),  # a closed-over constant
    lambda a: {"y": a * 2},                       # a pytree output
], ids=["two-outputs", "constant", "dict-output"])
def test_fast_path_entries_beyond_the_inline_one(fn):
    f, x = jaxkit.jit(fn), jnp.arange(3.0)
    want = jaxkit.tree_util.tree_map(np.asarray, fn(x))
    for _ in range(3):
        got = f(x)
        assert jaxkit.tree_util.tree_structure(got) == jaxkit.tree_util.tree_structure(want)
        for g, w in zip(jaxkit.tree_util.tree_leaves(got), jaxkit.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(g, w)
    assert f._cache_size() == 1


def test_jitted_function_api_and_lifetime():
    import gc
    import weakref

    from jaxkit.transforms.jit import JitFunction, jit_object

    def scale(x, k=2.0):
        """Scale x."""
        return x * k

    f = jaxkit.jit(scale, static_argnames="k")
    assert (f.__name__, f.__doc__, f.__wrapped__) == ("scale", "Scale x.", scale)
    assert isinstance(jit_object(f), JitFunction) and jit_object(scale) is None
    x = jnp.arange(3.0)
    np.testing.assert_allclose(f(x, k=3.0), [0.0, 3.0, 6.0])
    assert "stablehlo.multiply" in f.lower(x).as_text()
    assert f._cache_size() == 1 and len(f.cache_events) == 1
    f.clear_cache()
    assert f._cache_size() == 0

    class Scaler:
        @jaxkit.jit
        def twice(self_, x):  # noqa: N805 - jit sees the instance as its first argument
            return x * 2

    with pytest.raises(TypeError, match="Error interpreting argument to .* at path self_"):
        Scaler().twice(x)  # methods bind like functions; the instance is not an array
    ref = weakref.ref(jit_object(f))
    del f
    gc.collect()
    assert ref() is None  # dropping the function frees its caches


def test_another_thread_is_not_inside_this_threads_trace():
    import threading

    inner = jaxkit.jit(lambda a: a + 1)
    x = jnp.arange(3.0)
    inner(x)
    seen = []

    def outer(a):
        worker = threading.Thread(target=lambda: seen.append(inner(x)))
        worker.start()
        worker.join()
        return inner(a)

    jaxpr = jaxkit.make_jaxpr(outer)(x)
    assert _prims(jaxpr) == [jit_p.name]  # staged here ...
    assert type(seen[0]) is jaxkit.runtime.array.Array  # ... run eagerly in the other thread
    np.testing.assert_allclose(seen[0], [1.0, 2.0, 3.0])


def test_deleted_array_is_rejected_and_host_copy_is_dropped():
    x = jnp.arange(3.0) + 1
    np.testing.assert_allclose(np.asarray(x), [1.0, 2.0, 3.0])  # caches the host copy
    x.delete()
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[3\]"):
        np.asarray(x)


def test_small_closed_over_constants_are_baked_in_large_ones_passed():
    from jaxkit.interpreters.dispatch import _INLINE_CONST_MAX_SIZE
    from jaxkit.transforms.jit import jit_object

    small = jnp.arange(12.0).reshape(3, 4)
    large = jnp.ones((_INLINE_CONST_MAX_SIZE + 1,))
    f = jaxkit.jit(lambda x: x @ small.T + large[:3].sum())
    x = np.ones((2, 4), np.float32)
    text = f.lower(x).as_text()
    assert "stablehlo.constant dense<[[0.0" in text  # the small matrix, inlined as in JAX
    assert f"%arg0: tensor<{large.size}xf32>" in text  # the large vector is a parameter
    np.testing.assert_allclose(f(x), np.ones((2, 4)) @ np.arange(12.0).reshape(3, 4).T + 3)
    (entry,) = jit_object(f)._cache.values()
    assert len(entry.program.const_bufs) == 1


def test_baked_constants_keep_their_values_and_dtypes():
    mask = np.array([True, False, True])  # a bit-packed byte would read as a splat of True
    ints = np.array([1, 2, 3], dtype=np.int64)  # int32 in a program without x64
    f = jaxkit.jit(lambda x: jnp.where(mask, x, 0.0) + ints)
    np.testing.assert_array_equal(f(jnp.ones(3)), [2.0, 2.0, 4.0])
    g = jaxkit.jit(lambda x: f(x) * 2)  # the inner jit's constants, lowered inline
    np.testing.assert_array_equal(g(jnp.ones(3)), [4.0, 4.0, 8.0])
    np.testing.assert_array_equal(jaxkit.jit(lambda x: x & mask)(np.ones(3, bool)),
                                  [True, False, True])


@pytest.mark.parametrize("call", [
    lambda: jaxkit.jit(lambda x: jnp.dot(x, jnp.ones((4, 4))))(jnp.ones(3)),
    lambda: jaxkit.jit(lambda x, y: jnp.dot(x, y))(jnp.ones(3), jnp.ones((4, 4))),
    lambda: jaxkit.jit(lambda x, n: jnp.dot(x, jnp.ones((n, n))), static_argnums=1)(jnp.ones(3), 4),
    lambda: jnp.dot(jnp.ones(3), jnp.ones((4, 4))),
], ids=["jit-1-arg", "jit-2-args", "jit-static", "eager"])
def test_errors_are_not_chained_to_cache_misses(call):
    """A cache miss is not an error: the user's error must not show "During handling of the
    above exception" with an internal KeyError."""
    with pytest.raises(TypeError, match="contracting dimensions") as info:
        call()
    assert info.value.__context__ is None and info.value.__cause__ is None


# ---- static keywords on the direct fast path ---------------------------------------------------
# Calls of one or two Arrays with static keywords (``jnp.dot(a, b, precision=None)``,
# ``x.mean(axis=0)``) run a direct plan inline; each record is called three times (the first
# compiles, the later ones take the fast path) and compared with the JAX oracle.
_M = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
_V = _M[0].copy()
_KEYWORD_RECORDS = [
    ("dot", lambda np_, m, v: np_.dot(m, v), (_M, _V)),
    ("dot-precision", lambda np_, m, v: np_.dot(m, v, precision="highest"), (_M, _V)),
    ("dot-preferred", lambda np_, m, v: np_.dot(m, v, preferred_element_type=np.float32),
     (_M, _V)),
    ("mean-axis0", lambda np_, m: m.mean(axis=0), (_M,)),
    ("mean-axis1-keepdims", lambda np_, m: m.mean(axis=1, keepdims=True), (_M,)),
    ("sum-dtype", lambda np_, m: np_.sum(m, axis=0, dtype=np.int32), (_M * 10,)),
    ("argmax-keepdims", lambda np_, m: np_.argmax(m, axis=1, keepdims=True), (_M,)),
]


@pytest.mark.parametrize("record", _KEYWORD_RECORDS, ids=[r[0] for r in _KEYWORD_RECORDS])
def test_static_keywords_on_the_direct_path_match_jax(record):
    jax = pytest.importorskip("jax")
    _, fn, host = record
    want = fn(jax.numpy, *[jax.device_put(h) for h in host])
    args = [jaxkit.device_put(h) for h in host]
    for _ in range(3):
        got = fn(jnp, *args)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.weak_type == want.weak_type
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_static_keywords_select_their_own_plan():
    calls = []

    def f(x, y=None, *, scale, shift=0.0):
        calls.append(scale)
        return x * scale + shift if y is None else x * scale + y

    jf = jaxkit.jit(f, static_argnames=("scale", "shift"))
    x, y = jnp.arange(3.0), jnp.ones(3)
    for _ in range(3):
        np.testing.assert_allclose(jf(x, scale=2.0), [0.0, 2.0, 4.0])
        np.testing.assert_allclose(jf(x, scale=3.0), [0.0, 3.0, 6.0])
        np.testing.assert_allclose(jf(x, y, scale=2.0, shift=1.0), [1.0, 3.0, 5.0])
        np.testing.assert_allclose(jf(x, y, shift=1.0, scale=2.0), [1.0, 3.0, 5.0])
    assert calls == [2.0, 3.0, 2.0]  # keyword order is not part of the signature
    # One plan per keyword pattern, each run inline by the dispatcher (with several devices
    # each is also found under its key extended with its placement)
    plans = {id(plan): plan for plan in jf._jit._fast.values()}
    assert len(plans) == 4 and all(plan.direct for plan in plans.values())


def test_direct_plans_with_keywords_keep_weak_types_and_scalars():
    jf = jaxkit.jit(lambda x, *, k: x * k, static_argnames="k")
    for _ in range(3):
        weak = jf(2.0, k=3)  # a Python scalar argument: a weakly typed result, as in JAX
        assert weak.weak_type and weak.dtype == np.float32 and float(weak) == 6.0
        strong = jf(np.float32(2.0), k=3)
        assert not strong.weak_type and float(strong) == 6.0
        np.testing.assert_allclose(jf(jnp.arange(2.0), k=3), [0.0, 3.0])


def test_direct_plans_with_keywords_reject_deleted_and_donated_arrays():
    jf = jaxkit.jit(lambda x, *, k: x + k, static_argnames="k")
    x = jnp.arange(3.0)
    np.testing.assert_allclose(jf(x, k=1.0), [1.0, 2.0, 3.0])  # compiles, makes the plan
    x.delete()
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[3\]"):
        jf(x, k=1.0)
    donating = jaxkit.jit(lambda x, *, k: x + k, static_argnames="k", donate_argnums=0)
    for _ in range(3):
        a = jnp.arange(3.0) + 0
        np.testing.assert_allclose(donating(a, k=1.0), [1.0, 2.0, 3.0])
        assert a.is_deleted()
        with pytest.raises(RuntimeError, match="Array has been deleted"):
            donating(a, k=1.0)


def test_keywords_the_fast_path_cannot_key_take_the_general_path():
    # An unhashable static value falls back to a plain call (jnp), a traced keyword to the
    # general jit path; both stay correct on repeated calls.
    m = jnp.asarray(_M)
    for _ in range(3):
        np.testing.assert_allclose(jnp.sum(m, axis=[0, 1]), _M.sum(), rtol=1e-5)
        np.testing.assert_allclose(jaxkit.jit(lambda x, y: x + y)(m, y=m), 2 * _M)
