"""Eager ops under ``jax.set_mesh`` on 8 CPU devices: jaxkit against JAX, interleaved.

    python bench/bench_mesh_eager.py [--quick]

Under ``set_mesh`` every eager op runs over the mesh's devices and its result is committed
to a ``NamedSharding`` of that mesh. Cases (each is call + wait), over an Explicit and an Auto
2x4 mesh:

* ``x + 1``, ``sin(x)``, ``x * y`` on a replicated ``float32[8, 4]`` made under the mesh;
* ``x + 1`` on an array split ``P('x', 'y')``;
* ``zeros(8)``: a creation function (no operand);
* ``sin(np)``: a NumPy operand, laid out over the mesh by the op.

Prints per-call times and the jaxkit/JAX ratio.
"""
from __future__ import annotations

import argparse
import os
from contextlib import nullcontext

os.environ.setdefault("JAXKIT_NUM_CPU_DEVICES", "8")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=8").strip()

import numpy as np
from _timing import best_per_call

import jaxkit

try:
    import jax
except ImportError:  # the comparison needs the test extra
    jax = None

HOST = np.arange(32, dtype=np.float32).reshape(8, 4)


def cases(lib, axis_type: str) -> tuple:
    """A 2x4 mesh of ``axis_type`` axes and the timed calls of ``lib`` (jaxkit or jax),
    to be run under it."""
    sh = lib.sharding
    mesh = lib.make_mesh((2, 4), ("x", "y"), axis_types=(getattr(sh.AxisType, axis_type),) * 2)
    jnp = lib.numpy
    with lib.set_mesh(mesh):
        x = jnp.ones((8, 4))
        y = jnp.full((8, 4), 2.0)
        split = lib.device_put(HOST, sh.NamedSharding(mesh, sh.PartitionSpec("x", "y")))
    calls = {
        "x + 1": lambda: x + 1,
        "sin(x)": lambda: jnp.sin(x),
        "x * y": lambda: x * y,
        "split + 1": lambda: split + 1,
        "zeros(8)": lambda: jnp.zeros(8),
        "sin(np)": lambda: jnp.sin(HOST),
    }

    return mesh, {name: (lambda fn=fn: fn().block_until_ready()) for name, fn in calls.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter windows")
    args = parser.parse_args()
    number, windows = (20, 3) if args.quick else (200, 7)
    print(f"{'case':<24}{'jaxkit':>12}{'JAX':>12}{'ratio':>8}")
    for axis_type in ("Explicit", "Auto"):
        kit_mesh, kit = cases(jaxkit, axis_type)
        ref_mesh, ref = cases(jax, axis_type) if jax is not None else (None, {})
        # Both meshes stay set while timing: the calls are the eager ops alone.
        with jaxkit.set_mesh(kit_mesh), (jax.set_mesh(ref_mesh) if ref else nullcontext()):
            for name in kit:
                fns = {"kit": kit[name]} | ({"jax": ref[name]} if name in ref else {})
                best = best_per_call(fns, number, windows)
                k, j = best["kit"] * 1e6, best.get("jax", float("nan")) * 1e6
                print(f"{axis_type + ' ' + name:<24}{k:>10.1f}us{j:>10.1f}us{k / j:>8.2f}")


if __name__ == "__main__":
    main()
