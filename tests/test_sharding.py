"""jax.sharding on jaxkit: meshes, NamedSharding layouts, device_put, jit partitioned by XLA's
SPMD partitioner (Shardy), with_sharding_constraint and the sharding picture.

Runs on an extra 8-device CPU backend in this process. The printed forms and error texts
are JAX 0.10.2's (taken from it on 8 CPU devices); values are checked against NumPy, and the
derivatives of shard_maps also against JAX run on 8 CPU devices in a subprocess.
"""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit.runtime import multi_device
from jaxkit.sharding import (AxisType, DuplicateSpecError, IndivisibleError, Mesh,
                             NamedSharding, PartitionSpec as P)

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices
AUTO = (AxisType.Auto, AxisType.Auto)


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((4, 2), ("x", "y"), devices=DEVICES, axis_types=AUTO)


def put(mesh, value, *spec):
    return jax.device_put(np.asarray(value, np.float32), NamedSharding(mesh, P(*spec)))


def test_printing_matches_jax(mesh):
    assert repr(mesh) == "Mesh(axis_sizes=(4, 2), axis_names=('x', 'y'), axis_types=(Auto, Auto))"
    assert str(mesh) == "Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto))"
    explicit = jax.make_mesh((4, 2), ("x", "y"), devices=DEVICES)
    assert str(explicit) == "Mesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit))"
    assert Mesh(np.array(DEVICES).reshape(4, 2), ("x", "y")).axis_types == AUTO
    assert [repr(p) for p in (P("x"), P("x", None), P(), P(("x", "y")))] == [
        "P('x',)", "P('x', None)", "P()", "P(('x', 'y'),)"]
    assert P("x") == ("x",) and P("x", None) != P("x")
    assert repr(NamedSharding(mesh, P("x", None))) == (
        "NamedSharding(mesh=Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto)), spec=P('x', None), "
        "memory_kind=device)")
    assert dict(mesh.shape) == {"x": 4, "y": 2} and mesh.size == 8
    assert mesh.device_ids.tolist() == [[d.id for d in DEVICES[i:i + 2]] for i in (0, 2, 4, 6)]


@pytest.mark.parametrize("spec, shape, error, text", [
    (("z",), (8, 4), ValueError, "Resource axis: z of P('z',) is not found in mesh: ('x', 'y')."),
    (("x", "x"), (8, 4), DuplicateSpecError, "has duplicate entries for `x`"),
    (("x",), (6, 4), IndivisibleError, "implies that array axis 0 is partitioned 4 times, but "
     "the dimension size is 6 (full shape: (6, 4), per-dimension tiling factors: [4, 1] should "
     "evenly divide the shape)"),
    (("x", None, None), (8, 4), ValueError, "is only valid for values of rank at least 3, but "
     "was applied to a value of rank 2."),
])
def test_bad_layouts_are_refused_with_jax_messages(mesh, spec, shape, error, text):
    with pytest.raises(error) as info:
        put(mesh, np.zeros(shape), *spec)
    assert text in str(info.value)


LAYOUTS = [(("x",), (8,)), (("y",), (8,)), ((), (8,)), (("x", None), (8, 4)),
           ((None, "y"), (8, 4)), (("x", "y"), (8, 4)), (("y", "x"), (8, 8)),
           ((("x", "y"),), (16, 2)), ((("y", "x"), None), (8, 3))]


@pytest.mark.parametrize("spec, shape", LAYOUTS)
def test_device_put_lays_out_every_shard(mesh, spec, shape):
    value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    x = put(mesh, value, *spec)
    np.testing.assert_array_equal(np.asarray(x), value)
    assert x.sharding == NamedSharding(mesh, P(*spec))
    assert x.devices() == set(DEVICES)
    shards = x.addressable_shards
    assert len(shards) == 8
    seen: dict = {}
    for shard in shards:
        np.testing.assert_array_equal(np.asarray(shard.data), value[shard.index])
        assert shard.data.shape == x.sharding.shard_shape(shape)
        key = tuple((s.start, s.stop) for s in shard.index)
        assert shard.replica_id == seen.get(key, 0)
        seen[key] = shard.replica_id + 1
    assert x.is_fully_replicated == (len(seen) == 1)


def test_shard_indices_and_replicas_match_jax(mesh):
    x = put(mesh, np.arange(8), "y")
    assert [(s.device.id - DEVICES[0].id, (s.index[0].start, s.index[0].stop), s.replica_id)
            for s in x.addressable_shards] == [
        (0, (0, 4), 0), (1, (4, 8), 0), (2, (0, 4), 1), (3, (4, 8), 1),
        (4, (0, 4), 2), (5, (4, 8), 2), (6, (0, 4), 3), (7, (4, 8), 3)]


