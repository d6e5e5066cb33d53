"""``jax.experimental.multihost_utils`` and the ``make_array_from_*`` constructors.

Across processes: one worker, run as two processes (two CPU devices each) on jaxkit and on
the JAX oracle, records what every function returns or raises; the two records must be equal
(values, shapes, shard indices, printed shardings and jaxprs, error texts). In this process
(one process): the single-process behaviour against JAX and NumPy, the two primitives under
``make_jaxpr``, ``grad`` and ``vmap``, and the constructors on a 4-device backend.
"""
import textwrap

import numpy as np
import pytest
from _process_group import have_jax, run_group

import jaxkit as jax
import jaxkit.sharding as jsharding
from jaxkit.experimental import multihost_utils as mu
from jaxkit.runtime import multi_device
from jaxkit.sharding import Mesh, NamedSharding, PartitionSpec as P

WORKER = textwrap.dedent("""
    import importlib, json, sys
    import numpy as np
    lib, address, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    jax = importlib.import_module(lib)
    sh = importlib.import_module(lib + ".sharding")
    mu = importlib.import_module(lib + ".experimental.multihost_utils")
    P = sh.PartitionSpec
    jax.distributed.initialize(address, 2, pid, initialization_timeout=60)
    out = {}

    def record(name, fn):
        try:
            value = fn()
        except Exception as e:
            value = {"error": type(e).__name__, "text": str(e)}
        out[name] = value

    def shards(a):
        return [[s.device.id, [[i.start, i.stop] for i in s.index], s.replica_id,
                 np.asarray(s.data).tolist()] for s in a.addressable_shards]

    def info(a):
        return {"shape": list(a.shape), "dtype": str(a.dtype), "sharding": repr(a.sharding),
                "addressable": a.is_fully_addressable, "shards": shards(a)}

    mesh = sh.Mesh(np.array(jax.devices()), ("d",))
    grid = sh.Mesh(np.array(jax.devices()).reshape(2, 2), ("p", "l"))
    split = sh.NamedSharding(mesh, P("d"))
    mine = np.arange(4.0, dtype=np.float32) + 10 * pid

    record("allgather", lambda: mu.process_allgather(np.float32(pid)).tolist())
    record("allgather_stacked", lambda: mu.process_allgather(mine).tolist())
    record("allgather_tiled", lambda: mu.process_allgather(
        {"a": mine, "b": np.array([pid, pid])}, tiled=True)["a"].tolist())
    y = jax.jit(lambda v: v * 2, out_shardings=split)(
        jax.make_array_from_callback((8,), split, lambda i: np.arange(8.0, dtype=np.float32)[i]))
    record("allgather_global", lambda: mu.process_allgather(y, tiled=True).tolist())
    record("allgather_global_untiled", lambda: mu.process_allgather(y))
    record("device_put_replicated", lambda: np.asarray(
        jax.device_put(y, sh.NamedSharding(mesh, P()))).tolist())
    record("device_put_regrid", lambda: info(jax.device_put(
        y, sh.NamedSharding(mesh, P(None)))))
    mesh_utils = importlib.import_module(lib + ".experimental.mesh_utils")
    record("hybrid_mesh", lambda: [[d.id for d in row] for row in
                                   mesh_utils.create_hybrid_device_mesh(
                                       (1, 2), (2, 1), process_is_granule=True)])
    record("hybrid_mesh_1d", lambda: [d.id for d in mesh_utils.create_hybrid_device_mesh(
        (2,), (2,), process_is_granule=True)])
    record("hybrid_mesh_slices", lambda: mesh_utils.create_hybrid_device_mesh((2,), (2,)))
    record("hybrid_mesh_bad", lambda: mesh_utils.create_hybrid_device_mesh(
        (1,), (4,), process_is_granule=True))
    record("local_devices_of_1", lambda: [d.id for d in jax.local_devices(process_index=1)])
    pmapped = jax.pmap(lambda v: v * 2)(np.full((2, 3), pid, np.float32))
    record("allgather_pmap", lambda: mu.process_allgather(pmapped, tiled=True).tolist())
    record("pmap_result", lambda: [list(pmapped.shape), pmapped.is_fully_addressable,
                                   repr(pmapped), sorted(d.id for d in pmapped.devices()),
                                   [[s.device.id, s.index[0].start, s.index[0].stop,
                                     s.replica_id] for s in pmapped.addressable_shards]])
    record("broadcast", lambda: mu.broadcast_one_to_all(mine).tolist())
    record("broadcast_from_1", lambda: mu.broadcast_one_to_all(
        {"x": mine}, is_source=pid == 1)["x"].tolist())
    record("sync", lambda: mu.sync_global_devices("step 1"))
    record("assert_equal_same", lambda: mu.assert_equal(np.arange(3), "same"))
    record("assert_equal_differs", lambda: mu.assert_equal(np.array([pid]), "differs"))
    record("preemption", lambda: mu.reached_preemption_sync_point(0))

    def live():
        with mu.live_devices(jax.devices()) as alive:
            return [d.id for d in alive]
    record("live_devices", live)

    g = mu.host_local_array_to_global_array(mine, mesh, P("d"))
    record("h2g", lambda: info(g))
    record("h2g_grid", lambda: info(mu.host_local_array_to_global_array(
        mine.reshape(1, 4), grid, P("p"))))
    record("h2g_replicated", lambda: info(mu.host_local_array_to_global_array(
        np.arange(4.0, dtype=np.float32), mesh, P())))
    record("h2g_none", lambda: mu.host_local_array_to_global_array(mine, mesh, None))
    back = mu.global_array_to_host_local_array(g, mesh, P("d"))
    record("g2h", lambda: [list(back.shape), np.asarray(back).tolist(),
                           back.is_fully_addressable, repr(back.sharding)])
    record("g2h_of_jit_output", lambda: np.asarray(mu.global_array_to_host_local_array(
        y, mesh, P("d"))).tolist())
    record("jaxpr_h2g", lambda: str(jax.make_jaxpr(
        lambda a: mu.host_local_array_to_global_array(a, mesh, P("d")))(mine)))
    record("jaxpr_g2h", lambda: str(jax.make_jaxpr(
        lambda a: mu.global_array_to_host_local_array(a, grid, P(None, "l")))(
            np.zeros((2, 8), np.float32))))

    record("from_local", lambda: info(jax.make_array_from_process_local_data(split, mine)))
    record("from_local_shape", lambda: info(jax.make_array_from_process_local_data(
        split, mine, (8,))))
    record("from_local_grid", lambda: info(jax.make_array_from_process_local_data(
        sh.NamedSharding(grid, P("p", "l")), np.arange(6.0).reshape(1, 6) + pid)))
    record("from_local_replicated_rows", lambda: info(jax.make_array_from_process_local_data(
        sh.NamedSharding(grid, P("l")), np.arange(4.0).reshape(4, 1), (4, 1))))
    record("from_local_bad", lambda: jax.make_array_from_process_local_data(
        split, np.zeros(3, np.float32), (8,)))
    record("from_callback_2d", lambda: info(jax.make_array_from_callback(
        (4, 2), sh.NamedSharding(grid, P("l", "p")),
        lambda i: np.arange(8, dtype=np.int32).reshape(4, 2)[i])))
    record("from_single", lambda: info(jax.make_array_from_single_device_arrays(
        (8,), split, [jax.device_put(mine[2 * k:2 * k + 2], d)
                      for k, d in enumerate(jax.local_devices())])))
    record("from_single_bad_shape", lambda: jax.make_array_from_single_device_arrays(
        (8,), split, [jax.device_put(mine, d) for d in jax.local_devices()]))
    print(json.dumps(out), flush=True)
    jax.distributed.shutdown()
""")


