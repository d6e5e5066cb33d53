"""Several processes on 127.0.0.1: jaxlib's distributed runtime with gloo collectives.

Each test starts fresh Python processes (a random free port, a bounded wait, always killed
at the end): two processes agree on a psum and an all_gather through ``pmap``; a process
whose peer never arrives gets a ``TimeoutError`` within seconds that names the coordinator and
the missing process. Argument errors are checked in this process."""
import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(tmp_path, n_started: int, n_expected: int, timeout: int, wait: float):
    """Start ``n_started`` of ``n_expected`` processes; their JSON results and stderr."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    address = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, JAXKIT_NUM_CPU_DEVICES="1")
    procs = [subprocess.Popen([sys.executable, str(script), address, str(i), str(n_expected),
                               str(timeout)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(n_started)]
    results = []
    try:
        deadline = time.monotonic() + wait
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert p.returncode == 0, err[-3000:]
            results.append((json.loads(out.strip().splitlines()[-1]), err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return address, results


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
