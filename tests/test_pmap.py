"""pmap and collectives on 4 CPU devices (an extra 4-device backend created in this process),
checked against NumPy references; the same collectives under ``vmap(axis_name=...)``;
composition with grad, jvp, vmap and jit; sharded results; errors. One test runs a fresh
process with ``JAXKIT_NUM_CPU_DEVICES=4`` to check the default-device path and that jax is
never imported by jaxkit."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxkit
from jaxkit import lax
from jaxkit.runtime import multi_device as _runtime_multi
from jaxkit.api import grad, jvp
from jaxkit.transforms.pmap import ShardedArray, pmap
from jaxkit.transforms.vmap import vmap
from jaxkit.interpreters import batching
from jaxkit.lax import parallel as P

N = 4
BACKEND = "cpu_pmap_tests"


@pytest.fixture(scope="module", autouse=True)
def four_devices():
    return _runtime_multi.add_cpu_backend(BACKEND, N)


def ppmap(f, axis_name="i", **kw):
    return pmap(f, axis_name, backend=BACKEND, **kw)


def f32(*shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _ppermute_ref(x, perm):
    out = np.zeros_like(x)
    for src, dst in perm:
        out[dst] = x[src]
    return out


def _all_to_all_ref(x, split_axis, concat_axis):
    # x: (n, ...) per device; device i sends block j of split_axis to device j.
    n = x.shape[0]
    blocks = [np.split(x[i], n, axis=split_axis) for i in range(n)]
    return np.stack([np.concatenate([blocks[i][j] for i in range(n)], axis=concat_axis)
                     for j in range(n)])


CYCLE = [(0, 1), (1, 2), (2, 3), (3, 0)]

# name, per-device function of (x, axis name), input, NumPy reference of the stacked result
COLLECTIVES = [
    ("psum", lambda x, a: P.psum(x, a), f32(N, 3),
     lambda x: np.broadcast_to(x.sum(0), x.shape)),
    ("pmean", lambda x, a: P.pmean(x, a), f32(N, 3),
     lambda x: np.broadcast_to(x.mean(0), x.shape)),
    ("pmax", lambda x, a: P.pmax(x, a), rnd(N, 3),
     lambda x: np.broadcast_to(x.max(0), x.shape)),
    ("pmin", lambda x, a: P.pmin(x, a), rnd(N, 3),
     lambda x: np.broadcast_to(x.min(0), x.shape)),
    ("psum_int", lambda x, a: P.psum(x, a), np.arange(N * 2, dtype=np.int32).reshape(N, 2),
     lambda x: np.broadcast_to(x.sum(0), x.shape)),
    ("psum_constant", lambda x, a: P.psum(1, a), f32(N), lambda x: np.full(N, N)),
    ("axis_index", lambda x, a: P.axis_index(a), f32(N), lambda x: np.arange(N)),
    ("all_gather", lambda x, a: P.all_gather(x, a), f32(N, 3),
     lambda x: np.broadcast_to(x, (N, N, 3))),
    ("all_gather_axis1", lambda x, a: P.all_gather(x, a, axis=1), f32(N, 3),
     lambda x: np.broadcast_to(x.T, (N, 3, N))),
    ("all_gather_tiled", lambda x, a: P.all_gather(x, a, tiled=True), f32(N, 3),
     lambda x: np.broadcast_to(x.reshape(-1), (N, N * 3))),
    ("ppermute_cycle", lambda x, a: P.ppermute(x, a, CYCLE), f32(N, 3),
     lambda x: _ppermute_ref(x, CYCLE)),
    ("ppermute_partial", lambda x, a: P.ppermute(x, a, [(0, 2), (1, 0)]), f32(N, 3),
     lambda x: _ppermute_ref(x, [(0, 2), (1, 0)])),
    ("pshuffle", lambda x, a: P.pshuffle(x, a, [3, 0, 1, 2]), f32(N, 3),
     lambda x: x[[3, 0, 1, 2]]),
    ("psum_scatter", lambda x, a: P.psum_scatter(x, a), f32(N, N),
     lambda x: x.sum(0)),
    ("psum_scatter_tiled", lambda x, a: P.psum_scatter(x, a, tiled=True), f32(N, 2 * N),
     lambda x: x.sum(0).reshape(N, 2)),
    ("all_to_all", lambda x, a: P.all_to_all(x, a, 0, 0), f32(N, N, 2),
     lambda x: _all_to_all_ref(x, 0, 0).reshape(N, N, 2)),
    ("all_to_all_tiled", lambda x, a: P.all_to_all(x, a, 1, 0, tiled=True), f32(N, 1, 2 * N),
     lambda x: _all_to_all_ref(x, 1, 0)),
    ("psum_groups", lambda x, a: P.psum(x, a, axis_index_groups=[[0, 1], [2, 3]]), f32(N, 3),
     lambda x: np.concatenate([np.broadcast_to(x[:2].sum(0), (2, 3)),
                               np.broadcast_to(x[2:].sum(0), (2, 3))])),
    ("all_gather_groups", lambda x, a: P.all_gather(x, a, axis_index_groups=[[0, 2], [3, 1]]),
     f32(N, 2), lambda x: np.stack([x[[0, 2]], x[[3, 1]], x[[0, 2]], x[[3, 1]]])),
]


@pytest.mark.parametrize("name,fn,x,ref", COLLECTIVES, ids=[c[0] for c in COLLECTIVES])
def test_collective_under_pmap(name, fn, x, ref):
    out = ppmap(lambda v: fn(v, "i"))(x)
    assert isinstance(out, ShardedArray)
    np.testing.assert_allclose(np.asarray(out), ref(x), rtol=1e-6)


VMAPPABLE = [c for c in COLLECTIVES if "groups" not in c[0]]


@pytest.mark.parametrize("name,fn,x,ref", VMAPPABLE, ids=[c[0] for c in VMAPPABLE])
def test_collective_under_vmap_axis_name(name, fn, x, ref):
    with batching.checking_rules():
        out = vmap(lambda v: fn(v, "i"), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), ref(x), rtol=1e-6)


# ---- in_axes / out_axes / pytrees / options -------------------------------------------------


def test_in_axes_none_and_pytrees():
    params = {"w": rnd(3), "b": rnd(N, 3, seed=1)}
    out = ppmap(lambda p, x: (lax.add(lax.mul(p["w"], x), p["b"]), x),
                in_axes=({"w": None, "b": 0}, 0))(params, f32(N, 3))
    np.testing.assert_allclose(np.asarray(out[0]), params["w"] * f32(N, 3) + params["b"],
                               rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out[1]), f32(N, 3))


def test_in_axes_and_out_axes_one():
    x = f32(3, N)
    out = ppmap(lambda v: P.psum(v, "i"), in_axes=1, out_axes=1)(x)
    assert out.shape == (3, N)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(x.sum(1, keepdims=True), x.shape))


def test_out_axes_none_keeps_one_copy():
    out = ppmap(lambda v: P.psum(v, "i"), out_axes=None)(f32(N, 3))
    assert out.shape == (3,)
    np.testing.assert_allclose(np.asarray(out), f32(N, 3).sum(0))


def test_kwargs_static_and_axis_size():
    f = ppmap(lambda x, k, *, y: lax.mul(lax.add(x, y), np.float32(k)),
              static_broadcasted_argnums=1)
    np.testing.assert_allclose(np.asarray(f(f32(N, 2), 3, y=np.ones((N, 2), np.float32))),
                               (f32(N, 2) + 1) * 3)
    out = ppmap(lambda: P.axis_index("i"), axis_size=N)()
    np.testing.assert_array_equal(np.asarray(out), np.arange(N))


def test_closed_over_array_is_broadcast():
    w = jaxkit.device_put(rnd(3, seed=3))
    out = ppmap(lambda x: lax.mul(x, w))(f32(N, 3))
    np.testing.assert_allclose(np.asarray(out), f32(N, 3) * np.asarray(w), rtol=1e-6)


def test_results_stay_sharded_and_chain():
    f = ppmap(lambda v: lax.mul(v, np.float32(2)))
    out = f(f32(N, 3))
    shards = out.addressable_shards
    assert [s.device for s in shards] == jaxkit.devices(BACKEND)
    assert [s.data.shape for s in shards] == [(1, 3)] * N
    assert shards[2].index == (slice(2, 3), slice(None))
    np.testing.assert_array_equal(np.asarray(shards[2].data), f32(N, 3)[2:3] * 2)
    assert out.devices() == set(jaxkit.devices(BACKEND))
    again = f(out)  # the global array is used in place
    np.testing.assert_array_equal(np.asarray(again), f32(N, 3) * 4)


def test_explicit_devices_set_the_shard_order():
    devs = jaxkit.devices(BACKEND)[::-1][:2]
    out = pmap(lambda v: lax.add(v, lax.convert_element_type(P.axis_index("i"), np.float32)),
               "i", devices=devs)(f32(2, 3))
    assert [s.device for s in out.addressable_shards] == devs
    np.testing.assert_array_equal(np.asarray(out), f32(2, 3) + np.arange(2)[:, None])


def test_sharded_result_in_eager_op():
    out = ppmap(lambda v: lax.mul(v, np.float32(2)))(f32(N, 3))
    np.testing.assert_array_equal(np.asarray(lax.add(out, out)), f32(N, 3) * 4)


def test_donate_argnums_deletes_the_argument():
    f = ppmap(lambda v: lax.add(v, np.float32(1)), donate_argnums=0)
    x = f(f32(N, 3))
    y = f(x)
    assert x.is_deleted()
    np.testing.assert_array_equal(np.asarray(y), f32(N, 3) + 2)


def test_many_unawaited_steps_do_not_deadlock():
    # Without the bound on executions in flight the CPU client aborts in a collective
    # rendezvous after 40 s when many are queued (JAXLIB.md section 6).
    f = ppmap(lambda v: P.pmean(v, "i"))
    x = f(np.ones((N, 8), np.float32))
    for _ in range(200):
        x = f(x)
    np.testing.assert_array_equal(np.asarray(x), np.ones((N, 8), np.float32))


def test_make_jaxpr_shows_the_pmap_and_its_body():
    text = str(jaxkit.make_jaxpr(ppmap(lambda v: P.psum(lax.mul(v, 2.0), "i")))(f32(N, 3)))
    assert "xla_pmap[" in text and "psum[axes=('i',) axis_index_groups=None]" in text
    assert "a:f32[4,3]" in text and "f32[3] = mul" in text


# ---- transformations -------------------------------------------------------------------------


def loss(w):
    return lax.reduce_sum(lax.mul(lax.sin(w), w), (0,))


def loss_grad_np(w):
    return np.sin(w) + w * np.cos(w)


def test_pmap_of_grad_with_pmean_equals_mean_of_single_device_grads():
    ws = rnd(N, 3)
    out = ppmap(lambda w: P.pmean(grad(loss)(w), "i"))(ws)
    single = np.stack([np.asarray(grad(loss)(w)) for w in ws])
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(single.mean(0), ws.shape),
                               rtol=1e-5)


def test_grad_of_psum_follows_jax_pmap_semantics():
    # psum transposes to psum: d/dx psum(x^2) on each device is 2 * n * x (as jax.pmap gives)
    x = f32(N)
    out = ppmap(grad(lambda v: P.psum(lax.mul(v, v), "i")))(x)
    np.testing.assert_allclose(np.asarray(out), 2 * N * x)


def test_grad_of_pmapped_loss_equals_single_device_gradient():
    ws = rnd(N, 3)
    g = grad(lambda w: lax.reduce_sum(ppmap(loss)(w), (0,)))(ws)
    np.testing.assert_allclose(np.asarray(g), loss_grad_np(ws), rtol=1e-5)
    g2 = grad(lambda w: lax.reduce_sum(ppmap(lambda v: P.psum(loss(v), "i"))(w), (0,)))(ws)
    np.testing.assert_allclose(np.asarray(g2), N * loss_grad_np(ws), rtol=1e-5)


def test_grad_through_broadcast_and_closed_over_arguments():
    x = f32(N, 3)
    w = np.float32(1.5)
    g = grad(lambda w: lax.reduce_sum(ppmap(lambda v, w: lax.mul(v, w), in_axes=(0, None))(
        x, w), (0, 1)))(w)
    np.testing.assert_allclose(float(g), x.sum(), rtol=1e-6)
    g = grad(lambda w: lax.reduce_sum(ppmap(lambda v: lax.mul(v, w))(x), (0, 1)))(w)
    np.testing.assert_allclose(float(g), x.sum(), rtol=1e-6)


def test_grad_through_all_gather_and_ppermute():
    x = rnd(N, 3)
    g = ppmap(grad(lambda v: lax.reduce_sum(lax.mul(P.all_gather(v, "i"),
                                                    P.all_gather(v, "i")), (0, 1))))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * N * x, rtol=1e-5)
    c = rnd(3, seed=4)
    g = ppmap(grad(lambda v: lax.reduce_sum(lax.mul(P.ppermute(v, "i", CYCLE), c), (0,))))(x)
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(c, x.shape), rtol=1e-6)


def test_jvp_of_pmap():
    x, t = rnd(N, 3), rnd(N, 3, seed=1)
    y, ty = jvp(ppmap(lambda v: P.psum(lax.sin(v), "i")), (x,), (t,))
    np.testing.assert_allclose(np.asarray(y), np.broadcast_to(np.sin(x).sum(0), x.shape),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ty), np.broadcast_to((np.cos(x) * t).sum(0), x.shape),
                               rtol=1e-5)


def test_pmap_of_vmap_with_both_axis_names():
    x = f32(N, 2, 3)
    out = ppmap(vmap(lambda v: P.psum(v, ("i", "j")), axis_name="j"))(x)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(x.sum((0, 1)), x.shape))
    out = ppmap(vmap(lambda v: P.psum(v, "i"), axis_name="j"))(x)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(x.sum(0), x.shape))
    out = ppmap(vmap(lambda v: P.all_gather(v, "j"), axis_name="j"))(x)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(x[:, None], (N, 2, 2, 3)))


def test_vmap_of_pmap():
    x = f32(2, N, 3)
    out = vmap(ppmap(lambda v: P.psum(v, "i")))(x)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(x.sum(1, keepdims=True), x.shape))


def test_jit_of_pmap_calls_through():
    x = f32(N, 3)
    out = jaxkit.jit(lambda v: lax.mul(ppmap(lambda u: P.psum(u, "i"))(v), 2.0))(x)
    np.testing.assert_allclose(np.asarray(out), 2 * np.broadcast_to(x.sum(0), x.shape))


# ---- errors ----------------------------------------------------------------------------------


def test_unbound_axis_name():
    with pytest.raises(NameError, match="unbound axis name: k"):
        P.psum(f32(3), "k")
    with pytest.raises(NameError, match="unbound axis name: k"):
        jaxkit.jit(lambda v: P.psum(v, "k"))(f32(3))
    with pytest.raises(NameError, match="unbound axis name: j"):
        ppmap(lambda v: P.all_gather(v, "j"))(f32(N, 3))


def test_shape_errors():
    with pytest.raises(ValueError, match="inconsistent sizes"):
        ppmap(lax.add)(f32(N, 3), f32(3, 3))
    with pytest.raises(ValueError, match="requires 5 logical devices"):
        ppmap(lax.sin)(f32(5, 3))
    with pytest.raises(ValueError, match="must equal the axis size"):
        ppmap(lambda v: P.psum_scatter(v, "i"))(f32(N, 3))


# ---- the default devices, in a fresh process ---------------------------------------------------


def test_default_four_cpu_devices_in_a_fresh_process():
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import jaxkit
        from jaxkit.transforms.pmap import pmap
        from jaxkit.lax import parallel as P
        assert len(jaxkit.devices()) == 4, jaxkit.devices()
        out = pmap(lambda v: P.psum(v, "i"), "i")(np.arange(8.0, dtype=np.float32).reshape(4, 2))
        print(np.asarray(out).tolist(), [s.device.id for s in out.addressable_shards])
        half = pmap(lambda v: jaxkit.lax.convert_element_type(v, "bfloat16"))(np.ones((4, 2)))
        print(np.asarray(half).dtype, np.asarray(half).tolist())  # no buffer protocol: copied
        print("jax imported:", "jax" in sys.modules)
    """)
    env = dict(os.environ, JAXKIT_NUM_CPU_DEVICES="4")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, check=False,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "[[12.0, 16.0], [12.0, 16.0], [12.0, 16.0], [12.0, 16.0]] [0, 1, 2, 3]"
    assert lines[1] == "bfloat16 [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]"
    assert lines[2] == "jax imported: False"


@pytest.mark.parametrize("env,count", [
    ({"XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=3"}, 3),
    ({"JAX_NUM_CPU_DEVICES": "2", "XLA_FLAGS": "--xla_force_host_platform_device_count=3"}, 2),
])
def test_cpu_device_count_from_jax_settings(env, count):
    # As JAX: JAX_NUM_CPU_DEVICES, else XLA_FLAGS' host device count (chex's
    # set_n_cpu_devices sets the latter before the backend starts).
    clean = {k: v for k, v in os.environ.items()
             if k not in ("JAXKIT_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run([sys.executable, "-c", "import jaxkit; print(len(jaxkit.devices()))"],
                          env={**clean, **env}, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(count)
