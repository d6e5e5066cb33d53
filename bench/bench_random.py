"""``jit`` of a sampler (``random.normal(key, (1_000_000,))`` by default, or ``gamma``, whose
rejection loop runs for every element at once): jaxkit against JAX, interleaved in one run.

    python bench/bench_random.py [--sampler normal|gamma] [--size N] [--number K] [--windows W]

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


# name -> sample(random module, key, shape)
SAMPLERS = {
    "normal": lambda rnd, k, shape: rnd.normal(k, shape),
    "gamma": lambda rnd, k, shape: rnd.gamma(k, 2.0, shape),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sampler", choices=SAMPLERS, default="normal")
    parser.add_argument("--size", type=int, default=None,
                        help="samples per call (default: 1,000,000 normal, 100,000 gamma)")
    parser.add_argument("--number", type=int, default=20, help="calls per timing window")
    parser.add_argument("--windows", type=int, default=7, help="timing windows per side")
    args = parser.parse_args()
    size = args.size or (1_000_000 if args.sampler == "normal" else 100_000)
    shape = (size,)
    sample = SAMPLERS[args.sampler]

    fns, compile_s = {}, {}
    kfun = jaxkit.jit(lambda k: sample(random, k, shape))
    kkey = random.PRNGKey(0)
    start = time.perf_counter()
    kout = kfun(kkey).block_until_ready()
    compile_s["jaxkit"] = time.perf_counter() - start
    fns["jaxkit"] = lambda: kfun(kkey).block_until_ready()
    if jax is not None:
        jfun = jax.jit(lambda k: sample(jax.random, k, shape))
        jkey = jax.random.PRNGKey(0)
        start = time.perf_counter()
        jout = jfun(jkey).block_until_ready()
        compile_s["jax"] = time.perf_counter() - start
        fns["jax"] = lambda: jfun(jkey).block_until_ready()
        np.testing.assert_allclose(np.asarray(kout), np.asarray(jout), rtol=2e-5, atol=2e-6)

    best = best_per_call(fns, args.number, args.windows)
    print(f"jit(random.{args.sampler}(key, ..., ({size:_},))), best of {args.windows} windows of "
          f"{args.number} calls")
    for name, seconds in best.items():
        print(f"  {name:7s} {seconds * 1e3:9.3f} ms/call   (first call incl. compile "
              f"{compile_s[name] * 1e3:8.1f} ms)")
    if "jax" in best:
        print(f"  ratio jaxkit/jax: {best['jaxkit'] / best['jax']:.2f}")


if __name__ == "__main__":
    main()
