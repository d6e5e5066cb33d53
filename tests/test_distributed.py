"""Several processes on 127.0.0.1: jaxlib's distributed runtime with gloo collectives.

Each test starts fresh Python processes (``_process_group``: a random free port, a bounded
wait, always killed at the end): two processes agree on a psum and an all_gather through
``pmap``; a process whose peer never arrives gets a ``TimeoutError`` within seconds that names
the coordinator and the missing process; ``jit`` over a global mesh leaves each process its
own shards, printed and answered as JAX does (the same worker run on the JAX oracle); and the
issue's acceptance test: two processes train a data-parallel MLP (batch split over a global
mesh, parameters replicated) to the numbers of one process, and of JAX's two processes.
Argument errors are checked in this process."""
import textwrap

import numpy as np
import pytest
from _process_group import have_jax, run_group

import jaxkit
from jaxkit import distributed

WORKER = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import jaxkit
    from jaxkit import distributed
    from jaxkit.transforms.pmap import pmap
    from jaxkit.lax import parallel as P

    address, pid, n, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    start = time.monotonic()
    try:
        distributed.initialize(address, n, pid, initialization_timeout=timeout)
    except TimeoutError as e:
        print(json.dumps({"timeout": str(e), "seconds": time.monotonic() - start}), flush=True)
        sys.exit(0)
    x = np.full((1, 3), pid + 1.0, np.float32)
    psum = pmap(lambda v: P.psum(v, "i"), "i")(x)
    gathered = pmap(lambda v: P.all_gather(v, "i"), "i")(x)
    index = pmap(lambda v: P.axis_index("i"), "i")(x)
    print(json.dumps({
        "process_index": distributed.process_index(),
        "process_count": distributed.process_count(),
        "devices": len(jaxkit.devices()), "local_devices": len(jaxkit.local_devices()),
        "psum": np.asarray(psum).tolist(), "all_gather": np.asarray(gathered).tolist(),
        "axis_index": np.asarray(index).tolist(),
    }), flush=True)
    distributed.shutdown()
""")


def run_workers(tmp_path, n_started: int, n_expected: int, timeout: int, wait: float):
    """Start ``n_started`` of ``n_expected`` processes; their JSON results and stderr."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return run_group(script, lambda address, i: (address, i, n_expected, timeout), n_started,
                     wait)


def test_two_processes_agree_on_a_psum(tmp_path):
    _, results = run_workers(tmp_path, 2, 2, timeout=60, wait=120)
    for pid, (r, _) in enumerate(results):
        assert r["process_index"] == pid and r["process_count"] == 2
        assert r["devices"] == 2 and r["local_devices"] == 1
        assert r["psum"] == [[3.0, 3.0, 3.0]]
        assert r["all_gather"] == [[[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]]
        assert r["axis_index"] == [pid]


def test_a_peer_that_never_arrives_times_out(tmp_path):
    address, [(r, _)] = run_workers(tmp_path, 1, 2, timeout=1, wait=60)
    assert r["seconds"] < 20
    assert address in r["timeout"] and "processes [1]" in r["timeout"]


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="process_id must be in"):
        distributed.initialize("127.0.0.1:1234", 2, 2)
    with pytest.raises(ValueError, match="host:port"):
        distributed.initialize("localhost", 2, 0)


def test_initialize_after_the_backend_exists_is_an_error():
    jaxkit.devices()
    with pytest.raises(RuntimeError, match="before jaxkit creates its CPU backend"):
        distributed.initialize("127.0.0.1:1234", 2, 1)
    assert not distributed.is_initialized()
    assert distributed.process_index() == 0 and distributed.process_count() == 1


# ---- a global mesh over every process's devices --------------------------------------------
# The same worker runs on jaxkit and on the JAX oracle (argv[1] names the library).

