"""Sharding pieces beyond meshes and NamedSharding: ``jax.debug.visualize_sharding`` and
``inspect_array_sharding``, ``jax.experimental.shard_alike``,
``mesh_utils.create_hybrid_device_mesh``, and ``shard_map`` manual over a subset of the
mesh's axes or nested in another one.

Runs on an extra 8-device CPU backend in this process; every case is also run by JAX 0.10.2
on 8 CPU devices in a subprocess (the same source text, with ``jax`` bound to each), and the
printed output, layouts and values must be the same.
"""
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit.experimental import mesh_utils
from jaxkit.experimental.shard_alike import shard_alike
from jaxkit.runtime import multi_device

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices

PRELUDE = """
import numpy as np
P, NS, AxisType = jax.sharding.PartitionSpec, jax.sharding.NamedSharding, jax.sharding.AxisType
mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto), **MESH_KW)
def put(value, *spec):
    return jax.device_put(np.asarray(value, np.float32), NS(mesh, P(*spec)))
a = put(np.arange(32.0).reshape(8, 4), "x", "y")
b = np.linspace(-1, 1, 32).reshape(8, 4).astype(np.float32)
c = np.arange(64.0, dtype=np.float32).reshape(8, 8)
"""

# name -> code run after PRELUDE; it prints what is compared (stdout must be identical).
CASES = {
    "visualize_sharding_1d": "jax.debug.visualize_sharding((8,), NS(mesh, P('y')))",
    "visualize_sharding_one_device":
        "jax.debug.visualize_sharding((8,), jax.sharding.SingleDeviceSharding(DEVICES[3]))",
    "visualize_sharding_rank3": (
        "try:\n    jax.debug.visualize_sharding((8, 4, 2), NS(mesh, P('x')))\n"
        "except ValueError as e:\n    print(type(e).__name__, e)"),
    "inspect_eager_tree": "jax.debug.inspect_array_sharding({'a': a, 'b': jnp.ones(3)}, "
                          "callback=print)",
    "inspect_under_vmap": "jax.vmap(lambda r: jax.debug.inspect_array_sharding(r, "
                          "callback=print))(a)",
    "inspect_under_grad": (
        "def f(v):\n    jax.debug.inspect_array_sharding(v * 2, callback=print)\n"
        "    return (v ** 2).sum()\nprint(jax.grad(f)(jnp.ones(3)))"),
    "inspect_in_jaxpr": (
        "print(jax.make_jaxpr(lambda v: jax.debug.inspect_array_sharding(v, callback=print))"
        "(jnp.ones(3)))"),
    "inspect_in_partitioned_jit": (
        "def f(u):\n    v = jnp.sin(u)\n"
        "    jax.debug.inspect_array_sharding(v, callback=lambda s: print('v:', s))\n"
        "    w = v.sum(0)\n"
        "    jax.debug.inspect_array_sharding(w, callback=lambda s: print('w:', s))\n"
        "    return w\n"
        "jf = jax.jit(f)\nprint(jf(put(c, 'x', 'y')).shape)\n"
        "print(jf(put(c, 'x', 'y')).shape)  # compiled already: no callback\n"
        "jax.jit(f, out_shardings=NS(mesh, P()))(put(c, None, 'x'))\n"
        "g = jax.shard_map(lambda u: (jax.debug.inspect_array_sharding(\n"
        "    u, callback=lambda s: print('body:', s)), u)[1], mesh=mesh, in_specs=P('x'),\n"
        "    out_specs=P('x'))\n"
        "jax.jit(g)(c)"),
    "shard_alike_in_jit": (
        "out = jax.jit(lambda u, v: shard_alike(u * 2, v + 1))(a, b)\n"
        "print([o.sharding.spec for o in out], np.asarray(out[1]).sum())\n"
        "print(jax.jit(lambda u, v: (u * 2, v + 1))(a, b)[1].sharding.spec)"),
    "shard_alike_follows_second": (
        "c = put(b, None, 'y')\n"
        "print(jax.jit(lambda u, v: shard_alike(u + 1, v)[0])(b, c).sharding.spec)"),
    "shard_alike_eager_grad_vmap": (
        "print(shard_alike(jnp.ones(3), jnp.zeros(3)))\n"
        "print(jax.grad(lambda v: shard_alike(v * 2, v * 3)[1].sum())(jnp.ones(3)))\n"
        "print(jax.vmap(shard_alike, in_axes=(0, None))(jnp.ones((2, 3)), jnp.zeros(3)))\n"
        "print(jax.vmap(shard_alike, in_axes=(1, 0))(jnp.ones((3, 2)), jnp.zeros((2, 3))))\n"
        "print(jax.make_jaxpr(shard_alike)(jnp.ones(3), jnp.zeros(3)))"),
    "shard_alike_errors": (
        "for u, v in [(jnp.ones(3), jnp.ones(4)), ((jnp.ones(3),), jnp.ones(3))]:\n"
        "    try:\n        shard_alike(u, v)\n"
        "    except ValueError as e:\n        print(e)"),
    "hybrid_mesh_one_process": (
        "m = mesh_utils.create_hybrid_device_mesh((2, 4), (1, 1), devices=DEVICES,\n"
        "                                         process_is_granule=True)\n"
        "print(np.vectorize(lambda d: d.id)(m).tolist())\n"
        "try:\n    mesh_utils.create_hybrid_device_mesh((4, 2), (1, 1), devices=DEVICES)\n"
        "except ValueError as e:\n    print(e)\n"
        "try:\n    mesh_utils.create_hybrid_device_mesh((4,), (2,), devices=DEVICES,\n"
        "                                        process_is_granule=True)\n"
        "except ValueError as e:\n    print(e)"),
    "device_kind_handler": (
        "seen = []\n"
        "def handler(shape, devs, *, contiguous_submeshes):\n"
        "    seen.append((shape, contiguous_submeshes))\n"
        "    if shape == (8,):\n        return None  # falls back to the default order\n"
        "    grid = np.empty(len(devs), dtype=object)\n    grid[:] = devs[::-1]\n"
        "    return grid.reshape(shape)\n"
        "kind = DEVICES[0].device_kind\n"
        "print(kind in mesh_utils.device_kind_handler_dict)\n"
        "mesh_utils.device_kind_handler_dict[kind] = handler\n"
        "try:\n"
        "    for shape in [(4, 2), (8,)]:\n"
        "        m = mesh_utils.create_device_mesh(shape, DEVICES, contiguous_submeshes=True)\n"
        "        print(np.vectorize(lambda d: d.id)(m).tolist())\n"
        "finally:\n    del mesh_utils.device_kind_handler_dict[kind]\n"
        "print(seen)"),
    "manual_axis_type": (
        "M, AxisType = jax.sharding.ManualAxisType, jax.sharding.AxisType\n"
        "m = M(varying={'x'}, reduced={'y'})\n"
        "print(repr(m), repr(M()), M() is M(), M(varying={'x'}, reduced={'y'}) is m)\n"
        "print(m.update(unreduced={'z'}), m.to_ct_mat(), m.empty, M().empty, m.vur)\n"
        "am = jax.sharding.AbstractMesh((2, 2, 2), ('x', 'y', 'z'),\n"
        "                               axis_types=(AxisType.Manual,) * 3)\n"
        "print(m.invarying(am))\n"
        "for kw in [dict(varying={'x'}, unreduced={'x'}), dict(varying={'x'}, reduced={'x'})]:\n"
        "    try:\n        M(**kw)\n    except ValueError as e:\n        print(e)\n"
        "try:\n    m.varying = 1\nexcept AttributeError as e:\n    print(e)\n"
        "import pickle\nprint(pickle.loads(pickle.dumps(m)) is m, "
        "hash(m) == hash(M(varying={'x'}, reduced={'y'})))"),
    # shard_map manual over some of the mesh's axes, and nested
    "shard_map_subset": (
        "def body(u):\n    print('local', u.shape, jax.sharding.get_abstract_mesh())\n"
        "    return jax.lax.psum(u, 'x')\n"
        "f = jax.shard_map(body, mesh=mesh, in_specs=P('x'), out_specs=P(), "
        "axis_names={'x'})\n"
        "for r in (jax.jit(f)(c), f(c)):\n    print(r.sharding, np.asarray(r))\n"
        "print(jax.jit(jax.shard_map(lambda u: u * 2, mesh=mesh, in_specs=P(None, 'y'),\n"
        "                            out_specs=P(None, 'y'), axis_names={'y'}))(c).sharding)"),
    "shard_map_subset_axis_index": (
        "f = jax.shard_map(lambda u: u + jax.lax.axis_index('x'), mesh=mesh, in_specs=P('x'),\n"
        "                  out_specs=P('x'), axis_names={'x'})\n"
        "print(np.asarray(jax.jit(f)(c)))"),
    "shard_map_subset_grad_vmap": (
        "f = jax.shard_map(lambda u: jax.lax.psum(u, 'x'), mesh=mesh, in_specs=P('x'),\n"
        "                  out_specs=P(), axis_names={'x'})\n"
        "print(jax.grad(lambda u: (f(u) * jnp.arange(8.0)).sum())(c)[::3])\n"
        "print(jax.jvp(f, (c,), (jnp.ones_like(c),))[1])\n"
        "print(jax.vmap(f, in_axes=1, out_axes=1)(np.stack([c, c + 1], 1)).sum(0))"),
    "shard_map_nested": (
        "def outer(u):\n    def inner(v):\n"
        "        print('inner', v.shape, jax.sharding.get_abstract_mesh())\n"
        "        return jax.lax.psum(v, 'y') * jax.lax.axis_index('y')\n"
        "    return jax.shard_map(inner, in_specs=P(None, 'y'), out_specs=P(None, 'y'),\n"
        "                         axis_names={'y'})(u) + jax.lax.axis_index('x')\n"
        "g = jax.shard_map(outer, mesh=mesh, in_specs=P('x'), out_specs=P('x'), "
        "axis_names={'x'})\n"
        "r = jax.jit(g)(c)\nprint(r.sharding.spec, np.asarray(r))"),
    "shard_map_subset_errors": (
        "for kw in [dict(in_specs=P('y'), out_specs=P(), axis_names={'x'}),\n"
        "           dict(in_specs=P('x'), out_specs=P('y'), axis_names={'x'}),\n"
        "           dict(in_specs=P('x'), out_specs=P(), axis_names=('x',)),\n"
        "           dict(in_specs=P('x'), out_specs=P(), axis_names={'z'})]:\n"
        "    try:\n        jax.shard_map(lambda u: u, mesh=mesh, **kw)(c)\n"
        "    except (TypeError, ValueError) as e:\n        print(type(e).__name__, e)"),
    "smap": (
        "with jax.sharding.set_mesh(mesh):\n"
        "    f = jax.smap(lambda u: jax.lax.psum(u, 'x'), in_axes=0, out_axes=None, "
        "axis_name='x')\n"
        "    r = jax.jit(f)(c)\n    print(r.shape, r.sharding.spec, np.asarray(r).sum())\n"
        "    g = jax.smap(in_axes=(1, None), out_axes=1, axis_name='y')(lambda u, w: u * w)\n"
        "    r = g(c, np.float32(2))\n    print(r.shape, r.sharding.spec, np.asarray(r).sum())\n"
        "    h = jax.smap(lambda u: {'a': u + jax.lax.axis_index('y')}, in_axes=1,\n"
        "                 out_axes={'a': 1}, axis_name='y')\n"
        "    print(np.asarray(h(c)['a'])[0])"),
    "smap_errors": (
        "for kw in [dict(in_axes=0, out_axes=0, axis_name=('x',)),\n"
        "           dict(in_axes=[0], out_axes=0, axis_name='x'),\n"
        "           dict(in_axes=0, out_axes='a', axis_name='x'),\n"
        "           dict(out_axes=0, axis_name='x')]:\n"
        "    try:\n"
        "        with jax.sharding.set_mesh(mesh):\n"
        "            jax.smap(lambda u: u, **kw)(c)\n"
        "    except (TypeError, ValueError) as e:\n        print(type(e).__name__, e)\n"
        "try:\n    jax.smap(lambda u: u, in_axes=0, out_axes=0, axis_name='x')(c)\n"
        "except ValueError as e:\n    print(e)"),
    "auto_and_explicit_axes": (
        "mesh_e = jax.make_mesh((4, 2), ('x', 'y'), **MESH_KW)\n"
        "def inner(t):\n    print('inside', jax.sharding.get_abstract_mesh())\n"
        "    return t * 2\n"
        "with jax.sharding.set_mesh(mesh_e):\n"
        "    xe = jax.device_put(c, NS(mesh_e, P('x', None)))\n"
        "    r = jax.jit(lambda u: jax.sharding.auto_axes(inner, out_sharding=P(None, 'y'))(u))"
        "(xe)\n"
        "    print(r.sharding.spec, float(r.sum()))\n"
        "    r = jax.sharding.auto_axes(inner, axes='x', out_sharding=NS(mesh_e, P('y')))(xe)\n"
        "    print(r.sharding.spec)\n"
        "    r = jax.jit(lambda u: jax.sharding.explicit_axes(inner, in_sharding=P('x', 'y'))"
        "(u))(c)\n"
        "    print(r.sharding.spec, float(r.sum()))\n"
        "    r = jax.sharding.explicit_axes(inner)(c, in_sharding=P('x'))\n"
        "    print(r.sharding.spec)\n"
        "    try:\n        jax.sharding.auto_axes(inner)(xe)\n"
        "    except TypeError as e:\n        print(e)\n"
        "print(jax.sharding.auto_axes(inner, out_sharding=P('x'))(c).sum())\n"
        "r = jax.sharding.auto_axes(inner, out_sharding=NS(mesh, P('x')))(a)\n"
        "print(r.sharding.spec)\n"
        "try:\n    jax.sharding.explicit_axes(inner, in_sharding=P('x'))(c)\n"
        "except ValueError as e:\n    print(e)\n"
        "print(jax.sharding.reshard(put(c, 'x'), NS(mesh_e, P('y'))).sharding.spec)"),
}

