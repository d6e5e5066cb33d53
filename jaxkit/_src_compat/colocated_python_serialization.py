"""``jax.experimental.colocated_python.serialization`` under ``install_as_jax``: jaxkit's module
of that name (``DeviceList``, which Orbax names in annotations) plus ``xb``, the PjRt backends'
module JAX's imports. Only a Pathways (single-controller) setup patches JAX's private
``_reduce_*`` helpers; jaxkit pickles nothing for colocated functions, so they are absent."""
from jaxkit._src_compat import xla_bridge as xb  # noqa: F401
from jaxkit.experimental.colocated_python.serialization import DeviceList  # noqa: F401
