"""DLPack exchange of device buffers: the jaxlib side of ``jaxkit.dlpack`` and of
``Array.__dlpack__``.

Export hands out jaxlib's DLPack capsule of the buffer itself (no copy). Import goes through
NumPy's ``from_dlpack`` for host (CPU) tensors, which views the producer's memory, and then
puts that view on the device (aliased where the CPU client can): jaxlib's own importer builds
its result's abstract value through the ``jax`` package, which jaxkit never imports.
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np
from jaxlib import _jax


class DLDeviceType(enum.IntEnum):
    """DLPack's device kinds (those jaxkit names)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLROCM = 10


_PLATFORM_TO_DL = {"cpu": DLDeviceType.kDLCPU, "cuda": DLDeviceType.kDLCUDA,
                   "gpu": DLDeviceType.kDLCUDA, "rocm": DLDeviceType.kDLROCM}


def dlpack_device(device: Any) -> tuple[DLDeviceType, int]:
    """``(device type, id)`` of a jaxlib device, as ``__dlpack_device__`` returns it."""
    kind = _PLATFORM_TO_DL.get(device.platform)
    if kind is None:
        raise BufferError(f"DLPack does not describe devices of platform {device.platform!r}")
    return kind, (0 if kind == DLDeviceType.kDLCPU else device.local_hardware_id)


def to_dlpack(buf: Any, stream: Any = None) -> Any:
    """A DLPack capsule sharing the memory of the jaxlib buffer ``buf``."""
    return _jax.buffer_to_dlpack_managed_tensor(buf, stream=stream)


def host_view(external: Any) -> np.ndarray:
    """A NumPy view of a host DLPack producer's memory (read-only when it says so)."""
    return np.from_dlpack(external)
