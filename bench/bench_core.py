"""Foundation benchmarks: jaxkit against JAX and NumPy, measured interleaved in one run.

    python bench/bench_core.py [--quick] [--cases SUBSTR,...] [--repeat N] [--alone]

Each case alternates short timing windows between the contenders and keeps each one's best
window (the machine is shared; the best window is the least disturbed one). Prints a table of
per-call times and the jaxkit/JAX ratio. Cold compile times are medians of fresh functions.
``--repeat N`` measures every case N times and prints the median of the N ratios (and of the
times), as a shared machine calls for. ``--alone`` also times the jit(selu) cases with each
library in a fresh process of its own: jaxkit tunes glibc malloc at import
(``jaxkit/runtime/allocator.py``), which JAX shares when both run in one process, so only
separate processes compare what each library gives its users.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from _timing import best_per_call

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.runtime import compile_cache

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # the comparison needs the test extra
    jax = None


def selu_factory(np_mod):
    def selu(x, alpha=1.67, lmbda=1.05):
        return lmbda * np_mod.where(x > 0, x, alpha * np_mod.exp(x) - alpha)
    return selu


def f_seed(x):
    y1 = x + x * x + 3
    y2 = x * x + x * x.T
    return y1 * y2


def chain(n):
    def fn(x):
        for i in range(n):
            x = x * 1.0001 + 0.5 if i % 2 else x - 0.25
        return x
    return fn


def cold_compile(jit, x, n_ops: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        fn = chain(n_ops)
        start = time.perf_counter()
        jit(fn)(x).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# Run by ``--alone`` in a fresh interpreter per library: that library only, so each process
# has its own allocator settings (jaxkit tunes glibc malloc at import, JAX does not, and in one
# process the tuning serves both), with the same data, function and timing rule as the
# jit(selu) cases.
_ALONE = """
import sys, numpy as np
lib = sys.argv[4]
if lib == "jax":
    import jax, jax.numpy as jnp
else:
    import jaxkit as jax, jaxkit.numpy as jnp
from _timing import best_per_call
n, number, windows = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
x = jax.device_put(host)
f = jax.jit(lambda x, alpha=1.67, lmbda=1.05:
            lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha))
