"""``jax.extend.source_info_util``: source locations and name stacks.

Locations: libraries register their own files so that user-facing locations (the
``source_info`` of equations, and through it the HLO metadata) point at user code; the set of
excluded path prefixes is ``jaxkit.source_info``'s, and jaxkit's own directory is always in it.
A jaxkit location is a ``SourceInfo(file, line, function)``, or None where none is known.

Name stacks: the scopes ``jax.named_scope`` opens, and the transformations wrapped around
them (``jvp(f)``). ``extend_name_stack``/``set_name_stack``/``reset_name_stack``/
``transform_name_stack`` change the very stack ``jax.named_scope`` pushes onto (the one
``jaxkit.source_info`` records on equations), so each sees the other's scopes.
"""
from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator

from jaxkit import source_info
from jaxkit.source_info import (NameStack, Scope, SourceInfo, Transform, current_name_stack,
                                excluded_paths, register_exclusion)

__all__ = ["NameStack", "Scope", "SourceInfo", "Transform", "current", "current_name_stack",
           "excluded_paths", "extend_name_stack", "new_name_stack", "new_source_info",
           "register_exclusion", "reset_name_stack", "set_name_stack", "summarize",
           "transform_name_stack", "user_context", "user_frame"]


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


def new_source_info() -> SourceInfo | None:
    """A location that says nothing (jaxkit's unknown location: None)."""
    return None


def summarize(info: SourceInfo | None, num_frames: int = 1) -> str:
    """``file:line (function)`` of a location, ``"unknown"`` without one (a jaxkit location
    is one frame, so ``num_frames`` adds nothing)."""
    del num_frames
    return "unknown" if info is None else f"{info.file}:{info.line} ({info.function})"


@contextlib.contextmanager
def user_context(c, *, name_stack: NameStack | None = None) -> Iterator[None]:
    """Equations recorded inside get the location ``c`` (a ``SourceInfo``; anything else,
    such as a JAX traceback, leaves locations as they are) and, when given, the name stack
    ``name_stack`` (as JAX's; ``c``'s own names are not used)."""
    loc = c._replace(name_stack=NameStack()) if isinstance(c, SourceInfo) else None
    with source_info.user_context(loc):
        if name_stack is None:
            yield
        else:
            with source_info.name_stack_context(name_stack):
                yield


# ---- name stacks -----------------------------------------------------------------------------


def new_name_stack(name: str = "") -> NameStack:
    """An empty stack, or one holding the scope ``name``."""
    return NameStack().extend(name) if name else NameStack()


class set_name_stack:
    """``with set_name_stack(stack):`` the block runs with ``stack`` as its name stack (also
    usable as a decorator)."""

    __slots__ = ("arg", "_token")

    def __init__(self, arg):
        self.arg = arg  # the stack to set (subclasses: the name to push)
        self._token = None

    def _new_stack(self) -> NameStack:
        return self.arg

    def __enter__(self) -> NameStack:
        stack = self._new_stack()
        self._token = source_info._name_stack.set(stack)
        return stack

    def __exit__(self, *exc) -> bool:
        source_info._name_stack.reset(self._token)
        return False

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with type(self)(self.arg):
                return func(*args, **kwargs)
        return wrapper


class extend_name_stack(set_name_stack):
    """``with extend_name_stack(name):`` the block runs inside the scope ``name`` (as
    ``jax.named_scope``); yields the new stack."""

    __slots__ = ()

    def _new_stack(self) -> NameStack:
        return current_name_stack().extend(self.arg)


class transform_name_stack(set_name_stack):
    """``with transform_name_stack(name):`` the scopes opened in the block are wrapped in the
    transformation ``name``."""

    __slots__ = ()

    def _new_stack(self) -> NameStack:
        return current_name_stack().transform(self.arg)


def reset_name_stack() -> set_name_stack:
    """``with reset_name_stack():`` the block starts from an empty name stack."""
    return set_name_stack(NameStack())
