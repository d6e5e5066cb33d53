"""Compatibility modules for the private ``jax._src`` names that JAX libraries reach.

``jaxkit.install_as_jax()`` maps ``jax._src.X`` to ``jaxkit._src_compat.X``, and a few public JAX
modules whose jaxkit counterparts are internal with another interface (``jax.api_util``,
``jax.interpreters.partial_eval``, ``jax.experimental.hijax``, ...) to modules here too. Each
module says which library reaches it and for what; each name is jaxkit's own object where one
exists, and what a library could call but jaxkit does not do raises ``NotImplementedError``
naming it. These modules are no part of jaxkit's own API.
"""

# Libraries reach some of these as attributes of ``jax._src`` without importing them (chex's
# ``fake`` reads ``jax._src.xla_bridge._backends``), so they are loaded with the package.
from jaxkit._src_compat import xla_bridge  # noqa: E402,F401
# Orbax's tree utilities call ``jax._src.tree_util.flatten_one_level`` the same way.
from jaxkit._src_compat import tree_util  # noqa: E402,F401
# ... and read ``jax._src.distributed.global_state`` to ask whether jax.distributed is running.
from jaxkit._src_compat import distributed  # noqa: E402,F401
