"""DMAs of TPU Pallas kernels in interpret mode: local copies between a device's buffers and
remote copies to another device of the mesh, with the semaphores that track them.

As ``semaphores.py`` explains, interpreted kernels run in lockstep, so a copy is done when it
starts: ``start`` writes the destination and adds the number of elements copied to the
semaphores (the receiver's, and for a remote copy the sender's too), ``wait`` subtracts it, as
JAX's HLO interpreter does. A remote copy is a collective: every device of the mesh starts it,
and each device writes what was sent to it (if anything) into its own ``dst_ref``, at the
window its own ``dst_ref`` view names.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from jaxkit import numpy as jnp
from jaxkit import tree_util
from jaxkit import core
from jaxkit._ref_views import RefView
from jaxkit.experimental.pallas.semaphores import (DeviceIdType, device_target, from_device,
                                                   senders)

__all__ = ["AsyncCopyDescriptor", "async_copy", "async_remote_copy",
           "make_async_copy", "make_async_remote_copy", "sync_copy"]

_SEM = np.dtype(np.int32)


# What a DMA adds to its semaphores: its number of elements, at most this (JAX's interpreter
# holds semaphores as int16 and caps a copy's count so).
_MAX_COUNT = np.iinfo(np.int16).max


def _count(ref: Any) -> Any:
    return np.int32(min(math.prod(ref.shape), _MAX_COUNT))


def _write(src: Any, dst: Any, add: bool) -> None:
    dst[...] = dst[...] + src[...] if add else src[...]


def sync_copy(src_ref: Any, dst_ref: Any, *, add: bool = False) -> None:
    """Copy ``src_ref`` into ``dst_ref`` (refs or ``ref.at[...]`` views, or pytrees of
    them); with ``add``, accumulate into it."""
    for s, d in zip(tree_util.tree_leaves(src_ref), tree_util.tree_leaves(dst_ref)):
        _write(s, d, add)


@dataclasses.dataclass
class AsyncCopyDescriptor:
    """A DMA ``src_ref -> dst_ref``: local, or with ``device_id`` to another device's
    ``dst_ref``; ``dst_sem`` is the receiver's semaphore, ``src_sem`` the sender's."""

    src_ref: Any
    dst_ref: Any
    dst_sem: Any
    src_sem: Any | None
    device_id: Any
    device_id_type: DeviceIdType = DeviceIdType.MESH

    def __post_init__(self):
        if (self.src_sem is None) ^ (self.device_id is None):
            raise ValueError("Either both or neither `src_sem` and `device_id` can be set.")
        if tuple(self.src_ref.shape) != tuple(self.dst_ref.shape):
            raise ValueError(f"DMA source and destination must have the same shape, got "
                             f"{tuple(self.src_ref.shape)} and {tuple(self.dst_ref.shape)}.")

    @property
    def is_remote(self) -> bool:
        return self.src_sem is not None

    def start(self, priority: int = 0, *, add: bool = False) -> None:
        """Copy now (see the module docstring) and signal the semaphores."""
        if not self.is_remote:
            _write(self.src_ref, self.dst_ref, add)
            self.dst_sem[...] = self.dst_sem[...] + _count(self.dst_ref)
            return
        names, target, me = device_target(self.device_id, self.device_id_type)
        sender, count = senders(names, target, me)
        got = count > 0

        def sent(x):  # the sender's value of x
            return from_device(names, sender, x) if isinstance(x, core.Tracer) else x

        received = sent(self.src_ref[...])
        # the window of dst_ref written is the one the *sender* names (it may differ here)
        dst = self.dst_ref
        if isinstance(dst, RefView):
            dst = RefView.from_window(dst.ref, tuple((sent(d[0]), d[1]) if isinstance(d, tuple)
                                                     else sent(d) for d in dst.dims))
        old = dst[...]
        dst[...] = jnp.where(got, old + received if add else received, old)
        dst_sem = self.dst_sem
        if isinstance(dst_sem, RefView):
            dst_sem = RefView.from_window(dst_sem.ref, tuple(
                sent(d) if not isinstance(d, tuple) else (sent(d[0]), d[1]) for d in dst_sem.dims))
        dst_sem[...] = dst_sem[...] + jnp.where(got, _count(dst), 0).astype(_SEM)
        self.src_sem[...] = self.src_sem[...] + _count(self.src_ref)

    def wait(self) -> None:
        """Wait for the copy: for a remote copy, its sending then its receiving."""
        if self.is_remote:
            self.wait_send()
        self.wait_recv()

    def wait_recv(self) -> None:
        """Wait until ``dst_ref`` holds the data (subtract its size from ``dst_sem``)."""
        self.dst_sem[...] = self.dst_sem[...] - _count(self.dst_ref)

    def wait_send(self) -> None:
        """Wait until the data has left ``src_ref`` (subtract its size from ``src_sem``)."""
        if not self.is_remote:
            raise ValueError("Cannot `wait_send` on a local copy.")
        self.src_sem[...] = self.src_sem[...] - _count(self.src_ref)


def make_async_copy(src_ref: Any, dst_ref: Any, sem: Any) -> AsyncCopyDescriptor:
    """A descriptor of the local copy ``src_ref -> dst_ref`` signalling ``sem``; ``.start()``
    and ``.wait()`` it."""
    return AsyncCopyDescriptor(src_ref, dst_ref, sem, None, None)


def async_copy(src_ref: Any, dst_ref: Any, sem: Any, *, priority: int = 0,
               add: bool = False) -> AsyncCopyDescriptor:
    """Start the copy ``src_ref -> dst_ref`` and return its descriptor."""
    desc = make_async_copy(src_ref, dst_ref, sem)
    desc.start(priority=priority, add=add)
    return desc


def make_async_remote_copy(src_ref: Any, dst_ref: Any, send_sem: Any, recv_sem: Any,
                           device_id: Any,
                           device_id_type: DeviceIdType = DeviceIdType.MESH
                           ) -> AsyncCopyDescriptor:
    """A descriptor of the copy of this device's ``src_ref`` into ``dst_ref`` on the device
    ``device_id`` (mesh coordinates, a dict ``{axis: index}``, or a logical id), signalling
    ``send_sem`` here and ``recv_sem`` there."""
    if device_id_type == DeviceIdType.LOGICAL and isinstance(device_id, (tuple, dict)):
        raise AssertionError("LOGICAL device_id_type does not support device_id as a tuple "
                             "or dict.")
    return AsyncCopyDescriptor(src_ref, dst_ref, recv_sem, send_sem, device_id,
                               device_id_type)


def async_remote_copy(src_ref: Any, dst_ref: Any, send_sem: Any, recv_sem: Any,
                      device_id: Any, device_id_type: DeviceIdType = DeviceIdType.MESH
                      ) -> AsyncCopyDescriptor:
    """Start a remote copy (see ``make_async_remote_copy``) and return its descriptor."""
    desc = make_async_remote_copy(src_ref, dst_ref, send_sem, recv_sem, device_id,
                                  device_id_type)
    desc.start()
    return desc