GLOBAL_MESH_WORKER = textwrap.dedent("""
    import importlib, json, sys
    import numpy as np
    lib, address, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    jax = importlib.import_module(lib)
    sh = importlib.import_module(lib + ".sharding")
    jax.distributed.initialize(address, 2, pid, initialization_timeout=60)
    mesh = sh.Mesh(np.array(jax.devices()), ("d",))
    split = sh.NamedSharding(mesh, sh.PartitionSpec("d"))
    repl = sh.NamedSharding(mesh, sh.PartitionSpec())
    x = np.arange(8.0, dtype=np.float32)
    out = {"devices": [d.id for d in jax.devices()],
           "local_devices": [d.id for d in jax.local_devices()],
           "process_index": jax.process_index(), "process_count": jax.process_count(),
           "device_processes": [d.process_index for d in jax.devices()]}
    total = jax.jit(lambda v, w: (v * w).sum(), in_shardings=(split, repl),
                    out_shardings=repl)
    try:
        total(x, np.float32(2))
    except ValueError as e:
        out["numpy_split_error"] = str(e)
    xg = jax.make_array_from_callback((8,), split, lambda index: x[index])
    s = total(xg, np.float32(2))
    out["sum"] = float(s)
    out["sum_repr"] = repr(s)
    out["sum_addressable"] = s.is_fully_addressable
    y = jax.jit(lambda v: v * 2, out_shardings=split)(xg)
    out["y_repr"] = repr(y)
    out["y_addressable"] = y.is_fully_addressable
    out["y_sharding"] = repr(y.sharding)
    out["y_shards"] = [[sh.device.id, sh.index[0].start, sh.index[0].stop, sh.replica_id,
                        np.asarray(sh.data).tolist()] for sh in y.addressable_shards]
    try:
        np.asarray(y)
    except RuntimeError as e:
        out["fetch_error"] = str(e)
    summed = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "d"), mesh=mesh,
                                   in_specs=sh.PartitionSpec("d"),
                                   out_specs=sh.PartitionSpec("d")))(xg)
    out["shard_map_psum"] = [np.asarray(s.data).tolist() for s in summed.addressable_shards]
    odd = jax.jit(lambda v: v[1::2] + 1)(xg)  # layouts from the arguments, none given
    out["propagated"] = [repr(odd.sharding), [np.asarray(s.data).tolist()
                                              for s in odd.addressable_shards]]
    out["eager"] = [float(xg.sum()), float(jax.numpy.mean(xg * xg))]
    # data x model: the batch split over processes, the weights' columns over each one's devices
    grid = sh.Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "model"))
    w = jax.make_array_from_callback(
        (4, 6), sh.NamedSharding(grid, sh.PartitionSpec(None, "model")),
        lambda i: np.arange(24, dtype=np.float32).reshape(4, 6)[i] / 50)
    xb = jax.make_array_from_process_local_data(
        sh.NamedSharding(grid, sh.PartitionSpec("data")), np.full((3, 4), pid + 1.0, np.float32))
    col = jax.jit(lambda x, w: jax.numpy.tanh(x @ w).sum(axis=0),
                  out_shardings=sh.NamedSharding(grid, sh.PartitionSpec("model")))(xb, w)
    out["model_parallel"] = [list(xb.shape), repr(col.sharding),
                             [[s.device.id, s.index[0].start, s.replica_id,
                               np.asarray(s.data).tolist()] for s in col.addressable_shards]]
    print(json.dumps(out), flush=True)
    jax.distributed.shutdown()
""")


def run_library(tmp_path, worker: str, lib: str, n: int, devices: int, wait: float = 120):
    script = tmp_path / f"{lib}_worker.py"
    script.write_text(worker)
    _, results = run_group(script, lambda address, i: (lib, address, i, n), n, wait,
                           devices=devices)
    return [r for r, _ in results]


def test_jit_over_a_global_mesh_holds_each_process_shards(tmp_path):
    results = run_library(tmp_path, GLOBAL_MESH_WORKER, "jaxkit", 2, devices=2)
    for pid, r in enumerate(results):
        assert r["devices"] == [0, 1, 2048, 2049] and r["device_processes"] == [0, 0, 1, 1]
        assert r["local_devices"] == [[0, 1], [2048, 2049]][pid]
        assert (r["process_index"], r["process_count"]) == (pid, 2)
        assert "Passing non-trivial shardings for numpy inputs" in r["numpy_split_error"]
        assert r["sum"] == 56.0 and r["sum_repr"] == "Array(56., dtype=float32)"
        assert not r["sum_addressable"] and not r["y_addressable"]
        assert r["y_repr"] == "Array(shape=(8,), dtype=float32)"
        rows = [[0, 2], [2, 4]] if pid == 0 else [[4, 6], [6, 8]]
        assert r["y_shards"] == [[d, a, b, 0, [2.0 * a, 2.0 * a + 2]]
                                 for d, (a, b) in zip(r["local_devices"], rows)]
        assert "spans non-addressable" in r["fetch_error"]
        assert r["shard_map_psum"] == [[12.0, 16.0], [12.0, 16.0]]
        assert r["propagated"][1] == [[[2.0], [4.0]], [[6.0], [8.0]]][pid]
        assert r["eager"] == [28.0, 17.5]
        w = np.arange(24, dtype=np.float32).reshape(4, 6) / 50
        want = 3 * np.tanh(np.ones((1, 4), np.float32) @ w)[0] + \
            3 * np.tanh(2 * np.ones((1, 4), np.float32) @ w)[0]
        shape, _, shards = r["model_parallel"]
        assert shape == [6, 4] and [s[:3] for s in shards] == [
            [r["local_devices"][0], 0, pid], [r["local_devices"][1], 3, pid]]
        np.testing.assert_allclose(np.concatenate([s[3] for s in shards]), want, rtol=1e-6)
    if have_jax:  # the same program on JAX prints and answers the same
        assert run_library(tmp_path, GLOBAL_MESH_WORKER, "jax", 2, devices=2) == results


