"""``jax._src.traceback_util`` (reached by Flax's ``flax.traceback_util``): the registry of
source paths hidden from user-facing tracebacks, and ``api_boundary``, which filters them out
of the tracebacks of exceptions raised through a library's entry points, as JAX does.

Flax marks its entry points (``Module.init``, ``apply``, ...) with ``api_boundary`` and adds
or removes its own files in ``_exclude_paths`` (``hide_flax_in_tracebacks``). The outermost
boundary an exception passes through filters its traceback as ``jax_traceback_filtering``
says: ``off``; ``tracebackhide`` (hidden frames get a ``__tracebackhide__`` local, which
IPython and pytest honour); ``remove_frames`` (hidden frames are dropped, and the whole
traceback is kept on an ``UnfilteredStackTrace`` set as the exception's ``__cause__``);
``quiet_remove_frames`` (dropped, with a note saying so); ``auto`` (``tracebackhide`` under
IPython, else ``quiet_remove_frames``). jaxkit's own package is a hidden path. jaxkit's own
transformations (``jit``, ...) keep their tracebacks whole: wrapping their cached call path
would cost every call a Python frame.
"""
from __future__ import annotations

import functools
import os
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any, TypeVar

from jaxkit import _config
from jaxkit.extend.source_info_util import excluded_paths as _exclude_paths
from jaxkit.extend.source_info_util import register_exclusion

__all__ = ["SimplifiedTraceback", "UnfilteredStackTrace", "_exclude_paths", "api_boundary",
           "filter_traceback", "include_frame", "register_exclusion"]

C = TypeVar("C", bound=Callable[..., Any])

_UNFILTERED_NOTE = ("The stack trace below excludes JAX-internal frames.\n"
                    "The preceding is the original exception that occurred, unmodified.\n"
                    "\n--------------------")
_SIMPLIFIED_NOTE = ("For simplicity, JAX has removed its internal frames from the traceback "
                    "of the following exception. Set JAX_TRACEBACK_FILTERING=off to include "
                    "these.")


class UnfilteredStackTrace(Exception):
    """The whole traceback of an exception whose own traceback was filtered (its cause)."""


class SimplifiedTraceback(Exception):
    def __str__(self) -> str:
        return _SIMPLIFIED_NOTE


SimplifiedTraceback.__module__ = "jax.errors"


def _hidden_path(filename: str) -> bool:
    path = os.path.abspath(filename)
    for prefix in _exclude_paths:  # read each time: Flax edits the list in place
        prefix = os.path.abspath(prefix)
        if path == prefix or path.startswith(prefix.rstrip(os.sep) + os.sep):
            return True
    return False


def include_frame(f: types.FrameType) -> bool:
    """Whether a traceback shows frame ``f`` (its file is not under a hidden path)."""
    return not _hidden_path(f.f_code.co_filename)


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


def _is_boundary_frame(filename: str, name: str) -> bool:
    return filename == __file__ and name == "_filtering_boundary"


def _inside_another_boundary(e: BaseException) -> bool:
    """Whether a boundary further out will see ``e`` (then it filters, not this one)."""
    if e.__traceback__ is None:
        return False
    callers = traceback.extract_stack(e.__traceback__.tb_frame)[:-1]
    return any(_is_boundary_frame(s.filename, s.name) for s in callers)


def _mode() -> str:
    mode = _config.config.jax_traceback_filtering
    if mode in (None, "auto"):
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
        new_enough = ipython is not None and ipython.version_info[:2] >= (7, 17)
        mode = "tracebackhide" if shell is not None and new_enough else "quiet_remove_frames"
    return mode


def _filter(e: BaseException, mode: str) -> None:
    tb = e.__traceback__
    if mode == "tracebackhide":
        for f, _ in traceback.walk_tb(tb):
            if not include_frame(f) and not _is_boundary_frame(f.f_code.co_filename,
                                                               f.f_code.co_name):
                f.f_locals["__tracebackhide__"] = True
        return
    e.with_traceback(filter_traceback(tb))
    if mode == "quiet_remove_frames":
        e.add_note("--------------------\n" + _SIMPLIFIED_NOTE)
        return
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    whole = UnfilteredStackTrace(f"{text}\n\n{_UNFILTERED_NOTE}")
    whole.with_traceback(_with_callers(tb))
    whole.__cause__, whole.__context__ = e.__cause__, e.__context__
    whole.__suppress_context__ = e.__suppress_context__
    e.__cause__, e.__context__ = whole, None


def api_boundary(fun: C, *, repro_api_name: str | None = None,
                 repro_user_func: bool = False) -> C:
    """``fun``, filtering hidden frames out of the tracebacks of exceptions raised through it
    (by the outermost boundary only; see the module docstring)."""
    del repro_api_name, repro_user_func  # JAX's repro tooling, which jaxkit has not

    @functools.wraps(fun)
    def _filtering_boundary(*args, **kwargs):
        __tracebackhide__ = True  # noqa: F841  (read by traceback printers)
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            mode = _mode()
            if mode != "off" and not _inside_another_boundary(e):
                _filter(e, mode)
            raise

    return _filtering_boundary  # type: ignore[return-value]
