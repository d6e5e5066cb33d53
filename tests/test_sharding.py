"""jax.sharding on jaxkit: meshes, NamedSharding layouts, device_put, jit partitioned by XLA's
SPMD partitioner (Shardy), with_sharding_constraint and the sharding picture.

Runs on an extra 8-device CPU backend in this process. The printed forms and error texts
are JAX 0.10.2's (taken from it on 8 CPU devices); values are checked against NumPy.
"""
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


def test_jit_partitions_a_matmul_over_the_mesh(mesh):
    xv = np.arange(32, dtype=np.float32).reshape(8, 4) / 10
    x, w = put(mesh, xv, "x", None), put(mesh, np.ones((4, 2)), None, "y")
    f = jax.jit(lambda x, w: jnp.tanh(x @ w))
    text = f.lower(x, w).as_text()
    assert 'sdy.mesh @mesh = <["x"=4, "y"=2]>' in text
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
    with pytest.raises(ValueError, match="needs a mesh"):
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
    expected_row = "│" + "│".join(f" CPU {ids[i]},{ids[i + 1]} " for i in (0, 2, 4, 6)) + "│"
    out = capsys.readouterr().out.splitlines()
    assert out[1] == expected_row
    assert out[5] == "│" + "│".join(f"  CPU {ids[i]}  " for i in (0, 2, 4, 6)) + "│"
    with pytest.raises(ValueError, match="1 or 2 dimensions"):
        jax.debug.visualize_array_sharding(put(mesh, np.zeros((8, 2, 2)), "x"))


def test_jax_sharding_names_resolve_to_jaxkit():
    from jaxkit._src_compat import sharding as compat

    assert compat.NamedSharding is NamedSharding and compat.PartitionSpec is P
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
    gathered = jax.shard_map(lambda b: jax.lax.all_gather(b, "x", tiled=True), mesh=mesh,
                             in_specs=P("x"), out_specs=P())
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

    sharded_step = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P(("x", "y")),
                                                                     P(("x", "y"))),
                                         out_specs=P()))
    new = sharded_step(params, xs, ys)
    g = jax.grad(loss)(params, xs, ys)  # the whole batch on one device
    expected = jax.tree.map(lambda a, b: a - 0.1 * b, params, g)
    for k in params:
        np.testing.assert_allclose(np.asarray(new[k]), np.asarray(expected[k]), rtol=1e-5,
                                   atol=1e-6)


def test_shard_map_bad_specs_and_missing_rules(mesh):
    with pytest.raises(ValueError, match="not divisible by 4"):
        jax.shard_map(lambda b: b, mesh=mesh, in_specs=P("x"), out_specs=P("x"))(np.ones(6))
    with pytest.raises(ValueError, match="needs a mesh"):
        jax.shard_map(lambda b: b, in_specs=P("x"), out_specs=P("x"))(np.ones(8))
    f = jax.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(NotImplementedError, match="partial evaluation rule for 'shard_map'"):
        jax.grad(lambda v: f(v).sum())(np.ones(8, np.float32))
    small = jax.make_mesh((2,), ("x",), devices=DEVICES[:2])
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
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    with pytest.raises(NotImplementedError, match="no sharded avals"):
        ShapedArray((3,), np.float32, sharding=NamedSharding(mesh, P("x")))
