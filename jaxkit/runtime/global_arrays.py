"""Global arrays built from pieces: ``jax.make_array_from_*`` over a ``NamedSharding``.

In a multi-process run each process holds only the shards of its own devices, so a global
array is always assembled from *this process's* pieces: single-device arrays
(``from_single_device_arrays``), values a callback returns for each addressable index
(``from_callback``), or the process's slice of the data (``from_process_local_data``). The
pieces become one jaxlib ``ArrayImpl`` labelled with the sharding's global device list; XLA
programs partitioned over the same mesh then take it without a copy.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.runtime import multi_device, pjrt
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import NamedSharding

__all__ = ["from_callback", "from_device_buffers", "from_host_pieces", "from_process_local_data",
           "from_single_device_arrays", "local_to_global_shape"]


def _check_dtype(dtypes_seen: Sequence[np.dtype], dtype: Any, fname: str) -> np.dtype:
    if dtype is None:
        if not dtypes_seen:
            raise ValueError("If the Array has no addressable shards, `dtype` must be provided "
                             f"via the `dtype` argument to `jax.{fname}`.")
        return np.dtype(dtypes_seen[0])
    dtype = dtypes.check_and_canonicalize_user_dtype(dtype, fname)
    if dtypes_seen and np.dtype(dtypes_seen[0]) != dtype:
        raise ValueError(f"If `dtype` is provided to `jax.{fname}`, it must match the dtype of "
                         f"the addressable shards. Got dtype={dtype} and shard "
                         f"dtype={np.dtype(dtypes_seen[0])}`.")
    return dtype


def _long_name(aval: core.ShapedArray) -> str:
    """``float32[8]``: how JAX's errors about per-device arrays name the global type."""
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


def _assemble(shape: tuple, dtype: np.dtype, sharding: NamedSharding,
              bufs_by_device: dict) -> ShardedArray:
    """One global array from a buffer per addressable device of ``sharding`` (any order)."""
    aval = core.ShapedArray(shape, dtype)
    local = sharding.mesh.local_devices  # the order of the device list, as jaxlib wants
    missing = [d for d in local if d not in bufs_by_device]
    extra = [d for d in bufs_by_device if d not in local]
    if missing or extra:
        raise ValueError(f"The arrays must be one per addressable device of the sharding "
                         f"{sharding} ({len(local)} devices: {local}); missing "
                         f"{missing}, not addressable by it {extra}.")
    bufs = [bufs_by_device[d] for d in local]
    buf = multi_device.ArrayImpl(aval, sharding.runtime_sharding(len(shape)), bufs, True, True)
    return ShardedArray(buf, aval, sharding)


def from_device_buffers(shape: Sequence[int], dtype: Any, sharding: NamedSharding,
                        bufs_by_device: dict) -> ShardedArray:
    """The global array of ``shape`` laid out as ``sharding`` whose addressable shards are the
    given single-device buffers (one per addressable device; no copy)."""
    return _assemble(tuple(int(n) for n in shape), np.dtype(dtype), sharding, bufs_by_device)


def from_host_pieces(shape: Sequence[int], dtype: Any, sharding: NamedSharding,
                     pieces_by_device: dict) -> ShardedArray:
    """The global array of ``shape`` laid out as ``sharding`` from one host piece (of the
    shard shape and ``dtype``) per addressable device; the pieces are copied."""
    shape = tuple(int(n) for n in shape)
    piece_aval = core.ShapedArray(sharding.shard_shape(shape), np.dtype(dtype))
    bufs = {d: pjrt.put(np.ascontiguousarray(v), piece_aval, d)
            for d, v in pieces_by_device.items()}
    return _assemble(shape, np.dtype(dtype), sharding, bufs)


