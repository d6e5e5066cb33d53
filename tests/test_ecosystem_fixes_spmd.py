"""Flax 0.12.8's nnx spmd_test fixes, against JAX 0.10.2's output (recorded on 8 CPU devices
with the code below: no subprocess here): ``Sharding.is_equivalent_to``; a convolution laid
out by ``out_sharding`` over Explicit mesh axes (jaxpr, types, vmap); ``zeros_like`` keeping
an Explicit layout so that ``select``'s cases agree (``nnx.Dropout``); ``jit`` of a function
with no argument whose body lays a value out; grad's seed laid out over the argument's
Explicit mesh when no mesh is in context; ``PartitionSpec.index``/``count``; ``eval_shape``
results keeping their layout over Explicit axes; ``full_like``/``zeros_like`` of a concrete
array over an Auto mesh keeping its layout (optax's state); ``with_sharding_constraint`` with a
``layout.Format``."""
import importlib

import numpy as np

import jaxkit
from jaxkit.runtime import multi_device

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices

JAX_OUTPUT = [
    'equivalent True',
    'equivalent True',
    'equivalent False',
    'equivalent True',
    'equivalent False',
    'equivalent False',
    'equivalent True',
    'equivalent True',
    'equivalent True',
    '{ lambda ; a:f32[2,4,4] b:f32[3,4,8]. let\n    c:f32[2,4,8] = conv_general_dilated[\n      batch_group_count=1\n      dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 2, 1), rhs_spec=(2, 1, 0), out_spec=(0, 2, 1))\n      feature_group_count=1\n      lhs_dilation=(1,)\n      out_sharding=None\n      padding=((1, 1),)\n      precision=None\n      preferred_element_type=None\n      rhs_dilation=(1,)\n      window_strides=(1,)\n    ] a b\n  in (c,) }',
    "{ lambda a:f32[3,4,8]; b:f32[2@x,4,4]. let\n    c:f32[2@x,4@y,8] = conv_general_dilated[\n      batch_group_count=1\n      dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 2, 1), rhs_spec=(2, 1, 0), out_spec=(0, 2, 1))\n      feature_group_count=1\n      lhs_dilation=(1,)\n      out_sharding=NamedSharding(mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu), spec=P('x', 'y'))\n      padding=((1, 1),)\n      precision=None\n      preferred_element_type=None\n      rhs_dilation=(1,)\n      window_strides=(1,)\n    ] b a\n  in (c,) }",
    'float32[2@x,4@y,8]',
    'float32[2@x,4,8]',
    '(2, 1, 4, 8)',
    'float32[8@x,2] float32[8@x,2]',
    'float32[8@x,2]',
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P('x', 'y'), memory_kind=device) (4, 1)",
    '{ lambda ; a:f32[8@x,2]. let\n    b:f32[8@x,2] = mul a 2.0:f32[]\n    _:f32[] = reduce_sum[axes=(0, 1) out_sharding=None] b\n    c:f32[] = reshard 1.0:f32[]\n    d:f32[8@x,2] = broadcast_in_dim c\n    e:f32[8@x,2] = mul d 2.0:f32[]\n  in (e,) }',
    'spec 2 1',
    "ShapeDtypeStruct(shape=(8, 2), dtype=float32, sharding=NamedSharding(mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu), spec=P('x', None)))",
    "NamedSharding(mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, platform=cpu), spec=P(None, None))",
    'ShapeDtypeStruct(shape=(2, 2), dtype=float32)',
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P('y', 'x'), memory_kind=device)",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P('y', 'x'), memory_kind=device)",
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P(), memory_kind=device)",
    'SingleDeviceSharding',
    "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P('x', None), memory_kind=device) (0, 1)",
]


