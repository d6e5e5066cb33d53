"""``jaxkit.experimental.transfer`` (jaxlib's transfer server, over its CPU socket
transport): arrays offered by one server are pulled through a connection in the same
process, and error arrays fail as JAX's do. Not here: a pull from another process (JAX's
own module crashes in jaxlib's socket event loop doing that on this CPU machine), and JAX
and jaxkit servers mixed in one process (two CPU clients: jaxlib segfaults)."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.experimental import transfer as ktransfer
from jaxkit.runtime import pjrt

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.experimental import transfer as jtransfer  # noqa: E402


@pytest.fixture(scope="module")
def server():
    return ktransfer.start_transfer_server(jaxkit.devices()[0].client)


TREES = [
    [np.arange(6.0, dtype=np.float32)],
    {"a": np.arange(12, dtype=np.int32).reshape(3, 4), "b": (np.ones((2,), np.float16),)},
    # (No zero-size arrays: jaxlib 0.10.2 never marks a pulled zero-size buffer ready, and
    # reading one hangs in JAX as in jaxkit.)
    [np.array(3.5, np.float32), np.full((2, 3), -1, np.int8)],
]


@pytest.mark.parametrize("i", range(len(TREES)))
def test_pull_what_was_offered(server, i):
    arrays = jaxkit.tree_util.tree_map(kjnp.asarray, TREES[i])
    server.await_pull(100 + i, arrays)
    conn = server.connect(server.address())
    specs = jaxkit.tree_util.tree_map(lambda a: jaxkit.ShapeDtypeStruct(a.shape, a.dtype),
                                      arrays)
    pulled = conn.pull(100 + i, specs)
    assert jaxkit.tree_util.tree_structure(pulled) == jaxkit.tree_util.tree_structure(arrays)
    for got, want in zip(jaxkit.tree_util.tree_leaves(pulled), jaxkit.tree_util.tree_leaves(
            TREES[i])):
        assert isinstance(got, jaxkit.Array)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)


def test_empty_pull_returns_the_tree(server):
    assert server.connect(server.address()).pull(5, []) == []


def test_address_is_a_host_and_port(server):
    address = server.address()
    assert address.rsplit(":", 1)[1].isdigit(), address
    assert isinstance(server.address(), str)


def test_error_array_raises_its_message_when_used():
    e = ktransfer.make_error_array(jaxkit.ShapeDtypeStruct((3,), np.float32), "boom")
    assert e.shape == (3,) and e.dtype == np.float32
    with pytest.raises(pjrt.JaxRuntimeError, match="boom"):
        np.asarray(e)
    je = jtransfer.make_error_array(jax.ShapeDtypeStruct(
        (3,), jjnp.float32, sharding=jax.sharding.SingleDeviceSharding(jax.devices()[0])),
        "boom")
    with pytest.raises(jax.errors.JaxRuntimeError, match="boom"):
        np.asarray(je)
