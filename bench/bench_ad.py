"""Autodiff benchmark: an SGD step of an MLP 784-512-512-10 at batch 128, jaxkit vs JAX.

    python bench/bench_ad.py [--quick]

Three cases, each measured interleaved in one run (best of several timing windows):
``jit(step)`` with the gradient inside, the same step without ``jit`` (op by op), and the cold
compile of ``jit(grad(loss))`` (median over fresh functions).
"""
from __future__ import annotations

import argparse
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
except ImportError:
    jax = None

SIZES = (784, 512, 512, 10)
BATCH = 128


def make_step(api, jnp):
    def predict(params, x):
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    def loss(params, x, y):
        logits = predict(params, x)
        logits = logits - jnp.max(logits, axis=1, keepdims=True)
        logp = logits - jnp.log(jnp.sum(jnp.exp(logits), axis=1, keepdims=True))
        return -jnp.mean(jnp.sum(logp * y, axis=1))

    def step(params, x, y):
        grads = api.grad(loss)(params, x, y)
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)]

    return loss, step


def host_data(seed=0):
    rng = np.random.default_rng(seed)
    params = [(rng.standard_normal((m, n)).astype(np.float32) / np.sqrt(m),
               np.zeros(n, np.float32)) for m, n in zip(SIZES[:-1], SIZES[1:])]
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    return params, x, y


def block(tree, api):
    return api.block_until_ready(tree)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    windows = 3 if args.quick else 10
    params, x, y = host_data()
    kparams = jaxkit.device_put(params)
    kx, ky = jaxkit.device_put(x), jaxkit.device_put(y)
    kloss, kstep = make_step(jaxkit, kjnp)
    kstep_jit = jaxkit.jit(kstep)
    fns_jit = {"jaxkit": lambda: block(kstep_jit(kparams, kx, ky), jaxkit)}
    fns_eager = {"jaxkit": lambda: block(kstep(kparams, kx, ky), jaxkit)}
    if jax is not None:
        jparams = jax.device_put(params)
        jx, jy = jax.device_put(x), jax.device_put(y)
        jloss, jstep = make_step(jax, jjnp)
        jstep_jit = jax.jit(jstep)
        fns_jit["jax"] = lambda: block(jstep_jit(jparams, jx, jy), jax)
        fns_eager["jax"] = lambda: block(jstep(jparams, jx, jy), jax)
        # same numbers: one step from the same parameters
        np.testing.assert_allclose(np.asarray(kstep_jit(kparams, kx, ky)[0][0]),
                                   np.asarray(jstep_jit(jparams, jx, jy)[0][0]), rtol=1e-4,
                                   atol=1e-5)
    rows = [("jit(grad) SGD step", best_per_call(fns_jit, 20, windows)),
            ("SGD step without jit", best_per_call(fns_eager, 3, windows))]

    cold = {"jaxkit": [], "jax": []}
    for _ in range(3 if args.quick else 5):
        _, fresh = make_step(jaxkit, kjnp)
        # A true cold compile: jaxkit would answer an identical program from its executable
        # caches (in memory and on disk), which bench_compile_cache.py measures.
        compile_cache.clear_memory_cache()
        with jaxkit.config.override(jax_enable_compilation_cache=False):
            start = time.perf_counter()
            block(jaxkit.jit(fresh)(kparams, kx, ky), jaxkit)
            cold["jaxkit"].append(time.perf_counter() - start)
        if jax is not None:
            _, fresh_j = make_step(jax, jjnp)
            start = time.perf_counter()
            block(jax.jit(fresh_j)(jparams, jx, jy), jax)
            cold["jax"].append(time.perf_counter() - start)
    rows.append(("cold compile jit(grad) step", {k: statistics.median(v)
                                                 for k, v in cold.items() if v}))

    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}")
    print(f"{'case':30} {'jaxkit':>12} {'jax':>12} {'jaxkit/jax':>11}")
    for label, t in rows:
        ratio = t["jaxkit"] / t["jax"] if "jax" in t else float("nan")
        jx_text = f"{t['jax'] * 1e3:10.2f}ms" if "jax" in t else f"{'-':>12}"
        print(f"{label:30} {t['jaxkit'] * 1e3:10.2f}ms {jx_text} {ratio:11.2f}")


if __name__ == "__main__":
    main()
