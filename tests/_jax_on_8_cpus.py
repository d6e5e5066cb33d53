"""The multi-device oracle: expressions evaluated by JAX 0.10.2 on 8 CPU devices in a
subprocess, and by jaxkit in this process on an extra 8-device CPU backend, over the same
prelude. The prelude and the expressions name the library ``jax`` only and the devices
``DEV``, after ``COMMON`` (``jnp``, ``P``, ``NamedSharding``, ``AxisType``, a mesh ``mesh``
of 4 devices with an Auto axis 'x', ``s`` splitting over it, ``wsc``); an expression gives
a JSON value, or an error is recorded as ``{"error": "Class: message"}``."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jaxkit
from jaxkit.runtime import multi_device

DEVICES = multi_device.add_cpu_backend("oracle8", 8).devices

COMMON = """
jnp = jax.numpy
P, NamedSharding, AxisType = (jax.sharding.PartitionSpec, jax.sharding.NamedSharding,
                              jax.sharding.AxisType)
mesh = jax.make_mesh((4,), ('x',), axis_types=(AxisType.Auto,), devices=DEV[:4])
s = NamedSharding(mesh, P('x'))
wsc = jax.lax.with_sharding_constraint
"""

_DRIVER = r"""
import json, sys
import numpy as np
import jax
jax.config.update('jax_num_cpu_devices', 8)
sys.path.insert(0, sys.argv[3])
from _jax_on_8_cpus import evaluate
prelude, cases = sys.argv[1], json.loads(sys.argv[2])
ns = dict(np=np, jax=jax, DEV=jax.devices())
exec(prelude, ns)
print(json.dumps({name: evaluate(code, ns) for name, code in cases.items()}))
"""


def evaluate(code: str, ns: dict):
    """``code``'s value in ``ns``, or the class and text of the error it raised."""
    try:
        return eval(code, ns)  # noqa: S307  (the test's own expressions)
    except Exception as e:  # noqa: BLE001  (the class and text are what is compared)
        return {"error": f"{type(e).__name__}: {e}"}


def jax_results(prelude: str, cases: dict[str, str]) -> dict:
    """Every case as JAX gives it (the test is skipped without the oracle)."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the JAX oracle is not installed")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", _DRIVER, COMMON + prelude, json.dumps(cases),
                           os.path.dirname(__file__)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def jaxkit_namespace(prelude: str) -> dict:
    """The prelude run with jaxkit as ``jax`` over this process's 8 extra CPU devices."""
    ns = dict(np=np, jax=jaxkit, DEV=DEVICES)
    exec(COMMON + prelude, ns)  # noqa: S102
    return ns


def against_jax(prelude: str, cases: dict[str, str]) -> tuple:
    """A test module's fixtures ``oracle`` (JAX's results) and ``ns`` (jaxkit's namespace)
    and its test ``test_matches_jax`` (one per case: jaxkit's value is JAX's). Assign them in
    the module: ``oracle, ns, test_matches_jax = against_jax(PRELUDE, CASES)``."""

    @pytest.fixture(scope="module")
    def oracle() -> dict:
        return jax_results(prelude, cases)

    @pytest.fixture(scope="module")
    def ns() -> dict:
        return jaxkit_namespace(prelude)

    @pytest.mark.parametrize("case", list(cases))
    def test_matches_jax(oracle, ns, case):
        assert evaluate(cases[case], ns) == oracle[case]

    return oracle, ns, test_matches_jax
