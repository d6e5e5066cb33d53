"""The sharding notebook (``07_sharding``): meshes, layouts, jit over a mesh, shard_map.

    python notebooks/_build_sharding.py      # needs nbformat and nbclient

Kept apart from ``_build.py`` (the seed tutorials' ports); built and executed the same way.
The kernel asks for 8 CPU devices before jaxkit first touches a device.
"""
from __future__ import annotations

from _build import build, code, md

CELLS = [
    md("""
# Sharded arrays: one program, many devices

An array can live *spread over* several devices. A `Mesh` names the axes of a grid of
devices; a `NamedSharding(mesh, PartitionSpec(...))` says which mesh axes split each
dimension of an array. `jit` then compiles a program that XLA's SPMD partitioner splits over
the devices: jaxkit only annotates the program with the layouts (in Shardy attributes), XLA
decides the rest and inserts the communication.

This notebook runs on 8 CPU devices, which jaxkit creates when `JAXKIT_NUM_CPU_DEVICES` is
set before the first device is used (JAX's equivalent is
`XLA_FLAGS=--xla_force_host_platform_device_count=8`)."""),
    code("""
import os
os.environ['JAXKIT_NUM_CPU_DEVICES'] = '8'
import numpy as np
import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit.sharding import NamedSharding, PartitionSpec as P
jax.devices()"""),
    md("## A mesh and a layout"),
    code("""
mesh = jax.make_mesh((4, 2), ('x', 'y'))
print(mesh)
x = jax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4),
                   NamedSharding(mesh, P('x', 'y')))
print(x.sharding)
jax.debug.visualize_array_sharding(x)"""),
    md("Each device holds one block; `addressable_shards` lists them with the slices of the "
       "whole array they hold:"),
    code("""
for shard in x.addressable_shards[:3]:
    print(shard.device, shard.index, shard.data.shape)"""),
    md("Split over `'x'` only, each block is held by the two devices of a row of the mesh "
       "(`replica_id` counts the copies):"),
    code("""
rows = jax.device_put(x, NamedSharding(mesh, P('x')))
jax.debug.visualize_array_sharding(rows)
[(s.device.id, s.replica_id) for s in rows.addressable_shards[:4]]"""),
    md("""
## jit over a mesh

A jitted function called on laid-out arrays is partitioned over their mesh. The lowered
module carries the layouts; XLA propagates them and picks the outputs' layout:"""),
    code("""
w = jax.device_put(np.ones((4, 2), np.float32), NamedSharding(mesh, P(None, 'y')))

@jax.jit
def layer(x, w):
    return jnp.tanh(x @ w)

print(layer.lower(x, w).as_text())
y = layer(x, w)
print(y.sharding)"""),
    md("When the contracted dimension is split, every device holds a partial sum, and XLA "
       "adds them up with an all-reduce; the compiled program shows it:"),
    code("""
a = jax.device_put(np.ones((4, 8), np.float32), NamedSharding(mesh, P(None, 'x')))
b = jax.device_put(np.ones((8, 2), np.float32), NamedSharding(mesh, P('x', None)))
hlo = jax.jit(lambda a, b: a @ b).lower(a, b).compile().as_text()
for line in hlo.splitlines():
    if 'all-reduce(' in line:
        print(line.strip()[:90])
jax.jit(lambda a, b: a @ b)(a, b)"""),
    md("`in_shardings` and `out_shardings` fix layouts; `with_sharding_constraint` pins one "
       "inside the program:"),
    code("""
total = jax.jit(lambda x: x.sum(0), out_shardings=NamedSharding(mesh, P()))(x)
print(total, total.sharding.spec)

@jax.jit
def relayout(x):
    return jax.lax.with_sharding_constraint(2 * x, NamedSharding(mesh, P('y')))

jax.debug.visualize_array_sharding(relayout(x))"""),
    md("""
## shard_map: per-device code with collectives

`shard_map` runs a function on every device's block and lets it talk to the others over
the mesh's named axes. Here is a data-parallel training step: every device takes the
gradient on its share of the batch, and `pmean` averages the gradients over all devices:"""),
    code("""
def loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p['w'] + p['b']) - y) ** 2)

def step(p, x, y):
    g = jax.grad(loss)(p, x, y)
    g = jax.tree.map(lambda v: jax.lax.pmean(v, ('x', 'y')), g)
    return jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

rng = np.random.default_rng(0)
params = {'w': rng.normal(size=(3, 2)).astype(np.float32), 'b': np.zeros(2, np.float32)}
xs = rng.normal(size=(64, 3)).astype(np.float32)
ys = rng.normal(size=(64, 2)).astype(np.float32)

parallel_step = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P(('x', 'y')),
                                                                 P(('x', 'y'))),
                                      out_specs=P()))
p = params
for _ in range(50):
    p = parallel_step(p, xs, ys)
print(f'loss {float(loss(params, xs, ys)):.4f} -> {float(loss(p, xs, ys)):.4f}')"""),
    md("The same 50 steps on one device, with the whole batch, give the same parameters:"),
    code("""
q = params
one_device_step = jax.jit(lambda p, x, y: jax.tree.map(
    lambda a, b: a - 0.1 * b, p, jax.grad(loss)(p, x, y)))
for _ in range(50):
    q = one_device_step(q, xs, ys)
print(all(np.allclose(p[k], q[k], atol=1e-6) for k in p))"""),
    md("""
## What is not there yet

`grad` *of* a `shard_map` (its partial-evaluation and transpose rules), JAX's replication
checks, and arrays whose layout is part of their type (JAX's `Explicit` mesh axes: jaxkit
keeps the axis types for printing but lets XLA propagate every layout) are still to come;
so are several processes with sharded arrays. `grad` inside the body, as above, works."""),
]

if __name__ == "__main__":
    print("built", build("07_sharding", CELLS))