def run(tmp_path, lib: str) -> list[dict]:
    script = tmp_path / f"{lib}_multihost.py"
    script.write_text(WORKER)
    _, results = run_group(script, lambda address, i: (lib, address, i), 2, 120, devices=2)
    return [r for r, _ in results]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return run(tmp_path_factory.mktemp("multihost"), "jaxkit")


def test_values_across_two_processes(records):
    for pid, r in enumerate(records):
        assert r["allgather"] == [0.0, 1.0]
        assert r["allgather_stacked"] == [[0, 1, 2, 3], [10, 11, 12, 13]]
        assert r["allgather_tiled"] == [0, 1, 2, 3, 10, 11, 12, 13]
        assert r["allgather_global"] == [0, 2, 4, 6, 8, 10, 12, 14]
        assert r["allgather_global_untiled"]["error"] == "ValueError"
        assert r["allgather_pmap"] == [[0.0] * 3] * 2 + [[2.0] * 3] * 2
        assert r["pmap_result"][:2] == [[2, 3], True]  # this process's rows, as in JAX
        assert r["device_put_replicated"] == r["allgather_global"]
        assert r["local_devices_of_1"] == [2048, 2049]
        assert r["hybrid_mesh"] == [[0, 1], [2048, 2049]]
        assert r["hybrid_mesh_slices"]["error"] == "ValueError"
        assert r["broadcast"] == [0, 1, 2, 3] and r["broadcast_from_1"] == [10, 11, 12, 13]
        assert r["sync"] is None and r["assert_equal_same"] is None
        assert r["assert_equal_differs"] == {
            "error": "AssertionError", "text": f"differs. Expected: [0 1]; got: [{pid}]."}
        assert r["preemption"] is False and r["live_devices"] == [0, 1, 2048, 2049]
        h2g = r["h2g"]
        assert h2g["shape"] == [8] and not h2g["addressable"]
        assert [s[3] for s in h2g["shards"]] == [[10 * pid, 10 * pid + 1],
                                                  [10 * pid + 2, 10 * pid + 3]]
        assert r["g2h"][:3] == [[4], [10 * pid + k for k in range(4)], True]
        assert r["from_local"] == h2g
        assert r["from_local_bad"]["error"] == "ValueError"


