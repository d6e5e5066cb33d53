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
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, source_info
from jaxkit import tree_util
from jaxkit.debugger import breakpoint
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.runtime import multi_device
from jaxkit.runtime.sharding import (GlobalSharding, NamedSharding, PartitionSpec,
                                     named_from_hlo)
from jaxkit.transforms.callback import (DebugEffect, OrderedDebugEffect, debug_callback,
                                        debug_print_p, split_static_args)

__all__ = ["DebugEffect", "OrderedDebugEffect", "breakpoint", "callback",
           "inspect_array_sharding", "log", "print", "visualize_array_sharding",
           "visualize_sharding"]

logger = logging.getLogger("jaxkit.debug")

callback = debug_callback


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
    callable in two steps: ``jaxkit.debug.print(ordered=True)("x = {}", x)``. An ordered print
    is refused in a program over several devices (as JAX refuses it)."""

    def _print(fmt: str, *args: Any, **kwargs: Any) -> None:
        if not skip_format_check:
            _checker.format(fmt, *args, **kwargs)  # wrong placeholders fail here, not later
        has_placeholders = bool(fmt) and next(iter(_checker.parse(fmt)))[1] is not None
        in_tree, dyn, static_args = split_static_args(args, kwargs)
        debug_print_p.bind(*dyn, fmt=fmt, has_placeholders=has_placeholders, in_tree=in_tree,
                           logging_record=_logging_record() if _use_logging else None,
                           np_printoptions=tuple(np.get_printoptions().items()),
                           ordered=bool(ordered), partitioned=bool(partitioned),
                           static_args=static_args)

    if fmt is not None:
        _print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError(f"debug.print received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _print


def _logging_record() -> logging.LogRecord:
    """The record ``debug.log`` writes its message into (at INFO level), attributed to the
    calling line of user code."""
    info = source_info.current()
    file, line = (info.file, info.line) if info is not None else ("(unknown file)", 0)
    return logger.makeRecord(logger.name, logging.INFO, file, line, "", (), None)


def log(fmt: str | None = None, *args: Any, ordered: bool = False, partitioned: bool = False,
        skip_format_check: bool = False, **kwargs: Any) -> Callable[..., None] | None:
    """As ``print``, but the message is logged at INFO level by the ``jaxkit.debug`` logger
    (attributed to the calling line) when the values are known (``jax.debug.log``)."""
    return print(fmt, *args, ordered=ordered, partitioned=partitioned,
                 skip_format_check=skip_format_check, _use_logging=True, **kwargs)


def _blocks(shape: tuple, sharding) -> dict[tuple[int, int], tuple[set, float, float | None]]:
    """Per block (row, column): the ids of the devices holding it and its width and height as
    fractions of the array's (height None for a rank-1 array, which is drawn as one row)."""
    if hasattr(sharding, "devices_indices_map"):
        indices = sharding.devices_indices_map(shape)
    else:  # a SingleDeviceSharding: one device holds everything
        indices = {d: tuple(slice(None) for _ in shape) for d in sharding.device_set}
    blocks: dict[tuple[int, int], tuple[set, float, float | None]] = {}
    for device, index in indices.items():
        spans = []
        for n, s in zip(shape, index):
            start = s.start or 0
            stop = n if s.stop is None else s.stop
            spans.append((start // (stop - start) if stop > start else 0, (stop - start) / n))
        if len(shape) == 1:
            key, width, height = (0, spans[0][0]), spans[0][1], None
        else:
            key, width, height = (spans[0][0], spans[1][0]), spans[1][1], spans[0][1]
        blocks.setdefault(key, (set(), width, height))[0].add(device.id)
    return blocks


def _draw(shape: tuple, sharding, scale: float, min_width: int, max_width: int) -> None:
    """Print the blocks as JAX's uncoloured picture: a box per block sized in proportion to
    the block (10 * ``scale`` lines for the whole height, characters 2.5 times as many as
    lines), each labelled with the platform and the ids of the devices that hold it."""
    base_height = int(10 * scale)
    base_width = int(base_height * (shape[1] if len(shape) == 2 else 1) / shape[0])
    blocks = _blocks(shape, sharding)
    platform = next(iter(sharding.device_set)).platform.upper()
    n_rows = max(r for r, _ in blocks) + 1
    n_cols = max(c for _, c in blocks) + 1
    cells = {}
    for key, (ids, width, height) in blocks.items():
        label = f"{platform} " + ",".join(str(i) for i in sorted(ids))
        w = min(max(int(width * base_width * 2.5), min_width), max_width)
        h = 1 if height is None else int(height * base_height)
        left, extra = divmod(w - len(label) - 2, 2)
        top, extra_h = divmod(h - 2, 2)
        cells[key] = (label, max(top, 0), max(left + extra, 0), max(top + extra_h, 0),
                      max(left, 0))
    # A column is as wide as its widest cell, a row as tall as its tallest; a smaller cell
    # keeps its padding, is centred across the rest of the width and padded at the bottom.
    col_w = [max(len(cells[r, c][0]) + cells[r, c][2] + cells[r, c][4] for r in range(n_rows))
             for c in range(n_cols)]
    row_h = [max(cells[r, c][1] + 1 + cells[r, c][3] for c in range(n_cols))
             for r in range(n_rows)]

    def cell_lines(r: int, c: int) -> list[str]:
        label, top, right, _, left = cells[r, c]
        inner = col_w[c] - left - right
        pad = inner - len(label)
        text = " " * left + " " * (pad // 2) + label + " " * (pad - pad // 2) + " " * right
        lines = [" " * col_w[c]] * top + [text]
        return lines + [" " * col_w[c]] * (row_h[r] - len(lines))

    def rule(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * w for w in col_w) + right

    out = [rule("┌", "┬", "┐")]
    for r in range(n_rows):
        columns = [cell_lines(r, c) for c in range(n_cols)]
        out += ["│" + "│".join(col[i] for col in columns) + "│" for i in range(row_h[r])]
        out.append(rule("├", "┼", "┤") if r < n_rows - 1 else rule("└", "┴", "┘"))
    sys.stdout.write("\n".join(out) + "\n")


def visualize_sharding(shape: Sequence[int], sharding, *, use_color: bool = True,
                       scale: float = 1.0, min_width: int = 9, max_width: int = 80,
                       color_map=None) -> None:
    """Draw which devices hold which block of a rank-1 or rank-2 array of ``shape`` laid out
    as ``sharding`` (JAX's picture without colours, which need a terminal). A layout wider
    than ``max_width`` is drawn at full width; JAX's ``rich`` table squeezes it instead."""
    del use_color, color_map  # text only
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ValueError("`visualize_sharding` only works for shapes with 1 and 2 "
                         "dimensions.")
    _draw(shape, sharding, scale, min_width, max_width)


def visualize_array_sharding(arr, **kwargs) -> None:
    """Draw which devices hold which block of a rank-1 or rank-2 array, as boxes labelled
    with the devices' platform and ids (``CPU 0,1``: two devices hold copies of the block)."""
    visualize_sharding(arr.shape, arr.sharding, **kwargs)


# ---- inspect_array_sharding ----
#
# The callback gets the sharding as soon as it is known: for an array (eagerly, and under
# ``grad``/``vmap`` where the values are concrete) at once; inside a ``jit`` partitioned over
# a mesh when XLA's partitioner has chosen the layout, while the program compiles (so not
# again when the compiled program comes from a cache).


def inspect_array_sharding(value: Any, *, callback: Callable[[Any], None]) -> None:
    """Call ``callback`` with the sharding of every array in the pytree ``value``."""
    wrapped = _ShardingCallback(callback)
    for leaf in tree_util.tree_leaves(value):
        inspect_sharding_p.bind(leaf, callback=wrapped)


class _ShardingCallback:
    """The ``callback`` parameter: prints in a jaxpr as the function's repr, as JAX's does
    (a bare function would print as its name); equal when the function is the same."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], None]):
        self.fn = fn

    def __call__(self, sharding) -> None:
        self.fn(sharding)

    def __eq__(self, other) -> bool:
        return type(other) is _ShardingCallback and other.fn == self.fn

    def __hash__(self) -> int:
        return hash(self.fn)

    def __str__(self) -> str:
        return repr(self.fn)


inspect_sharding_p = core.Primitive("inspect_sharding")
inspect_sharding_p.multiple_results = True


@inspect_sharding_p.def_impl
def _inspect_sharding_impl(value, *, callback):
    callback(value.sharding)
    return []


@inspect_sharding_p.def_abstract_eval
def _inspect_sharding_abstract_eval(aval, *, callback):
    return []


def _inspect_sharding_jvp(primals, tangents, *, callback):
    return inspect_sharding_p.bind(*primals, callback=callback), []


def _inspect_sharding_batch(axis_data, args, dims, *, callback):
    # The batched array is the one that has a layout: its sharding is what is reported.
    inspect_sharding_p.bind(*args, callback=callback)
    return [], []


# Callbacks XLA will call while compiling: they must outlive the lowering (each is small).
_pending_inspections: list = []


def _inspect_sharding_lowering(ctx: mlir.LoweringRuleContext, value, *, callback):
    mesh = ctx.module_context.device_mesh()
    if mesh is None:
        raise NotImplementedError(
            "lowering rule for 'inspect_sharding' outside a program partitioned over a mesh "
            "is not implemented: jaxkit's one-device programs do not know their device while "
            "lowering; lay the arguments out on a mesh, or inspect the arrays outside jit")
    ndim = len(ctx.avals_in[0].shape)

    def on_sharding(hlo_sharding) -> None:
        if hlo_sharding.is_manual():  # inside a shard_map body
            callback(NamedSharding(mesh, PartitionSpec()))
            return
        named = named_from_hlo(mesh, hlo_sharding, ndim)
        callback(named if named is not None else
                 GlobalSharding(multi_device.device_list(mesh._flat), hlo_sharding))

    _pending_inspections.append(on_sharding)
    mlir.inspect_sharding(value, on_sharding)
    return []


ad.defjvp_rule(inspect_sharding_p, _inspect_sharding_jvp)
ad.deftranspose(inspect_sharding_p, lambda cts, *args, callback: [None] * len(args))
batching.defrule(inspect_sharding_p, _inspect_sharding_batch)
mlir.register_lowering(inspect_sharding_p, _inspect_sharding_lowering)
pe.defeffectful(inspect_sharding_p)
