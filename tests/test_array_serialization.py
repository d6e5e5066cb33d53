"""``jaxkit.experimental.array_serialization`` against JAX's, on real TensorStore files:
one record per array (shape, dtype); each is written by one library and read by the
other (zarr through the checkpoint manager, zarr3 in OCDBT through the async functions),
and both read back the same values; then specs, padding and casting on read, the commit
callback, and the errors."""
from __future__ import annotations

import asyncio
import os

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.experimental.layout import Format, Layout

ts = pytest.importorskip("tensorstore")
from jaxkit.experimental.array_serialization import serialization as kser  # noqa: E402
from jaxkit.experimental.array_serialization import tensorstore_impl as kts  # noqa: E402

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.experimental.array_serialization import serialization as jser  # noqa: E402
from jax.experimental.array_serialization import tensorstore_impl as jts  # noqa: E402
from jax.experimental.layout import Format as JFormat  # noqa: E402

RECORDS = [((4, 6), np.float32), ((5,), np.int32), ((), np.float32), ((2, 3, 4), np.int8),
           ((3, 2), np.float16), ((0, 3), np.float32), ((7,), np.bool_), ((2, 2), np.uint32)]


def _value(shape, dtype):
    n = int(np.prod(shape))
    return (np.arange(n) % 7 - 3).astype(dtype).reshape(shape)


def _kit_sharding():
    return kjnp.zeros(()).sharding


def _jax_sharding():
    return jax.sharding.SingleDeviceSharding(jax.devices()[0])


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{np.dtype(r[1]).name}{r[0]}")
def test_manager_round_trip_both_ways(tmp_path, record):
    value = _value(*record)
    kpath, jpath = str(tmp_path / "kit"), str(tmp_path / "jax")
    kman, jman = kser.GlobalAsyncCheckpointManager(), jser.GlobalAsyncCheckpointManager()
    kman.serialize_with_paths([kjnp.asarray(value)], [kpath])
    jman.serialize_with_paths([jjnp.asarray(value)], [jpath])
    kman.wait_until_finished()
    jman.wait_until_finished()
    assert sorted(os.listdir(kpath)) == sorted(os.listdir(jpath))
    for path in (kpath, jpath):
        (ours,) = kman.deserialize_with_paths([_kit_sharding()], [path])
        (theirs,) = jman.deserialize_with_paths([_jax_sharding()], [path])
        assert isinstance(ours, jaxkit.Array)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
        np.testing.assert_array_equal(np.asarray(ours), value)


@pytest.mark.parametrize("record", RECORDS[:4], ids=lambda r: f"{np.dtype(r[1]).name}{r[0]}")
def test_async_zarr3_ocdbt_round_trip(tmp_path, record):
    value = _value(*record)
    arr = kjnp.asarray(value)
    spec = kts.get_tensorstore_spec(str(tmp_path / "ckpt" / "a"), arr=arr)
    assert spec == jts.get_tensorstore_spec(str(tmp_path / "ckpt" / "a"),
                                            arr=jjnp.asarray(value))

    async def write_then_read():
        futures: list = []
        await kts.async_serialize(arr, dict(spec), commit_future=futures)
        for f in futures:
            await f
        return await kts.async_deserialize(_kit_sharding(), spec)

    ours = asyncio.run(write_then_read())
    theirs = asyncio.run(jts.async_deserialize(_jax_sharding(), spec))
    np.testing.assert_array_equal(np.asarray(ours), value)
    np.testing.assert_array_equal(np.asarray(theirs), value)


def test_read_pads_and_casts_like_jax(tmp_path):
    path = str(tmp_path / "x")
    kser.run_serialization([kjnp.arange(24.0).reshape(4, 6)],
                           [kser.get_tensorstore_spec(path)])
    (ours,) = kser.run_deserialization([_kit_sharding()], [kser.get_tensorstore_spec(path)],
                                       [(5, 7)], [np.float16])
    (theirs,) = jser.run_deserialization([_jax_sharding()], [jser.get_tensorstore_spec(path)],
                                         [(5, 7)], [np.float16])
    assert ours.dtype == theirs.dtype == np.float16
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    (struct,) = kser.run_deserialization([jaxkit.ShapeDtypeStruct((4, 6), np.int32)],
                                         [kser.get_tensorstore_spec(path)])
    assert struct.dtype == np.int32 and int(struct[3, 5]) == 23


def test_read_into_a_format_like_jax(tmp_path):
    # a Format names the sharding (and the layout) to read into, as in JAX
    path = str(tmp_path / "x")
    kser.run_serialization([kjnp.arange(6.0).reshape(2, 3)], [kser.get_tensorstore_spec(path)])
    (ours,) = kser.run_deserialization([Format(None, _kit_sharding())],
                                       [kser.get_tensorstore_spec(path)])
    (theirs,) = jser.run_deserialization([JFormat(None, _jax_sharding())],
                                         [jser.get_tensorstore_spec(path)])
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert kser.Format is Format
    with pytest.raises(NotImplementedError, match="row-major"):
        kser.run_deserialization([Format(Layout((1, 0)), _kit_sharding())],
                                 [kser.get_tensorstore_spec(path)])