def test_jit_result_over_a_one_device_mesh_has_its_shard():
    """JAX 0.10.2: one shard, the whole array (a dimension split once is ``slice(None)``)."""
    mesh1 = jax.make_mesh((1,), ("x",), devices=DEVICES[:1])
    out = jax.jit(lambda a: a * 2)(jax.device_put(np.arange(8.0, dtype=np.float32).reshape(8, 1),
                                                  NamedSharding(mesh1, P("x"))))
    [shard] = out.addressable_shards
    assert shard.device == DEVICES[0] and shard.index == (slice(None), slice(None))
    assert shard.replica_id == 0 and shard.data.shape == (8, 1)
    np.testing.assert_array_equal(np.asarray(shard.data).ravel(), np.arange(8.0) * 2)


# JAX 0.10.2's lowered text over an Explicit mesh: the mesh with its stablehlo.mesh attribute,
# the broadcast scalar and the product constrained to the operand's type.
SCALED_TEXT = """\
module @jit__lambda attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=4]> {stablehlo.mesh = {axes = [{name = "x", size = 2 : i64}, \
{name = "y", size = 4 : i64}]}}
  func.func public @main(%arg0: tensor<2x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, \
{"y"}]>}) -> (tensor<2x4xf32> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, \
[{"x"}, {"y"}]>}) {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x4xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"x"}, {"y"}]> : tensor<2x4xf32>
    %2 = stablehlo.multiply %arg0, %1 : tensor<2x4xf32>
    %3 = sdy.sharding_constraint %2 <@mesh, [{"x"}, {"y"}]> : tensor<2x4xf32>
    return %3 : tensor<2x4xf32>
  }
}
"""


def test_lowered_text_over_an_explicit_mesh_matches_jax():
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2, devices=DEVICES)
    x = jax.device_put(np.ones((2, 4), np.float32), NamedSharding(mesh, P("x", "y")))
    assert jax.jit(lambda a: a * 2).lower(x).as_text() == SCALED_TEXT


def test_jit_partitions_a_matmul_over_the_mesh(mesh):
    xv = np.arange(32, dtype=np.float32).reshape(8, 4) / 10
    x, w = put(mesh, xv, "x", None), put(mesh, np.ones((4, 2)), None, "y")
    f = jax.jit(lambda x, w: jnp.tanh(x @ w))
    text = f.lower(x, w).as_text()
    # JAX 0.10.2's line (its sdy-lift-inlined-meshes pass adds the stablehlo.mesh attribute)
    assert 'sdy.mesh @mesh = <["x"=4, "y"=2]> {stablehlo.mesh = {axes = [{name = "x", size = ' \
        '4 : i64}, {name = "y", size = 2 : i64}]}}\n' in text
    assert 'sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>' in text
    assert "mhlo.num_partitions = 8" in text
    y = f(x, w)
    np.testing.assert_allclose(np.asarray(y), np.tanh(xv @ np.ones((4, 2))), rtol=1e-6)
    assert y.sharding.spec == P("x", "y")  # as JAX propagates it
    f(x, w)
    assert f._cache_size() == 1


def test_a_contraction_over_a_split_dimension_all_reduces(mesh):
    xv = np.arange(32, dtype=np.float32).reshape(4, 8)
    x, w = put(mesh, xv, None, "x"), put(mesh, np.ones((8, 2)), "x", None)
    f = jax.jit(lambda x, w: x @ w)
    np.testing.assert_allclose(np.asarray(f(x, w)), xv @ np.ones((8, 2)))
    assert "all-reduce" in f.lower(x, w).compile().as_text()


def test_in_and_out_shardings(mesh):
    y = jax.jit(lambda x: x + 1, in_shardings=NamedSharding(mesh, P("x")))(np.ones((8, 4)))
    assert y.sharding.spec == P("x") and float(y.sum()) == 64.0
    x = put(mesh, np.arange(32).reshape(8, 4), "x", "y")
    s = jax.jit(lambda x: x.sum(0), out_shardings=NamedSharding(mesh, P()))(x)
    assert s.sharding.spec == P() and s.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(s), np.arange(32).reshape(8, 4).sum(0))
    t = jax.jit(lambda x: x.T, out_shardings=NamedSharding(mesh, P(None, "x")))(x)
    assert t.sharding.spec == P(None, "x")
    pair = jax.jit(lambda x: (x, 2 * x),
                   out_shardings=(NamedSharding(mesh, P("y")), None))(x)
    assert pair[0].sharding.spec == P("y")
    with pytest.raises(ValueError, match="Sharding passed to jit does not match the sharding "
                       "on the respective arg"):
        jax.jit(lambda x: x + 1, in_shardings=NamedSharding(mesh, P("y")))(x)


