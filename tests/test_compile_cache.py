"""The executable caches (runtime/compile_cache.py): the in-process cache keyed on the
program's bytes, and the persistent on-disk cache (across processes, concurrent writers, the
size bound, corrupt entries, the switches), plus the JAX-compatible settings API."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from jaxlib import _jax

import jaxkit
import jaxkit.numpy as jnp
from jaxkit._config import config
from jaxkit.experimental.compilation_cache import compilation_cache as cc
from jaxkit.runtime import compile_cache, multi_device
from jaxkit.sharding import AxisType, NamedSharding, PartitionSpec as P

ENTRY_SUFFIX = ".xlaexe"


def entries(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(ENTRY_SUFFIX))


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh persistent cache directory for this test, and an empty in-process cache."""
    directory = tmp_path / "xla-cache"
    with config.override(jax_compilation_cache_dir=str(directory),
                         jax_compilation_cache_max_size=1 << 30):
        compile_cache.reset_cache()
        compile_cache.clear_memory_cache()
        yield str(directory)
    compile_cache.reset_cache()
    compile_cache.clear_memory_cache()


def compile_fresh(fun, *args):
    """Compile ``fun`` as a new function object, so jit's own caches cannot answer."""
    return jaxkit.jit(lambda *a: fun(*a)).lower(*args).compile()


def program(x):
    return jnp.tanh(x @ x.T) * 2.0 + 1.0


X = np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(4, 6)
EXPECTED = np.tanh(X @ X.T) * 2.0 + 1.0


# ---- the in-process cache --------------------------------------------------------------------


def test_new_function_object_with_identical_program_reuses_the_executable(cache_dir):
    x = jnp.asarray(X)
    first = compile_fresh(program, x)
    before = dict(compile_cache.stats)
    second = compile_fresh(program, x)
    assert first.executable.cache_source == "compiled"
    assert second.executable.cache_source == "memory"
    assert compile_cache.stats["compiles"] == before.get("compiles", 0)
    assert second.executable.xla_executable is first.executable.xla_executable
    np.testing.assert_allclose(np.asarray(second(x)), EXPECTED, rtol=1e-5, atol=1e-6)


def test_jit_of_new_lambdas_in_a_loop_compiles_once(cache_dir):
    x = jnp.asarray(X)
    before = compile_cache.stats["compiles"]
    for _ in range(5):
        out = jaxkit.jit(lambda v: program(v))(x)
    assert compile_cache.stats["compiles"] - before == 1
    np.testing.assert_allclose(np.asarray(out), EXPECTED, rtol=1e-5, atol=1e-6)


def test_different_programs_and_shapes_get_different_executables(cache_dir):
    a = compile_fresh(program, jnp.asarray(X))
    b = compile_fresh(lambda x: program(x) + 1.0, jnp.asarray(X))
    c = compile_fresh(program, jnp.asarray(X[:3]))
    assert b.executable.cache_source == "compiled"
    assert c.executable.cache_source == "compiled"
    assert len({id(e.executable.xla_executable) for e in (a, b, c)}) == 3
    np.testing.assert_allclose(np.asarray(b(jnp.asarray(X))), EXPECTED + 1.0, rtol=1e-5,
                               atol=1e-6)


def test_memory_cache_is_bounded(cache_dir, monkeypatch):
    monkeypatch.setattr(compile_cache, "_MEMORY_CAPACITY", 2)
    for k in range(4):
        compile_fresh(lambda x, k=k: x * float(k + 2), jnp.asarray(X))
    assert compile_cache.memory_cache_size() == 2


def test_weak_types_of_outputs_follow_the_caller(cache_dir):
    # Same StableHLO, different output avals: each executable wraps its own outputs.
    strong = jaxkit.jit(lambda x: x * jnp.float32(2))(jnp.float32(3))
    weak = jaxkit.jit(lambda x: x * 2)(3.0)
    assert jaxkit.dtypes.is_weakly_typed(weak) and not jaxkit.dtypes.is_weakly_typed(strong)


