"""``jax.extend``: the interfaces JAX 0.10.2 offers to libraries built on it (Flax, chex, ...).

``core`` (primitives and the jaxpr IR), ``linear_util`` (wrapped functions), ``backend``
(the PjRt clients), ``source_info_util`` (traceback filtering). Each is jaxkit's own machinery
under the names ``jax.extend`` gives it.
"""
from jaxkit.extend import backend, core, linear_util, source_info_util

__all__ = ["backend", "core", "linear_util", "source_info_util"]