SPEC_CASES = [
    dict(ckpt_path="/tmp/ckpt/arr"),
    dict(ckpt_path="/tmp/ckpt/arr/", ocdbt=False),
    dict(ckpt_path="gs://bucket/dir/arr"),
    dict(ckpt_path="s3://bucket/dir/arr", ocdbt=False, process_idx=2),
    dict(ckpt_path="/tmp/ckpt/arr", process_idx=0, driver="zarr"),
]


@pytest.mark.parametrize("kwargs", SPEC_CASES, ids=lambda k: k["ckpt_path"])
def test_specs_match_jax(kwargs):
    assert kts.get_tensorstore_spec(**kwargs) == jts.get_tensorstore_spec(**kwargs)
    assert kser.get_tensorstore_spec(kwargs["ckpt_path"]) == \
        jser.get_tensorstore_spec(kwargs["ckpt_path"])


@pytest.mark.parametrize("shape,dtype", [((1000, 1000), np.float32), ((3, 5, 7), np.int8),
                                         ((1 << 20, 3), np.float64)])
def test_metadata_and_verification_match_jax(shape, dtype):
    # Metadata comes from shape and dtype alone: a zero-stride NumPy stand-in serves both.
    stand_in = np.lib.stride_tricks.as_strided(np.zeros((), dtype), shape, [0] * len(shape))
    ours = kts.get_tensorstore_spec("/tmp/c/a", arr=stand_in)
    assert ours == jts.get_tensorstore_spec("/tmp/c/a", arr=stand_in)
    kts.verify_tensorstore_spec(ours, stand_in, "/tmp/c", ocdbt=True)
    bad = dict(ours, metadata=dict(ours["metadata"], shape=(1,)))
    with pytest.raises(ValueError, match="doesn't match"):
        kts.verify_tensorstore_spec(bad, stand_in, "/tmp/c", ocdbt=True)
    with pytest.raises(ValueError, match="does not match the spec path"):
        kts.verify_tensorstore_spec(ours, stand_in, "/elsewhere", ocdbt=True)


def test_helpers_match_jax():
    a = {"driver": "zarr", "kvstore": {"driver": "file", "path": "/a"}, "x": 1}
    b = {"kvstore": {"path": "/b"}, "y": 2}
    assert kts.merge_nested_ts_specs(a, b) == jts.merge_nested_ts_specs(a, b)
    assert kts.merge_nested_ts_specs(a, None) == jts.merge_nested_ts_specs(a, None)
    for leaf in (None, {"driver": "zarr"}, {"kvstore": {}}, {"a": 1}, [1], 3):
        assert kts.is_tensorstore_spec_leaf(leaf) == jts.is_tensorstore_spec_leaf(leaf)
    for spec in ("gs://a/b", "s3://a", "/local", {"driver": "gcs"},
                 {"kvstore": {"driver": "ocdbt", "base": {"driver": "s3"}}},
                 {"kvstore": {"driver": "file", "path": "/x"}}):
        assert kser.is_remote_storage(spec) == jser.is_remote_storage(spec)


def test_read_footprint_matches_jax(tmp_path):
    path = str(tmp_path / "f")
    kser.run_serialization([kjnp.zeros((10, 12))], [kser.get_tensorstore_spec(path)])
    t = ts.open(kser.get_tensorstore_spec(path)).result()
    for domain in (None, t[2:5, 3:12].domain, t[0:1, 0:1].domain):
        assert kts.estimate_read_memory_footprint(t, domain) == \
            jts.estimate_read_memory_footprint(t, domain)


def test_commit_callback_and_errors(tmp_path):
    manager = kser.GlobalAsyncCheckpointManager()
    calls = []
    manager.serialize([kjnp.ones(3)], [kser.get_tensorstore_spec(str(tmp_path / "ok"))],
                      on_commit_callback=lambda: calls.append("committed"))
    manager.wait_until_finished()
    assert calls == ["committed"]

    def fail():
        raise RuntimeError("rename failed")

    manager.serialize([kjnp.ones(3)], [kser.get_tensorstore_spec(str(tmp_path / "bad"))],
                      on_commit_callback=fail)
    with pytest.raises(RuntimeError, match="rename failed"):
        manager.wait_until_finished()
    manager.check_for_errors()  # raised once only
    with pytest.raises(ValueError, match="one spec per array"):
        manager.serialize([kjnp.ones(3), kjnp.ones(2)],
                          [kser.get_tensorstore_spec(str(tmp_path / "c"))])
    with pytest.raises(TypeError, match="instance of `jax.sharding.Sharding`"):
        manager.deserialize(["not a sharding"], [kser.get_tensorstore_spec(
            str(tmp_path / "ok"))])
    with pytest.raises(ValueError, match="should be absolute"):
        kts.get_tensorstore_spec("relative/path/a")
    assert isinstance(kser.BarrierTimeoutError("x"), Exception)
    assert kts.make_single_device_sharding(jaxkit.devices()[0]) is _kit_sharding()
