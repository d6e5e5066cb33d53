"""How sharded values print, against JAX 0.10.2's output (recorded on 8 CPU devices: no
subprocess here): the class of an array laid out over several devices, and the seed of
``grad`` over a mesh with ``Explicit`` axes, which JAX lays out replicated over that mesh
(a ``reshard`` in the jaxpr: at top level, and in a shard_map body whose mesh keeps an
Explicit axis), but not over Auto or Manual axes; the batched type of a vmapped jit; the
layout of an eager shard_map's results."""
import numpy as np

import jaxkit as jax
from jaxkit import lax
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices
X = np.arange(16.0, dtype=np.float32).reshape(8, 2)
MESH_TYPES = [(AxisType.Explicit,) * 2, (AxisType.Explicit, AxisType.Auto), (AxisType.Auto,) * 2]

# Per mesh of MESH_TYPES: the jaxpr of grad at top level, type(x), the jaxpr of
# value_and_grad in a shard_map manual over 'x' only (JAX 0.10.2's output).
JAX_OUTPUT = [
    "\n".join([
        '{ lambda ; a:f32[8@x,2]. let',
        '    b:f32[8@x,2] = mul a 2.0:f32[]',
        '    _:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] b',
        '    c:f32[] = reshard 1.0:f32[]',
        '    d:f32[8@x,2] = broadcast_in_dim c',
        '    e:f32[8@x,2] = mul d 2.0:f32[]',
        '  in (e,) }']),
    "\n".join([
        "<class 'jaxlib._jax.ArrayImpl'>"]),
    "\n".join([
        '{ lambda ; a:f32[8,2]. let',
        '    b:f32[] c:f32[8,2] = shard_map[',
        '      check_vma=True',
        '      in_specs=(P(),)',
        '      jaxpr={ lambda ; d:f32[8,2]. let',
        '          e:f32[8,2] = mul d 2.0:f32[]',
        '          f:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] e',
        '          g:f32[] = reshard 1.0:f32[]',
        '          h:f32[8,2] = broadcast_in_dim g',
        '          i:f32[8,2] = mul h 2.0:f32[]',
        '        in (f, i) }',
        "      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu)",
        "      newly_manual_axes=frozenset({'x'})",
        '      out_specs=(P(), P())',
        '    ] a',
        '  in (b, c) }']),
    "\n".join([
        '{ lambda ; a:f32[8@x,2]. let',
        '    b:f32[8@x,2] = mul a 2.0:f32[]',
        '    _:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] b',
        '    c:f32[] = reshard 1.0:f32[]',
        '    d:f32[8@x,2] = broadcast_in_dim c',
        '    e:f32[8@x,2] = mul d 2.0:f32[]',
        '  in (e,) }']),
    "\n".join([
        "<class 'jaxlib._jax.ArrayImpl'>"]),
    "\n".join([
        '{ lambda ; a:f32[8,2]. let',
        '    b:f32[] c:f32[8,2] = shard_map[',
        '      check_vma=True',
        '      in_specs=(P(),)',
        '      jaxpr={ lambda ; d:f32[8,2]. let',
        '          e:f32[8,2] = mul d 2.0:f32[]',
        '          f:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] e',
        '          g:f32[8,2] = broadcast_in_dim 1.0:f32[]',
        '          h:f32[8,2] = mul g 2.0:f32[]',
        '        in (f, h) }',
        "      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Auto), device_kind=cpu, num_cores=None, platform=cpu)",
        "      newly_manual_axes=frozenset({'x'})",
        '      out_specs=(P(), P())',
        '    ] a',
        '  in (b, c) }']),
    "\n".join([
        '{ lambda ; a:f32[8,2]. let',
        '    b:f32[8,2] = mul a 2.0:f32[]',
        '    _:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] b',
        '    c:f32[8,2] = broadcast_in_dim 1.0:f32[]',
        '    d:f32[8,2] = mul c 2.0:f32[]',
        '  in (d,) }']),
    "\n".join([
        "<class 'jaxlib._jax.ArrayImpl'>"]),
    "\n".join([
        '{ lambda ; a:f32[8,2]. let',
        '    b:f32[] c:f32[8,2] = shard_map[',
        '      check_vma=True',
        '      in_specs=(P(),)',
        '      jaxpr={ lambda ; d:f32[8,2]. let',
        '          e:f32[8,2] = mul d 2.0:f32[]',
        '          f:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] e',
        '          g:f32[8,2] = broadcast_in_dim 1.0:f32[]',
        '          h:f32[8,2] = mul g 2.0:f32[]',
        '        in (f, h) }',
        "      mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto), device_kind=cpu, num_cores=None, platform=cpu)",
        "      newly_manual_axes=frozenset({'x'})",
        '      out_specs=(P(), P())',
        '    ] a',
        '  in (b, c) }']),
]


