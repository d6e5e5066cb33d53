"""``jax.extend.source_info_util``: which source files tracebacks and source locations skip.

Libraries register their own files so that user-facing locations (the ``source_info`` of
equations, and through it the HLO metadata) point at user code. The set of excluded path
prefixes is ``jaxkit.source_info``'s; jaxkit's own directory is always in it.
"""
from __future__ import annotations

import sys

from jaxkit import source_info
from jaxkit.source_info import SourceInfo, excluded_paths, register_exclusion

__all__ = ["SourceInfo", "current", "excluded_paths", "new_name_stack", "register_exclusion",
           "user_context", "user_frame"]


def user_frame():
    """The innermost frame of the caller's stack that is not in an excluded path."""
    frame = sys._getframe(1)
    while frame is not None:
        if not any(frame.f_code.co_filename.startswith(p) for p in excluded_paths):
            return frame
        frame = frame.f_back
    return None


def current() -> SourceInfo | None:
    """The current source location: the innermost user frame (file, line, function)."""
    return source_info.current()


def new_name_stack(name: str = "") -> str:
    return name


def user_context(c, *, name_stack=None) -> source_info.user_context:
    """Equations recorded inside get the location ``c`` (a ``SourceInfo``; anything else,
    such as a JAX traceback, leaves locations as they are)."""
    return source_info.user_context(c if isinstance(c, SourceInfo) else None)
