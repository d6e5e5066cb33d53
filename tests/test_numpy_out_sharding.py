"""``out_sharding=`` of ``jax.numpy`` functions: over a mesh whose axes are ``Explicit`` the
result is laid out as asked, its type says so, and the printed jaxpr is JAX's (the layout a
parameter of ``iota``/``broadcast_in_dim``/``reshape``/``dot_general``, not a constraint).

One record per call: its expression over two laid-out arrays, a NumPy reference for its
value, and JAX 0.10.2's result spec, type and ``make_jaxpr`` text, recorded on 8 CPU devices
(``jax.config.update('jax_num_cpu_devices', 8)``, the same mesh and arrays; the abstract
mesh's repr is written ``{M}``). jaxkit runs them on an extra 8-device CPU backend in this
process. Cheap: each expression runs once eagerly and is traced once.
"""
from typing import NamedTuple

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("explicit8", 8).devices
M = ("AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, "
     "num_cores=None, platform=cpu)")


class Record(NamedTuple):
    name: str
    expr: str  # over a: f32[8,4] laid out P('x', 'y') and v: f32[8] laid out P('x')
    numpy: str  # the value, from NumPy's a and v
    spec: str  # JAX's x.sharding.spec
    type: str  # JAX's jax.typeof(x)
    jaxpr: tuple  # JAX's make_jaxpr text, line by line


RECORDS = [
    Record('arange',
           "jnp.arange(8, out_sharding=P('x'))",
           'np.arange(8)', "P('x',)", 'int32[8@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:i32[8@x] = iota[',
               '      dimension=0',
               '      dtype=int32',
               '      shape=(8,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] ',
               '  in (c,) }',
           )),
    Record('zeros',
           "jnp.zeros((8, 4), out_sharding=P('x'))",
           'np.zeros((8, 4))', "P('x', None)", 'float32[8@x,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,4] = broadcast_in_dim 0.0:f32[]',
               '  in (c,) }',
           )),
    Record('ones',
           "jnp.ones((8,), dtype=jnp.int32, out_sharding=P(('x', 'y')))",
           'np.ones(8)', "P(('x', 'y'),)", 'int32[8@(x,y)]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:i32[8@(x,y)] = broadcast_in_dim 1:i32[]',
               '  in (c,) }',
           )),
    Record('full_array_fill',
           "jnp.full((8, 4), jnp.arange(4.0), out_sharding=P('x'))",
           'np.broadcast_to(np.arange(4.0), (8, 4))', "P('x', None)", 'float32[8@x,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4] = iota[dimension=0 dtype=float32 shape=(4,) sharding=None] ',
               '    d:f32[8@x,4] = broadcast_in_dim[broadcast_dimensions=(1,)] c',
               '  in (d,) }',
           )),
    Record('zeros_like',
           "jnp.zeros_like(a, out_sharding=P('y'))",
           'np.zeros((8, 4))', "P('y', None)", 'float32[8@y,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@y,4] = broadcast_in_dim 0.0:f32[]',
               '  in (c,) }',
           )),
    Record('ones_like',
           'jnp.ones_like(v, out_sharding=P())',
           'np.ones(8)', 'P(None,)', 'float32[8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8] = broadcast_in_dim 1.0:f32[]',
               '  in (c,) }',
           )),
    Record('full_like',
           "jnp.full_like(a, 3, out_sharding=P(None, 'x'))",
           'np.full((8, 4), 3)', "P(None, 'x')", 'float32[8,4@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8,4@x] = broadcast_in_dim 3.0:f32[]',
               '  in (c,) }',
           )),
    Record('full_like_shape',
           "jnp.full_like(a, 2, shape=(4, 8), out_sharding=P('x'))",
           'np.full((4, 8), 2)', "P('x', None)", 'float32[4@x,8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4@x,8] = broadcast_in_dim 2.0:f32[]',
               '  in (c,) }',
           )),
    Record('reshape',
           "jnp.reshape(a, (32,), out_sharding=P('x'))",
           'a.reshape(32)', "P('x',)", 'float32[32@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '  in (c,) }',
           )),
    Record('reshape_method',
           "a.reshape(32, out_sharding=P('x'))",
           'a.reshape(32)', "P('x',)", 'float32[32@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '  in (c,) }',
           )),
    Record('ravel',
           "jnp.ravel(a, out_sharding=P('x'))",
           'a.ravel()', "P('x',)", 'float32[32@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '  in (c,) }',
           )),
    Record('flatten',
           "a.flatten(out_sharding=P('x'))",
           'a.ravel()', "P('x',)", 'float32[32@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '  in (c,) }',
           )),
    Record('broadcast_to',
           "jnp.broadcast_to(v, (4, 8), out_sharding=P(None, 'x'))",
           'np.broadcast_to(v, (4, 8))', "P(None, 'x')", 'float32[4,8@x]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4,8@x] = broadcast_in_dim[broadcast_dimensions=(1,)] b',
               '  in (c,) }',
           )),
    Record('matmul',
           "jnp.matmul(a, a.T, out_sharding=P('x', None))",
           'a @ a.T', "P('x', None)", 'float32[8@x,8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4@y,8@x] = transpose[permutation=(1, 0)] a',
               '    d:f32[8@x,8] = dot_general[',
               '      dimension_numbers=(([1], [0]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a c',
               '  in (d,) }',
           )),
    Record('tensordot',
           "jnp.tensordot(a, a, axes=([0], [0]), out_sharding=P('x', 'y'))",
           'a.T @ a', "P('x', 'y')", 'float32[4@x,4@y]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4@x,4@y] = dot_general[',
               '      dimension_numbers=(([0], [0]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a a',
               '  in (c,) }',
           )),
    Record('dot',
           "jnp.dot(a, a.T, out_sharding=P('x', 'y'))",
           'a @ a.T', "P('x', 'y')", 'float32[8@x,8@y]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[4@y,8@x] = transpose[permutation=(1, 0)] a',
               '    d:f32[8@x,8@y] = dot_general[',
               '      dimension_numbers=(([1], [0]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a c',
               '  in (d,) }',
           )),
    Record('einsum',
           "jnp.einsum('ij,kj->ik', a, a, out_sharding=P('x', None))",
           'a @ a.T', "P('x', None)", 'float32[8@x,8]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,8] = dot_general[',
               '      dimension_numbers=(([1], [1]), ([], []))',
               '      preferred_element_type=float32',
               '    ] a a',
               '  in (c,) }',
           )),
    Record('jit_zeros_like',
           "jax.jit(lambda x: jnp.zeros_like(x, out_sharding=P('y')))(a)",
           'np.zeros((8, 4))', "P('y', None)", 'float32[8@y,4]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@y,4] = jit[',
               '      name=<lambda>',
               "      ctx_mesh=Mesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit))",
               '      jaxpr={ lambda ; a:f32[8@x,4@y]. let',
               '          c:f32[8@y,4] = broadcast_in_dim 0.0:f32[]',
               '        in (c,) }',
               '    ] a',
               '  in (c,) }',
           )),
    Record('grad_reshape',
           "jax.grad(lambda x: jnp.reshape(x, (32,), out_sharding=P('x')).sum())(a)",
           'np.ones((8, 4))', "P('x', 'y')", 'float32[8@x,4@y]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[32@x] = reshape[',
               '      dimensions=None',
               '      new_sizes=(32,)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x',))",
               '    ] a',
               '    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] c',
               '    d:f32[] = reshard 1.0:f32[]',
               '    e:f32[32@x] = broadcast_in_dim d',
               '    f:f32[8@x,4@y] = reshape[',
               '      dimensions=None',
               '      new_sizes=(8, 4)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x', 'y'))",
               '    ] e',
               '  in (f,) }',
           )),
    Record('vmap_reshape',
           "jax.vmap(lambda x: jnp.reshape(x, (2, 2), out_sharding=P('y')))(a)",
           'a.reshape(8, 2, 2)', "P('x', 'y', None)", 'float32[8@x,2@y,2]', (
               '{ lambda ; a:f32[8@x,4@y] b:f32[8@x]. let',
               '    c:f32[8@x,2@y,2] = reshape[',
               '      dimensions=None',
               '      new_sizes=(8, 2, 2)',
               "      sharding=NamedSharding(mesh={M}, spec=P('x', 'y'))",
               '    ] a',
               '  in (c,) }',
           )),
]