def test_with_sharding_constraint(mesh):
    x = put(mesh, np.arange(32).reshape(8, 4), "x", None)
    f = jax.jit(lambda x: jax.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P("y"))))
    assert 'sdy.sharding_constraint %1 <@mesh, [{"y"}, {}]>' in f.lower(x).as_text()
    out = f(x)
    assert out.sharding.spec == P("y")
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(32).reshape(8, 4))
    # A constraint alone partitions the program (its arguments are replicated).
    assert f(np.ones((8, 4), np.float32)).sharding.spec == P("y")
    # Eagerly it lays the value out; it is linear for grad and leaves vmap's axis unsplit.
    eager = jax.lax.with_sharding_constraint(np.ones(8, np.float32), NamedSharding(mesh, P("x")))
    assert eager.sharding.spec == P("x")
    g = jax.grad(lambda v: f(v).sum())(np.ones((8, 4), np.float32))
    np.testing.assert_array_equal(np.asarray(g), np.full((8, 4), 2.0))
    rows = jax.vmap(lambda r: jax.lax.with_sharding_constraint(
        r * 2, NamedSharding(mesh, P("y"))))(np.ones((3, 8), np.float32))
    np.testing.assert_array_equal(np.asarray(rows), np.full((3, 8), 2.0))
    with mesh:  # a bare PartitionSpec refers to the mesh in context
        assert jax.lax.with_sharding_constraint(np.ones(8, np.float32), P("y")).sharding \
            == NamedSharding(mesh, P("y"))
    with pytest.raises(RuntimeError, match="requires a non-empty mesh in context"):
        jax.lax.with_sharding_constraint(np.ones(8, np.float32), P("y"))


def test_eager_ops_on_laid_out_arrays_stay_laid_out(mesh):
    x = put(mesh, np.arange(32).reshape(8, 4), "x", None)
    y = x + 1
    assert y.sharding == x.sharding
    np.testing.assert_array_equal(np.asarray(y), np.arange(32).reshape(8, 4) + 1)
    z = jax.device_put(x, NamedSharding(mesh, P("y", "x")))
    assert z.sharding.spec == P("y", "x")
    np.testing.assert_array_equal(np.asarray(z), np.asarray(x))
    assert jax.device_put(x, x.sharding) is x


def test_visualize_array_sharding(mesh, capsys):
    jax.debug.visualize_array_sharding(put(mesh, np.zeros(8), "x"))
    jax.debug.visualize_array_sharding(put(mesh, np.zeros((8, 8)), "y", "x"))
    ids = [d.id for d in DEVICES]
    # JAX 0.10.2's pictures (boxes sized in proportion to the blocks)
    expected_row = "│" + "│".join(f"CPU {ids[i]},{ids[i + 1]}" for i in (0, 2, 4, 6)) + "│"
    out = capsys.readouterr().out.splitlines()
    assert out[1] == expected_row
    assert out[5] == "│" + "│".join(f" CPU {ids[i]} " for i in (0, 2, 4, 6)) + "│"
    with pytest.raises(ValueError, match="1 and 2 dimensions"):
        jax.debug.visualize_array_sharding(put(mesh, np.zeros((8, 2, 2)), "x"))


def test_jax_sharding_names_resolve_to_jaxkit():
    # ``import jax.sharding`` under install_as_jax is jaxkit.sharding itself, not a copy
    from jaxkit import install

    assert install.jaxkit_name("jax.sharding") == "jaxkit.sharding"
    assert isinstance(jnp.ones(2).sharding, jax.sharding.Sharding)


# ---- shard_map ----


def test_shard_map_collectives(mesh):
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    total = jax.shard_map(lambda b: jax.lax.psum(b.sum(0, keepdims=True), "x"), mesh=mesh,
                          in_specs=P("x", "y"), out_specs=P(None, "y"))
    np.testing.assert_array_equal(np.asarray(total(a)), a.sum(0, keepdims=True))
    text = jax.jit(total).lower(a).as_text()
    assert "sdy.manual_computation" in text and "use_global_device_ids" in text
    scaled = jax.shard_map(lambda b: b * jax.lax.axis_index("x"), mesh=mesh, in_specs=P("x"),
                           out_specs=P("x"))
    np.testing.assert_array_equal(np.asarray(scaled(a)), a * np.repeat(np.arange(4), 2)[:, None])
    # all_gather's result is replicated, but (as in JAX) not seen to be: check_vma=False
    gathered = jax.shard_map(lambda b: jax.lax.all_gather(b, "x", tiled=True), mesh=mesh,
                             in_specs=P("x"), out_specs=P(), check_vma=False)
    np.testing.assert_array_equal(np.asarray(gathered(a)), a)
    shifted = jax.shard_map(lambda b: jax.lax.ppermute(b, "x", [(i, (i + 1) % 4)
                                                                for i in range(4)]),
                            mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    np.testing.assert_array_equal(np.asarray(shifted(a)), np.roll(a, 2, axis=0))
    scattered = jax.shard_map(lambda b: jax.lax.psum_scatter(b, "x", tiled=True), mesh=mesh,
                              in_specs=P(), out_specs=P("x"))
    np.testing.assert_array_equal(np.asarray(scattered(a)), 4 * a)
    # Laid-out arguments go in as they are; the result is laid out as out_specs says.
    x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    assert total(x).sharding.spec == P(None, "y")


def test_shard_map_data_parallel_training_step(mesh):
    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(3, 2)).astype(np.float32),
              "b": np.zeros(2, np.float32)}
    xs = rng.normal(size=(16, 3)).astype(np.float32)
    ys = rng.normal(size=(16, 2)).astype(np.float32)

    def loss(p, x, y):
        return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)

    def step(p, x, y):
        g = jax.grad(loss)(p, x, y)
        g = jax.tree.map(lambda v: jax.lax.pmean(v, ("x", "y")), g)
        return jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

    # check_vma=False: with JAX's default, grad inside the body already sums the replicated
    # parameters' gradients over the devices (the transpose of their pvary), so the pmean
    # below would average a sum (tests/test_shard_map_vma.py checks that against JAX).
    sharded_step = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P(("x", "y")),
                                                                     P(("x", "y"))),
                                         out_specs=P(), check_vma=False))
    new = sharded_step(params, xs, ys)
    g = jax.grad(loss)(params, xs, ys)  # the whole batch on one device
    expected = jax.tree.map(lambda a, b: a - 0.1 * b, params, g)
    for k in params:
        np.testing.assert_allclose(np.asarray(new[k]), np.asarray(expected[k]), rtol=1e-5,
                                   atol=1e-6)


