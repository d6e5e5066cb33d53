"""Compiling again: a second process with the persistent cache, and new jit objects in a loop.

    python bench/bench_compile_cache.py [--quick]

1. **Second process.** The MLP gradient step is compiled in a fresh process with an empty cache
   directory (cold), then in another fresh process with the same directory (warm). Each
   process reports the time of its first call (trace + lower + compile or load + run) and of
   the compile stage alone. JAX's cold compile is measured the same way (its persistent cache
   is off by default), and JAX's warm process with its cache turned on, for reference. Rounds
   of the four processes are interleaved; medians are printed.
2. **New lambdas in a loop** (seed 002): ``jit(lambda x: body(x))(i)`` and
   ``jit(partial(body))(i)`` 20 times, jaxkit against JAX, interleaved, best window.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from functools import partial

from _timing import best_per_call

import jaxkit

try:
    import jax
except ImportError:  # the comparison needs the test extra
    jax = None

MLP_STEP = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    lib = sys.argv[1]
    if lib == "jax":
        import jax
        if len(sys.argv) > 2:
            jax.config.update("jax_compilation_cache_dir", sys.argv[2])
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        import jax.numpy as jnp
    else:
        import jaxkit as jax
        import jaxkit.numpy as jnp

    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        h = jnp.tanh(h @ p["w2"] + p["b2"])
        return jnp.mean((h @ p["w3"] - y) ** 2)

    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)

    r = np.random.RandomState(0)
    p = {"w1": r.randn(64, 512).astype("f4"), "b1": np.zeros(512, "f4"),
         "w2": r.randn(512, 512).astype("f4"), "b2": np.zeros(512, "f4"),
         "w3": r.randn(512, 10).astype("f4")}
    x, y = r.randn(256, 64).astype("f4"), r.randn(256, 10).astype("f4")
    p, x, y = jax.device_put((p, x, y))
    jax.block_until_ready((p, x, y))
    start = time.perf_counter()
    jitted = jax.jit(step)
    lowered = jitted.lower(p, x, y)
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    compiled_at = time.perf_counter()
    jax.block_until_ready(compiled(p, x, y))
    end = time.perf_counter()
    print(json.dumps({"first_call": end - start, "compile": compiled_at - lowered_at}))
""")


def run_process(*argv: str, env_extra: dict | None = None) -> dict:
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.run([sys.executable, "-c", MLP_STEP, *argv], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def second_process(rounds: int) -> None:
    results: dict[str, list[dict]] = {"jaxkit cold": [], "jaxkit warm (2nd process)": [],
                                      "jax cold": [], "jax warm (its cache on)": []}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as kit_dir, tempfile.TemporaryDirectory() as jax_dir:
            env = {"JAXKIT_COMPILATION_CACHE_DIR": kit_dir}
            results["jaxkit cold"].append(run_process("jaxkit", env_extra=env))
            results["jaxkit warm (2nd process)"].append(run_process("jaxkit", env_extra=env))
            if jax is not None:
                results["jax cold"].append(run_process("jax"))
                run_process("jax", jax_dir)  # fills JAX's cache
                results["jax warm (its cache on)"].append(run_process("jax", jax_dir))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("first_call", "compile")}
           for name, rs in results.items() if rs}
    print(f"MLP gradient step, medians of {rounds} rounds of fresh processes")
    print(f"{'':28s} {'first call':>12s} {'compile':>12s}")
    for name, m in med.items():
        print(f"{name:28s} {m['first_call'] * 1e3:10.1f}ms {m['compile'] * 1e3:10.1f}ms")
    cold, warm = med["jaxkit cold"], med["jaxkit warm (2nd process)"]
    print(f"jaxkit 2nd process / jaxkit cold: compile {warm['compile'] / cold['compile']:.3f}x, "
          f"first call {warm['first_call'] / cold['first_call']:.3f}x   (target <= 0.1x)")
    if "jax cold" in med:
        jc = med["jax cold"]
        print(f"jaxkit 2nd process / JAX cold:    compile {warm['compile'] / jc['compile']:.3f}x, "
              f"first call {warm['first_call'] / jc['first_call']:.3f}x")


def unjitted_loop_body(prev_i):
    return prev_i + 1


def loop_factory(jit, mode: str):
    def run(n=20):
        i = 0
        while i < n:
            if mode == "lambda":
                i = jit(lambda x: unjitted_loop_body(x))(i)
            elif mode == "partial":
                i = jit(partial(unjitted_loop_body))(i)
            else:
                i = jit(unjitted_loop_body)(i)
        return i
    return run


def new_lambdas(windows: int) -> None:
    print("\nseed 002: jit(...) created inside a loop of 20 iterations; best window, per loop")
    print(f"{'':10s} {'jaxkit':>10s} {'jax':>10s} {'ratio':>8s}")
    for mode in ("lambda", "partial", "normal"):
        fns = {"jaxkit": loop_factory(jaxkit.jit, mode)}
        if jax is not None:
            fns["jax"] = loop_factory(jax.jit, mode)
        best = best_per_call(fns, 1, windows)
        ratio = best["jaxkit"] / best["jax"] if "jax" in best else float("nan")
        jax_ms = best.get("jax", float("nan")) * 1e3
        print(f"{mode:10s} {best['jaxkit'] * 1e3:8.2f}ms {jax_ms:8.2f}ms {ratio:7.3f}x")
    print("(target for lambda: <= 0.1x JAX)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer rounds (smoke run)")
    args = parser.parse_args()
    second_process(1 if args.quick else 3)
    new_lambdas(3 if args.quick else 10)


if __name__ == "__main__":
    main()
