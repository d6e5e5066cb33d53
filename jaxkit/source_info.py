"""Where in the user's code an equation came from.

Tracing records, with every equation, the innermost frame of the Python stack that is not in
jaxkit itself (nor in a path registered with ``register_exclusion``, as libraries built on
jaxkit do): file, line and function. The lowering turns it into an MLIR location, so XLA's
compiled HLO carries ``metadata={op_name=... source_file=... source_line=...}``, which
profilers and ``%%jit -a`` read.

Finding the frame is a walk up ``sys._getframe()`` comparing file names with a tuple of
prefixes (no ``inspect``, no traceback objects): about a microsecond per equation.

Interpreters that re-emit the equations of a jaxpr (``eval_jaxpr``, transposition, lowering)
run each equation under ``user_context(eqn.source_info)``, so that equations derived from it
(its batched form, its transpose, the jaxpr a lowering rule traces) keep the user's line
instead of pointing at the line that called the transformation.
"""
from __future__ import annotations

import contextvars
import os
import sys
from typing import NamedTuple

__all__ = ["SourceInfo", "current", "excluded_paths", "register_exclusion", "user_context"]


class SourceInfo(NamedTuple):
    """A user frame: ``file``, ``line`` (1-based) and ``function`` (qualified) name, and the 0-based
    ``column`` where the expression running there starts (-1 when unknown)."""

    file: str
    line: int
    function: str
    column: int = -1

    def __str__(self):
        # As JAX summarizes a frame: ``file:line:column (function)``.
        col = f":{self.column}" if self.column >= 0 else ""
        return f"{self.file}:{self.line}{col} ({self.function})"


# jaxkit's own package directory (with the separator, so that ``jaxkit_extras/`` is not in it).
excluded_paths: list[str] = [os.path.dirname(os.path.abspath(__file__)) + os.sep]
_excluded: tuple[str, ...] = tuple(excluded_paths)


def register_exclusion(path: str) -> None:
    """Skip frames whose file name starts with ``path`` when locating user code (a library
    built on jaxkit registers its own directory)."""
    global _excluded
    if path not in excluded_paths:
        excluded_paths.append(path)
        _excluded = tuple(excluded_paths)


_override: contextvars.ContextVar[SourceInfo | None] = contextvars.ContextVar(
    "jaxkit_source_info", default=None)


def current(depth: int = 1) -> SourceInfo | None:
    """The source location to record now: the one set by ``user_context`` if any, else the
    innermost frame outside the excluded paths (None when every frame is excluded).

    The walk starts ``depth`` frames up (1: the caller). A jaxkit caller that knows its own
    callers are jaxkit's passes more: each frame looked at costs Python a frame object, the
    main cost of the walk."""
    info = _override.get()
    if info is not None:
        return info
    excluded = _excluded
    frame = sys._getframe(depth)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(excluded):
            return _make(SourceInfo, (code.co_filename, frame.f_lineno, code.co_qualname,
                                      _column(code, frame.f_lasti)))
        frame = frame.f_back
    return None


_columns: dict = {}


def _column(code, lasti: int) -> int:
    """The start column of the instruction at ``lasti`` (the call being made), cached per
    instruction: finding it walks the code's position table."""
    key = (code, lasti)
    col = _columns.get(key)
    if col is None:
        col = -1
        if lasti >= 0:
            for i, pos in enumerate(code.co_positions()):
                if i == lasti // 2:
                    col = -1 if pos[2] is None else pos[2]
                    break
        if len(_columns) > 100_000:  # bounded: code objects of dead functions stay otherwise
            _columns.clear()
        _columns[key] = col
    return col


_make = tuple.__new__  # SourceInfo(...) without NamedTuple's Python-level __new__


class user_context:
    """``with user_context(info):`` equations recorded inside get ``info`` (when it is not
    None) instead of the frame that records them. A class, not a generator, because it wraps
    every equation an interpreter re-emits."""

    __slots__ = ("info", "_token")

    def __init__(self, info: SourceInfo | None):
        self.info = info
        self._token = None

    def __enter__(self):
        if self.info is not None:
            self._token = _override.set(self.info)
        return self.info

    def __exit__(self, *exc):
        if self._token is not None:
            _override.reset(self._token)
            self._token = None
        return False
