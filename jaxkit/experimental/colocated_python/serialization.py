"""``jax.experimental.colocated_python.serialization``: how JAX pickles colocated functions and
the meshes, device lists and shardings they close over, to run them on other hosts. jaxkit runs
colocated functions in this process and pickles nothing for them, so only the public name is
here: ``DeviceList``, the runtime's device-list type (Orbax names it in annotations)."""
from __future__ import annotations

from jaxkit.runtime.multi_device import DeviceList

__all__ = ["DeviceList"]
