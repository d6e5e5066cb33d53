"""Typed keys over several devices (the extra 8-device CPU backend the sharding tests use):
``pmap``, ``device_put`` with a ``NamedSharding``, sharded ``jit`` and ``shard_map`` take and
give key arrays with JAX 0.10.2's key data and layouts.

The oracle runs in this process on one device, so each record computes the same keys there
without devices (``vmap`` for ``pmap``/``shard_map``, which give the same bits), and the
layouts a key array reports are the ones JAX reports on 8 CPU devices (its key arrays name
one spec entry per key axis: ``P('x', None)`` for ``key<fry>[8,2]`` split on ``x``).
"""
import numpy as np
import pytest

import jaxkit
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices


def _oracle():
    return pytest.importorskip("jax")


@pytest.fixture(scope="module")
def env():
    mesh = jaxkit.make_mesh((8,), ("x",), devices=DEVICES, axis_types=(AxisType.Auto,))
    keys = jaxkit.random.split(jaxkit.random.key(0), 8)
    return mesh, keys, jaxkit.device_put(keys, NamedSharding(mesh, P("x")))


def _smap(f, mesh, in_specs, out_specs):
    return jaxkit.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


# (name, jaxkit call on (mesh, keys, keys laid out over x), the same keys from JAX on one
# device, the spec JAX reports for the result or None for pmap's own layout)
RECORDS = [
    ("pmap_split", lambda mesh, k, ks: jaxkit.pmap(jaxkit.random.split, backend="spmd8")(k),
     lambda jax: jax.vmap(jax.random.split)(jax.random.split(jax.random.key(0), 8)), None),
    ("pmap_normal", lambda mesh, k, ks: jaxkit.pmap(
        lambda k: jaxkit.random.normal(k, (2,)), backend="spmd8")(k),
     lambda jax: jax.vmap(lambda k: jax.random.normal(k, (2,)))(
         jax.random.split(jax.random.key(0), 8)), None),
    ("device_put", lambda mesh, k, ks: ks,
     lambda jax: jax.random.split(jax.random.key(0), 8), P("x")),
    ("jit_of_sharded", lambda mesh, k, ks: jaxkit.jit(jaxkit.vmap(jaxkit.random.split))(ks),
     lambda jax: jax.vmap(jax.random.split)(jax.random.split(jax.random.key(0), 8)),
     P("x", None)),
    ("jit_out_shardings", lambda mesh, k, ks: jaxkit.jit(
        lambda k: jaxkit.random.split(k, 8), out_shardings=NamedSharding(mesh, P("x")))(
            jaxkit.random.key(3)),
     lambda jax: jax.random.split(jax.random.key(3), 8), P("x")),
    ("shard_map_split", lambda mesh, k, ks: _smap(
        lambda k: jaxkit.random.split(k[0])[None], mesh, P("x"), P("x"))(ks),
     lambda jax: jax.vmap(jax.random.split)(jax.random.split(jax.random.key(0), 8)),
     P("x", None)),
    ("shard_map_fold_in_axis_index", lambda mesh, k, ks: jaxkit.jit(_smap(
        lambda k: jaxkit.random.fold_in(k, jaxkit.lax.axis_index("x"))[None], mesh, P(),
        P("x")))(jaxkit.random.key(0)),
     lambda jax: jax.vmap(jax.random.fold_in, (None, 0))(jax.random.key(0), np.arange(8)),
     P("x")),
    ("eq_of_sharded", lambda mesh, k, ks: ks == ks[::-1],
     lambda jax: jax.numpy.zeros(8, bool), P("x")),
]


def _data(m, x):
    if m.dtypes.issubdtype(x.dtype, m.dtypes.prng_key):
        return ("key", x.shape, np.asarray(m.random.key_data(x)).tolist())
    return (str(x.dtype), x.shape, np.asarray(x).tolist())


@pytest.mark.parametrize("name,call,expected,spec", RECORDS, ids=[r[0] for r in RECORDS])
def test_keys_over_devices_as_jax(env, name, call, expected, spec):
    jax = _oracle()
    out = call(*env)
    assert _data(jaxkit, out) == _data(jax, expected(jax))
    assert isinstance(out, jaxkit.Array) and len(out.devices()) == 8
    if spec is not None:
        assert out.sharding == NamedSharding(env[0], spec)
