"""``jax.experimental.mesh_utils``: arrays of devices to build a ``Mesh`` from."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from jaxkit.runtime import pjrt

__all__ = ["create_device_mesh"]


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence | None = None, *,
                       contiguous_submeshes: bool = False,
                       allow_split_physical_axes: bool = False) -> np.ndarray:
    """The devices (default: all of the default backend's, in id order) as an array of
    ``mesh_shape``. CPU devices have no physical topology, so the order is the id order, as
    JAX gives it on CPU."""
    del contiguous_submeshes, allow_split_physical_axes  # topology options: none on CPU
    if devices is None:
        devices = pjrt.get_backend().devices
    devices = list(np.asarray(devices, dtype=object).flat)
    if math.prod(mesh_shape) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product of "
                         f"mesh_shape {tuple(mesh_shape)}")
    grid = np.empty(len(devices), dtype=object)
    grid[:] = devices
    return grid.reshape(tuple(mesh_shape))