def _lines(jax, devices) -> list[str]:
    """What the fixes print, written for JAX's API so that the same code recorded JAX's
    output (``jax``: jaxkit here, JAX 0.10.2 with 8 CPU devices for the record)."""
    jnp, lax = jax.numpy, jax.lax
    from_sh = jax.sharding
    P, NS, AT = from_sh.PartitionSpec, from_sh.NamedSharding, from_sh.AxisType
    out = []
    ex = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AT.Explicit,) * 2, devices=devices)
    au = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AT.Auto,) * 2, devices=devices)
    other = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AT.Auto,) * 2, devices=devices)
    x = jax.device_put(np.arange(16.0, dtype=np.float32).reshape(8, 2), NS(ex, P("x")))
    one = jax.device_put(np.ones((8, 2), np.float32), devices[0])
    # is_equivalent_to: tiling, devices, replicated spellings
    for a, b, n in [(NS(au, P("x")), NS(au, P("x", None)), 2), (NS(au, P()), NS(au, P(None)), 2),
                    (NS(au, P("x")), NS(other, P("x")), 2), (NS(au, P()), NS(other, P()), 2),
                    (NS(au, P("x")), NS(au, P("y")), 2), (one.sharding, NS(au, P()), 2),
                    (one.sharding, one.sharding, 1), (x.sharding, NS(ex, P("x", None)), 2),
                    (NS(ex.abstract_mesh, P("x")), NS(ex.abstract_mesh, P("x")), 2)]:
        out.append(f"equivalent {a.is_equivalent_to(b, n)}")

    def conv(a, w, **kw):
        return lax.conv_general_dilated(a, w, (1,), "SAME",
                                        dimension_numbers=("NWC", "WIO", "NWC"), **kw)
    c = np.arange(32.0, dtype=np.float32).reshape(2, 4, 4)
    w = np.ones((3, 4, 8), np.float32)
    out.append(str(jax.make_jaxpr(conv)(c, w)))
    with jax.set_mesh(ex):
        cs = from_sh.reshard(c, P("x", None, None))
        out.append(str(jax.make_jaxpr(lambda a: conv(a, w, out_sharding=P("x", "y")))(cs)))
        out.append(str(jax.typeof(conv(cs, w, out_sharding=P("x", "y", None)))))
        out.append(str(jax.typeof(conv(cs, w))))
        out.append(str(jax.vmap(lambda a: conv(a[None], w, out_sharding=P(None, "y")),
                                in_axes=(0,))(cs).shape))
        # zeros_like keeps an Explicit layout, so select's cases agree (nnx.Dropout)
        z = jnp.zeros_like(x)
        out.append(f"{jax.typeof(z)} {jax.typeof(jnp.ones_like(x, shape=(8, 2)))}")
        m = jax.random.bernoulli(jax.random.key(0), 0.5, (8, 2), out_sharding=jax.typeof(x).sharding)
        out.append(str(jax.typeof(lax.select(m, x, z))))
    # jit of a function with no argument whose body lays a value out
    with jax.set_mesh(au):
        r = jax.jit(lambda: jax.lax.with_sharding_constraint(jnp.ones((8, 4)), P("x", "y")))()
        out.append(f"{r.sharding} {r.sharding.shard_shape(r.shape)}")
    # grad's seed without a mesh in context: laid out over the argument's Explicit mesh
    out.append(str(jax.make_jaxpr(jax.grad(lambda a: (a * 2).sum()))(x)))
    # PartitionSpec has tuple's index and count (Flax's linen spmd calls index)
    out.append(f"spec {P('x', None, ('x', 'y')).index(('x', 'y'))} {P('x', None).count(None)}")
    # eval_shape gives a result's layout over Explicit axes (Flax's nnx.eval_shape), and
    # replicated over an all-Explicit context mesh
    out.append(repr(jax.eval_shape(lambda: from_sh.reshard(jnp.ones((8, 2)), NS(ex, P("x"))))))
    with jax.set_mesh(ex):
        out.append(str(jax.eval_shape(lambda: jnp.ones((2, 2))).sharding))
    out.append(repr(jax.eval_shape(lambda: jnp.ones((2, 2)))))
    # full_like of a concrete array laid out over an Auto mesh keeps its layout (optax's
    # zeros_like state of a sharded parameter); a new shape of a split one does not
    xa = jax.device_put(np.ones((8, 2), np.float32), NS(au, P("y", "x")))
    rep = jax.device_put(np.ones((8, 2), np.float32), NS(au, P()))
    out += [str(jnp.zeros_like(xa).sharding), str(jnp.full_like(xa, 2.0).sharding),
            str(jnp.zeros_like(rep, shape=(3,)).sharding),
            str(type(jnp.zeros_like(xa, shape=(3,)).sharding).__name__)]
    # with_sharding_constraint takes a layout.Format: its sharding (Flax's Variable)
    lay = importlib.import_module(f"{jax.__name__}.experimental.layout")
    fmt = lay.Format(lay.Layout(major_to_minor=(0, 1)), NS(au, P("x", None)))
    v = lax.with_sharding_constraint(jnp.ones((4, 4)), fmt)
    out.append(f"{v.sharding} {v.format.layout.major_to_minor}")
    return out


def test_spmd_fixes_print_as_jax():
    assert _lines(jaxkit, DEVICES) == JAX_OUTPUT
