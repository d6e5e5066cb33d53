"""``jit`` of ``random.normal(key, (1_000_000,))``: jaxkit against JAX, interleaved in one run.

    python bench/bench_random.py [--size N] [--number K] [--windows W]

Both sides generate the same numbers (checked first). The timing windows alternate between
the two and each side keeps its best window (the machine is shared; the best window is the
least disturbed one). Prints seconds per call, the jaxkit/JAX ratio and the compile times.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import best_per_call

import jaxkit
from jaxkit import random

try:
    import jax
except ImportError:  # the comparison needs the test extra
    jax = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--number", type=int, default=20, help="calls per timing window")
    parser.add_argument("--windows", type=int, default=7, help="timing windows per side")
    args = parser.parse_args()
    shape = (args.size,)

    fns, compile_s = {}, {}
    kfun = jaxkit.jit(lambda k: random.normal(k, shape))
    kkey = random.PRNGKey(0)
    start = time.perf_counter()
    kout = kfun(kkey).block_until_ready()
    compile_s["jaxkit"] = time.perf_counter() - start
    fns["jaxkit"] = lambda: kfun(kkey).block_until_ready()
    if jax is not None:
        jfun = jax.jit(lambda k: jax.random.normal(k, shape))
        jkey = jax.random.PRNGKey(0)
        start = time.perf_counter()
        jout = jfun(jkey).block_until_ready()
        compile_s["jax"] = time.perf_counter() - start
        fns["jax"] = lambda: jfun(jkey).block_until_ready()
        np.testing.assert_allclose(np.asarray(kout), np.asarray(jout), rtol=2e-5, atol=2e-6)

    best = best_per_call(fns, args.number, args.windows)
    print(f"jit(random.normal(key, ({args.size:_},))), best of {args.windows} windows of "
          f"{args.number} calls")
    for name, seconds in best.items():
        print(f"  {name:7s} {seconds * 1e3:9.3f} ms/call   (first call incl. compile "
              f"{compile_s[name] * 1e3:8.1f} ms)")
    if "jax" in best:
        print(f"  ratio jaxkit/jax: {best['jaxkit'] / best['jax']:.2f}")


if __name__ == "__main__":
    main()
