"""Memory of the runtime: no growth per call (the jaxlib garbage queue is drained), and the
malloc tuning that keeps large freed buffers for reuse (runtime/allocator.py) with its switch.

Each check runs in a fresh process so that RSS and page-fault counts are its own. They count
bytes and page faults, never time."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from jaxkit.runtime import allocator


def run(script: str, **env_extra) -> dict:
    env = dict(os.environ, **env_extra)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


RSS_SCRIPT = """
    import gc, json
    import jaxkit, jaxkit.numpy as jnp

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    f = jaxkit.jit(lambda x, y: x * y + 1)
    x, y = jnp.ones(4), jnp.ones(4)
    call = {"jit": lambda: f(x, y), "eager": lambda: x * y}[MODE]
    marks = {}
    done = 0
    for mark in (1000, 100_000, 200_000):
        for _ in range(mark - done):
            call()
        done = mark
        gc.collect()
        marks[mark] = rss()
    print(json.dumps(marks))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from /proc")
@pytest.mark.parametrize("mode", ["jit", "eager"])
def test_rss_is_flat_over_many_calls(mode):
    marks = run(RSS_SCRIPT.replace("MODE", repr(mode)))
    r1e3, r1e5, r2e5 = marks["1000"], marks["100000"], marks["200000"]
    assert r1e5 <= 1.05 * r1e3, marks
    # The leak this guards against grew ~9 MB per 1e5 calls; allow allocator noise only.
    assert r2e5 - r1e5 < 2_000_000, marks


FAULTS_SCRIPT = """
    import gc, json, resource
    import jaxkit, jaxkit.numpy as jnp
    from jaxkit.runtime import allocator

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    selu = jaxkit.jit(lambda x: 1.0507 * jnp.where(x > 0, x, 1.6733 * (jnp.exp(x) - 1)))
    x = jnp.ones(10_000_000, dtype=jnp.float32)  # 40 MB in and out
    # The heap grows over the first calls (how many buffers are still in flight when the next
    # output is allocated varies); the steady state is what counts.
    for _ in range(12):
        selu(x).block_until_ready()
    faults = []
    for _ in range(10):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        selu(x).block_until_ready()
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    rss_8 = rss()
    for _ in range(300):
        selu(x).block_until_ready()
    gc.collect()  # a full collection applies the bound on kept memory
    print(json.dumps({"settings": allocator.settings, "faults": min(faults),
                      "rss_growth": rss() - rss_8}))
"""


@pytest.mark.skipif(not allocator.settings.get("enabled"), reason="glibc malloc only")
def test_large_output_buffers_are_reused_without_page_faults():
    keep = 200_000_000
    got = run(FAULTS_SCRIPT, JAXKIT_MALLOC_KEEP_BYTES=str(keep))
    assert got["settings"]["enabled"] and got["settings"]["trim_threshold"] == keep
    pages = 10_000_000 * 4 // 4096
    assert got["faults"] < pages // 10, got  # reused memory: no fresh pages to fault in
    # Kept, not leaked: after a full collection the process holds at most `keep` free bytes
    # (plus a buffer or two in flight) beyond what it held before.
    assert got["rss_growth"] < keep + 100_000_000, got


@pytest.mark.skipif(not allocator.settings.get("enabled"), reason="glibc malloc only")
def test_malloc_tuning_switch():
    got = run(FAULTS_SCRIPT, JAXKIT_MALLOC_TUNING="0")
    assert not got["settings"]["enabled"]
    assert got["settings"]["reason"] == "JAXKIT_MALLOC_TUNING=0"
    # Untuned glibc maps and unmaps a 40 MB block per call: one fault per page.
    assert got["faults"] > 10_000_000 * 4 // 4096 // 2, got


def test_keep_bytes_setting():
    settings = allocator.settings
    if settings.get("enabled"):
        assert settings["trim_threshold"] == 2 * settings["mmap_threshold"]
        assert settings["arena_max"] == 1
    assert allocator._keep_bytes({"JAXKIT_MALLOC_KEEP_BYTES": "2e8"}) == 200_000_000
    with pytest.warns(RuntimeWarning, match="JAXKIT_MALLOC_KEEP_BYTES"):
        default = allocator._keep_bytes({"JAXKIT_MALLOC_KEEP_BYTES": "lots"})
    assert default == allocator._keep_bytes({})