assert ("jaxkit" in sys.modules) == (lib == "jaxkit") and ("jax" in sys.modules) == (lib == "jax")
print(best_per_call({lib: lambda: f(x).block_until_ready()}, number, windows)[lib])
"""


def alone(lib: str, n: int, number: int, windows: int) -> float:
    """Best seconds per call of ``lib``'s jit(selu) on ``n`` floats in a process of its own."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    out = subprocess.run([sys.executable, "-c", _ALONE, str(n), str(number), str(windows), lib],
                         cwd=here, env={**os.environ, "PYTHONPATH": f"{here}:{root}"},
                         check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer windows (smoke run)")
    parser.add_argument("--cases", default="",
                        help="comma-separated substrings: run only the cases whose label has one")
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure each case this many times; print medians")
    parser.add_argument("--alone", action="store_true",
                        help="also time jit(selu) with each library in a process of its own")
    args = parser.parse_args()
    windows = 5 if args.quick else 25
    wanted = [w.strip() for w in args.cases.split(",") if w.strip()]
    rows = []

    def selected(label: str) -> bool:
        return not wanted or any(w in label for w in wanted)

    def case(label, kit_fn, jax_fn=None, np_fn=None, number=200, scale=1):
        """``scale``: that many times more windows (of ``number`` calls each). The micro cases
        use many short windows: on a shared machine a short window is likelier to be an
        undisturbed one for every contender."""
        if not selected(label):
            return
        fns = {"jaxkit": kit_fn}
        if jax is not None and jax_fn is not None:
            fns["jax"] = jax_fn
        if np_fn is not None:
            fns["numpy"] = np_fn
        runs = [best_per_call(fns, number, windows * scale) for _ in range(args.repeat)]
        best = {name: statistics.median(r[name] for r in runs) for name in fns}
        if "jax" in best:
            best["ratio"] = statistics.median(r["jaxkit"] / r["jax"] for r in runs)
        rows.append((label, best))
        if args.alone and label.startswith("jit(selu)") and jax is not None:
            n = int(float(label.split()[-2]))
            times = {lib: [alone(lib, n, number, windows * scale) for _ in range(args.repeat)]
                     for lib in ("jaxkit", "jax")}
            rows.append((label + ", each alone", {
                "jaxkit": statistics.median(times["jaxkit"]),
                "jax": statistics.median(times["jax"]),
                "ratio": statistics.median(k / j for k, j in zip(times["jaxkit"],
                                                                  times["jax"]))}))

    # cached jit call of a tiny function
    xs = np.arange(4, dtype=np.float32)
    kx = jaxkit.device_put(xs)
    kadd = jaxkit.jit(lambda a, b: a + b)
    jadd = jax.jit(lambda a, b: a + b) if jax else None
    jx = jax.device_put(xs) if jax else None
    case("cached jit call, tiny add", lambda: kadd(kx, kx), jadd and (lambda: jadd(jx, jx)),
         number=400, scale=5)
    # one eager op
    case("eager op: x + y", lambda: kx + kx, jax and (lambda: jx + jx), lambda: xs + xs,
         number=400, scale=5)
    case("eager op: jnp.sin(x)", lambda: kjnp.sin(kx), jax and (lambda: jjnp.sin(jx)),
         lambda: np.sin(xs), number=400, scale=5)
    case("eager op: x * 2.0", lambda: kx * 2.0, jax and (lambda: jx * 2.0), lambda: xs * 2.0,
         number=400, scale=5)
    # eager jnp functions made of several primitives (jitted inside jnp, as in JAX)
    hm = np.random.default_rng(0).standard_normal((150, 100)).astype(np.float32)
    km, kv = jaxkit.device_put(hm), jaxkit.device_put(hm[0, :100].copy())
    jm, jv = (jax.device_put(hm), jax.device_put(hm[0, :100].copy())) if jax else (None, None)
    case("eager jnp.dot(mat, v) 150x100", lambda: kjnp.dot(km, kv),
         jax and (lambda: jjnp.dot(jm, jv)), lambda: np.dot(hm, hm[0]), number=400, scale=3)
    case("eager mat.mean(axis=0)", lambda: km.mean(axis=0), jax and (lambda: jm.mean(axis=0)),
         lambda: hm.mean(axis=0), number=400, scale=3)

    # jit(selu) on 1e6 and 1e7 floats
    for n in (1_000_000, 10_000_000):
        host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        kxn = jaxkit.device_put(host)
        kselu = jaxkit.jit(selu_factory(kjnp))
        if jax:
            jxn = jax.device_put(host)
            jselu = jax.jit(selu_factory(jjnp))
        case(f"jit(selu) on {n:.0e} floats", lambda: kselu(kxn).block_until_ready(),
             jax and (lambda: jselu(jxn).block_until_ready()),
             lambda: selu_factory(np)(host), number=3 if n > 1e6 else 5,
             scale=1 if n > 1e6 else 4)

    # f(x) on 3000x3000
    host = np.random.default_rng(0).standard_normal((3000, 3000)).astype(np.float32)
    kxm = jaxkit.device_put(host)
    kf = jaxkit.jit(f_seed)
    if jax:
        jxm = jax.device_put(host)
        jf = jax.jit(f_seed)
    case("jit f(x) on 3000x3000", lambda: kf(kxm).block_until_ready(),
         jax and (lambda: jf(jxm).block_until_ready()), lambda: f_seed(host), number=3)

    # cold compile of a 200-op chain (median of fresh functions, interleaved)
    reps = 3 if args.quick else 7
    cold = {"jaxkit": [], "jax": []}
    for _ in range(reps if selected("cold compile, 200-op chain") else 0):
        # A true cold compile: jaxkit would answer an identical program from its executable
        # caches (in memory and on disk), which bench_compile_cache.py measures.
        compile_cache.clear_memory_cache()
        with jaxkit.config.override(jax_enable_compilation_cache=False):
            cold["jaxkit"].append(cold_compile(jaxkit.jit, kx, 200, 1))
        if jax:
            cold["jax"].append(cold_compile(jax.jit, jx, 200, 1))
    if cold["jaxkit"]:
        rows.append(("cold compile, 200-op chain", {k: statistics.median(v) for k, v in
                                                     cold.items() if v}))

    print(f"{'case':34} {'jaxkit':>12} {'jax':>12} {'numpy':>12} {'jaxkit/jax':>11}")
    for label, best in rows:
        def fmt(name):
            v = best.get(name)
            if v is None:
                return f"{'-':>12}"
            return f"{v * 1e6:10.1f}us" if v < 1e-3 else f"{v * 1e3:10.2f}ms"
        ratio = best.get("ratio", best["jaxkit"] / best["jax"] if "jax" in best else
                         float("nan"))
        print(f"{label:34} {fmt('jaxkit')} {fmt('jax')} {fmt('numpy')} {ratio:11.2f}")


if __name__ == "__main__":
    main()