def test_shard_map_bad_specs_and_nesting_in_pmap(mesh):
    with pytest.raises(ValueError, match="not divisible by 4"):
        jax.shard_map(lambda b: b, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(np.ones(6))
    with pytest.raises(ValueError, match="The context mesh cannot be empty"):
        jax.shard_map(lambda b: b, in_specs=P("x"), out_specs=P("x"))(np.ones(8))
    # (Auto axes: over Explicit ones the unsplit argument's type would contradict in_specs,
    # JAX's ValueError, before pmap is reached)
    small = jax.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,),
                          devices=DEVICES[:2])
    g = jax.shard_map(lambda b: b * 2, mesh=small, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(NotImplementedError, match="shard_map inside pmap"):
        jax.pmap(g, backend="spmd8")(np.ones((8, 4), np.float32))


def test_shard_map_under_jvp_and_vmap(mesh):
    f = jax.shard_map(lambda b: jnp.sin(b) * jax.lax.psum(b.sum(), "x"), mesh=mesh,
                      in_specs=P("x"), out_specs=P("x"))
    x = np.arange(8, dtype=np.float32) / 8

    def reference(v):  # what every device computes, written for the whole array
        v = v.astype(np.float64)
        block_sums = v.reshape(4, 2).sum(1)
        return np.sin(v) * np.repeat(block_sums.sum(), 8)

    np.testing.assert_allclose(np.asarray(f(x)), reference(x), rtol=1e-5)
    _, tangent = jax.jvp(f, (x,), (np.ones(8, np.float32),))
    eps = 1e-4
    numeric = (reference(x + eps) - reference(x - eps)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(tangent), numeric, rtol=1e-4)
    xs = np.stack([x, 2 * x, 3 * x])
    np.testing.assert_allclose(np.asarray(jax.vmap(f)(xs)),
                               np.stack([reference(r) for r in xs]), rtol=1e-5)


def test_partitioned_stages_report_like_single_device_ones(mesh):
    x = put(mesh, np.ones((8, 4)), "x", None)
    compiled = jax.jit(lambda x: jnp.sin(x) @ x.T).lower(x).compile()
    assert compiled.cost_analysis()["flops"] > 0
    assert compiled.memory_analysis().output_size_in_bytes > 0
    assert compiled(x).shape == (8, 8)


def test_top_level_names_and_helpers(mesh):
    from jaxkit.experimental import mesh_utils

    assert jax.NamedSharding is NamedSharding and jax.P is P
    grid = mesh_utils.create_device_mesh((4, 2), DEVICES)
    assert grid.shape == (4, 2) and grid[1, 0] is DEVICES[2]
    x = put(mesh, np.arange(8), "x")
    y = jax.reshard(x, NamedSharding(mesh, P("y")))
    assert y.sharding.spec == P("y")
    np.testing.assert_array_equal(np.asarray(y), np.arange(8))
    d = DEVICES[3]
    assert jax.sharding.make_single_device_sharding(d).device_set == {d}


# ---- reverse mode of shard_map: against JAX on 8 CPU devices and finite differences ----
#
# Each record is a snippet written against ``jax``/``jnp``/``lax``/``P``/``mesh`` that sets
# ``out`` (a pytree of arrays). It runs here under jaxkit and, once for all records, under JAX
# in a fresh process with 8 CPU devices; every leaf must agree, and agree with a NumPy float64
# reference (finite differences of the global computation the body describes).

GRAD_PRELUDE = """
rng = np.random.default_rng(0)
def rand(*shape):
    return rng.normal(size=shape).astype(np.float32)
X, T = rand(8, 3), rand(8, 2)
W1, W2 = rand(3, 4) / 2, rand(4, 2) / 2
A, S, V = rand(2), rand(8), rand(8, 4)
CT = rand(8, 4)
RING = [(i, (i + 1) % 4) for i in range(4)]
smap = jax.shard_map
"""

GRAD_CASES = {
    # a Megatron-style MLP: hidden units split over 'y', batch over 'x'
    "mlp": """
def body(x, w1, w2, t):
    y = lax.psum(jnp.tanh(x @ w1) @ w2, 'y')
    return lax.psum(jnp.sum((y - t) ** 2), 'x')
loss = smap(body, mesh=mesh, in_specs=(P('x'), P(None, 'y'), P('y'), P('x')), out_specs=P())
out = jax.grad(loss, argnums=(1, 2))(X, W1, W2, T)
""",
    "pmean_value_and_grad": """
def body(w, b, x, t):
    return lax.pmean(jnp.mean((x @ w + b - t) ** 2), ('x', 'y'))
loss = smap(body, mesh=mesh, in_specs=(P(), P(), P(('x', 'y')), P(('x', 'y'))), out_specs=P())
out = jax.value_and_grad(loss, argnums=(0, 1))(W2[:3], A, X, T)
""",
    "replicated_and_sharded_inputs": """
def body(a, s, v):
    return a * jnp.sin(s) + lax.psum(jnp.sum(s * s), 'x') * lax.psum(v.sum(), 'y')
f = smap(body, mesh=mesh, in_specs=(P(), P('x'), P('y')), out_specs=P('x'))
out = jax.grad(lambda a, s, v: jnp.sum(f(a, s, v) ** 2), argnums=(0, 1, 2))(A, S, S[:2])
""",
    "all_gather": """
f = smap(lambda b: jnp.sin(lax.all_gather(b, 'x', tiled=True)).reshape(4, 2, 2) *
         lax.all_gather(b, 'x') * b[0, 0], mesh=mesh, in_specs=P('x'), out_specs=P('x'))
out = jax.grad(lambda v: jnp.sum(f(v) * CT.reshape(16, 2, 1)))(V[:, :2])
""",
    "ppermute": """
f = smap(lambda b: lax.ppermute(b, 'x', RING) * jnp.cos(b), mesh=mesh, in_specs=P('x'),
         out_specs=P('x'))
out = jax.grad(lambda v: jnp.sum(f(v) * CT))(V)
""",
    "psum_scatter": """
f = smap(lambda b: lax.psum_scatter(b * b, 'x', tiled=True) +
         lax.psum_scatter(jnp.sin(b), 'x', scatter_dimension=1)[None],
         mesh=mesh, in_specs=P(None, 'y'), out_specs=P('x', 'y'))
out = jax.grad(lambda v: jnp.sum(f(v) * CT.reshape(4, 8)))(V.reshape(4, 8))
""",
    "all_to_all": """
f = smap(lambda b: jnp.tanh(lax.all_to_all(b * b, 'x', 0, 1, tiled=True)), mesh=mesh,
         in_specs=P('x', None), out_specs=P('x'))
out = jax.grad(lambda v: jnp.sum(f(jnp.concatenate([v, v[::-1]])) *
                                 CT.reshape(4, 8).repeat(2, 1)))(V)
""",
    "axis_index": """
f = smap(lambda b: b ** 2 * (1 + lax.axis_index('x')) + lax.axis_index('y'), mesh=mesh,
         in_specs=P('x', 'y'), out_specs=P('x', 'y'))
out = jax.grad(lambda v: jnp.sum(f(v) * CT))(V)
""",
    "grad_under_jit": """
def body(x, w1, w2, t):
    y = lax.psum(jnp.tanh(x @ w1) @ w2, 'y')
    return lax.psum(jnp.sum((y - t) ** 2), 'x')
loss = smap(body, mesh=mesh, in_specs=(P('x'), P(None, 'y'), P('y'), P('x')), out_specs=P())
out = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(X, W1, W2, T)
""",
    "vjp": """
f = smap(lambda b, a: jnp.sin(b) * lax.psum(b, 'y') + a, mesh=mesh,
         in_specs=(P('x', 'y'), P()), out_specs=P('x', 'y'))
y, pull = jax.vjp(f, V, A[:1])
out = (y, *pull(CT))
""",
    "linearize": """
f = smap(lambda b: jnp.sin(b) * lax.psum(b.sum(), 'x'), mesh=mesh, in_specs=P('x'),
         out_specs=P('x'))
y, f_jvp = jax.linearize(f, S)
out = (y, f_jvp(jnp.cos(S)), jax.linear_transpose(f_jvp, S)(S))
""",
    "jacrev": """
f = smap(lambda b: lax.ppermute(jnp.sin(b), 'x', RING) * lax.psum(b, 'x'), mesh=mesh,
         in_specs=P('x'), out_specs=P('x'))
out = (jax.jacrev(f)(S), jax.jacfwd(f)(S))
""",
    "grad_of_shard_map_of_grad": """
def body(b):
    g = jax.grad(lambda u: jnp.sum(jnp.sin(u) * u))(b)
    return lax.psum(jnp.sum(g * g), 'x')
out = jax.grad(smap(body, mesh=mesh, in_specs=P('x'), out_specs=P()))(S)
""",
    "hessian": """
f = smap(lambda b: lax.psum(jnp.sum(jnp.sin(b) * b[::-1]), 'x'), mesh=mesh,
         in_specs=P('x'), out_specs=P())
out = (jax.hessian(f)(S), jax.jacrev(jax.grad(f))(S))
""",
}


def _inputs():
    ns = {"np": np, "jax": jax}
    exec(GRAD_PRELUDE, ns)
    return {k: ns[k].astype(np.float64) for k in ("X", "T", "W1", "W2", "A", "S", "V", "CT")}


def _jacobian(fn, x, eps=1e-6):
    """d fn(x) / dx by central differences, shaped ``fn(x).shape + x.shape``."""
    x = np.asarray(x, np.float64)
    cols = []
    for i in range(x.size):
        d = np.zeros(x.size)
        d[i] = eps
        d = d.reshape(x.shape)
        cols.append((np.asarray(fn(x + d)) - np.asarray(fn(x - d))) / (2 * eps))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(fn(x)) + x.shape)


