"""Arrays to and from TensorStore (zarr3 or zarr arrays on a file, GCS or S3 key-value store,
optionally inside an OCDBT database), asynchronously: what JAX's checkpointing writes.

Writing opens (creating) the array from a spec and writes each addressable shard of the
array at its index; a ``commit_future`` list collects the futures of the open and of each
write's commit, so a caller can return once the data is copied and commit in the
background. Reading opens the stored array and builds the requested sharding's array with
``make_array_from_callback``, each shard read from its index (padded with zeros where the
stored array is smaller), optionally limiting the bytes in flight.

``tensorstore`` is an optional dependency (the ``test`` extra installs it); this module
imports it, so import it only where it is installed.
"""
from __future__ import annotations

import asyncio
import functools
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorstore as ts

from jaxkit import dtypes
from jaxkit.api import ShapeDtypeStruct, process_count
from jaxkit.api_extra import make_array_from_callback
from jaxkit.experimental.layout import Format, Layout
from jaxkit.runtime import pjrt
from jaxkit.runtime.array import Array

__all__ = ["Future", "Transaction", "async_deserialize", "async_serialize", "combine_kvstores",
           "estimate_read_memory_footprint", "get_tensorstore_spec",
           "is_tensorstore_spec_leaf", "make_single_device_sharding",
           "merge_nested_ts_specs", "verify_tensorstore_spec"]

Future, Transaction = ts.Future, ts.Transaction

_TS_ARRAY_DRIVER = "zarr3"
_TS_CONTEXT = ts.Context({
    "file_io_concurrency": {"limit": 128},
    "cache_pool": {"total_bytes_limit": 10_000_000_000},
    "cache_pool#remote": {"total_bytes_limit": 10_000_000_000},
    "data_copy_concurrency": {"limit": 128},
})
# Chunks of at most 100M elements; the file-size target below splits them further.
_TS_CHUNK_LAYOUT = ts.ChunkLayout(chunk=ts.ChunkLayout.Grid(elements=100_000_000))
_DEFAULT_BASE_DRIVER = "file"
_PROCESS_DIR_FORMAT = "process_{}"
_FILE_SIZE_TARGET = 2 * 1024 ** 3


def make_single_device_sharding(device: Any) -> Any:
    """The single-device sharding of ``device`` (jaxkit's one instance per device)."""
    return pjrt.backend_of(device).shardings[device]


class _LimitInFlightBytes:
    """At most ``limit`` bytes read and not yet released, across concurrent reads."""

    def __init__(self, limit: int):
        self._limit = limit
        self._available = limit
        self._cv = asyncio.Condition()

    async def wait_for_bytes(self, requested: int) -> None:
        if requested > self._limit:
            raise ValueError(f"Requested more bytes ({requested}) than the in-flight limit "
                             f"({self._limit}); raise concurrent_gb")
        async with self._cv:
            await self._cv.wait_for(lambda: self._available >= requested)
            self._available -= requested

    async def release_bytes(self, requested: int) -> None:
        async with self._cv:
            self._available += requested
            self._cv.notify_all()


def is_tensorstore_spec_leaf(leaf: Any) -> bool:
    """Whether ``leaf`` is a spec (a dict naming a driver or kvstore) or None, not a
    subtree: what a pytree of specs is flattened down to."""
    return leaf is None or (isinstance(leaf, dict) and ("driver" in leaf or "kvstore" in leaf))


def _prime_factors(x: int) -> list[int]:
    factors = []
    d = 2
    while d * d <= x:
        while x % d == 0:
            factors.append(d)
            x //= d
        d += 1
    if x > 1:
        factors.append(x)
    return factors


@functools.lru_cache(maxsize=1024)
def _chunk_shape(local_shape: tuple[int, ...], dtype: str,
                 file_size_target: int = _FILE_SIZE_TARGET) -> list[int]:
    """A chunk dividing ``local_shape`` with at most ~110% of ``file_size_target`` bytes
    (so each shard writes whole chunks and no file grows past the target): the smallest
    prime factor of any axis is divided out until the chunk is small enough."""
    if not local_shape or math.prod(local_shape) == 0:
        return [max(n, 1) for n in local_shape]  # tensorstore needs non-zero chunks
    chunk = list(local_shape)
    size = math.prod(local_shape) * np.dtype(dtype).itemsize
    factors = [_prime_factors(n) for n in local_shape]
    while size > 1.1 * file_size_target:
        axes = [i for i, f in enumerate(factors) if len(f) > 1]
        if not axes:
            break
        axis = min(axes, key=lambda i: factors[i][0])
        divisor = factors[axis].pop(0)
        chunk[axis] //= divisor
        size //= divisor
    return chunk


