"""``jax._src.traceback_util`` (reached by Flax's ``flax.traceback_util``): API-boundary
decoration and the registry of source paths hidden from user-facing tracebacks."""
from __future__ import annotations

from jaxkit.extend.source_info_util import excluded_paths as _exclude_paths
from jaxkit.extend.source_info_util import register_exclusion
from jaxkit.source_info import api_boundary

__all__ = ["_exclude_paths", "api_boundary", "register_exclusion"]
