"""``jax.debug.breakpoint``: stop a program, eager or staged, and inspect the values its
Python frames hold at that point in a small command-line debugger (``(jdb)`` prompt).

The breakpoint records the user's frames (file, line, source, globals and locals) when it is
traced; the locals that are arrays travel through a debug callback, so under ``jit`` the
debugger shows their runtime values. Commands: ``p``/``pp`` expr, ``u(p)``, ``d(own)``,
``l(ist)``, ``w(here)``/``bt``, ``c(ontinue)``, ``q(uit)``, or an expression to print."""
from __future__ import annotations

import cmd
import inspect
import pprint
import sys
import traceback
from typing import IO, Any

from jaxkit import core, source_info
from jaxkit.runtime.array import Array
from jaxkit.transforms.callback import debug_callback

__all__ = ["breakpoint"]


class _Frame:
    """One recorded Python frame: where it is, the source of its function (``offset``: the
    current line's index in it, None without source) and its local variables. As in JAX,
    expressions see the locals only."""

    def __init__(self, filename: str, lineno: int, source: list[str], offset: int | None,
                 loc: dict):
        self.filename, self.lineno = filename, lineno
        self.source, self.offset = source, offset
        self.globals: dict = {}
        self.locals = loc


def _function_source(frame, lineno: int) -> tuple[list[str], int | None]:
    try:
        _, start = inspect.getsourcelines(frame)
        source = inspect.getsource(frame).split("\n")
    except (OSError, TypeError):
        return [], None
    offset = lineno - max(start, 1)
    return (source, offset) if 0 <= offset < len(source) else ([], None)


class CliDebugger(cmd.Cmd):
    """The ``(jdb)`` command loop over recorded frames (innermost first)."""

    prompt = "(jdb) "

    def __init__(self, frames: list[_Frame], stdin: IO[str] | None = None,
                 stdout: IO[str] | None = None):
        super().__init__(stdin=stdin, stdout=stdout)
        self.use_rawinput = stdin is None
        self.frames = frames
        self.index = 0
        self.intro = "Entering jdb:"

    def _eval(self, expr: str) -> Any:
        frame = self.frames[self.index]
        return eval(expr, {}, {**frame.globals, **frame.locals})  # noqa: S307  (a debugger)

    def _show(self, expr: str, fmt) -> None:
        try:
            self.stdout.write(fmt(self._eval(expr)) + "\n")
        except Exception:  # noqa: BLE001  (any error in the user's expression is reported)
            err = traceback.format_exception_only(*sys.exc_info()[:2])[-1].strip()
            self.stdout.write(f"*** {err}\n")

    def default(self, line: str) -> None:
        self._show(line, repr)

    def do_p(self, arg: str) -> None:
        """p expression: print the value of an expression."""
        self._show(arg, repr)

    def do_pp(self, arg: str) -> None:
        """pp expression: pretty-print the value of an expression."""
        self._show(arg, pprint.pformat)

    def _context(self, around: int = 2) -> None:
        frame = self.frames[self.index]
        lines = [f"> {frame.filename}({frame.lineno})"]
        if frame.offset is not None:
            at = frame.offset
            for i in range(max(0, at - around - 1), min(len(frame.source), at + around + 1)):
                lines.append(("->  " if i == at else "    ") + frame.source[i])
        self.stdout.write("\n".join(lines) + "\n")

    def do_up(self, arg: str) -> None:
        """u(p): move to the calling frame."""
        if self.index == len(self.frames) - 1:
            self.stdout.write("At topmost frame.\n")
        else:
            self.index += 1
        self._context()

    def do_down(self, arg: str) -> None:
        """d(own): move to the called frame."""
        if self.index == 0:
            self.stdout.write("At bottommost frame.\n")
        else:
            self.index -= 1
        self._context()

    def do_list(self, arg: str) -> None:
        """l(ist): show the source around the current line."""
        self._context(around=5)

    def do_where(self, arg: str) -> None:
        """w(here): the recorded frames, innermost last ('bt' too)."""
        out = ["Traceback:"]
        for frame in reversed(self.frames):
            out.append(f'  File "{frame.filename}", line {frame.lineno}')
            out.append("    " + ("<no source>" if frame.offset is None
                                 else frame.source[frame.offset].strip()))
        self.stdout.write("\n".join(out) + "\n")

    def do_continue(self, arg: str) -> bool:
        """c(ontinue): leave the debugger and go on with the program."""
        return True

    def do_quit(self, arg: str) -> None:
        """q(uit): end the program."""
        sys.exit(0)

    do_u, do_d, do_l = do_up, do_down, do_list
    do_w = do_bt = do_where
    do_c = do_cont = do_continue
    do_q = do_exit = do_EOF = do_quit


def _is_array(x) -> bool:
    return isinstance(x, (core.Tracer, Array))


def breakpoint(*, backend: str | None = None, filter_frames: bool = True,  # noqa: A001
               num_frames: int | None = None, ordered: bool = False, token=None,
               **kwargs: Any) -> Any:
    """Stop here and open the ``(jdb)`` debugger on the calling frames when the program runs
    (``jax.debug.breakpoint``). With ``token``, the breakpoint runs once ``token`` is
    computed and ``token`` is returned."""
    if token is not None and ordered:
        raise ValueError("`ordered` and `token` are mutually exclusive arguments.")
    if backend not in (None, "cli"):
        raise ValueError(f"jaxkit has only the 'cli' debugger backend, not {backend!r}")
    excluded = tuple(source_info.excluded_paths)
    infos = [f for f in inspect.stack()[1:]
             if not (filter_frames and f.filename.startswith(excluded))]
    if num_frames is not None:
        infos = infos[:num_frames]
    statics, arrays = [], []
    for f in infos:
        loc = {k: v for k, v in f.frame.f_locals.items() if not _is_array(v)}
        arr = {k: v for k, v in f.frame.f_locals.items() if _is_array(v)}
        statics.append((f.filename, f.lineno, *_function_source(f.frame, f.lineno), loc))
        arrays.append(arr)
    del infos

    def run(arrays, token):
        frames = [_Frame(fn, ln, src, off, {**loc, **arr})
                  for (fn, ln, src, off, loc), arr in zip(statics, arrays)]
        CliDebugger(frames, **kwargs).cmdloop()

    debug_callback(run, arrays, token, ordered=ordered)
    return token
