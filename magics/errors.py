"""How a failure inside a magic reaches the user.

Two kinds. A mistake in the magic line itself (a call that does not parse, an unknown name,
a bad option value, ``%grad`` of a non-scalar function) is a ``UsageError``: IPython prints
its one line, with no traceback. An error raised by the user's function (or by jaxkit on
the user's values) is shown as the user's error: its traceback keeps the user's frames and
drops those of jaxkit and of the magics, as JAX filters its own frames out of tracebacks.
"""
from __future__ import annotations

import functools
import os
import types
from collections.abc import Callable

from IPython.core.error import UsageError

import jaxkit

_INTERNAL_DIRS = (os.path.dirname(os.path.abspath(jaxkit.__file__)) + os.sep,
                  os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _internal(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_INTERNAL_DIRS)


def user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without jaxkit's and the magics' frames. When every frame is internal (jaxkit
    refused a value the user passed), the innermost one stays: it is where the error was
    raised."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    kept = [t for t in frames if not _internal(t.tb_frame.f_code.co_filename)] or frames[-1:]
    new = None
    for t in reversed(kept):
        new = types.TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return new


def magic_errors(method: Callable) -> Callable:
    """Show errors raised while a magic runs as the user's (see the module docstring)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        __tracebackhide__ = True  # IPython leaves this frame out of the traceback it prints
        try:
            return method(self, *args, **kwargs)
        except UsageError:
            raise
        except Exception as err:  # noqa: BLE001  (re-raised, with a shorter traceback)
            err.__traceback__ = user_traceback(err.__traceback__)
            context = err.__context__
            if context is not None and all(
                    _internal(code.co_filename) for code in _codes(context.__traceback__)):
                err.__suppress_context__ = True  # an internal exception the error replaced
            raise err
    return run


def _codes(tb):
    while tb is not None:
        yield tb.tb_frame.f_code
        tb = tb.tb_next
