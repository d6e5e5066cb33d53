"""``jax._src.test_util`` (imported as ``jtu`` by JAX's docs and by tests written against JAX,
e.g. the host-offloading example of the gradient-checkpointing tutorial): the helpers of it
that such code calls."""
from __future__ import annotations

import math
import unittest
from collections.abc import Sequence

import numpy as np

from jaxkit.runtime import pjrt
from jaxkit.runtime.sharding import AxisType, Mesh


def create_mesh(mesh_shape: Sequence[int], axis_names: Sequence[str], iota_order: bool = False,
                axis_types=None) -> Mesh:
    """A mesh of ``mesh_shape`` over the first devices of the default backend (by id), with
    ``Auto`` axes unless ``axis_types`` says otherwise; skips the test (``unittest.SkipTest``,
    as JAX's) when there are too few devices."""
    del iota_order  # devices are taken in id order either way
    size = math.prod(mesh_shape)
    devices = sorted(pjrt.get_backend().devices, key=lambda d: d.id)
    if len(devices) < size:
        raise unittest.SkipTest(f"Test requires {size} global devices and found "
                                f"{len(devices)}.")
    if axis_types is None:
        axis_types = (AxisType.Auto,) * len(mesh_shape)
    grid = np.empty(size, dtype=object)
    grid[:] = devices[:size]
    return Mesh(grid.reshape(tuple(mesh_shape)), tuple(axis_names), axis_types)