JAX_DRIVER = """
import io, json, sys
from contextlib import redirect_stdout
import jax, jax.numpy as jnp
from jax.experimental import mesh_utils
from jax.experimental.shard_alike import shard_alike
prelude, cases = sys.argv[1], json.loads(sys.argv[2])
ns = dict(jax=jax, jnp=jnp, MESH_KW={}, DEVICES=jax.devices(), shard_alike=shard_alike,
          mesh_utils=mesh_utils)
exec(prelude, ns)
out = {}
for name, code in cases.items():
    buf = io.StringIO()
    try:
        with redirect_stdout(buf):
            exec(code, dict(ns))
    except Exception as e:  # recorded: the jaxkit side must then fail the same way
        buf.write(f"raised {type(e).__name__}: {e}")
    out[name] = buf.getvalue()
print(json.dumps(out))
"""


def _jax_run(cases: dict) -> dict:
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the JAX oracle is not installed")
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    proc = subprocess.run([sys.executable, "-c", JAX_DRIVER, PRELUDE, json.dumps(cases)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def jax_out():
    """What JAX 0.10.2 prints for every case on 8 CPU devices."""
    return _jax_run(CASES)


def _run(code: str) -> str:
    ns = dict(jax=jax, jnp=jnp, MESH_KW={"devices": DEVICES}, DEVICES=DEVICES,
              shard_alike=shard_alike, mesh_utils=mesh_utils)
    exec(PRELUDE, ns)
    buf = io.StringIO()
    with redirect_stdout(buf):
        exec(code, ns)
    return buf.getvalue()


def _normalise(text: str) -> str:
    # A function's repr names its address, and a set prints in hash order (which changes
    # from process to process); the rest must be identical.
    text = re.sub(r"<function [^>]*>", "<function>", text)
    return re.sub(r"frozenset\(\{([^}]*)\}\)",
                  lambda m: "frozenset({" + ", ".join(sorted(m.group(1).split(", "))) + "})",
                  text)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_jax(jax_out, name):
    assert _normalise(_run(CASES[name])) == _normalise(jax_out[name])


def test_inspect_array_sharding_in_one_device_jit_names_the_missing_rule():
    # JAX reports GSPMDSharding({replicated}) here; jaxkit's one-device programs do not know
    # their device while lowering.
    f = jax.jit(lambda v: jax.debug.inspect_array_sharding(v, callback=print))
    with pytest.raises(NotImplementedError, match="lowering rule for 'inspect_sharding'"):
        f(jnp.ones(3))


class _FakeDevice:
    """A device of a multi-slice system: only what the hybrid mesh reads."""

    def __init__(self, id_, slice_index):
        self.id, self.slice_index, self.process_index = id_, slice_index, 0

    def __repr__(self):
        return f"d{self.id}"


@pytest.mark.parametrize("mesh_shape, dcn_shape, slices", [
    ((2, 2), (2, 1), 2), ((1, 4), (1, 2), 2), ((2,), (4,), 4), ((2, 1, 2), (1, 2, 1), 2),
])
def test_hybrid_mesh_tiles_slices_as_numpy_block_does(mesh_shape, dcn_shape, slices):
    per = int(np.prod(mesh_shape))
    # Slices listed out of order: the mesh sorts them by slice_index.
    devs = [_FakeDevice(i, i // per) for i in range(per * slices)][::-1]
    got = mesh_utils.create_hybrid_device_mesh(mesh_shape, dcn_shape, devices=devs)
    ids = np.vectorize(lambda d: d.id)(got)
    inner = [np.array(sorted(range(s * per, (s + 1) * per), reverse=True)).reshape(mesh_shape)
             for s in range(slices)]
    grid = np.arange(slices).reshape(dcn_shape)
    want = np.block(np.vectorize(lambda s: inner[s], otypes=[object])(grid).tolist())
    np.testing.assert_array_equal(ids, want)
    unsorted = mesh_utils.create_hybrid_device_mesh(mesh_shape, dcn_shape, devices=devs,
                                                    should_sort_granules_by_key=False)
    assert np.vectorize(lambda d: d.slice_index)(unsorted).flat[0] == slices - 1


def test_grad_of_nested_shard_map_matches_numpy():
    """JAX 0.10.2 itself fails here (a DuplicateSpecError from its residual specs), so the
    reference is the derivative worked out by hand: output column j < 4 of block i is i, column
    j + 4 is ``u[:, j] + u[:, j + 4] + i``."""
    ns = dict(jax=jax, jnp=jnp, MESH_KW={"devices": DEVICES})
    exec(PRELUDE, ns)
    exec(CASES["shard_map_nested"].split("r = jax.jit")[0], ns)
    c = ns["c"]
    grad = jax.grad(lambda u: (ns["g"](u) ** 2).sum())(c)
    i = np.repeat(np.arange(4), 2)[:, None]
    half = 2 * (c[:, :4] + c[:, 4:] + i)
    np.testing.assert_allclose(np.asarray(grad), np.concatenate([half, half], 1))


def test_subset_lowering_is_manual_over_its_axes_only():
    ns = dict(jax=jax, jnp=jnp, MESH_KW={"devices": DEVICES})
    exec(PRELUDE, ns)
    f = jax.shard_map(lambda u: jax.lax.psum(u, "x"), mesh=ns["mesh"], in_specs=ns["P"]("x"),
                      out_specs=ns["P"](), axis_names={"x"})
    text = jax.jit(f).lower(ns["c"]).as_text()
    assert 'in_shardings=[<@mesh, [{"x", ?}, {?}]>] out_shardings=[<@mesh, [{?}, {?}]>] ' \
           'manual_axes={"x"}' in text
