"""``jax.ds`` / ``dslice``: a slice given by a start and a size, either of which may be traced.

``x[i:i + 2]`` needs a static ``i``; ``x[jax.ds(i, 2)]`` does not, because the size of the
result (2) is known while the start may be a tracer. ``jaxkit.numpy`` indexing lowers a
``Slice`` to ``dynamic_slice`` (unit stride, start clamped so the window fits, as XLA does) or
to a gather of ``start + stride * arange(size)`` (clamped per index).

A ``Slice`` is a pytree whose leaves are its traced parts only, so ``jit`` can carry it.
"""
from __future__ import annotations

import dataclasses
import operator
from typing import Any

from jaxkit import core, tree_util

__all__ = ["Slice", "ds", "dslice"]


def _is_static_int(x: Any) -> bool:
    """A Python/NumPy integer (or a concrete value that converts to one exactly)."""
    if isinstance(x, core.Tracer):
        return False
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


@tree_util.register_pytree_node_class
@dataclasses.dataclass(slots=True)
class Slice:
    """A slice with a start index, a size and a static stride; start and size may be
    dynamic (traced) or static."""

    start: Any
    size: Any
    stride: int = 1

    def __post_init__(self):
        if self.stride < 0:
            raise ValueError("`stride` must be >= 0.")

    @property
    def is_dynamic_start(self) -> bool:
        return not _is_static_int(self.start)

    @property
    def is_dynamic_size(self) -> bool:
        return not _is_static_int(self.size)

    def tree_flatten(self) -> tuple[tuple, tuple]:
        # Static parts go to the tree definition, dynamic ones are leaves (None when static).
        start_dyn, size_dyn = self.is_dynamic_start, self.is_dynamic_size
        children = (self.start if start_dyn else None, self.size if size_dyn else None)
        aux = (None if start_dyn else self.start, None if size_dyn else self.size, self.stride)
        return children, aux

    @classmethod
    def tree_unflatten(cls, aux_data: tuple, children: tuple) -> Slice:
        start, size = (c if c is not None else a for c, a in zip(children, aux_data[:2]))
        return cls(start, size, aux_data[2])

    @classmethod
    def from_slice(cls, slc: slice, size: int) -> Slice:
        """The ``Slice`` selecting what the builtin ``slc`` selects from ``size`` elements."""
        start, stop, step = slc.indices(size)
        if step < 1:
            raise ValueError(f"slice must have a step >= 1 (found: {step})")
        return cls(start, len(range(start, stop, step)), step)


def dslice(start: Any, size: Any = None, stride: int | None = None) -> slice | Slice:
    """A ``Slice`` from a start index and a size, mirroring the builtin ``slice``:
    ``dslice(None)`` is ``:``, ``dslice(j)`` is ``:j``, ``dslice(i, j)`` is ``i:i+j`` and
    ``dslice(i, j, stride)`` is ``i:i+j:stride`` (``j`` elements taken every ``stride``).
    The start may be traced: ``x[jax.ds(i, 2)]`` works under ``jit`` with a traced ``i``."""
    if start is None:
        return slice(None)
    if stride is None:
        stride = 1
    if not isinstance(stride, int):
        raise ValueError("Non-static stride in `dslice`")
    if size is None:
        start, size = 0, start
    return Slice(start, size, stride)


ds = dslice
