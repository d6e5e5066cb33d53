"""``jax.experimental.colocated_python.serialization``: how JAX pickles colocated functions and
the meshes, device lists and shardings they close over, to run them on other hosts. Orbax
imports it: its annotations name ``DeviceList`` at import time, and only a Pathways
(single-controller) setup patches the private ``_reduce_*`` helpers. jaxkit runs colocated
functions in this process and pickles nothing for them, so those helpers are absent;
``DeviceList`` is the runtime's device-list type and ``xb`` the PjRt backends' module."""
from __future__ import annotations

from jaxkit._src_compat import xla_bridge as xb  # noqa: F401
from jaxkit.runtime.multi_device import DeviceList  # noqa: F401