def _local_shape(arr: Any) -> tuple[int, ...]:
    if isinstance(arr, Array) or hasattr(arr, "addressable_shards"):
        return tuple(arr.sharding.shard_shape(tuple(arr.shape)))
    return tuple(arr.shape)


def _metadata(arr: Any, is_remote: bool = False, driver: str = _TS_ARRAY_DRIVER,
              file_size_target: int = _FILE_SIZE_TARGET) -> dict[str, Any]:
    shape, dtype, local = tuple(arr.shape), np.dtype(arr.dtype).name, _local_shape(arr)
    if driver == "zarr3":
        return {"codecs": [{"name": "zstd"}] if is_remote else [], "shape": shape,
                "data_type": dtype,
                "chunk_grid": {"name": "regular", "configuration": {
                    "chunk_shape": _chunk_shape(local, dtype, file_size_target)}}}
    if driver == "zarr":  # zarr keeps the dtype in the base spec, not the metadata
        return {"compressor": {"id": "zstd"}, "shape": shape,
                "chunks": np.maximum(1, local).tolist()}
    raise ValueError(f"Unsupported driver: {driver}")


def merge_nested_ts_specs(dict1: dict[Any, Any], dict2: dict[Any, Any] | None
                          ) -> dict[Any, Any]:
    """``dict1`` updated by ``dict2`` (whose entries win), the ``kvstore`` merged key by
    key."""
    if dict2 is None:
        return dict1
    kvstore = dict1.get("kvstore", {}) | dict2.get("kvstore", {})
    return dict1 | dict(dict2, kvstore=kvstore)


def verify_tensorstore_spec(spec: dict[str, Any], arr: Any, path: str | os.PathLike[str],
                            ocdbt: bool, check_metadata: bool = True) -> None:
    """Raise ``ValueError`` unless ``spec`` writes ``arr`` at ``path``: the OCDBT kvstore
    when asked for, the array's dtype and shape, a chunk dividing its shards."""
    if ocdbt and spec.get("kvstore", {}).get("driver", "") != "ocdbt":
        raise ValueError(f"Expected ocdbt driver, got {spec=}")
    if check_metadata:
        if arr is None:
            raise ValueError("Array is required for metadata verification.")
        metadata = spec["metadata"]
        if spec.get("driver", "") == "zarr3" and metadata["data_type"] != np.dtype(
                arr.dtype).name:
            raise ValueError(f"Provided dtype ({metadata['data_type']=}) doesn't match "
                             f"({arr.dtype=})")
        if "shape" in metadata and tuple(metadata["shape"]) != tuple(arr.shape):
            raise ValueError(f"Provided shape ({metadata['shape']=}) doesn't match "
                             f"({arr.shape=})")
        if spec.get("driver", "") == "zarr3":
            chunk = metadata["chunk_grid"]["configuration"]["chunk_shape"]
            local = _local_shape(arr)
            if not np.all(np.array(local) % np.array(chunk) == 0):
                raise ValueError(f"Provided chunk shape {chunk} does not divide the local "
                                 f"shape of the array {local}")
    found = spec["kvstore"]["base"]["path"] if ocdbt else spec["kvstore"]["path"]
    if str(found) != str(path):
        raise ValueError(f"Provided {path=} does not match the spec path: "
                         f"{spec['kvstore']}")


def _has_metadata(tree: Any) -> bool:
    return isinstance(tree, dict) and ("metadata" in tree or any(
        _has_metadata(sub) for sub in tree.values()))


_BUCKET = re.compile(r"^(gs|s3)://([^/]*)/(.*)$", re.DOTALL)


def _bucket_kvstore(path: str) -> dict[str, Any]:
    m = _BUCKET.fullmatch(path)
    if m is None:
        raise ValueError("The ckpt_path should contain the bucket name and the file path "
                         f"inside the bucket. Got: {path}")
    return {"driver": "gcs" if m[1] == "gs" else "s3", "bucket": m[2], "path": m[3]}