@pytest.mark.skipif(not have_jax, reason="the JAX oracle is not installed")
def test_every_record_matches_jax(records, tmp_path):
    theirs = run(tmp_path, "jax")
    for mine, ref in zip(records, theirs):
        assert mine.keys() == ref.keys()
        for key in mine:
            assert mine[key] == ref[key], key


# ---- one process --------------------------------------------------------------------------

DEVICES = multi_device.add_cpu_backend("multihost4", 4).devices


def test_single_process_behaviour_matches_jax():
    x = np.arange(3, dtype=np.int32)
    assert mu.process_allgather(x).tolist() == [[0, 1, 2]]
    assert mu.process_allgather(x, tiled=True).tolist() == [0, 1, 2]
    assert mu.broadcast_one_to_all({"a": x})["a"].tolist() == [0, 1, 2]
    mu.sync_global_devices("solo")
    mu.assert_equal(x)
    assert mu.reached_preemption_sync_point(3) is False
    with pytest.raises(RuntimeError, match="Distributed JAX not initialized."):
        with mu.live_devices(jax.devices()):
            pass
    with pytest.raises(ValueError, match="`None` is not a valid input to the pspecs"):
        mu.host_local_array_to_global_array(x, Mesh(np.array(jax.devices()[:1]), "d"), None)
    if have_jax:
        import jax as real  # noqa: PLC0415  (the oracle, only when installed)
        from jax.experimental import multihost_utils as ref  # noqa: PLC0415
        np.testing.assert_array_equal(mu.process_allgather(x), ref.process_allgather(x))
        np.testing.assert_array_equal(mu.broadcast_one_to_all(x), ref.broadcast_one_to_all(x))
        assert real.process_count() == jax.process_count() == 1


