"""``jnp.from_dlpack``: arrays from DLPack producers (NumPy arrays, other array libraries).

Host (CPU) tensors are supported: their memory is viewed through NumPy's importer and put on
the device, aliased when the CPU client can and no dtype change or copy is asked for. A GPU
producer raises ``NotImplementedError``: jaxlib's device importer builds its result through the
``jax`` package, which jaxkit never imports.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from jaxkit import dtypes
from jaxkit.core import ShapedArray
from jaxkit.runtime import dlpack_io, pjrt
from jaxkit.runtime.array import Array

_DL_GPU = (dlpack_io.DLDeviceType.kDLCUDA, dlpack_io.DLDeviceType.kDLCUDAHost,
           dlpack_io.DLDeviceType.kDLROCM)


def _single_device(device: Any) -> Any:
    if device is None or not hasattr(device, "device_set"):
        return device
    devices = device.device_set
    if len(devices) > 1:
        raise ValueError("from_dlpack can only unpack a dlpack tensor onto a singular device, "
                         f"but a Sharding with {len(devices)} devices was provided.")
    (only,) = devices
    return only


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Array:
    """An array holding the DLPack tensor ``x`` (an object with ``__dlpack__`` and
    ``__dlpack_device__``), sharing its memory unless ``copy=True`` or a dtype change (64-bit
    values without x64) or another ``device`` needs a copy."""
    device = _single_device(device)
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError("The array passed to from_dlpack must have __dlpack__ and "
                        "__dlpack_device__ methods.")
    dl_type, _ = x.__dlpack_device__()
    if dl_type in _DL_GPU:
        raise NotImplementedError("from_dlpack of a GPU DLPack tensor is not supported by "
                                  "jaxkit; move the tensor to host memory first.")
    if dl_type != dlpack_io.DLDeviceType.kDLCPU:
        raise TypeError("Array passed to from_dlpack is on unsupported device type "
                        f"(DLDeviceType: {dl_type}, array: {x}")
    source = pjrt.local_devices("cpu")[0]
    if device is not None and device != source and copy is False:
        raise ValueError(f"Specified device={device} which requires a copy since the source "
                         f"device is {source!r}, however copy=False. Set copy=True or "
                         "copy=None to perform the requested operation.")
    view = dlpack_io.host_view(x)
    dtype = dtypes.canonicalize_dtype(view.dtype)
    value = np.array(view, dtype=dtype) if copy or dtype != view.dtype else view
    target = device if device is not None else source
    # committed, with or without device=, as JAX's from_dlpack
    return Array(pjrt.put(value, ShapedArray(view.shape, dtype), target, may_alias=True,
                          committed=True))
