"""``jax.experimental.mesh_utils``: arrays of devices to build a ``Mesh`` from (one process's
devices, or a hybrid mesh whose outer axes go across processes)."""
from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Sequence

import numpy as np

from jaxkit.runtime import pjrt

__all__ = ["create_device_mesh", "create_hybrid_device_mesh"]


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


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence | None = None, *,
                              process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A mesh of shape ``mesh_shape * dcn_mesh_shape`` (elementwise) for two networks: the
    devices are grouped in granules (slices, or processes with ``process_is_granule``), each
    granule is a ``mesh_shape`` block, and the blocks are laid out as ``dcn_mesh_shape``
    (granule ``k`` at position ``k`` in row-major order). CPU devices have no slice, so on
    CPU the granules are the processes."""
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
    granules = [by_key[k] for k in sorted(by_key)] if should_sort_granules_by_key else \
        list(by_key.values())
    if math.prod(dcn_mesh_shape) != len(granules):
        raise ValueError(f"Number of slices {len(granules)} must equal the product of "
                         f"dcn_mesh_shape {dcn_mesh_shape}")
    blocks = [create_device_mesh(mesh_shape, g,
                                 allow_split_physical_axes=allow_split_physical_axes)
              for g in granules]
    inner, outer = tuple(mesh_shape), tuple(dcn_mesh_shape)
    out = np.empty(tuple(m * n for m, n in zip(inner, outer)), dtype=object)
    for k, position in enumerate(itertools.product(*map(range, outer))):
        out[tuple(slice(p * m, (p + 1) * m) for p, m in zip(position, inner))] = blocks[k]
    return out
