"""``jaxkit._src_compat.util`` (``jax._src.util`` for JAX's custom-interpreter tutorial):
``safe_map``/``safe_zip`` agree with JAX's on results and on the error class."""
from __future__ import annotations

import operator

import numpy as np

import pytest

from jaxkit._src_compat import util as kit_util
from jaxkit._src_compat import xla_bridge as kit_xb
from jaxkit._src_compat.lib import xla_client as kit_xc

jax_util = pytest.importorskip("jax._src.util")
jax_xb = pytest.importorskip("jax._src.xla_bridge")
# JAX 0.10.2's jax._src.lib holds jaxlib's xla_client as an attribute, not a submodule
jax_xc = pytest.importorskip("jax._src.lib").xla_client

CASES = [
    ("map_one", lambda u: u.safe_map(abs, [-1, 2, -3])),
    ("map_two", lambda u: u.safe_map(operator.add, [1, 2], (10, 20))),
    ("map_empty", lambda u: u.safe_map(abs, [])),
    ("map_mismatch", lambda u: u.safe_map(operator.add, [1, 2], [1])),
    ("zip_two", lambda u: u.safe_zip([1, 2], "ab")),
    ("zip_mismatch", lambda u: u.safe_zip([1, 2], [1, 2, 3])),
    ("zip_none", lambda u: u.safe_zip()),
]


def _outcome(fn, module):
    try:
        return fn(module)
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)


@pytest.mark.parametrize("fn", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_matches_jax(fn):
    assert _outcome(fn, kit_util) == _outcome(fn, jax_util)


# ``jax._src.xla_bridge.get_backend`` and ``jax._src.lib.xla_client`` (autodidax's XLA backend):
# the backend is jaxlib's PjRt client, on which a StableHLO module compiles and runs directly.
_ADD_ONE = """
func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  %c = stablehlo.constant dense<1.0> : tensor<3xf32>
  %0 = stablehlo.add %arg0, %c : tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""


class _Aval:
    shape, dtype, weak_type = (3,), np.dtype("float32"), False


def _run_on_client(xb, xc):
    backend = xb.get_backend(None)
    device = backend.devices()[0]
    compiled = backend.compile_and_load(_ADD_ONE, backend.devices()[:1])
    buf = xc.batched_device_put(_Aval(), xc.GSPMDSharding((device,), xc.OpSharding()),
                                [np.arange(3, dtype=np.float32)], [device], True,
                                enable_x64=True)
    return type(backend).__name__, np.asarray(compiled.execute([buf])[0])


def test_backend_is_the_pjrt_client_as_in_jax():
    kit_name, kit_out = _run_on_client(kit_xb, kit_xc)
    jax_name, jax_out = _run_on_client(jax_xb, jax_xc)
    assert kit_name == jax_name
    np.testing.assert_array_equal(kit_out, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(kit_out, jax_out)
