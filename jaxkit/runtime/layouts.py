"""The memory layouts PjRt gave buffers and executables, read out of jaxlib as plain tuples.

A layout is ``(major_to_minor, tiling, element_size_in_bits)``: the dimensions from the one
that varies slowest to the one that varies fastest in memory (XLA stores the reverse,
``minor_to_major``), the tiles (none on CPU), and the bit width of sub-byte elements (0 for
ordinary ones). ``jaxkit.experimental.layout`` wraps them in JAX's ``Layout`` objects.
"""
from __future__ import annotations

from typing import Any

from jaxlib import _jax

LayoutTuple = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], int]

__all__ = ["LayoutTuple", "buffer_layout", "executable_layouts"]


def _from_pjrt(pjrt_layout: Any) -> LayoutTuple:
    xla = pjrt_layout._xla_layout()
    return (tuple(xla.minor_to_major())[::-1], tuple(map(tuple, xla.tiling())),
            int(xla.element_size_in_bits()))


def buffer_layout(buf: Any) -> LayoutTuple | None:
    """The layout of a device array (``None`` where the backend does not report one, as
    JAX's ``Format(None, ...)`` says then)."""
    try:
        return _from_pjrt(buf._pjrt_layout)
    except _jax.JaxRuntimeError as e:
        if str(e.args[0]).startswith("UNIMPLEMENTED"):
            return None
        raise


def executable_layouts(xla_executable: Any) -> tuple[list[LayoutTuple], list[LayoutTuple]]:
    """The layouts XLA chose for a compiled executable's parameters and its results."""
    return ([_from_pjrt(p) for p in xla_executable.get_parameter_layouts()],
            [_from_pjrt(p) for p in xla_executable.get_output_layouts()])