@pytest.fixture(scope="module")
def mesh():
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2,
                         devices=DEVICES)
    with jax.sharding.set_mesh(mesh):
        yield mesh


@pytest.fixture(scope="module")
def operands(mesh):
    a = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    v = np.arange(8.0, dtype=np.float32)
    return (a, v), (jax.device_put(a, P("x", "y")), jax.device_put(v, P("x")))


@pytest.mark.parametrize("rec", RECORDS, ids=[r.name for r in RECORDS])
def test_out_sharding_matches_jax(rec, operands):
    (a_np, v_np), (a, v) = operands
    f = eval("lambda a, v: " + rec.expr)  # noqa: S307 - the table's own expressions
    got = f(a, v)
    assert (str(got.sharding.spec), str(jax.typeof(got))) == (rec.spec, rec.type)
    want = eval(rec.numpy, {"np": np, "a": a_np, "v": v_np})  # noqa: S307
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    assert str(jax.make_jaxpr(f)(a, v)) == "\n".join(rec.jaxpr).replace("{M}", M)


def test_out_sharding_is_refused_with_a_device(mesh):
    """JAX's ValueError when both ``device`` and ``out_sharding`` are given."""
    with pytest.raises(ValueError, match="Only one of `device` or `out_sharding` can be set"):
        jnp.zeros(8, device=DEVICES[0], out_sharding=P("x"))
    with pytest.raises(ValueError, match="Only one of `device` or `out_sharding` can be set"):
        jnp.arange(8, device=DEVICES[0], out_sharding=P("x"))
