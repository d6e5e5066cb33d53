"""``ShardedArray``: a global array laid out over several devices.

One jaxlib ``ArrayImpl`` holds every addressable shard (its C++ sharding labels the buffers);
the array also keeps the user-facing sharding (a ``NamedSharding``, or a pmap axis split),
whose ``devices_indices_map`` says which slices of the global value each device holds. The
value is assembled on the host only when asked for.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit.core import ShapedArray
from jaxkit.runtime import multi_device, pjrt
from jaxkit.runtime.sharding import typed_aval
from jaxkit.runtime.array import Array

__all__ = ["Shard", "ShardedArray"]


class Shard:
    """One device's piece of a ``ShardedArray``: ``device``, ``index`` (the slices of the
    global array it holds), ``replica_id`` (0 for the first copy of that piece) and ``data``
    (an ``Array`` on that device)."""

    __slots__ = ("_aval", "_buf", "_data", "_index", "_replica_id", "_where", "device")

    def __init__(self, device, index: tuple | None, replica_id: int | None, buf,
                 aval: ShapedArray, where: Any = None):
        self.device = device
        self._index = index
        self._replica_id = replica_id
        self._where = where  # (sharding, global shape) when the index is asked for lazily
        self._buf = buf
        self._aval = aval
        self._data = None

    @property
    def index(self) -> tuple:
        if self._index is None:  # an unreduced piece: the sharding says why it has none
            sharding, shape = self._where
            self._index = sharding.devices_indices_map(shape)[self.device]
        return self._index

    @property
    def replica_id(self) -> int:
        if self._replica_id is None:
            sharding, shape = self._where
            self._replica_id = _replica_ids(sharding.devices_indices_map(shape))[self.device]
        return self._replica_id

    @property
    def data(self) -> Array:
        if self._data is None:
            self._data = Array(multi_device.wrap_shard(self._buf, self._aval))
        return self._data

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


def _replica_ids(indices: dict) -> dict:
    """Per device, how many devices before it (in map order) hold the same slices."""
    seen: dict[tuple, int] = {}
    out = {}
    for device, index in indices.items():
        key = tuple((s.start, s.stop) for s in index)
        out[device] = seen.get(key, 0)
        seen[key] = out[device] + 1
    return out


class ShardedArray(Array):
    """An array split over (or replicated on) several devices, as its ``sharding`` says."""

    # ``_laid``: None, or (major_to_minor, per-device copies of the shards in that layout)
    # that ``jax.experimental.layout`` made; ``_buf`` stays row-major for computations.
    __slots__ = ("_laid", "_sharding")

    def __init__(self, buf: multi_device.ArrayImpl, aval: ShapedArray, sharding: Any):
        self._buf = buf
        self._laid = None
        # Over a mesh's Explicit axes the layout is part of the type (``f32[8@x,4]``).
        self.aval = typed_aval(aval, sharding)
        self._sharding = sharding

    @property
    def sharding(self):
        return self._view()

    def _view(self) -> Any:
        """The layout the array presents. A pmap result in a multi-process run is this
        process's rows (its buffer spans every process's devices): as in JAX, it presents
        itself as split over this process's devices only, and is fully addressable."""
        s = self._sharding
        if isinstance(s, multi_device.AxisSharding):
            local = multi_device.addressable_devices(s.devices)
            if len(local) != len(s.devices):
                return multi_device.axis_sharding(local, self.ndim, s.axis)
        return s

    @property
    def device(self):
        raise ValueError("Length of devices is greater than 1. Please use `.devices()`.")

    def devices(self) -> set:
        return set(self._view().device_set)

    @property
    def is_fully_replicated(self) -> bool:
        return self._sharding.is_fully_replicated

    @property
    def is_fully_addressable(self) -> bool:
        devices = list(self._view().device_set)
        return len(multi_device.addressable_devices(devices)) == len(devices)

    @property
    def addressable_shards(self) -> list[Shard]:
        """This process's pieces, in the sharding's device order."""
        self._check_alive()
        bufs = multi_device.addressable_shards(self._buf)
        view = self._view()
        shard_aval = self.aval.update(shape=view.shard_shape(self.shape))
        if getattr(getattr(view, "spec", None), "unreduced", None):
            # The pieces are summands: asking one for its index raises, as in JAX.
            return [Shard(b._sharding._device, None, None, b, shard_aval,
                          (view, self.shape)) for b in bufs]
        indices = view.devices_indices_map(self.shape)
        replica = _replica_ids(indices)
        shards = []
        for b in bufs:
            device = b._sharding._device
            shards.append(Shard(device, indices[device], replica[device], b, shard_aval))
        if self._laid is not None:  # laid out in another order: the data are those buffers
            for shard, laid in zip(shards, self._laid[1]):
                shard._data = laid
        return shards

    global_shards = addressable_shards

    def addressable_data(self, index: int) -> Array:
        return self.addressable_shards[index].data

    @property
    def _value(self) -> np.ndarray:
        try:
            return self._npy
        except AttributeError:  # not assembled yet
            self._check_alive()
            self._npy = npy = self._assemble()
        return npy

    def _assemble(self) -> np.ndarray:
        pieces = multi_device.fetch_shards(self._buf)
        if not pieces:
            raise RuntimeError(_NOT_ADDRESSABLE)
        if self._sharding.is_fully_replicated or len(pieces) == 1 and \
                self.is_fully_addressable:
            # (jaxlib's buffer view of a 0-d shard is 1-d: give the piece the array's shape)
            return pieces[0].reshape(self.shape)
        indices = self._view().devices_indices_map(self.shape)
        bufs = multi_device.addressable_shards(self._buf)
        if not self.is_fully_addressable:
            # As JAX: a process may read a multi-process array only when its own devices
            # hold every distinct piece (e.g. split over the devices of one process only).
            mine = {_index_key(indices[b._sharding._device]) for b in bufs}
            if len(mine) != len({_index_key(i) for i in indices.values()}):
                raise RuntimeError(_NOT_ADDRESSABLE)
        out = np.empty(self.shape, dtype=pieces[0].dtype)
        for b, piece in zip(bufs, pieces):
            out[indices[b._sharding._device]] = piece
        out.flags.writeable = False
        return out

    def _unreduced(self) -> bool:
        return bool(getattr(getattr(self._sharding, "spec", None), "unreduced", None))

    def __str__(self):
        return repr(self) if self._unreduced() else super().__str__()

    def __format__(self, spec):
        return repr(self) if self._unreduced() else super().__format__(spec)

    def __repr__(self):
        if self._unreduced():  # JAX prints no values: the devices hold summands of them
            weak = ", weak_type=True" if self.weak_type else ""
            return (f"Array(shape={self.shape}, dtype={self.dtype.name}{weak}, "
                    f"sharding={self._sharding})")
        if not self._buf.is_deleted() and not (self.is_fully_addressable
                                               or self.is_fully_replicated):
            # JAX prints no values for an array whose pieces live in other processes.
            weak = ", weak_type=True" if self.weak_type else ""
            return f"Array(shape={self.shape}, dtype={self.dtype.name}{weak})"
        return super().__repr__()

    def to_device(self, device, *, stream=None) -> Array:
        if stream is not None:
            raise NotImplementedError("to_device(stream=...) is not supported")
        return Array(pjrt.put(np.asarray(self._value), self.aval, device))

    def __reduce__(self):
        return (_runtime_device_put, (np.array(self._value), self.weak_type))


_NOT_ADDRESSABLE = (
    "Fetching value for `jax.Array` that spans non-addressable (non process local) devices is "
    "not possible. You can use `jax.experimental.multihost_utils.process_allgather` to print "
    "the global array or use `.addressable_shards` method of jax.Array to inspect the "
    "addressable (process local) shards.")


def _index_key(index: tuple) -> tuple:
    return tuple((s.start, s.stop) for s in index)


def _runtime_device_put(value: np.ndarray, weak_type: bool) -> Array:
    aval = core.get_aval(value).update(weak_type=weak_type)
    return Array(pjrt.put(value, aval))


core.pytype_aval_mappings[ShardedArray] = lambda x: x.aval


def sharded_arrays(bufs: Sequence, avals: Sequence[ShapedArray],
                   shardings: Sequence) -> list[ShardedArray]:
    return [ShardedArray(b, a, s) for b, a, s in zip(bufs, avals, shardings)]


# Under JAX an array over several devices is of the same class as a one-device array, so
# ``type(x)`` prints ``jaxlib._jax.ArrayImpl`` for both (see ``Array``'s name).
ShardedArray.__name__ = ShardedArray.__qualname__ = "ArrayImpl"
ShardedArray.__module__ = "jaxlib._jax"
