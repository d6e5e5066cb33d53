"""``jax.experimental.mesh_utils``: arrays of devices to build a ``Mesh`` from."""
from __future__ import annotations

import collections
import math
from collections.abc import Callable, Sequence

import numpy as np

from jaxkit.runtime import pjrt

__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]

# Device kind -> handler(mesh_shape, devices, *, contiguous_submeshes) returning the device
# array for that kind, or None to fall back to the default order. JAX ships handlers for TPU
# generations' physical topologies; jaxkit runs on CPU and GPU, so none are registered here.
device_kind_handler_dict: dict[str, Callable[..., np.ndarray | None]] = {}


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence | None = None, *,
                       contiguous_submeshes: bool = False,
                       allow_split_physical_axes: bool = False) -> np.ndarray:
    """The devices (default: all of the default backend's, in id order) as an array of
    ``mesh_shape``: a handler registered for the devices' kind in
    ``device_kind_handler_dict`` decides first; otherwise the order is the id order, as JAX
    gives it on CPU (which has no physical topology)."""
    del allow_split_physical_axes  # a topology option: no topology on CPU
    if devices is None:
        devices = pjrt.get_backend().devices
    devices = list(np.asarray(devices, dtype=object).flat)
    mesh_shape = tuple(mesh_shape)
    if math.prod(mesh_shape) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product of "
                         f"mesh_shape {mesh_shape}")
    handler = device_kind_handler_dict.get(getattr(devices[-1], "device_kind", None))
    if handler is not None:
        grid = handler(mesh_shape, devices, contiguous_submeshes=contiguous_submeshes)
        if grid is not None:
            return grid
    grid = np.empty(len(devices), dtype=object)
    grid[:] = devices
    return grid.reshape(tuple(mesh_shape))


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence | None = None, *,
                              process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A device array for two-level parallelism: the devices are grouped into granules
    (slices, or processes with ``process_is_granule``), each granule becomes a mesh of
    ``mesh_shape``, and the granules are tiled as ``dcn_mesh_shape``; the result has shape
    ``mesh_shape * dcn_mesh_shape`` (elementwise)."""
    if devices is None:
        devices = pjrt.get_backend().devices
    devices = list(np.asarray(devices, dtype=object).flat)
    attr = "process_index" if process_is_granule else "slice_index"
    if not hasattr(devices[0], attr):
        raise ValueError(f"Device {devices[0]} does not have attribute {attr}. See "
                         "`process_is_granule` option.")
    by_key: dict = collections.defaultdict(list)
    for d in devices:
        by_key[getattr(d, attr)].append(d)
    granules = [by_key[k] for k in sorted(by_key)] if should_sort_granules_by_key \
        else list(by_key.values())
    mesh_shape, dcn_mesh_shape = tuple(mesh_shape), tuple(dcn_mesh_shape)
    if math.prod(dcn_mesh_shape) != len(granules):
        raise ValueError(f"Number of slices {len(granules)} must equal the product of "
                         f"dcn_mesh_shape {dcn_mesh_shape}")
    if len(mesh_shape) != len(dcn_mesh_shape):
        raise ValueError(f"mesh_shape {mesh_shape} and dcn_mesh_shape {dcn_mesh_shape} must "
                         "have the same length (one entry per mesh axis)")
    inner = [create_device_mesh(mesh_shape, g, allow_split_physical_axes=allow_split_physical_axes)
             for g in granules]
    out = np.empty(tuple(m * n for m, n in zip(mesh_shape, dcn_mesh_shape)), dtype=object)
    # Granule g sits at block position ``outer`` of the dcn grid; its mesh fills that block.
    for g, outer in enumerate(np.ndindex(*dcn_mesh_shape)):
        block = tuple(slice(o * m, (o + 1) * m) for o, m in zip(outer, mesh_shape))
        out[block] = inner[g]
    return out
