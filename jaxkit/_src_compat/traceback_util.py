"""``jax._src.traceback_util`` (reached by Flax's ``flax.traceback_util``): the registry of
source paths hidden from user-facing tracebacks, and ``api_boundary``, which filters them out
of the tracebacks of exceptions raised through a library's entry points, as JAX does (the
mechanism is ``jaxkit._traceback_filter``'s, which jaxkit's jitted functions use too).

Flax marks its entry points (``Module.init``, ``apply``, ...) with ``api_boundary`` and adds
or removes its own files in ``_exclude_paths`` (``hide_flax_in_tracebacks``). jaxkit's own
package is a hidden path.
"""
from __future__ import annotations

from jaxkit._traceback_filter import (SIMPLIFIED_NOTE, UnfilteredStackTrace, api_boundary,
                                      filter_traceback, include_frame)
from jaxkit.extend.source_info_util import excluded_paths as _exclude_paths
from jaxkit.extend.source_info_util import register_exclusion

__all__ = ["SimplifiedTraceback", "UnfilteredStackTrace", "_exclude_paths", "api_boundary",
           "filter_traceback", "include_frame", "register_exclusion"]


class SimplifiedTraceback(Exception):
    def __str__(self) -> str:
        return SIMPLIFIED_NOTE


SimplifiedTraceback.__module__ = "jax.errors"
