"""The jit caches of all functions together hold a bounded number of compiled entries (as JAX's
jit caches do): a process compiling program after program keeps its memory maps bounded,
instead of running into the kernel's limit (``vm.max_map_count``), where XLA's CPU client
crashes the process."""
import gc
import os

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.interpreters import dispatch
from jaxkit.runtime import compile_cache
from jaxkit.transforms import jit_caches


@pytest.fixture
def small_bound(monkeypatch):
    jaxkit.clear_caches()
    monkeypatch.setattr(jit_caches, "capacity", 6)
    yield 6
    jaxkit.clear_caches()


def _functions(n):
    return [jaxkit.jit(lambda x, i=i: x * i + 1.0) for i in range(n)]


def test_entries_of_all_functions_are_bounded(small_bound):
    fs = _functions(20)
    for i, f in enumerate(fs):
        assert float(f(np.float32(2.0))) == 2.0 * i + 1.0
    assert jit_caches.live_entries() == small_bound
    assert [f._cache_size() for f in fs] == [0] * 14 + [1] * 6  # the most recent stay


def test_an_evicted_function_compiles_again_and_still_answers(small_bound):
    fs = _functions(10)
    for f in fs:
        f(np.float32(1.0))
    assert fs[0]._cache_size() == 0
    assert float(fs[0](np.float32(3.0))) == 1.0  # its fast path went with the entry
    assert fs[0]._cache_size() == 1 and jit_caches.live_entries() == small_bound


@pytest.mark.parametrize("arg", [np.float32(1.0), {"x": np.float32(1.0)}],
                         ids=["fast-path", "slow-path"])  # (a dict makes no fast-path plan)
def test_a_function_in_use_keeps_its_entry(small_bound, arg):
    keep = jaxkit.jit(lambda a: jaxkit.tree.leaves(a)[0] + 1.0)
    for f in _functions(30):
        f(np.float32(1.0))
        assert float(keep(arg)) == 2.0
    assert keep._cache_size() == 1 and len(keep.cache_events) == 1  # never compiled again


def test_entries_kept_for_another_configuration_count_too(small_bound):
    f = jaxkit.jit(lambda x: x + 1)
    for n in range(4):
        f(np.ones(n + 1, np.float32))
    with jaxkit.enable_x64(True):  # a thread-local block has tables of its own
        f(np.ones(2))
    jaxkit.config.update("jax_enable_x64", True)
    try:
        for n in range(4):  # the float32 entries are set aside under the old values
            f(np.ones(n + 1))
    finally:
        jaxkit.config.update("jax_enable_x64", False)
    assert jit_caches.live_entries() <= small_bound
    np.testing.assert_array_equal(np.asarray(f(np.ones(3, np.float32))), np.full(3, 2.0))


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads Linux's /proc")
def test_memory_maps_stay_bounded_while_compiling_many_programs(small_bound, monkeypatch):
    monkeypatch.setattr(compile_cache, "_MEMORY_CAPACITY", 4)
    monkeypatch.setattr(dispatch.programs, "capacity", 4)

    def maps():
        gc.collect()
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)

    for f in _functions(10):  # warm up: the bound is reached
        f(jnp.ones(3))
    before = maps()
    for i, f in enumerate(_functions(150)):
        f(jnp.ones(i + 4))  # a new shape each time: a new program each time
    # Each executable held maps a few regions; 150 kept would add hundreds of maps.
    assert maps() - before < 100
