"""Sharding benchmark on 8 CPU devices: jaxkit against JAX, interleaved in one process.

    python bench/bench_sharding.py [--quick]

Cases (each is call + wait):

* ``dp step (shard_map)``: a data-parallel training step of a 2-layer MLP written with
  ``shard_map``: gradients of each device's share of the batch, averaged with ``pmean``;
* ``dp step (jit, laid out)``: the same step as plain ``jit`` on a batch laid out over the
  mesh (``NamedSharding(mesh, P(('x', 'y')))``), partitioned by XLA's propagation;
* ``dp step (jit, host batch)``: the same step taking the batch as NumPy arrays, laid out
  inside by ``with_sharding_constraint`` (each device is given its part of the batch, the
  layout XLA chose for the parameter, as in JAX);
* ``device_put to a layout``: a NumPy batch split over the 8 devices.

Prints per-call times and the jaxkit/JAX ratio (JAX's mesh axes are made ``Auto``, as
jaxkit partitions them).
"""
from __future__ import annotations

import argparse
import os

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


def make_step(lib, mesh, P, shard_map):
    jnp = lib.numpy

    def loss(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

    def step(p, x, y):
        g = lib.grad(loss)(p, x, y)
        return lib.tree.map(lambda a, b: a - 0.01 * b, p, g)

    def dp_step(p, x, y):
        g = lib.grad(loss)(p, x, y)
        g = lib.tree.map(lambda v: lib.lax.pmean(v, ("x", "y")), g)
        return lib.tree.map(lambda a, b: a - 0.01 * b, p, g)

    batch = P(("x", "y"))
    mapped = lib.jit(shard_map(dp_step, mesh=mesh, in_specs=(P(), batch, batch),
                               out_specs=P()))
    laid = lib.sharding.NamedSharding(mesh, batch)
    wsc = lib.lax.with_sharding_constraint
    from_host = lib.jit(lambda p, x, y: step(p, wsc(x, laid), wsc(y, laid)))
    return mapped, lib.jit(step), from_host


def contender(lib, shard_map, axis_types, host):
    from_lib = lib.sharding
    mesh = lib.make_mesh((4, 2), ("x", "y"), axis_types=axis_types)
    P, NamedSharding = from_lib.PartitionSpec, from_lib.NamedSharding
    mapped, plain, from_host = make_step(lib, mesh, P, shard_map)
    params, xs, ys = host
    layout = NamedSharding(mesh, P(("x", "y")))
    xs_dev, ys_dev = lib.device_put(xs, layout), lib.device_put(ys, layout)
    params_dev = lib.device_put(params, NamedSharding(mesh, P()))
    return {
        "dp step (shard_map)": lambda: lib.block_until_ready(mapped(params_dev, xs_dev,
                                                                    ys_dev)),
        "dp step (jit, laid out)": lambda: lib.block_until_ready(plain(params_dev, xs_dev,
                                                                       ys_dev)),
        "dp step (jit, host batch)": lambda: lib.block_until_ready(from_host(params_dev, xs,
                                                                             ys)),
        "device_put to a layout": lambda: lib.block_until_ready(lib.device_put(xs, layout)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(64, 256)).astype(np.float32) / 8,
              "b1": np.zeros(256, np.float32),
              "w2": rng.normal(size=(256, 10)).astype(np.float32) / 16,
              "b2": np.zeros(10, np.float32)}
    host = (params, rng.normal(size=(1024, 64)).astype(np.float32),
            rng.normal(size=(1024, 10)).astype(np.float32))
    k = contender(jaxkit, jaxkit.shard_map, (jaxkit.sharding.AxisType.Auto,) * 2, host)
    j = None
    if jax is not None:
        j = contender(jax, jax.shard_map, (jax.sharding.AxisType.Auto,) * 2, host)
    number, windows = (5, 5) if args.quick else (20, 15)
    print(f"{'case':28s} {'jaxkit':>10s} {'JAX':>10s} {'jaxkit/JAX':>11s}")
    for case in k:
        fns = {"jaxkit": k[case]}
        if j is not None:
            fns["jax"] = j[case]
        best = best_per_call(fns, number, windows)
        kt = best["jaxkit"] * 1e6
        if j is None:
            print(f"{case:28s} {kt:9.0f}us")
            continue
        jt = best["jax"] * 1e6
        print(f"{case:28s} {kt:9.0f}us {jt:9.0f}us {kt / jt:10.2f}x")


if __name__ == "__main__":
    main()