def _loss(a):
    return (a * 2).sum()


def test_types_and_grad_seeds_print_as_jax():
    out = []
    for types in MESH_TYPES:
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=types, devices=DEVICES)
        with jax.set_mesh(mesh):
            xs = jax.device_put(X, P("x"))
            out.append(str(jax.make_jaxpr(jax.grad(_loss))(xs)))
            out.append(str(type(xs)))
            body = jax.shard_map(jax.value_and_grad(_loss), in_specs=P(), out_specs=(P(), P()),
                                 axis_names={"x"})
            out.append(str(jax.make_jaxpr(body)(X)))
    assert out == JAX_OUTPUT


# vmap of a jit over a dimension split over an Explicit mesh axis: the batched jaxpr's
# inputs keep that axis (JAX 0.10.2's output, with and without spmd_axis_name).
VMAP_JIT_JAXPRS = [
    "\n".join([
        '{ lambda ; a:f32[8@x,4@y]. let',
        '    b:f32[8@x,4@y] = jit[',
        '      name=<lambda>',
        "      ctx_mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit))",
        '      jaxpr={ lambda ; a:f32[8@x,4@y]. let',
        '          b:f32[8@x,4@y] = mul a 2.0:f32[]',
        '        in (b,) }',
        '    ] a',
        '  in (b,) }']),
    "\n".join([
        '{ lambda ; a:f32[8@x,4@y]. let',
        '    b:f32[8@x,4@y] = jit[',
        '      name=<lambda>',
        "      ctx_mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit))",
        '      jaxpr={ lambda ; a:f32[8@x,4@y]. let',
        '          b:f32[8@x,4@y] = mul a 2.0:f32[]',
        '        in (b,) }',
        '    ] a',
        '    c:f32[4@y,8@x] = transpose[permutation=(1, 0)] b',
        '  in (c,) }']),
]


def test_vmap_of_jit_keeps_the_split_batch_dimension():
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2,
                         devices=DEVICES)
    with jax.set_mesh(mesh):
        xs = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), P("x", "y"))
        row = jax.jit(lambda r: r * 2)
        out = [str(jax.make_jaxpr(jax.vmap(row, spmd_axis_name="x"))(xs)),
               str(jax.make_jaxpr(jax.vmap(row, in_axes=1))(xs))]
    assert out == VMAP_JIT_JAXPRS


# An eager shard_map's results are laid out as out_specs writes them (P('x',), P(None,)),
# over a mesh from the context too (JAX 0.10.2's output; Explicit, then Auto mesh).
EAGER_OUT_SHARDINGS = [
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit)), spec=P(None,), memory_kind=device) float32[8]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit)), spec=P(), memory_kind=device) float32[8]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit)), spec=P('x',), memory_kind=device) float32[8@x,2]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit)), spec=P(('x', 'y'),), memory_kind=device) float32[32@(x,y),2]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit)), spec=P(), memory_kind=device) float32[4,2]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P(None,), memory_kind=device) float32[8]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P(), memory_kind=device) float32[8]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P('x',), memory_kind=device) float32[8,2]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P(('x', 'y'),), memory_kind=device) float32[32,2]",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P(), memory_kind=device) float32[4,2]",
]


def test_eager_shard_map_results_are_laid_out_as_out_specs_write_them():
    out = []
    for types in [AxisType.Explicit, AxisType.Auto]:
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(types,) * 2, devices=DEVICES)
        with jax.set_mesh(mesh):
            x = jax.device_put(X, P("x", None))
            for specs, arg in [((P(), P(None,)), X[:, 0]), ((P(), P()), X[:, 0]),
                               ((P("x"), P("x")), x), ((P("x"), P(("x", "y"))), x)]:
                r = jax.shard_map(lambda a: a, in_specs=specs[0], out_specs=specs[1])(arg)
                out.append(f"{r.sharding} {jax.typeof(r)}")
            r = jax.shard_map(lambda a: lax.psum(a, "x"), in_specs=P("x"), out_specs=P())(x)
            out.append(f"{r.sharding} {jax.typeof(r)}")
    assert out == EAGER_OUT_SHARDINGS