def _grads(fn, args, argnums):
    def partial_in(i):
        return lambda v: fn(*args[:i], v, *args[i + 1:])
    return [_jacobian(partial_in(i), args[i]) for i in argnums]


def _mlp(x, w1, w2, t):
    return np.sum((np.tanh(x @ w1) @ w2 - t) ** 2)


def _ring(v):  # block i of ppermute(v, RING) is block i - 1 of v (blocks of 2 rows)
    return np.roll(v, 2, axis=0)


def _pair_swap(s):  # b[::-1] within each device's block of 2
    return s.reshape(4, 2)[:, ::-1].reshape(8)


def _psum_scatter(v):  # out[i, 4k + c] = 4 v[i, 4k + c]^2 + 4 sin(v[c, 4k + i])
    blocks = v.reshape(4, 2, 4).transpose(1, 0, 2)  # per y-block k: b_k = v[:, 4k:4k+4]
    return np.concatenate([4 * b ** 2 + 4 * np.sin(b.T) for b in blocks], axis=1)


def _all_to_all(v):  # out[j, 4i + c] = tanh(v16[4i + j, c]^2)
    v16 = np.concatenate([v, v[::-1]])
    return np.tanh(v16.reshape(4, 4, 4).transpose(1, 0, 2).reshape(4, 16) ** 2)


