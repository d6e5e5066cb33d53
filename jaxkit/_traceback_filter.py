"""Traceback filtering at API boundaries, as JAX's ``traceback_util``: an exception raised
through a library entry point (a jitted function, a ``jnp`` function, an entry point marked
with ``jax._src.traceback_util.api_boundary``) loses the frames of hidden source paths
(jaxkit's own package, and those libraries register), as ``jax_traceback_filtering`` says:
``off``; ``tracebackhide`` (hidden frames get a ``__tracebackhide__`` local, which IPython and
pytest honour); ``remove_frames`` (hidden frames are dropped, and the whole traceback is kept
on an ``UnfilteredStackTrace`` set as the exception's ``__cause__``); ``quiet_remove_frames``
(dropped, with JAX's note saying so); ``auto`` (``tracebackhide`` under IPython, else
``quiet_remove_frames``). Only the outermost boundary an exception passes through filters it.

A boundary is a function whose code object is in ``boundary_codes``; it calls
:func:`filter_at_boundary` from its ``except`` clause, so calls that raise nothing pay nothing
but the boundary's frame (none for jitted functions, whose dispatcher is the boundary).
"""
from __future__ import annotations

import functools
import os
import sys
import traceback
import types

from collections.abc import Callable
from typing import Any, TypeVar

from jaxkit._config import config
from jaxkit.source_info import excluded_paths

C = TypeVar("C", bound=Callable[..., Any])

UNFILTERED_NOTE = ("The stack trace below excludes JAX-internal frames.\n"
                   "The preceding is the original exception that occurred, unmodified.\n"
                   "\n--------------------")
SIMPLIFIED_NOTE = ("For simplicity, JAX has removed its internal frames from the traceback "
                   "of the following exception. Set JAX_TRACEBACK_FILTERING=off to include "
                   "these.")

# The code objects of the boundaries' functions (every closure made from one shares it).
boundary_codes: set[types.CodeType] = set()


class UnfilteredStackTrace(Exception):
    """The whole traceback of an exception whose own traceback was filtered (its cause)."""


def hidden_path(filename: str) -> bool:
    """Whether frames of ``filename`` are hidden (it is under an excluded path)."""
    path = os.path.abspath(filename)
    for prefix in excluded_paths:  # read each time: Flax edits the list in place
        prefix = os.path.abspath(prefix)
        if path == prefix or path.startswith(prefix.rstrip(os.sep) + os.sep):
            return True
    return False


def include_frame(f: types.FrameType) -> bool:
    """Whether a traceback shows frame ``f`` (its file is not under a hidden path)."""
    return not hidden_path(f.f_code.co_filename)


def filter_traceback(tb: types.TracebackType) -> types.TracebackType | None:
    """``tb`` without the frames of hidden files."""
    out = None
    for f, lineno in reversed(list(traceback.walk_tb(tb))):
        if include_frame(f):
            out = types.TracebackType(out, f, f.f_lasti, lineno)
    return out


def _with_callers(tb: types.TracebackType) -> types.TracebackType:
    """``tb`` extended with the frames that called its first one, up to the first run of
    module-level frames (not past a REPL's exec point), importlib's frames left out."""
    out, module_level = tb, False
    for f, lineno in traceback.walk_stack(tb.tb_frame):
        if "importlib._bootstrap" in f.f_code.co_filename:
            continue
        if module_level and f.f_code.co_name != "<module>":
            break
        if include_frame(f):
            out = types.TracebackType(out, f, f.f_lasti, lineno)
        module_level = module_level or f.f_code.co_name == "<module>"
    return out


def _inside_another_boundary(e: BaseException) -> bool:
    """Whether a boundary further out will see ``e`` (then it filters, not this one)."""
    if e.__traceback__ is None:
        return False
    f = e.__traceback__.tb_frame.f_back
    while f is not None:
        if f.f_code in boundary_codes:
            return True
        f = f.f_back
    return False


def mode() -> str:
    """The filtering mode in effect (``auto`` resolved)."""
    value = config.jax_traceback_filtering
    if value in (None, "auto"):
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
        new_enough = ipython is not None and ipython.version_info[:2] >= (7, 17)
        value = "tracebackhide" if shell is not None and new_enough else "quiet_remove_frames"
    return value


def _filter(e: BaseException, how: str) -> None:
    tb = e.__traceback__
    if how == "tracebackhide":
        for f, _ in traceback.walk_tb(tb):
            if not include_frame(f) and f.f_code not in boundary_codes:
                f.f_locals["__tracebackhide__"] = True
        return
    e.with_traceback(filter_traceback(tb))
    if how == "quiet_remove_frames":
        e.add_note("--------------------\n" + SIMPLIFIED_NOTE)
        return
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    whole = UnfilteredStackTrace(f"{text}\n\n{UNFILTERED_NOTE}")
    whole.with_traceback(_with_callers(tb))
    whole.__cause__, whole.__context__ = e.__cause__, e.__context__
    whole.__suppress_context__ = e.__suppress_context__
    e.__cause__, e.__context__ = whole, None


def filter_at_boundary(e: BaseException) -> None:
    """Called by a boundary's ``except`` clause before it re-raises ``e``: filter ``e``'s
    traceback unless the mode is ``off`` or a boundary further out will."""
    how = mode()
    if how != "off" and not _inside_another_boundary(e):
        _filter(e, how)


def api_boundary(fun: C) -> C:
    """``fun`` as an API boundary (JAX's ``api_boundary``): exceptions raised through it are
    filtered by :func:`filter_at_boundary`."""

    @functools.wraps(fun)
    def _filtering_boundary(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841  (read by traceback printers)
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            filter_at_boundary(e)
            raise

    return _filtering_boundary  # type: ignore[return-value]


boundary_codes.add(api_boundary(lambda: None).__code__)