# Two CPU backends number their devices alike (cpu:0 ... cpu:7), so their compiles have the
# same key on disk; in memory each client must get its own executable. An executable of one
# client run on another's buffers crashed the process inside XLA (test_numpy_out_sharding then
# test_sharding in one process). The backend names are those of the sharding tests, so that
# the suite's process makes no extra clients.
@pytest.mark.parametrize("mesh_axis", [None, "x"], ids=["one_device", "mesh"])
def test_each_backend_gets_an_executable_of_its_own_client(cache_dir, mesh_axis):
    backends = [multi_device.add_cpu_backend(name, 8) for name in ("spmd8", "explicit8")]
    for i, backend in enumerate(backends):
        if mesh_axis is None:
            x = jaxkit.device_put(X, backend.devices[0])
        else:
            mesh = jaxkit.make_mesh((8,), (mesh_axis,), devices=backend.devices,
                                    axis_types=(AxisType.Auto,))
            x = jaxkit.device_put(np.tile(X, (2, 1)), NamedSharding(mesh, P(mesh_axis)))
        compiled = compile_fresh(lambda v: jnp.sum(program(v), axis=0), x)
        assert compiled.executable.cache_source == ("compiled", "persistent")[i]
        assert compiled.executable.xla_executable.client is backend.client
        want = np.sum(np.tanh(np.asarray(x) @ np.asarray(x).T) * 2.0 + 1.0, axis=0)
        np.testing.assert_allclose(np.asarray(compiled(x)), want, rtol=1e-5)


# ---- the persistent cache in this process ------------------------------------------------------


def test_entry_is_written_and_loaded_back(cache_dir):
    x = jnp.asarray(X)
    compile_fresh(program, x)
    assert len(entries(cache_dir)) == 1
    compile_cache.clear_memory_cache()
    loaded = compile_fresh(program, x)
    assert loaded.executable.cache_source == "persistent"
    np.testing.assert_allclose(np.asarray(loaded(x)), EXPECTED, rtol=1e-5, atol=1e-6)
    # The loaded executable answers the stage queries as a compiled one does.
    assert "tanh" in loaded.as_text()
    assert loaded.cost_analysis()["flops"] > 0
    assert loaded.memory_analysis().output_size_in_bytes == 4 * 4 * 4


def test_lapack_program_round_trips(cache_dir):
    a = jnp.asarray(np.array([[4.0, 1.0], [1.0, 3.0]], np.float32))
    compile_fresh(jnp.linalg.cholesky, a)
    compile_cache.clear_memory_cache()
    loaded = compile_fresh(jnp.linalg.cholesky, a)
    assert loaded.executable.cache_source == "persistent"
    np.testing.assert_allclose(np.asarray(loaded(a)), np.linalg.cholesky(np.asarray(a)),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("damage", ["truncate", "empty", "flip_payload_byte", "bad_magic",
                                    "wrong_key"])
def test_corrupt_entry_is_detected_and_recompiled(cache_dir, damage):
    x = jnp.asarray(X)
    compile_fresh(program, x)
    (name,) = entries(cache_dir)
    path = os.path.join(cache_dir, name)
    data = bytearray(open(path, "rb").read())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = bytearray()
    elif damage == "flip_payload_byte":
        data[-100] ^= 0xFF
    elif damage == "bad_magic":
        data[0] ^= 0xFF
    else:  # another key's valid entry renamed to this key
        start = len(compile_cache._MAGIC)
        data[start] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))
    compile_cache.clear_memory_cache()
    before = dict(compile_cache.stats)
    again = compile_fresh(program, x)
    assert again.executable.cache_source == "compiled"
    assert compile_cache.stats["corrupt"] == before.get("corrupt", 0) + 1
    np.testing.assert_allclose(np.asarray(again(x)), EXPECTED, rtol=1e-5, atol=1e-6)
    # The entry was replaced by a valid one.
    compile_cache.clear_memory_cache()
    assert compile_fresh(program, x).executable.cache_source == "persistent"


def test_entry_that_jaxlib_cannot_load_is_recompiled(cache_dir):
    x = jnp.asarray(X)
    compile_fresh(program, x)
    (name,) = entries(cache_dir)
    key = bytes.fromhex(name[: -len(ENTRY_SUFFIX)])
    compile_cache.write_entry(cache_dir, key, b"a valid checksum over bytes that are no executable")
    compile_cache.clear_memory_cache()
    before = compile_cache.stats["corrupt"]
    again = compile_fresh(program, x)
    assert again.executable.cache_source == "compiled"
    assert compile_cache.stats["corrupt"] == before + 1
    np.testing.assert_allclose(np.asarray(again(x)), EXPECTED, rtol=1e-5, atol=1e-6)


