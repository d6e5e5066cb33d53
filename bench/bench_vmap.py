"""vmap benchmark: automatic batching against hand batching and a Python loop, jaxkit and JAX.

    python bench/bench_vmap.py [--quick]

The tutorial's ``apply_matrix(v) = dot(mat, v)`` with ``mat`` of shape (150, 100), batched
over ``B`` vectors (B = 10 and 1000) three ways: ``jit(vmap(apply_matrix))``, the
hand-batched ``jit(lambda vs: vs @ mat.T)``, and the naive loop
``stack([apply_matrix(v) for v in vs])`` (eager, one dispatch per example). Every contender
of a batch size (jaxkit's and JAX's) is timed in interleaved windows within one run, keeping
each one's best window (the machine is shared; the best window is the least disturbed), and
waiting for results with ``block_until_ready``. The table gives per-call times, the
jaxkit/hand-batched ratio (vmap's overhead over hand batching, ~1 when the batched program is
as good) and the jaxkit/JAX ratio.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.transforms.vmap import vmap

try:
    import jax
    import jax.numpy as jjnp
except ImportError:  # the comparison needs the test extra
    jax = None


def best_per_call(fns: dict, number: dict, windows: int) -> dict:
    """Interleave timing windows of every function; best seconds per call for each."""
    best = {name: float("inf") for name in fns}
    for fn in fns.values():  # warm up (compiles)
        fn()
        fn()
    for _ in range(windows):
        for name, fn in fns.items():
            n = number[name]
            start = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / n)
    return best


def contenders(jit, vmap, jnp, mat, vs) -> dict:
    """The three ways of batching ``apply_matrix`` in one library (jaxkit or JAX)."""
    mat = jnp.asarray(mat)
    vs = jnp.asarray(vs)

    def apply_matrix(v):
        return jnp.dot(mat, v)

    vmapped = jit(vmap(apply_matrix))
    hand = jit(lambda batch: jnp.dot(batch, mat.T))

    def naive():
        return jnp.stack([apply_matrix(v) for v in vs])

    return {
        "jit(vmap)": lambda: vmapped(vs).block_until_ready(),
        "hand-batched": lambda: hand(vs).block_until_ready(),
        "python loop": lambda: naive().block_until_ready(),
    }


def check_same(kit: dict, ref: dict) -> None:
    """All contenders compute the same numbers (a benchmark of wrong code is worthless)."""
    outs = [np.asarray(fn()) for fn in list(kit.values()) + list(ref.values())]
    for o in outs[1:]:
        np.testing.assert_allclose(o, outs[0], rtol=2e-4, atol=2e-4)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer windows (smoke run)")
    args = parser.parse_args()
    windows = 3 if args.quick else 15
    rng = np.random.default_rng(0)
    mat = rng.normal(size=(150, 100)).astype(np.float32)
    rows = []
    for batch in (10, 1000):
        vs = rng.normal(size=(batch, 100)).astype(np.float32)
        kit = contenders(jaxkit.jit, vmap, kjnp, mat, vs)
        ref = contenders(jax.jit, jax.vmap, jjnp, mat, vs) if jax is not None else {}
        check_same(kit, ref)
        fns = {("jaxkit", k): f for k, f in kit.items()}
        fns.update({("JAX", k): f for k, f in ref.items()})
        # The loop makes `batch` eager dispatches per call: time it fewer times.
        number = {key: (max(1, 200 // batch) if key[1] == "python loop" else 200)
                  for key in fns}
        best = best_per_call(fns, number, windows)
        hand = best[("jaxkit", "hand-batched")]
        for name in kit:
            t_kit = best[("jaxkit", name)]
            t_jax = best.get(("JAX", name))
            rows.append((f"B={batch:<5d} {name}", t_kit, t_jax, t_kit / hand,
                         None if t_jax is None else t_kit / t_jax))

    def fmt(t):
        return "      -" if t is None else f"{t * 1e6:9.1f}"

    def ratio(r):
        return "     -" if r is None else f"{r:6.2f}"

    print(f"{'case':<26s} {'jaxkit us':>9s} {'JAX us':>9s} {'kit/hand':>8s} {'kit/JAX':>8s}")
    for label, t_kit, t_jax, r_hand, r_jax in rows:
        print(f"{label:<26s} {fmt(t_kit)} {fmt(t_jax)} {ratio(r_hand):>8s} {ratio(r_jax):>8s}")


if __name__ == "__main__":
    main()
