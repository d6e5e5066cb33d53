"""``jax.interpreters.pxla``: what JAX 0.10.2 still exports from its SPMD executable layer, the
options of a program compiled for several devices (the rest of the module is deprecated or
removed in JAX; jaxkit compiles partitioned programs in ``runtime.sharding``)."""
from __future__ import annotations

from jaxkit.runtime.compile_config import create_compile_options

__all__ = ["create_compile_options"]