def _all_gather(v):  # device i's block: sin(v) * v (as 4 blocks of 2 rows) * v[2i, 0]
    g = (np.sin(v) * v).reshape(4, 2, 2)
    return np.concatenate([g * v[2 * i, 0] for i in range(4)])


def _grad_of_grad(s):
    return np.sum((np.cos(s) * s + np.sin(s)) ** 2)


def _hessian_f_grad(s):
    return np.cos(s) * _pair_swap(s) + np.sin(_pair_swap(s))


def _reference(name: str, d: dict) -> list:
    """The expected leaves of ``out`` for record ``name``, in float64."""
    X, T, W1, W2, A, S, V, CT = (d[k] for k in ("X", "T", "W1", "W2", "A", "S", "V", "CT"))
    ix = np.repeat(np.arange(4), 2)[:, None]
    iy = np.repeat(np.arange(2), 2)[None, :]
    jac_f = (lambda s: _ring(np.sin(s)) * np.tile(s.reshape(4, 2).sum(0), 4))
    lin_f = (lambda s: np.sin(s) * s.sum())
    vjp_f = (lambda v, a: np.sin(v) * np.tile(v[:, :2] + v[:, 2:], 2) + a)
    dp = (lambda w, b: np.mean((X @ w + b - T) ** 2))
    rep = (lambda a, s, v: np.sum((np.tile(a, 4) * np.sin(s) + np.sum(s * s) * v.sum()) ** 2))
    return {
        "mlp": lambda: _grads(_mlp, [X, W1, W2, T], (1, 2)),
        "pmean_value_and_grad": lambda: [dp(W2[:3], A), *_grads(dp, [W2[:3], A], (0, 1))],
        "replicated_and_sharded_inputs": lambda: _grads(rep, [A, S, S[:2]], (0, 1, 2)),
        "all_gather": lambda: _grads(lambda v: np.sum(_all_gather(v) * CT.reshape(16, 2, 1)),
                                     [V[:, :2]], (0,)),
        "ppermute": lambda: _grads(lambda v: np.sum(_ring(v) * np.cos(v) * CT), [V], (0,)),
        "psum_scatter": lambda: _grads(lambda v: np.sum(_psum_scatter(v) * CT.reshape(4, 8)),
                                       [V.reshape(4, 8)], (0,)),
        "all_to_all": lambda: _grads(
            lambda v: np.sum(_all_to_all(v) * CT.reshape(4, 8).repeat(2, 1)), [V], (0,)),
        "axis_index": lambda: _grads(lambda v: np.sum((v ** 2 * (1 + ix) + iy) * CT), [V],
                                     (0,)),
        "grad_under_jit": lambda: _grads(_mlp, [X, W1, W2, T], (0, 1, 2)),
        "vjp": lambda: [vjp_f(V, A[:1]),
                        *_grads(lambda v, a: np.sum(vjp_f(v, a) * CT), [V, A[:1]], (0, 1))],
        "linearize": lambda: [lin_f(S), _jacobian(lin_f, S) @ np.cos(S),
                              S @ _jacobian(lin_f, S)],
        "jacrev": lambda: [_jacobian(jac_f, S)] * 2,
        "grad_of_shard_map_of_grad": lambda: _grads(_grad_of_grad, [S], (0,)),
        "hessian": lambda: [_jacobian(_hessian_f_grad, S)] * 2,
    }[name]()


