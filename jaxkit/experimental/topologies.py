"""``jax.experimental.topologies``: descriptions of a set of devices to build meshes from.

A ``TopologyDescription`` is a list of devices. ``get_attached_topology`` describes the devices
this process is attached to; ``get_topology_desc`` asks a PjRt plugin for the *compile-only*
devices of a named topology (a TPU slice one does not own, say). JAX finds those through
plugin topology factories; no plugin jaxkit can load (the CPU client, the CUDA plugin) provides
one for CPU, and there is no TPU plugin, so it raises the errors JAX raises in that setting.
"""
from __future__ import annotations

from collections.abc import Sequence

from jaxkit.experimental import mesh_utils
from jaxkit.runtime import pjrt
from jaxkit.runtime.sharding import Mesh

__all__ = ["Device", "TopologyDescription", "get_attached_topology", "get_topology_desc",
           "make_mesh"]

Device = pjrt.Device


class TopologyDescription:
    """The devices of a topology (``.devices``), attached or compile-only."""

    def __init__(self, devices: list[Device]):
        self.devices: list[Device] = devices


def get_attached_topology(platform: str | None = None) -> TopologyDescription:
    """The topology of the devices of ``platform`` (default: the default backend's)."""
    return TopologyDescription(pjrt.devices(platform))


def get_topology_desc(topology_name: str = "", platform: str | None = None,
                      **kwargs) -> TopologyDescription:
    """The compile-only devices of the topology ``topology_name`` on ``platform``.

    Only PjRt plugins that register a topology factory can answer (JAX's TPU plugin, its CUDA
    plugin); jaxkit loads neither for this, so a TPU request (the default) raises
    ``RuntimeError`` as JAX does without TPU support, any other ``NotImplementedError``."""
    del topology_name, kwargs
    if platform == "tpu" or platform is None:
        raise RuntimeError("JAX TPU support not installed; cannot generate TPU topology. See "
                           "https://github.com/jax-ml/jax#installation")
    if platform.lower() != "cpu":
        pjrt.get_backend(platform)  # an unknown or absent platform: the backend's own error
    raise NotImplementedError(f"topology not implemented for {platform}")


def make_mesh(topo: TopologyDescription, mesh_shape: Sequence[int], axis_names: tuple[str, ...],
              *, contiguous_submeshes: bool = False) -> Mesh:
    """A ``Mesh`` of ``mesh_shape`` named ``axis_names`` over the topology's devices."""
    devices = mesh_utils.create_device_mesh(mesh_shape, list(topo.devices),
                                            contiguous_submeshes=contiguous_submeshes)
    return Mesh(devices, axis_names)
