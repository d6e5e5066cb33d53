"""Concurrency and interruption: jit and eager calls from 8 threads at once give NumPy's answers
and never deadlock; a KeyboardInterrupt during tracing, compiling or a running computation
leaves jaxkit usable (the next call works and the caches hold nothing half-made).

Threads are joined with timeouts: a deadlock fails the test instead of hanging the run."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.runtime import compile_cache

THREADS = 8
TIMEOUT_S = 300


def run_threads(target, n=THREADS):
    """Start ``n`` threads on ``target(i)`` behind a barrier (so they really overlap), join
    them with a timeout, and re-raise the first error any of them hit."""
    barrier = threading.Barrier(n)
    errors = []

    def body(i):
        try:
            barrier.wait(timeout=TIMEOUT_S)
            target(i)
        except BaseException as e:  # noqa: BLE001  (reported to the main thread)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"threads did not finish in {TIMEOUT_S}s (deadlock?): {stuck}"
    if errors:
        raise errors[0]


def test_same_jitted_function_from_8_threads_with_concurrent_cache_misses():
    # A fresh function and, per round, a new shape: all eight threads miss the cache together.
    f = jaxkit.jit(lambda x, y: jnp.sin(x) * y + jnp.sum(x))

    def work(i):
        for n in range(1, 5):
            x = np.arange(n * 3, dtype=np.float32).reshape(n, 3) + i
            y = np.float32(i)
            np.testing.assert_allclose(f(x, y), np.sin(x) * y + x.sum(), rtol=1e-5, atol=1e-5)

    run_threads(work)


def test_different_functions_and_eager_ops_from_8_threads():
    fns = [
        (jaxkit.jit(lambda x: jnp.cumsum(x * 2)), lambda x: np.cumsum(x * 2)),
        (jaxkit.jit(lambda x: jnp.exp(-x) @ x.T), lambda x: np.exp(-x) @ x.T),
        (lambda x: jnp.max(x, axis=0) - jnp.min(x), lambda x: x.max(0) - x.min()),  # eager
        (jaxkit.jit(jaxkit.grad(lambda x: jnp.sum(jnp.tanh(x)))),
         lambda x: 1 - np.tanh(x) ** 2),
        (jaxkit.vmap(lambda r: jnp.dot(r, r)), lambda x: (x * x).sum(1)),
        (lambda x: jnp.sort(x, axis=None)[::-1], lambda x: np.sort(x, axis=None)[::-1]),
    ]

    def work(i):
        rng = np.random.default_rng(i)
        for k in range(12):
            fn, ref = fns[(i + k) % len(fns)]
            x = rng.standard_normal((2 + k % 3, 3)).astype(np.float32)
            np.testing.assert_allclose(fn(x), ref(x), rtol=2e-5, atol=2e-5)

    run_threads(work)


def test_random_and_eager_arithmetic_from_8_threads():
    key = jaxkit.random.PRNGKey(0)
    expected = np.asarray(jaxkit.random.uniform(key, (5,)))

    def work(i):
        for _ in range(5):
            np.testing.assert_array_equal(jaxkit.random.uniform(key, (5,)), expected)
            np.testing.assert_array_equal(jnp.arange(4) + i, np.arange(4) + i)

    run_threads(work)


# ---- KeyboardInterrupt ----------------------------------------------------------------------
def test_interrupt_during_tracing_leaves_function_usable():
    calls = {"interrupt": True}

    def f(x):
        if calls.pop("interrupt", False):
            raise KeyboardInterrupt  # as if Ctrl-C landed while Python traced f
        return jnp.sin(x) + 1

    jf = jaxkit.jit(f)
    x = np.arange(3, dtype=np.float32)
    with pytest.raises(KeyboardInterrupt):
        jf(x)
    np.testing.assert_allclose(jf(x), np.sin(x) + 1, rtol=1e-6)
    np.testing.assert_allclose(jf(x + 1), np.sin(x + 1) + 1, rtol=1e-6)
    # The interrupted trace must not have left a tracer in a trace context: eager works too.
    np.testing.assert_allclose(jnp.cos(x), np.cos(x), rtol=1e-6)


def test_interrupt_during_compile_caches_nothing(monkeypatch):
    real = compile_cache.compile_and_load
    state = {"interrupt": True}

    def interrupted(*args, **kwargs):
        if state.pop("interrupt", False):
            raise KeyboardInterrupt  # Ctrl-C during XLA compilation
        return real(*args, **kwargs)

    monkeypatch.setattr(compile_cache, "compile_and_load", interrupted)
    jf = jaxkit.jit(lambda x: x * 3 - 1)
    x = np.arange(4, dtype=np.float32) + 0.25  # shapes/values no other test compiles
    with pytest.raises(KeyboardInterrupt):
        jf(x)
    np.testing.assert_allclose(jf(x), x * 3 - 1)
    # Eager primitives compile through the same entry: an interrupted one is retried too.
    state["interrupt"] = True
    y = np.arange(7, dtype=np.int16)
    with pytest.raises(KeyboardInterrupt):
        jnp.bitwise_xor(y, np.int16(5))
    np.testing.assert_array_equal(jnp.bitwise_xor(y, np.int16(5)), y ^ 5)


def test_interrupt_during_computation_leaves_jaxkit_usable():
    # A host callback that raises KeyboardInterrupt stands for Ctrl-C while the program runs.
    state = {"interrupt": True}

    def host(x):
        if state.pop("interrupt", False):
            raise KeyboardInterrupt
        return np.asarray(x) * 2

    def f(x):
        y = jaxkit.pure_callback(host, jaxkit.ShapeDtypeStruct(x.shape, x.dtype), x)
        return y + 1

    jf = jaxkit.jit(f)
    x = np.arange(5, dtype=np.float32)
    with pytest.raises(BaseException) as info:  # jaxlib may wrap the interrupt in its error
        np.asarray(jf(x))
    assert isinstance(info.value, (KeyboardInterrupt, RuntimeError)), info.value
    np.testing.assert_allclose(jf(x), x * 2 + 1)
    np.testing.assert_allclose(jnp.sum(x), x.sum())


def test_interrupt_while_other_threads_compile():
    # One thread is interrupted in its trace while seven others trace and compile the same
    # function: the others finish correctly and the function works afterwards.
    fired = threading.Event()

    def f(x):
        if threading.current_thread().name == "victim" and not fired.is_set():
            fired.set()
            raise KeyboardInterrupt
        return jnp.tanh(x) * 2

    jf = jaxkit.jit(f)
    x = np.linspace(-1, 1, 6, dtype=np.float32) + 0.125
    results, errors = [], []

    def body():
        try:
            results.append(np.asarray(jf(x)))
        except KeyboardInterrupt:
            errors.append("interrupted")

    threads = [threading.Thread(target=body, name="victim" if i == 0 else f"t{i}", daemon=True)
               for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert errors == ["interrupted"] and len(results) == THREADS - 1
    for r in results + [np.asarray(jf(x))]:
        np.testing.assert_allclose(r, np.tanh(x) * 2, rtol=1e-6)