def test_size_bound_evicts_least_recently_used(tmp_path):
    directory = str(tmp_path)
    keys = [bytes([k]) * 32 for k in range(6)]
    payload = b"x" * 1000
    entry_size = compile_cache._HEADER.size + len(payload)
    with config.override(jax_compilation_cache_max_size=4 * entry_size):
        compile_cache.reset_cache()
        for t, key in enumerate(keys[:4]):
            compile_cache.write_entry(directory, key, payload)
            os.utime(compile_cache._entry_path(directory, key), (1000 + t, 1000 + t))
        assert len(entries(directory)) == 4
        # Reading the oldest entry makes it the most recently used.
        assert compile_cache.read_entry(directory, keys[0]) == payload
        compile_cache.write_entry(directory, keys[4], payload)
        compile_cache.write_entry(directory, keys[5], payload)
        left = entries(directory)
    compile_cache.reset_cache()
    total = sum(os.path.getsize(os.path.join(directory, n)) for n in left)
    assert total <= 4 * entry_size
    names = {k.hex() + ENTRY_SUFFIX for k in keys}
    assert keys[0].hex() + ENTRY_SUFFIX in left  # recently read: kept
    assert keys[5].hex() + ENTRY_SUFFIX in left  # newest: kept
    assert keys[1].hex() + ENTRY_SUFFIX not in left  # least recently used: evicted
    assert set(left) <= names


def test_entry_larger_than_the_bound_is_not_written(tmp_path):
    with config.override(jax_compilation_cache_max_size=100):
        compile_cache.write_entry(str(tmp_path), b"k" * 32, b"y" * 1000)
    assert entries(tmp_path) == []


def test_unwritable_directory_does_not_fail_the_compile(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with config.override(jax_compilation_cache_dir=str(blocker / "cache")):
        compile_cache.reset_cache()
        compile_cache.clear_memory_cache()
        out = compile_fresh(program, jnp.asarray(X))(jnp.asarray(X))
    compile_cache.reset_cache()
    np.testing.assert_allclose(np.asarray(out), EXPECTED, rtol=1e-5, atol=1e-6)


def test_directory_removed_while_running_is_made_again(cache_dir):
    compile_fresh(program, jnp.asarray(X))
    shutil.rmtree(cache_dir)
    compile_cache.clear_memory_cache()
    compile_fresh(lambda x: program(x) - 1.0, jnp.asarray(X))
    assert len(entries(cache_dir)) == 1


def test_disable_option_writes_nothing(tmp_path):
    with config.override(jax_compilation_cache_dir=str(tmp_path),
                         jax_enable_compilation_cache=False):
        compile_cache.clear_memory_cache()
        assert compile_cache.cache_dir() is None
        compile_fresh(program, jnp.asarray(X))
    assert entries(tmp_path) == []


def test_set_cache_dir_and_reset_cache_as_jax(tmp_path):
    saved = config.jax_compilation_cache_dir
    try:
        cc.set_cache_dir(tmp_path / "via-api")
        assert config.jax_compilation_cache_dir == str(tmp_path / "via-api")
        assert compile_cache.cache_dir() == str(tmp_path / "via-api")
        compile_cache.clear_memory_cache()
        compile_fresh(program, jnp.asarray(X))
        assert len(entries(tmp_path / "via-api")) == 1
        cc.reset_cache()
        assert config.jax_compilation_cache_dir == str(tmp_path / "via-api")  # as in JAX
    finally:
        config.update("jax_compilation_cache_dir", saved)
        compile_cache.reset_cache()
    assert sorted(cc.__all__) == ["reset_cache", "set_cache_dir"]


def test_default_directory_is_the_user_cache_dir(monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "/some/where")
    assert compile_cache.default_cache_dir() == "/some/where/jaxkit/xla"
    with config.override(jax_compilation_cache_dir=None):
        assert compile_cache.cache_dir() == "/some/where/jaxkit/xla"


def test_key_covers_options_devices_and_module():
    client = jaxkit.devices()[0].client
    devices = [jaxkit.devices()[0]]
    opts = _jax.CompileOptions()
    base = compile_cache.cache_key(b"module", client, devices, opts)
    assert compile_cache.cache_key(b"module", client, devices, opts) == base
    assert compile_cache.cache_key(b"module2", client, devices, opts) != base
    opts.num_replicas = 2
    assert compile_cache.cache_key(b"module", client, devices, opts) != base


# ---- across processes --------------------------------------------------------------------------

MLP_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jaxkit as jax, jaxkit.numpy as jnp
    from jaxkit.runtime import compile_cache

    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)

    @jax.jit
    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)

    r = np.random.RandomState(0)
    p = {"w1": r.randn(8, 16).astype("f4"), "b1": np.zeros(16, "f4"),
         "w2": r.randn(16, 2).astype("f4")}
    x, y = r.randn(4, 8).astype("f4"), r.randn(4, 2).astype("f4")
    out = step(p, x, y)
    print(json.dumps({"stats": dict(compile_cache.stats),
                      "w1": np.asarray(out["w1"]).tolist()}))