JAX_GRAD_DRIVER = """
import os, sys
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
from jax.sharding import AxisType, PartitionSpec as P
prelude, cases, dest = sys.argv[1], eval(sys.argv[2]), sys.argv[3]
mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))
results = {}
for name, code in cases.items():
    ns = dict(np=np, jax=jax, jnp=jnp, lax=lax, P=P, mesh=mesh)
    exec(prelude + code, ns)
    for i, leaf in enumerate(jax.tree_util.tree_leaves(ns["out"])):
        results[f"{name}/{i}"] = np.asarray(leaf)
np.savez(dest, **results)
"""


@pytest.fixture(scope="module")
def jax_grads(tmp_path_factory):
    """Every record's leaves as JAX 0.10.2 computes them on 8 CPU devices."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the JAX oracle is not installed")
    dest = tmp_path_factory.mktemp("jax_grads") / "out.npz"
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    proc = subprocess.run([sys.executable, "-c", JAX_GRAD_DRIVER, GRAD_PRELUDE,
                           repr(GRAD_CASES), str(dest)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(np.load(dest))


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_reverse_mode_of_shard_map_matches_jax_and_finite_differences(mesh, jax_grads, name):
    ns = {"np": np, "jax": jax, "jnp": jnp, "lax": jax.lax, "P": P, "mesh": mesh}
    exec(GRAD_PRELUDE + GRAD_CASES[name], ns)
    leaves = [np.asarray(v) for v in jax.tree_util.tree_leaves(ns["out"])]
    expected = _reference(name, _inputs())
    assert len(leaves) == len(expected) == len([k for k in jax_grads
                                                if k.startswith(name + "/")])
    for i, (got, want) in enumerate(zip(leaves, expected)):
        oracle = jax_grads[f"{name}/{i}"]
        assert got.shape == oracle.shape == np.shape(want) and got.dtype == oracle.dtype
        np.testing.assert_allclose(got, oracle, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * max(1, np.abs(want).max()))


_VARYING = "which implies that the corresponding output value is only varying across mesh axes"
_REPLICATED = "which implies that the corresponding output value is replicated across mesh axis"


# The texts are JAX 0.10.2's under jit (its eager path names an internal function instead).
@pytest.mark.parametrize("body, in_spec, out_spec, lines", [
    (lambda b: b * 2, P("x"), P(),
     [f"out_specs is P() {_VARYING} {{}} and not {{x}}, but it was inferred to be possibly "
      "varying over {x}"]),
    (lambda b: b * 2, P(("x", "y")), P("x"),
     [f"out_specs is P('x',) {_REPLICATED} 'y', but could not infer replication over any "
      "axes"]),
    (lambda b: (b, jax.lax.psum(b, "x")), P("x", "y"), (P(), P("x")),
     [f"* out_specs[0] is P() {_VARYING} {{}} and not {{x,y}}, but it was inferred to be "
      "possibly varying over {x,y}",
      f"* out_specs[1] is P('x',) {_REPLICATED} 'y', but could not infer replication over "
      "any axes"]),
    (lambda b: {"u": b.sum(), "v": jax.lax.psum(b.sum(), ("x", "y"))}, P("x", "y"), P(),
     [f"out_specs is P() {_VARYING} {{}} and not {{x,y}}, but it was inferred to be possibly "
      "varying over {x,y}"]),
    (lambda b: b + jax.lax.axis_index("y"), P("x"), P("x"),
     [f"out_specs is P('x',) {_REPLICATED} 'y', but could not infer replication over any "
      "axes"]),
    (lambda b: jax.lax.all_gather(b, "x", tiled=True), P("x"), P(),
     [f"out_specs is P() {_VARYING} {{}} and not {{x}}, but it was inferred to be possibly "
      "varying over {x}"]),
    (lambda b: jax.jit(lambda c: jax.lax.psum(c, "x"))(b), P("x"), P(), None),
    (lambda b: jax.lax.pmean(b * 3, "x") + 1.0, P("x"), P(), None),
])
def test_shard_map_check_vma_requires_seen_replication(mesh, body, in_spec, out_spec, lines):
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    f = jax.shard_map(body, mesh=mesh, in_specs=in_spec, out_specs=out_spec)
    if lines is None:
        f(x)
    else:
        with pytest.raises(ValueError) as info:
            jax.jit(f)(x)
        assert str(info.value) == (
            "shard_map applied to the function '<lambda>' was given out_specs which require "
            "replication which can't be statically inferred given the mesh:\n\nThe mesh given "
            "has shape (4, 2) with corresponding axis names ('x', 'y').\n\n"
            + "\n\n".join(lines) + "\n\nCheck if these output values are meant to be "
            "replicated over those mesh axes. If not, consider revising the corresponding "
            "out_specs entries. If so, consider disabling the check by passing the "
            "check_vma=False argument to `jax.shard_map`.")
    # Unchecked, the body runs: the blocks of an output over an axis its spec leaves out are
    # assumed to be equal.
    jax.shard_map(body, mesh=mesh, in_specs=in_spec, out_specs=out_spec, check_vma=False)(x)


def test_shard_map_check_vma_false_differentiates_the_same(mesh):
    x = np.arange(8, dtype=np.float32) / 8

    def loss(check):
        f = jax.shard_map(lambda b, w: jax.lax.psum(jnp.sum(jnp.sin(b * w)), "x"), mesh=mesh,
                          in_specs=(P("x"), P()), out_specs=P(), check_vma=check)
        return jax.grad(f, argnums=(0, 1))(x, np.float32(1.5))

    for a, b in zip(loss(True), loss(False)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(np.asarray(loss(False)[1]), np.sum(x * np.cos(1.5 * x)),
                               rtol=1e-5)
    with pytest.raises(TypeError, match="check_rep"):
        jax.shard_map(lambda b: b, mesh=mesh, in_specs=P(), out_specs=P(), check_rep=False)


def test_type_sharding_is_replicated_on_the_empty_abstract_mesh_as_in_jax():
    real = pytest.importorskip("jax")
    for shape in [(), (3,), (2, 3)]:
        ours = jax.typeof(jnp.zeros(shape)).sharding
        theirs = real.typeof(real.numpy.zeros(shape)).sharding
        assert repr(ours) == repr(theirs)
        assert ours.is_fully_replicated and ours.mesh.empty and ours.mesh.size == 0
    with pytest.raises(ValueError, match="device_set is not implemented for "
                                         "`jax.sharding.AbstractMesh`"):
        jax.typeof(jnp.zeros(3)).sharding.device_set
    seen = []
    jax.jit(lambda x: seen.append(jax.typeof(x).sharding) or x)(jnp.ones(2))
    assert repr(seen[0]) == "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=P(None,))"


def test_jax_shapedarray_takes_a_types_own_sharding():
    # Flax rebuilds avals as ShapedArray(shape, dtype, sharding=aval.sharding).
    from jaxkit._src_compat.core import ShapedArray
    aval = jax.typeof(jnp.ones(3))
    assert ShapedArray((3,), np.float32, sharding=aval.sharding) is aval
    # a sharding over Explicit axes is part of the type (tests/test_explicit_sharding.py);
    # over Auto axes it is not
    auto = Mesh(np.array(jax.devices()[:1]), ("x",))
    assert str(ShapedArray((3,), np.float32, sharding=NamedSharding(auto, P("x")))) == \
        "float32[3]"
    explicit = Mesh(np.array(jax.devices()[:1]), ("x",), (AxisType.Explicit,))
    assert str(ShapedArray((3,), np.float32, sharding=NamedSharding(explicit, P("x")))) == \
        "float32[3@x]"


def test_jit_shardings_given_as_partition_specs_take_the_context_mesh(mesh):
    # JAX resolves bare PartitionSpecs over the mesh in context when the function is called
    f = jax.jit(lambda v: v * 2, in_shardings=P("x"), out_shardings=P(None, "y"))
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    with jax.set_mesh(mesh):
        out = f(x)
    assert out.sharding == NamedSharding(mesh, P(None, "y"))
    np.testing.assert_array_equal(np.asarray(out), x * 2)
    for what, g in [("in_shardings", jax.jit(lambda v: v, in_shardings=P("x"))),
                    ("out_shardings", jax.jit(lambda v: v, out_shardings=P()))]:
        with pytest.raises(RuntimeError) as e:  # JAX 0.10.2's text
            g(x)
        assert str(e.value) == (
            f"jit requires a non-empty mesh in context if you are passing `PartitionSpec`s "
            f"to {what}. You can define a context mesh via `jax.set_mesh(mesh)`. "
            f"Alternatively, provide `Sharding`s to {what} and then the mesh context manager "
            "is not required.")


@pytest.mark.parametrize("axis_type, want", [
    # JAX 0.10.2 on 4 CPU devices: over an Explicit mesh a computed value's spec is its
    # type's (P(None,) when replicated); over an Auto mesh what the layout needs (P())
    (AxisType.Explicit, ["P()", "P('x',)", "P(None,)", "P()", "P('x', None)", "P(None, 'x')",
                         "P(None,)"]),
    (AxisType.Auto, ["P()", "P('x',)", "P()", "P()", "P('x',)", "P(None, 'x')", "P()"]),
])
def test_result_specs_follow_the_mesh_axis_types_as_in_jax(axis_type, want):
    mesh = Mesh(np.array(DEVICES[:4]), ("x",), axis_types=(axis_type,))
    with jax.set_mesh(mesh):
        a = jax.device_put(np.arange(8.0, dtype=np.float32), P())
        b = jax.device_put(np.ones((4, 2), np.float32), P("x"))
        got = [a, b, jax.jit(lambda v: v * 2)(a), jax.jit(lambda v: v * 2, out_shardings=P())(b),
               b + 1, jax.jit(lambda v: v.T)(b)]
    got.append(a * 2)  # outside the mesh context
    assert [str(x.sharding.spec) for x in got] == want
