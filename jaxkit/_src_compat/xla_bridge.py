"""``jax._src.xla_bridge`` (reached by chex's ``fake`` helpers for ``_backends``): jaxkit's
table of initialised PjRt backends by platform."""
from jaxkit.runtime.pjrt import _backends, get_backend  # noqa: F401
