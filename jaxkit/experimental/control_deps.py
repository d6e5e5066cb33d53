"""``jax.experimental.control_deps``: order two computations without a data dependency.

``control_dep(src, dst)`` emits a side-effecting ``custom_call @control_dep(src, dst)`` (an
``ffi_call`` with no results); XLA turns it into a control edge, so whatever computes ``dst``
is scheduled after ``src`` is computed. The values themselves are unchanged.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxkit import ffi

__all__ = ["control_dep", "schedule"]


def control_dep(src: Any, dst: Any) -> None:
    """Adds a control dependency from ``src`` to ``dst``."""
    return ffi.ffi_call("control_dep", (), has_side_effect=True)(src, dst)


def schedule(ops: Sequence[Any]) -> None:
    """Adds control dependencies so the ops run in the given order: ``schedule([a, b, c])``
    adds ``a -> b`` and ``b -> c``."""
    for src, dst in zip(ops[:-1], ops[1:]):
        control_dep(src, dst)