def from_single_device_arrays(shape: Sequence[int], sharding: NamedSharding,
                              arrays: Sequence, dtype: Any = None) -> ShardedArray:
    """The global array of ``shape`` whose addressable shards are ``arrays`` (one jaxkit
    ``Array`` per addressable device of ``sharding``, each on its device)."""
    if not isinstance(arrays, (list, tuple)):
        raise TypeError("jax.make_array_from_single_device_arrays `arrays` argument must be a "
                        f"list or tuple, but got {type(arrays)}.")
    for a in arrays:
        if isinstance(a, core.Tracer):
            raise ValueError("jax.make_array_from_single_device_arrays requires a list of "
                             "concrete arrays as input, but got types "
                             f"{set(map(type, arrays))}")
        if type(a) is not Array:
            raise TypeError("jax.make_array_from_single_device_arrays needs single-device "
                            f"jax Arrays (made with jax.device_put(x, device)), got "
                            f"{type(a).__name__}")
    shape = tuple(int(n) for n in shape)
    dtype = _check_dtype([a.dtype for a in arrays], dtype,
                         "make_array_from_single_device_arrays")
    expected = sharding.shard_shape(shape)
    aval = core.ShapedArray(shape, dtype)
    by_device = {}
    for a in arrays:
        if a.dtype != dtype:
            raise ValueError("Input buffers to `Array` must have matching dtypes. "
                             f"Got {a.dtype}, expected {dtype} for buffer: {a}")
        if tuple(a.shape) != expected:
            raise ValueError(f"Expected shard shape {expected} doesn't match the single device "
                             f"array shape {tuple(a.shape)}. Shape of Array is "
                             f"{_long_name(aval)} with sharding {sharding}")
        a._check_alive()
        by_device[pjrt.device_of(a._buf)] = a._buf
    return _assemble(shape, dtype, sharding, by_device)


def from_callback(shape: Sequence[int], sharding: NamedSharding,
                  data_callback: Callable[[tuple], Any], dtype: Any = None) -> ShardedArray:
    """The global array of ``shape`` whose shard on each addressable device is
    ``data_callback(index)`` (``index``: that shard's slices of the global array). A fully
    replicated layout calls it once, with the whole array's index."""
    shape = tuple(int(n) for n in shape)
    if sharding.is_fully_replicated:
        local = list(sharding.addressable_devices_indices_map(shape))
        whole = (slice(None),) * len(shape)
        values = [_host_value(data_callback(whole))] * len(local)
    else:
        indices = sharding.addressable_devices_indices_map(shape)
        local = list(indices)
        values = [_host_value(data_callback(indices[d])) for d in local]
    dtype = _check_dtype([v.dtype for v in values], dtype, "make_array_from_callback")
    expected = sharding.shard_shape(shape)
    aval = core.ShapedArray(shape, dtype)
    bufs = {}
    for d, v in zip(local, values):
        if v.dtype != dtype:
            raise ValueError("Input buffers to `Array` must have matching dtypes. "
                             f"Got {v.dtype}, expected {dtype} for buffer: {v}")
        if v.shape != expected:
            raise ValueError(f"Expected shard shape {expected} doesn't match the single device "
                             f"array shape {v.shape}. Shape of Array is {_long_name(aval)} "
                             f"with sharding {sharding}")
        bufs[d] = pjrt.put(np.ascontiguousarray(v), aval.update(shape=expected), d)
    return _assemble(shape, dtype, sharding, bufs)


def _host_value(value: Any) -> np.ndarray:
    """A callback's result as a host array of a canonical dtype (jaxkit Arrays are fetched;
    Python scalars take JAX's default types)."""
    if isinstance(value, core.Tracer):
        raise core.UnexpectedTracerError(
            "jax.make_array_from_callback cannot be called within a traced context.")
    if isinstance(value, Array):
        value = value._value
    host = np.asarray(value)
    return host.astype(dtypes.canonicalize_dtype(host.dtype), copy=False)


# ---- process-local data ----------------------------------------------------------------------


