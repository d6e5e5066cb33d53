"""Big arrays at memory speed, and memory that stays flat.

    python bench/bench_memory_speed.py [--quick]

Each contender runs in its own fresh process, because importing jaxkit tunes the process's
malloc (runtime/allocator.py) and JAX or NumPy in the same process would profit from it: JAX
is measured as its users run it. Rounds of the processes (jaxkit, JAX, plain NumPy) are
interleaved, and each figure is the best window over all rounds.

* ``jit(selu)`` on 1e7 float32, jaxkit / JAX;
* ``a + b`` and ``2 * a`` on 5e7 float32 (jit'd), as bandwidth (bytes read + written per
  second) against NumPy's out-of-place ``a + b`` / ``2 * a``, both in a plain NumPy process and
  inside the jaxkit process (where NumPy's own allocations profit from the tuning too);
* RSS after 1e3 and after 1e5 calls of a small jitted function, jaxkit and JAX.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

WORKER = textwrap.dedent("""
    import gc, json, sys, time
    import numpy as np
    mode, windows = sys.argv[1], int(sys.argv[2])
    if mode == "jax":
        import jax, jax.numpy as jnp
    elif mode == "jaxkit":
        import jaxkit as jax, jaxkit.numpy as jnp

    def best(fn, number):
        fn(); fn()
        b = float("inf")
        for _ in range(windows):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            b = min(b, (time.perf_counter() - start) / number)
        return b

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    out = {}
    an = np.linspace(-1, 1, 50_000_000, dtype=np.float32)
    bn = np.linspace(1, 2, 50_000_000, dtype=np.float32)
    if mode in ("jax", "jaxkit"):
        selu = jax.jit(lambda x: 1.0507 * jnp.where(x > 0, x, 1.6733 * (jnp.exp(x) - 1)))
        add = jax.jit(lambda a, b: a + b)
        dbl = jax.jit(lambda a: 2 * a)
        x = jax.device_put(an[:10_000_000].copy())
        a, b = jax.device_put(an), jax.device_put(bn)
        out["selu_1e7"] = best(lambda: selu(x).block_until_ready(), 10)
        out["add_5e7"] = best(lambda: add(a, b).block_until_ready(), 3)
        out["dbl_5e7"] = best(lambda: dbl(a).block_until_ready(), 3)
        del a, b, x
        small = jax.jit(lambda u, v: u * v + 1)
        u = v = jax.device_put(np.ones(4, np.float32))
        for _ in range(1000):
            small(u, v)
        gc.collect()
        r3 = rss()
        for _ in range(99_000):
            small(u, v)
        gc.collect()
        out["rss_1e3"], out["rss_1e5"] = r3, rss()
    if mode in ("numpy", "jaxkit"):
        out["np_add_5e7"] = best(lambda: an + bn, 3)
        out["np_dbl_5e7"] = best(lambda: 2 * an, 3)
    print(json.dumps(out))
""")


def run(mode: str, windows: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", WORKER, mode, str(windows)],
                          capture_output=True, text=True, timeout=900, env=dict(os.environ))
    if proc.returncode:
        raise RuntimeError(f"{mode} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one round (smoke run)")
    args = parser.parse_args()
    rounds, windows = (1, 4) if args.quick else (3, 8)
    try:
        import jax  # noqa: F401, PLC0415  (only to know whether the comparison can run)
        modes = ["jaxkit", "jax", "numpy"]
    except ImportError:
        modes = ["jaxkit", "numpy"]
    best: dict[str, dict[str, float]] = {m: {} for m in modes}
    for _ in range(rounds):
        for mode in modes:
            for key, value in run(mode, windows).items():
                keep = max if key.startswith("rss") else min
                best[mode][key] = keep(best[mode].get(key, value), value)
    kit, jx, npp = best["jaxkit"], best.get("jax", {}), best["numpy"]
    n_big = 50_000_000 * 4

    def gbs(seconds, arrays):
        return arrays * n_big / seconds / 1e9

    print(f"best of {rounds} rounds x {windows} windows; each contender in its own process\n")
    print(f"{'case':24s} {'jaxkit':>10s} {'jax':>10s} {'jaxkit/jax':>11s}")
    for key, label in (("selu_1e7", "jit(selu) 1e7 f32"), ("add_5e7", "a + b 5e7 f32"),
                       ("dbl_5e7", "2 * a 5e7 f32")):
        j = jx.get(key, float("nan"))
        print(f"{label:24s} {kit[key] * 1e3:8.2f}ms {j * 1e3:8.2f}ms {kit[key] / j:10.3f}x")
    print("\nbandwidth (bytes read + written / s)")
    print(f"{'case':10s} {'jaxkit':>9s} {'jax':>9s} {'numpy':>9s} {'np in jaxkit':>13s} "
          f"{'jaxkit/numpy':>13s} {'vs np in jaxkit':>16s}")
    for key, arrays in (("add_5e7", 3), ("dbl_5e7", 2)):
        k, n, ni = gbs(kit[key], arrays), gbs(npp["np_" + key], arrays), gbs(
            kit["np_" + key], arrays)
        j = gbs(jx[key], arrays) if key in jx else float("nan")
        print(f"{key:10s} {k:7.1f}GB {j:7.1f}GB {n:7.1f}GB {ni:11.1f}GB {k / n:12.0%} "
              f"{k / ni:15.0%}")
    print("\nRSS of a small jitted function's calls")
    for mode in ("jaxkit", "jax"):
        if mode in best:
            r3, r5 = best[mode]["rss_1e3"], best[mode]["rss_1e5"]
            print(f"{mode:8s} after 1e3: {r3 / 1e6:7.1f} MB, after 1e5: {r5 / 1e6:7.1f} MB "
                  f"({(r5 - r3) / r3:+.2%})")
    print("\ntargets: selu <= 0.33x JAX; a + b, 2 * a >= 60% of NumPy's bandwidth; "
          "RSS within 5%")


if __name__ == "__main__":
    main()