def _jaxprs(lib_jax, lib_mu, lib_sharding):
    mesh = lib_sharding.Mesh(np.array(lib_jax.devices()[:1]), ("d",))
    spec = lib_sharding.PartitionSpec("d")
    to_global = lambda a: lib_mu.host_local_array_to_global_array(a, mesh, spec)  # noqa: E731
    to_local = lambda a: lib_mu.global_array_to_host_local_array(a, mesh, spec)  # noqa: E731
    x = np.ones((2, 4), np.float32)
    return [str(lib_jax.make_jaxpr(to_global)(x)),
            str(lib_jax.make_jaxpr(lib_jax.vmap(to_global))(x)),
            str(lib_jax.make_jaxpr(lib_jax.vmap(to_local, in_axes=1))(x)),
            str(lib_jax.make_jaxpr(lib_jax.grad(lambda a: to_global(a).sum()))(x)),
            str(lib_jax.make_jaxpr(lib_jax.linear_transpose(to_local, x))(x))]


def test_primitives_trace_like_jax():
    mine = _jaxprs(jax, mu, jsharding)
    assert "host_local_array_to_global_array[" in mine[0] and "pspec=P(None, 'd')" in mine[1]
    if have_jax:
        import jax as real  # noqa: PLC0415
        import jax.sharding as real_sharding  # noqa: PLC0415
        from jax.experimental import multihost_utils as ref  # noqa: PLC0415
        assert mine == _jaxprs(real, ref, real_sharding)


def test_primitives_evaluate_in_one_process():
    mesh = Mesh(np.array(DEVICES), ("d",))
    x = np.arange(8.0, dtype=np.float32)
    g = mu.host_local_array_to_global_array(x, mesh, P("d"))
    assert g.shape == (8,) and g.is_fully_addressable and g.sharding == NamedSharding(mesh, P("d"))
    np.testing.assert_array_equal(np.asarray(g), x)
    assert mu.global_array_to_host_local_array(g, mesh, P("d")) is g
    np.testing.assert_array_equal(jax.jit(lambda a: mu.host_local_array_to_global_array(
        a, mesh, P("d")) * 2)(x), 2 * x)


@pytest.mark.parametrize("spec, shape", [(("d",), (8, 3)), ((None, "d"), (2, 8)), ((), (5,)),
                                         ((("d", "e"),), (8,))])
def test_constructors_on_four_devices(spec, shape):
    mesh = Mesh(np.array(DEVICES).reshape(2, 2), ("d", "e"))
    sharding = NamedSharding(mesh, P(*spec))
    value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    calls = []
    a = jax.make_array_from_callback(shape, sharding, lambda i: calls.append(i) or value[i])
    b = jax.make_array_from_process_local_data(sharding, value)
    c = jax.make_array_from_single_device_arrays(
        shape, sharding, [jax.device_put(value[i], d)
                          for d, i in sharding.addressable_devices_indices_map(shape).items()])
    for arr in (a, b, c):
        assert arr.shape == shape and arr.sharding == sharding and arr.is_fully_addressable
        np.testing.assert_array_equal(np.asarray(arr), value)
        for s in arr.addressable_shards:
            np.testing.assert_array_equal(np.asarray(s.data), value[s.index])
    assert len(calls) == (1 if sharding.is_fully_replicated else 4)


def test_constructor_errors_name_the_problem():
    mesh = Mesh(np.array(DEVICES), ("d",))
    sharding = NamedSharding(mesh, P("d"))
    with pytest.raises(ValueError, match=r"Expected shard shape \(2,\) doesn't match"):
        jax.make_array_from_callback((8,), sharding, lambda i: np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="must have matching dtypes"):
        jax.make_array_from_single_device_arrays(
            (8,), sharding, [jax.device_put(np.zeros(2, np.float32 if k else np.int32), d)
                             for k, d in enumerate(DEVICES)])
    with pytest.raises(ValueError, match="one per addressable device"):
        jax.make_array_from_single_device_arrays(
            (8,), sharding, [jax.device_put(np.zeros(2, np.float32), DEVICES[0])])
    with pytest.raises(ValueError, match="global_shape should be None or equal"):
        jax.make_array_from_process_local_data(sharding, np.zeros(4, np.float32), (8,))
    with pytest.raises(TypeError, match="must be a list or tuple"):
        jax.make_array_from_single_device_arrays((8,), sharding, np.zeros(8))