def get_tensorstore_spec(ckpt_path: str | os.PathLike[str], ocdbt: bool = True,
                         process_idx: int | None = None, arr: Any = None,
                         driver: str = _TS_ARRAY_DRIVER) -> dict[str, Any]:
    """The spec of an array stored at ``ckpt_path`` (a local absolute path, ``gs://`` or
    ``s3://``). With ``ocdbt`` the path's last part is the array's key in an OCDBT store in
    its parent; ``process_idx`` writes under ``process_<i>/``; ``arr`` adds its metadata."""
    path = re.sub(r"^(gs|s3):/", r"\1://", os.path.normpath(str(ckpt_path)))
    if process_idx is not None:
        parent, name = os.path.split(path)
        path = os.path.join(parent, _PROCESS_DIR_FORMAT.format(process_idx), name)
    remote = path.startswith(("gs://", "s3://"))
    spec: dict[str, Any] = {"driver": driver, "kvstore": {}}
    key = None
    if ocdbt:
        original, (path, key) = path, os.path.split(path)
        if remote and _BUCKET.fullmatch(path) is None:
            raise ValueError("Using OCDBT requires the bucket name, the directory name and "
                             f"the array name, your path is: {original}")
        if not remote and not os.path.isabs(path):
            raise ValueError(f"Checkpoint path should be absolute. Got {path}")
    base = _bucket_kvstore(path) if remote else {"driver": _DEFAULT_BASE_DRIVER, "path": path}
    spec["kvstore"] = {"driver": "ocdbt", "base": base, "path": key} if ocdbt else base
    if arr is not None:
        spec["metadata"] = _metadata(arr, driver=str(spec["driver"]))
    return spec


async def combine_kvstores(combined_kvstore: dict[str, Any], kvstores: list[dict[str, Any]],
                           context: ts.Context | None = _TS_CONTEXT) -> None:
    """Copy every entry of ``kvstores`` into ``combined_kvstore`` in one transaction (not
    safe to run from several processes at once)."""
    combined, opened = await asyncio.gather(
        ts.KvStore.open(combined_kvstore, context=context),
        asyncio.gather(*(ts.KvStore.open(k, context=context) for k in kvstores)))
    tx = ts.Transaction()
    await asyncio.gather(*(k.experimental_copy_range_to(combined.with_transaction(tx))
                           for k in opened))
    await tx.commit_async()


def _shards(arr: Any) -> list[tuple[tuple, int, np.ndarray | Any]]:
    """(index, replica id, data) of each shard this process holds."""
    if hasattr(arr, "addressable_shards"):
        return [(s.index, s.replica_id, s.data) for s in arr.addressable_shards]
    return [(tuple(slice(None) for _ in np.shape(arr)), 0, arr)]


async def async_serialize(arr_inp: Any, tensorstore_spec: dict[str, Any],
                          commit_future: list | None = None, context=_TS_CONTEXT,
                          chunk_layout=_TS_CHUNK_LAYOUT, primary_host: int | None = None,
                          replica_id: int = 0,
                          transaction: ts.Transaction | None = None) -> list:
    """Write ``arr_inp`` (an array or NumPy array) to the TensorStore ``tensorstore_spec``
    (metadata filled in when absent). With ``commit_future`` (a list) the open and commit
    futures are appended to it and this returns once the data is copied; without, it
    returns once written. Only shards with ``replica_id`` are written; only process
    ``primary_host`` creates the array (every process when None)."""
    if process_count() > 1 and isinstance(arr_inp, Array):
        raise ValueError(
            "Passing fully addressable arrays to a multiprocess serialization is not "
            "allowed, as this may lead to a race condition between processes. "
            "Serialization have failed for the array with the path from kvstore: "
            f"\"{tensorstore_spec['kvstore']}\".")
    if not _has_metadata(tensorstore_spec):
        tensorstore_spec["metadata"] = _metadata(arr_inp, driver=tensorstore_spec["driver"])
    if tensorstore_spec["driver"] == "zarr" and "dtype" not in tensorstore_spec:
        tensorstore_spec["dtype"] = np.dtype(arr_inp.dtype).name
    if primary_host is None or primary_host == 0:  # this process (0) creates the array
        opened = ts.open(ts.Spec(tensorstore_spec), create=True, open=True, context=context,
                         chunk_layout=chunk_layout, transaction=transaction)
        if commit_future is not None:
            commit_future.append(opened)
        else:
            await opened
    # Opening again assuming the metadata does no I/O: it gives the handle to write with.
    t = await ts.open(ts.Spec(tensorstore_spec), open=True, assume_metadata=True,
                      context=context, chunk_layout=chunk_layout, transaction=transaction)

    async def write(index, rid, data):
        if rid != replica_id:
            return
        host = np.asarray(data)
        written = t[index].write(host, can_reference_source_data_indefinitely=isinstance(
            arr_inp, Array))  # a jaxkit array's NumPy view is immutable: no copy needed
        if commit_future is not None:
            commit_future.append(written.commit)
            await written.copy
        else:
            await written.commit

    return await asyncio.gather(*(write(*s) for s in _shards(arr_inp)))


def _run_serialization(arrays: Sequence[Any], tensorstore_specs: Sequence[dict]) -> None:
    async def run():
        return await asyncio.gather(*(async_serialize(a, s)
                                      for a, s in zip(arrays, tensorstore_specs)))
    asyncio.run(run())


