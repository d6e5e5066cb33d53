"""pmap benchmark on 4 CPU devices: jaxkit against JAX, measured interleaved in one process.

    python bench/bench_pmap.py [--quick]

Cases (each is call + wait, so no collective execution is left in flight: JAX's own pmap
deadlocks on few cores when they pile up):

* ``psum step``: ``pmap(lambda x: psum(x, 'i'))`` on a result of the previous call (the data
  stays on the devices);
* ``psum step, NumPy in``: the same with a NumPy argument (split and copied to 4 devices);
* ``step + fetch``: the step, then the whole result converted to NumPy (one shard per device);
* ``grad step``: ``pmap(grad(loss))`` with the gradient averaged by ``pmean``.

Each case alternates short timing windows between the contenders and keeps each one's best
window. Prints per-call times and the jaxkit/JAX ratio.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("JAXKIT_NUM_CPU_DEVICES", "4")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4").strip()

import numpy as np
from _timing import best_per_call

import jaxkit
from jaxkit import lax as klax
from jaxkit.api import grad as kgrad
from jaxkit.transforms.pmap import pmap as kpmap
from jaxkit.lax import parallel as kparallel

try:
    import jax
except ImportError:  # the comparison needs the test extra
    jax = None


def cases(shape: tuple[int, ...]):
    host = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    k_step = kpmap(lambda x: kparallel.psum(x, "i"), "i")
    k_dev = k_step(host)
    out = {
        "psum step": {"jaxkit": lambda: k_step(k_dev).block_until_ready()},
        "psum step, NumPy in": {"jaxkit": lambda: k_step(host).block_until_ready()},
        "step + fetch": {"jaxkit": lambda: np.asarray(k_step(k_dev))},
    }
    def k_loss(w):
        return klax.reduce_sum(klax.mul(klax.sin(w), w), tuple(range(w.ndim)))

    k_gstep = kpmap(lambda w: kparallel.pmean(kgrad(k_loss)(w), "i"), "i")
    out["grad step"] = {"jaxkit": lambda: k_gstep(k_dev).block_until_ready()}
    if jax is not None:
        j_step = jax.pmap(lambda x: jax.lax.psum(x, "i"), "i")
        j_dev = j_step(host)
        out["psum step"]["jax"] = lambda: j_step(j_dev).block_until_ready()
        out["psum step, NumPy in"]["jax"] = lambda: j_step(host).block_until_ready()
        out["step + fetch"]["jax"] = lambda: np.asarray(j_step(j_dev))
        def j_loss(w):
            return (jax.numpy.sin(w) * w).sum()

        j_gstep = jax.pmap(lambda w: jax.lax.pmean(jax.grad(j_loss)(w), "i"), "i")
        out["grad step"]["jax"] = lambda: j_gstep(j_dev).block_until_ready()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing windows")
    args = parser.parse_args()
    number, windows = (50, 4) if args.quick else (200, 20)
    print(f"devices: jaxkit {len(jaxkit.devices())}"
          + (f", jax {len(jax.devices())}" if jax is not None else " (jax not installed)"))
    print(f"{'case':<32}{'jaxkit us':>12}{'jax us':>12}{'ratio':>9}")
    for shape in [(4, 3), (4, 256, 256)]:
        for name, fns in cases(shape).items():
            best = best_per_call(fns, number if shape[-1] < 100 else number // 10, windows)
            k = best["jaxkit"] * 1e6
            j = best.get("jax", float("nan")) * 1e6
            label = f"{name} {'x'.join(map(str, shape))}"
            print(f"{label:<32}{k:>12.1f}{j:>12.1f}{k / j:>9.2f}")


if __name__ == "__main__":
    main()