# ---- the acceptance test: a data-parallel MLP step over two processes ---------------

MLP_WORKER = textwrap.dedent("""
    import importlib, json, sys
    import numpy as np
    lib, address, pid, nproc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    jax = importlib.import_module(lib)
    jnp = importlib.import_module(lib + ".numpy")
    sh = importlib.import_module(lib + ".sharding")
    mu = importlib.import_module(lib + ".experimental.multihost_utils")
    if nproc > 1:
        jax.distributed.initialize(address, nproc, pid, initialization_timeout=60)
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(4, 8)).astype(np.float32) * 0.5,
              "b1": np.zeros(8, np.float32),
              "w2": rng.normal(size=(8, 1)).astype(np.float32) * 0.5,
              "b2": np.zeros(1, np.float32)}
    X = rng.normal(size=(16, 4)).astype(np.float32)
    Y = np.sin(X.sum(1, keepdims=True)).astype(np.float32)
    mesh = sh.Mesh(np.array(jax.devices()), ("batch",))
    data = sh.NamedSharding(mesh, sh.PartitionSpec("batch"))
    repl = sh.NamedSharding(mesh, sh.PartitionSpec())
    rows = slice(pid * 16 // nproc, (pid + 1) * 16 // nproc)   # this process's sub-batch
    x = jax.make_array_from_process_local_data(data, X[rows])
    y = jax.make_array_from_process_local_data(data, Y[rows])
    params = jax.device_put(params, repl)

    def loss_fn(p, x, y):
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

    def step(p, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), loss

    train = jax.jit(step, in_shardings=(repl, data, data), out_shardings=(repl, repl))
    losses = []
    for _ in range(3):
        params, loss = train(params, x, y)
        losses.append(float(loss))
    mu.assert_equal(losses, "the processes' losses differ")
    print(json.dumps({
        "losses": losses, "params": {k: np.asarray(v).tolist() for k, v in params.items()},
        "x_shape": list(x.shape), "x_addressable": x.is_fully_addressable,
        "x_rows": [[s.index[0].start, s.index[0].stop] for s in x.addressable_shards],
        "params_sharding": repr(params["w1"].sharding)}), flush=True)
    if nproc > 1:
        jax.distributed.shutdown()
""")


def _flat_params(r):
    return {k: np.asarray(v, np.float32) for k, v in r["params"].items()}


def test_two_processes_train_a_data_parallel_mlp_like_one(tmp_path):
    two = run_library(tmp_path, MLP_WORKER, "jaxkit", 2, devices=2)
    [one] = run_library(tmp_path, MLP_WORKER, "jaxkit", 1, devices=4)
    for pid, r in enumerate(two):
        assert r["x_shape"] == [16, 4] and not r["x_addressable"]
        assert r["x_rows"] == [[[0, 4], [4, 8]], [[8, 12], [12, 16]]][pid]
        assert "spec=P()" in r["params_sharding"]
        np.testing.assert_allclose(r["losses"], one["losses"], rtol=1e-5)
        for k, v in _flat_params(r).items():
            np.testing.assert_allclose(v, _flat_params(one)[k], rtol=1e-5, atol=1e-6)
    assert one["x_addressable"] and one["losses"][2] < one["losses"][0]
    if have_jax:  # JAX's two processes reach the same numbers
        for mine, theirs in zip(two, run_library(tmp_path, MLP_WORKER, "jax", 2, devices=2)):
            np.testing.assert_allclose(mine["losses"], theirs["losses"], rtol=1e-6)
            for k, v in _flat_params(mine).items():
                np.testing.assert_allclose(v, _flat_params(theirs)[k], rtol=1e-6, atol=1e-7)
