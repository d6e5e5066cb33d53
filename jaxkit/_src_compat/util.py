"""``jax._src.util`` (reached by JAX's own tutorial "Writing custom Jaxpr interpreters", which
imports ``safe_map``): length-checked ``map`` and ``zip`` that return lists, jaxkit's own
(``jaxkit._util``)."""
from __future__ import annotations

from jaxkit._util import safe_map, safe_zip

__all__ = ["safe_map", "safe_zip"]
