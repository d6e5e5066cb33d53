"""``jaxkit.debug``: printing and callbacks that work eagerly and inside transformations.

``print`` formats its arguments with ``str.format`` *when the program runs*, so inside ``jit``
it shows runtime values, not tracers; under ``vmap`` it prints once per example, under ``grad``
the primal values. ``print`` binds the ``debug_print`` primitive of ``jaxkit.transforms.callback``
(the debug callback's rules under JAX's name for it).
"""
from __future__ import annotations

import logging
import string
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import source_info
from jaxkit.debugger import breakpoint
from jaxkit.transforms.callback import bind_side_effect, debug_callback, debug_print_p

__all__ = ["DebugEffect", "OrderedDebugEffect", "breakpoint", "callback", "log", "print",
           "visualize_array_sharding"]

logger = logging.getLogger("jaxkit.debug")

callback = debug_callback


class _Printer:
    """Formats and writes one ``debug.print`` message (hashable: same format, same options)."""

    __slots__ = ("fmt", "np_printoptions", "has_placeholders", "log_site")

    def __init__(self, fmt: str, np_printoptions: tuple, has_placeholders: bool,
                 log_site: tuple | None = None):
        self.fmt = fmt
        self.np_printoptions = np_printoptions
        self.has_placeholders = has_placeholders
        # (file, line) of a ``debug.log`` call: the message goes to ``logger`` at INFO level,
        # attributed to that line, instead of standard output.
        self.log_site = log_site

    def __call__(self, *args, **kwargs) -> None:
        if self.has_placeholders:
            with np.printoptions(**dict(self.np_printoptions)):
                msg = self.fmt.format(*args, **kwargs)
        else:
            msg = " ".join((self.fmt, *(str(a) for a in args)))
        if self.log_site is not None:
            file, line = self.log_site
            logger.handle(logger.makeRecord(logger.name, logging.INFO, file, line, msg, (),
                                            None))
            return
        sys.stdout.write(msg + "\n")

    def _key(self):
        return (self.fmt, self.np_printoptions, self.has_placeholders, self.log_site)

    def __eq__(self, other):
        return type(other) is _Printer and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"print({self.fmt!r})"

    __name__ = property(lambda self: "debug_print")


class _FormatChecker(string.Formatter):
    """Checks placeholders against the arguments without formatting (tracers have no value)."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(f"Unused positional arguments to `jaxkit.debug.print`: {unused}")
        unused_kw = [k for k in kwargs if k not in used_args]
        if unused_kw:
            raise ValueError(f"Unused keyword arguments to `jaxkit.debug.print`: {unused_kw}")


_checker = _FormatChecker()


def print(  # noqa: A001  (shadows the builtin on purpose: jax.debug.print)
        fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
        skip_format_check: bool = False, _use_logging: bool = False,
        **kwargs: Any) -> Callable[..., None] | None:
    """Print ``fmt.format(*args, **kwargs)`` with the values the arrays have at run time.

    Use placeholders, not f-strings: ``jaxkit.debug.print("x = {x}", x=x)``. Like JAX, also
    callable in two steps: ``jaxkit.debug.print(ordered=True)("x = {}", x)``."""

    del partitioned  # accepted as in JAX; a program here prints from one device

    def _print(fmt: str, *args: Any, **kwargs: Any) -> None:
        if not skip_format_check:
            _checker.format(fmt, *args, **kwargs)  # wrong placeholders fail here, not later
        has_placeholders = bool(fmt) and next(iter(_checker.parse(fmt)))[1] is not None
        site = None
        if _use_logging:
            info = source_info.current()
            site = (info.file, info.line) if info is not None else ("(unknown file)", 0)
        printer = _Printer(fmt, tuple(np.get_printoptions().items()), has_placeholders, site)
        bind_side_effect(debug_print_p, printer, args, kwargs, ordered)

    if fmt is not None:
        _print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"debug.print received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _print


def log(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
        skip_format_check: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """As ``print``, but the message is logged at INFO level by the ``jaxkit.debug`` logger
    (attributed to the calling line) when the values are known (``jax.debug.log``)."""
    return print(fmt, *args, ordered=ordered, partitioned=partitioned,
                 skip_format_check=skip_format_check, _use_logging=True, **kwargs)


class DebugEffect:
    """The effect of an unordered debug callback (``jax.debug.DebugEffect``; prints
    ``Debug``). jaxkit keeps such equations through DCE by their primitive rather than by an
    effect object; this type names the effect for code that inspects it."""

    def __str__(self):
        return "Debug"

    __repr__ = __str__


class OrderedDebugEffect:
    """The effect of an ordered debug callback (``ordered=True``; prints ``OrderedDebug``)."""

    def __str__(self):
        return "OrderedDebug"

    __repr__ = __str__


debug_effect = DebugEffect()
ordered_debug_effect = OrderedDebugEffect()


def _sharding_cells(arr) -> tuple[list, list, dict]:
    """Row starts, column starts and, per (row, column) block, the ids of the devices that
    hold it, for a rank-1 or rank-2 array (a rank-1 array is one row)."""
    shape = tuple(arr.shape)
    sharding = arr.sharding
    if hasattr(sharding, "devices_indices_map"):
        indices = sharding.devices_indices_map(shape)
    else:  # one device holds everything
        indices = {arr.device: tuple(slice(None) for _ in shape)}
    cells: dict[tuple, list[int]] = {}
    for device, index in indices.items():
        spans = [(s.start or 0) for s in index]
        key = (0, spans[0]) if len(shape) == 1 else (spans[0], spans[1])
        cells.setdefault(key, []).append(device.id)
    rows = sorted({r for r, _ in cells})
    cols = sorted({c for _, c in cells})
    return rows, cols, cells


def visualize_array_sharding(arr, *, use_color: bool = False, scale: float = 1.0,
                             min_width: int = 9, max_width: int = 80,
                             color_map=None) -> None:
    """Draw which devices hold which block of a rank-1 or rank-2 array, as boxes labelled
    with the devices' platform and ids (``CPU 0,1``: two devices hold copies of the block)."""
    del use_color, scale, color_map  # text only
    if len(arr.shape) not in (1, 2):
        raise ValueError("visualize_array_sharding only works for shapes with 1 or 2 "
                         f"dimensions, got shape {tuple(arr.shape)}")
    rows, cols, cells = _sharding_cells(arr)
    platform = next(iter(arr.devices())).platform.upper()
    labels = {k: f"{platform} {','.join(str(i) for i in sorted(ids))}"
              for k, ids in cells.items()}
    width = max(min(max(len(s) for s in labels.values()) + 2, max_width // len(cols)),
                min(min_width, max_width // len(cols)))
    pad_lines = 1 if len(arr.shape) == 2 else 0

    def rule(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * width for _ in cols) + right

    lines = [rule("┌", "┬", "┐")]
    for i, r in enumerate(rows):
        blank = "│" + "│".join(" " * width for _ in cols) + "│"
        lines += [blank] * pad_lines
        lines.append("│" + "│".join(labels[(r, c)].center(width) for c in cols) + "│")
        lines += [blank] * pad_lines
        lines.append(rule("├", "┼", "┤") if i < len(rows) - 1 else rule("└", "┴", "┘"))
    sys.stdout.write("\n".join(lines) + "\n")
