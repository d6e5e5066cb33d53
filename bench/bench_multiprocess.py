"""Two processes on 127.0.0.1 (2 CPU devices each, gloo collectives): jaxkit against JAX.

    python bench/bench_multiprocess.py [--quick]

Cases, timed in each process of the group (process 0's numbers are printed):

* ``MLP train step``: the data-parallel step of tests/test_distributed.py (batch split over the
  global mesh of 4 devices, parameters replicated, grad + SGD), on a batch of 256 x 64, hidden
  width 256; the parameters stay on the devices between steps;
* ``process_allgather``: a 1024-float host array from each process, gathered on all;
* ``host_local -> global``: ``host_local_array_to_global_array`` of a 256 x 64 batch.

Unlike the other bench scripts the contenders cannot be interleaved in one process (each
group has its own distributed runtime), so jaxkit's group runs first, then JAX's; each case
keeps its best timing window (``_timing.best_per_call``).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap

WORKER = textwrap.dedent("""
    import importlib, json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[5])
    from _timing import best_per_call
    lib, address, pid, number = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    jax = importlib.import_module(lib)
    jnp = importlib.import_module(lib + ".numpy")
    sh = importlib.import_module(lib + ".sharding")
    mu = importlib.import_module(lib + ".experimental.multihost_utils")
    jax.distributed.initialize(address, 2, pid, initialization_timeout=60)
    rng = np.random.default_rng(0)
    mesh = sh.Mesh(np.array(jax.devices()), ("batch",))
    data = sh.NamedSharding(mesh, sh.PartitionSpec("batch"))
    repl = sh.NamedSharding(mesh, sh.PartitionSpec())
    params = jax.device_put({"w1": rng.normal(size=(64, 256)).astype(np.float32) * 0.1,
                             "w2": rng.normal(size=(256, 1)).astype(np.float32) * 0.1}, repl)
    local = rng.normal(size=(128, 64)).astype(np.float32)
    x = jax.make_array_from_process_local_data(data, local)
    y = jax.make_array_from_process_local_data(data, local[:, :1])

    def loss_fn(p, x, y):
        return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)

    def step(p, x, y):
        g = jax.grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)

    train = jax.jit(step, in_shardings=(repl, data, data), out_shardings=repl)
    state = [params]

    def train_step():
        state[0] = train(state[0], x, y)
        jax.block_until_ready(state[0])

    host = np.arange(1024, dtype=np.float32)
    fns = {"MLP train step": train_step,
           "process_allgather": lambda: mu.process_allgather(host),
           "host_local -> global": lambda: jax.block_until_ready(
               mu.host_local_array_to_global_array(local, mesh, sh.PartitionSpec("batch")))}
    times = best_per_call(fns, number=number, windows=3)
    print(json.dumps(times), flush=True)
    jax.distributed.shutdown()
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_group(lib: str, number: int, script: str) -> dict[str, float]:
    address = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, JAXKIT_NUM_CPU_DEVICES="2", JAX_NUM_CPU_DEVICES="2",
               JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo", JAX_PLATFORMS="cpu")
    bench_dir = os.path.dirname(os.path.abspath(__file__))
    procs = [subprocess.Popen([sys.executable, script, lib, address, str(i), str(number),
                               bench_dir], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(2)]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"{lib} worker failed:\n{err[-2000:]}")
    return json.loads(outs[0][0].strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per window")
    args = parser.parse_args()
    number = 5 if args.quick else 30
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "multiprocess_worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        results = {"jaxkit": run_group("jaxkit", number, script)}
        if importlib.util.find_spec("jax") is not None:
            results["jax"] = run_group("jax", number, script)
    print(f"{'case':24s} {'jaxkit':>12s} {'jax':>12s} {'ratio':>7s}")
    for case, t in results["jaxkit"].items():
        ref = results.get("jax", {}).get(case)
        ratio = f"{t / ref:7.2f}" if ref else "      -"
        ref_text = f"{ref * 1e6:10.0f}us" if ref else "           -"
        print(f"{case:24s} {t * 1e6:10.0f}us {ref_text} {ratio}")


if __name__ == "__main__":
    main()