def _piece_sets(sharding: NamedSharding, ndim: int, dim: int) -> dict[int, set]:
    """Per process, which of the pieces along ``dim`` its devices hold (pieces numbered
    from 0, found on a probe shape whose pieces have size 1)."""
    probe = tuple(sharding._tiling(ndim))
    out: dict[int, set] = {}
    for device, index in sharding.devices_indices_map(probe).items():
        out.setdefault(device.process_index, set()).add(index[dim].start or 0)
    return out


def _process_slices(sharding: NamedSharding, ndim: int, dim: int) -> int | None:
    """Into how many distinct process-sized slices ``dim`` is cut: the tiling divided by the
    pieces one process holds, when every process holds the same number of pieces and any
    two processes hold the same pieces or none in common; None otherwise (non-uniform)."""
    sets = list(_piece_sets(sharding, ndim, dim).values())
    k = len(sets[0])
    if any(len(s) != k for s in sets):
        return None
    if any(a != b and a & b for a in sets for b in sets):
        return None
    return sharding._tiling(ndim)[dim] // k


def local_to_global_shape(sharding: NamedSharding,
                          local_shape: Sequence[int]) -> tuple[int | None, ...]:
    """The global shape a process's ``local_shape`` data stands for under ``sharding``
    (None in a dimension where processes hold non-uniform slices)."""
    ndim = len(local_shape)
    out = []
    for dim, n in enumerate(local_shape):
        count = _process_slices(sharding, ndim, dim)
        out.append(None if count is None else n * count)
    return tuple(out)


def _addressable_size(sharding: NamedSharding, dim: int, global_shape: tuple) -> int:
    """How many indices of ``dim`` this process's devices hold (distinct pieces times the
    piece size)."""
    starts = {index[dim].start or 0 for index in
              sharding.addressable_devices_indices_map(global_shape).values()}
    return sharding.shard_shape(global_shape)[dim] * len(starts)


def from_process_local_data(sharding: NamedSharding, local_data: Any,
                            global_shape: Sequence[int] | None = None) -> ShardedArray:
    """The global array of which ``local_data`` is this process's part: along each
    dimension the data is either the whole global extent or exactly the slices this
    process's devices hold (in order), as ``jax.make_array_from_process_local_data``."""
    data = _host_value(local_data)
    if global_shape is None:
        shape = local_to_global_shape(sharding, data.shape)
        if None in shape:
            raise ValueError("Unable to compute global_shape due to non-uniform sharding. "
                             f"Specify global shape directly. Partially computed "
                             f"global_shape={shape}.")
    else:
        shape = tuple(global_shape)
        if None in shape:
            raise ValueError(f"global_shape={shape} has Nones. This is not supported.")
    shape = tuple(int(n) for n in shape)
    if len(shape) != data.ndim:
        raise ValueError(f"global_shape {shape} and the local data's shape {data.shape} must "
                         "have the same rank")
    full = []
    for dim, (n_local, n_global) in enumerate(zip(data.shape, shape)):
        full.append(n_local == n_global)
        if n_local != n_global:
            held = _addressable_size(sharding, dim, shape)
            if held != n_local:
                raise ValueError(
                    "Invalid host data, each dimension should match either global or process "
                    f"shape. In dimension {dim}, the process data has {n_local} elements. "
                    f"Process addresses {held} elements and global_shape={shape}.")
    piece = sharding.shard_shape(shape)
    # Where each addressable piece sits in the local data: the k-th distinct start (in
    # increasing order) of a dimension maps to the k-th piece-sized block of the data.
    starts = [sorted({index[d].start or 0 for index in
                      sharding.addressable_devices_indices_map(shape).values()})
              for d in range(len(shape))]

    def local_slices(index: tuple) -> tuple:
        out = []
        for d, s in enumerate(index):
            if full[d]:
                out.append(s)
            else:
                k = starts[d].index(s.start or 0)
                out.append(slice(k * piece[d], (k + 1) * piece[d]))
        return tuple(out)

    return from_callback(shape, sharding, lambda index: data[local_slices(index)], data.dtype)
