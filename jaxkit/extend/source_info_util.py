"""``jax.extend.source_info_util``: which source files tracebacks and source locations skip.

Libraries register their own files so that user-facing locations point at user code. jaxkit
keeps one set of excluded path prefixes, read by ``user_frame``.
"""
from __future__ import annotations

import contextlib
import sys

__all__ = ["current", "excluded_paths", "new_name_stack", "register_exclusion", "user_context",
           "user_frame"]

excluded_paths: list[str] = []


def register_exclusion(path: str) -> None:
    """Skip frames whose file starts with ``path`` when locating user code."""
    if path not in excluded_paths:
        excluded_paths.append(path)


def user_frame():
    """The innermost frame of the caller's stack that is not in an excluded path."""
    frame = sys._getframe(1)
    while frame is not None:
        if not any(frame.f_code.co_filename.startswith(p) for p in excluded_paths):
            return frame
        frame = frame.f_back
    return None


def current():
    """The current source location: the innermost user frame."""
    return user_frame()


def new_name_stack(name: str = "") -> str:
    return name


@contextlib.contextmanager
def user_context(c, *, name_stack=None):
    yield