def estimate_read_memory_footprint(t: ts.TensorStore, domain: ts.IndexDomain | None) -> int:
    """Bytes read to fetch ``domain`` of ``t``: whole chunks, so the domain is widened to
    the chunk grid (the whole domain for unchunked drivers)."""
    itemsize = t.dtype.numpy_dtype.itemsize
    template = t.chunk_layout.read_chunk_template
    domain = t.domain if domain is None else domain
    if not all(template[i].finite for i in range(t.rank)):
        return domain.size * itemsize
    total = itemsize
    for i in range(t.rank):
        lower = domain.origin[i] - template.origin[i]
        upper = lower + domain.shape[i]
        size = template.shape[i]
        total *= -(-upper // size) * size - lower // size * size
    return total


def _sharding_and_dtype(in_type: Any, dtype: Any) -> tuple[Any, Any]:
    if isinstance(in_type, Format):
        # jaxkit's arrays are laid out row-major; another layout cannot be honoured, and is
        # refused rather than ignored
        layout = in_type.layout
        if isinstance(layout, Layout) and layout.major_to_minor != tuple(
                range(len(layout.major_to_minor))):
            raise NotImplementedError(f"deserializing into {in_type}: jaxkit reads arrays in "
                                      "the default (row-major) layout only")
        in_type = in_type.sharding
    if isinstance(in_type, ShapeDtypeStruct):
        device = pjrt.default_device()
        return make_single_device_sharding(device), in_type.dtype if dtype is None else dtype
    if hasattr(in_type, "shard_shape") and hasattr(in_type, "device_set"):
        return in_type, dtype
    raise TypeError("sharding passed to deserialization should be specified, concrete and an "
                    f"instance of `jax.sharding.Sharding`. Got {in_type}")


async def async_deserialize(in_type: Any, tensorstore_spec: ts.Spec | dict[str, Any],
                            global_shape: Sequence[int] | None = None, dtype=None,
                            byte_limiter: _LimitInFlightBytes | None = None,
                            context=_TS_CONTEXT, chunk_layout=_TS_CHUNK_LAYOUT,
                            assume_metadata: bool = False) -> Array:
    """Read the stored array into an array with sharding ``in_type`` (or a
    ``ShapeDtypeStruct``: its dtype, on the default device), of ``global_shape`` (the
    stored shape by default; a larger one is zero-padded) and ``dtype`` (cast on the
    host)."""
    sharding, dtype = _sharding_and_dtype(in_type, dtype)
    t = await ts.open(tensorstore_spec, open=True, assume_metadata=assume_metadata,
                      context=context, chunk_layout=chunk_layout)
    shape = tuple(t.shape if global_shape is None else global_shape)
    stored_dtype = t.dtype.numpy_dtype
    dtype = stored_dtype if dtype is None else np.dtype(dtype)
    shard_shape = tuple(sharding.shard_shape(shape))

    async def read(index):
        wanted = ts.IndexTransform(input_shape=shape)[index].domain
        present = t.domain.intersect(wanted)
        nbytes = estimate_read_memory_footprint(t, present)
        if byte_limiter is not None:
            await byte_limiter.wait_for_bytes(nbytes)
        out = np.zeros(shard_shape, dtype=stored_dtype)
        await ts.array(out)[ts.d[:].translate_to[wanted.origin]][present].write(t[present])
        if byte_limiter is not None:
            await byte_limiter.release_bytes(nbytes)
        return out.astype(dtype)

    indices = sharding.devices_indices_map(shape) if hasattr(
        sharding, "devices_indices_map") else {d: tuple(slice(None) for _ in shape)
                                               for d in sharding.device_set}
    host = dict(zip(indices, await asyncio.gather(*(read(i) for i in indices.values()))))
    by_index = {_index_key(indices[d]): host[d] for d in indices}
    return make_array_from_callback(shape, sharding, lambda idx: by_index[_index_key(idx)],
                                    dtype=dtypes.canonicalize_dtype(dtype))


def _index_key(index: tuple) -> tuple:
    return tuple((s.start, s.stop, s.step) if isinstance(s, slice) else s for s in index)


def _run_deserialization(shardings: Sequence[Any], tensorstore_specs: Sequence[Any],
                         global_shapes: Sequence[Sequence[int]] | None = None,
                         dtypes_: Sequence[Any] | None = None,
                         concurrent_gb: int = 32) -> list[Array]:
    n = len(tensorstore_specs)

    async def run():
        limiter = _LimitInFlightBytes(concurrent_gb * 10 ** 9)
        return await asyncio.gather(*(
            async_deserialize(s, spec, g, d, byte_limiter=limiter) for s, spec, g, d in zip(
                shardings, tensorstore_specs, global_shapes or [None] * n,
                dtypes_ or [None] * n)))
    return list(asyncio.run(run()))

