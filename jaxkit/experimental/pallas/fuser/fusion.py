"""``Fusion``: a function handed to a ``fusible`` kernel standing for the computation fused
before (an input fusion: no arguments, gives the kernel's input) or after it (an output
fusion: takes the kernel's results), with the types it takes and gives."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jaxkit import tree_util

__all__ = ["Fusion"]


@dataclasses.dataclass
class Fusion:
    """A fused computation: call it like ``func``; ``in_type`` is ``(args, kwargs)`` of avals
    it takes, ``out_type`` the aval(s) it gives; ``strict_mode`` asks block-spec propagation
    to check that colliding index maps are equal."""

    func: Callable[..., Any]
    in_type: tuple[tuple[Any, ...], dict[str, Any]]
    out_type: Any
    strict_mode: bool = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    @property
    def shape(self) -> Any:
        return tree_util.tree_map(lambda x: x.shape, self.out_type)

    @property
    def dtype(self) -> Any:
        return tree_util.tree_map(lambda x: x.dtype, self.out_type)

    @property
    def type(self) -> Any:
        return self.out_type

    @property
    def in_shape(self) -> Any:
        return tree_util.tree_map(lambda x: x.shape, self.in_type)

    @property
    def in_dtype(self) -> Any:
        return tree_util.tree_map(lambda x: x.dtype, self.in_type)
