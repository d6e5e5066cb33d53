"""Linear algebra: jaxkit against JAX on eigh, svd, qr, cholesky, solve and inv, interleaved.

    python bench/bench_linalg.py [--quick] [--sizes 8 64 512] [--ops eigh svd ...]

For each operation and size n (float32 n x n matrices) it measures, for both libraries:

* ``eager 1st``: the first eager call of ``jnp.linalg.<op>`` at that shape (compiles);
* ``jit 1st``: the first call of a fresh ``jit`` of a function calling it (trace, lower,
  compile and run; the median of 3 fresh jits);
* ``eager``/``jit``: steady-state seconds per call (best interleaved window, bench/_timing.py).

and prints the jaxkit/JAX ratio of each. Both libraries run the same LAPACK kernels, so the
steady-state ratios measure dispatch overhead, and the first-call ratios the cost of tracing,
lowering and compiling. So that they do, jaxkit's executable caches, which JAX does not have
by default, are kept out of every first call: the persistent cache is off for the run and the
in-memory one (keyed by the program, so a fresh ``jit`` of the same function would hit it) is
cleared before each first call. ``bench_compile_cache.py`` measures those caches.
"""
from __future__ import annotations

import argparse
import gc
import statistics
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

OPS = {
    "eigh": lambda m, a, b: m.linalg.eigh(a),
    "svd": lambda m, a, b: m.linalg.svd(a),
    "qr": lambda m, a, b: m.linalg.qr(a),
    "cholesky": lambda m, a, b: m.linalg.cholesky(a),
    "solve": lambda m, a, b: m.linalg.solve(a, b),
    "inv": lambda m, a, b: m.linalg.inv(a),
}


def _block(out):
    for leaf in (out if isinstance(out, tuple) else (out,)):
        leaf.block_until_ready()


def _inputs(op: str, n: int):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n)).astype(np.float32)
    if op in ("eigh", "cholesky"):
        a = (a @ a.T + n * np.eye(n)).astype(np.float32)
    return a, rng.standard_normal((n,)).astype(np.float32)


def _first_call(fn, lib) -> float:
    if lib is jaxkit:
        compile_cache.clear_memory_cache()
    # A first call allocates a great deal (tracing, lowering, compiling): a cyclic garbage
    # collection of everything both libraries hold can land in it and add 50-100 ms to one
    # library's single sample. Collect before, and not during, the timed call.
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        _block(fn())
        return time.perf_counter() - start
    finally:
        gc.enable()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer windows (smoke run)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[8, 64, 512])
    parser.add_argument("--ops", nargs="*", default=list(OPS), choices=list(OPS))
    args = parser.parse_args()
    if jax is None:
        raise SystemExit("bench_linalg needs JAX (the test extra) as the reference")
    windows = 3 if args.quick else 7
    first_repeats = 1 if args.quick else 3
    libs = {"jaxkit": (jaxkit, kjnp), "jax": (jax, jjnp)}
    # Warm-up on an unrelated shape: JAX registers its LAPACK kernels when its CPU backend
    # starts, jaxkit on the first LAPACK call; neither is part of an operation's first call.
    for _, jnp in libs.values():
        _block(jnp.linalg.cholesky(jnp.eye(3, dtype=np.float32)))
    for op in args.ops:
        fn = OPS[op]
        for n in args.sizes:
            a, b = _inputs(op, n)
            dev = {name: (jnp.asarray(a), jnp.asarray(b)) for name, (_, jnp) in libs.items()}
            first = {}
            for name, (lib, jnp) in libs.items():  # interleaved: jaxkit then JAX, per case
                x, y = dev[name]
                first[(name, "eager")] = _first_call(lambda: fn(jnp, x, y), lib)
            jit_firsts = {name: [] for name in libs}
            for _ in range(first_repeats):  # a fresh jit each time: median of the first calls
                for name, (lib, jnp) in libs.items():
                    x, y = dev[name]
                    jitted = lib.jit(lambda x, y, jnp=jnp: fn(jnp, x, y))
                    jit_firsts[name].append(_first_call(lambda: jitted(x, y), lib))
            for name in libs:
                first[(name, "jit")] = statistics.median(jit_firsts[name])
            steady_fns = {}
            for name, (lib, jnp) in libs.items():
                x, y = dev[name]
                jitted = lib.jit(lambda x, y, jnp=jnp: fn(jnp, x, y))
                steady_fns[(name, "eager")] = (lambda jnp=jnp, x=x, y=y:
                                               _block(fn(jnp, x, y)))
                steady_fns[(name, "jit")] = lambda j=jitted, x=x, y=y: _block(j(x, y))
            once = best_per_call(steady_fns, 1, 1)
            number = max(1, min(200, int(0.05 / max(min(once.values()), 1e-6))))
            steady = best_per_call(steady_fns, number, windows)
            _print_row(op, n, first, steady)


def _fmt(t: float) -> str:
    return f"{t * 1e3:9.3f}ms" if t < 1 else f"{t:9.3f}s "


def _print_row(op, n, first, steady):
    if not hasattr(_print_row, "header"):
        _print_row.header = True
        print(f"{'op':9}{'n':>5} | {'kind':10}{'jaxkit':>12}{'jax':>12}{'ratio':>8}")
        print("-" * 58)
    for label, table, kind in (("eager 1st", first, "eager"), ("jit 1st", first, "jit"),
                               ("eager", steady, "eager"), ("jit", steady, "jit")):
        k, j = table[("jaxkit", kind)], table[("jax", kind)]
        print(f"{op:9}{n:>5} | {label:10}{_fmt(k):>12}{_fmt(j):>12}{k / j:7.2f}x")


if __name__ == "__main__":
    with jaxkit.config.override(jax_enable_compilation_cache=False):
        main()
