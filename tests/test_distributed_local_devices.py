"""``jax.distributed.initialize(local_device_ids=...)`` on jaxkit and on the JAX oracle: two
processes with two CPU devices each. JAX applies the ids to the GPUs a process sees; its CPU
client keeps every device, and so does jaxkit's. Argument checks run in this process."""
import textwrap

import pytest

from _process_group import have_jax, run_group
from jaxkit import distributed

WORKER = textwrap.dedent("""
    import importlib, json, os, sys
    lib, address, pid, n, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    jax = importlib.import_module(lib)
    ids = {"int": pid, "list": [pid], "env": None}[how]
    if how == "env":
        os.environ["JAX_LOCAL_DEVICE_IDS"] = str(pid)
    jax.distributed.initialize(address, n, pid, local_device_ids=ids)
    import numpy as np
    total = jax.jit(lambda x: x.sum())(np.arange(4.0, dtype=np.float32))
    print(json.dumps({
        "devices": [d.id for d in jax.devices()],
        "local_devices": [d.id for d in jax.local_devices()],
        "process_index": jax.process_index(), "total": float(total),
    }), flush=True)
    jax.distributed.shutdown()
""")


def run(tmp_path, lib: str, how: str) -> list:
    script = tmp_path / f"{lib}_{how}_worker.py"
    script.write_text(WORKER)
    _, results = run_group(script, lambda address, i: (lib, address, i, 2, how), 2, 120,
                           devices=2)
    return [r for r, _ in results]


@pytest.mark.parametrize("how", ["int", "list", "env"])
def test_local_device_ids_leave_the_cpu_devices_as_jax_does(tmp_path, how):
    ours = run(tmp_path, "jaxkit", how)
    for pid, r in enumerate(ours):
        assert r["process_index"] == pid and r["total"] == 6.0
        assert len(r["devices"]) == 4 and len(r["local_devices"]) == 2
    if have_jax:
        assert run(tmp_path, "jax", how) == ours


@pytest.mark.parametrize("ids, error, text", [
    ("0", ValueError, "non-negative device ids"),
    ([0, -1], ValueError, "non-negative device ids"),
    (1.5, TypeError, "an int or a sequence of ints"),
])
def test_bad_local_device_ids_are_refused(ids, error, text):
    with pytest.raises(error, match=text):
        distributed.initialize("127.0.0.1:1234", 2, 0, local_device_ids=ids)
    assert not distributed.is_initialized()
