"""The stages of ``jit`` (``jax.stages``): ``Traced`` -> ``Lowered`` -> ``Compiled``.

Defined in ``jaxkit.transforms.stages``; this is their public module name, as in JAX.
"""
from typing import Any, Protocol

from jaxkit.transforms.stages import Compiled, Lowered, Timings, Traced

__all__ = ["Compiled", "Lowered", "Timings", "Traced", "Wrapped"]


class Wrapped(Protocol):
    """The type of a function transformed by ``jit``: callable, and staged by ``trace`` /
    ``lower``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def trace(self, *args: Any, **kwargs: Any) -> Traced: ...

    def lower(self, *args: Any, **kwargs: Any) -> Lowered: ...