""")


def run_script(script, env_extra, timeout=240):
    env = dict(os.environ, **env_extra)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_loads_instead_of_compiling(tmp_path):
    env = {"JAXKIT_COMPILATION_CACHE_DIR": str(tmp_path)}
    cold = run_script(MLP_SCRIPT, env)
    warm = run_script(MLP_SCRIPT, env)
    assert cold["stats"]["compiles"] >= 1
    assert cold["stats"].get("persistent_hits", 0) == 0
    assert warm["stats"].get("compiles", 0) == 0
    assert warm["stats"]["persistent_hits"] == cold["stats"]["compiles"]
    assert warm["w1"] == cold["w1"]


def test_concurrent_processes_writing_the_same_entries(tmp_path):
    env = dict(os.environ, JAXKIT_COMPILATION_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", MLP_SCRIPT], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["w1"] == results[0]["w1"] for r in results)
    names = os.listdir(tmp_path)
    assert not [n for n in names if not n.endswith(ENTRY_SUFFIX)]  # no temporary files left
    for name in names:  # every entry is complete and valid
        key = bytes.fromhex(name[: -len(ENTRY_SUFFIX)])
        assert compile_cache.read_entry(str(tmp_path), key) is not None
    after = run_script(MLP_SCRIPT, {"JAXKIT_COMPILATION_CACHE_DIR": str(tmp_path)})
    assert after["stats"].get("compiles", 0) == 0
    assert after["w1"] == results[0]["w1"]


def test_environment_switch_turns_the_persistent_cache_off(tmp_path):
    env = {"JAXKIT_COMPILATION_CACHE_DIR": str(tmp_path), "JAXKIT_COMPILATION_CACHE": "0"}
    first = run_script(MLP_SCRIPT, env)
    second = run_script(MLP_SCRIPT, env)
    assert os.listdir(tmp_path) == []
    assert second["stats"]["compiles"] == first["stats"]["compiles"] >= 1
    assert second["stats"].get("persistent_hits", 0) == 0


PMAP_SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    import jaxkit as jax
    from jaxkit.runtime import compile_cache

    f = jax.pmap(lambda x: jax.lax.psum(x * 2.0, "i"), axis_name="i")
    out = f(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    print(json.dumps({"stats": dict(compile_cache.stats), "out": np.asarray(out).tolist()}))
""")


def test_replicated_program_is_loaded_in_a_second_process(tmp_path):
    env = {"JAXKIT_COMPILATION_CACHE_DIR": str(tmp_path), "JAXKIT_NUM_CPU_DEVICES": "2"}
    cold = run_script(PMAP_SCRIPT, env)
    warm = run_script(PMAP_SCRIPT, env)
    assert cold["stats"]["compiles"] >= 1
    assert warm["stats"].get("compiles", 0) == 0
    assert warm["stats"]["persistent_hits"] == cold["stats"]["compiles"]
    assert warm["out"] == cold["out"] == [[6.0, 10.0, 14.0]] * 2


def test_jit_says_where_each_executable_came_from(cache_dir):
    """``Compiled.cache_source`` and each jitted function's ``cache_events`` record whether XLA
    compiled, or the in-process or on-disk cache answered."""
    x = jnp.asarray(X)
    f = jaxkit.jit(lambda a: program(a))
    f(x)
    assert f.cache_events[-1].executable_source == "compiled"
    g = jaxkit.jit(lambda a: program(a))
    g(x)
    assert g.cache_events[-1].executable_source == "memory"
    compile_cache.clear_memory_cache()
    assert compile_fresh(program, x).cache_source == "persistent"
