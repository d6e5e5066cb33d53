"""The small namespaces at the top of JAX's API: ``jax.ad`` (the markers of
``vjp(...)[1].with_refs``) and ``jax.memory`` (``memory.Space``, where an array lives).

``with_refs`` takes one marker per primal: ``GradValue()`` returns that cotangent (the
default), ``DontWant()`` skips it (``DidntWant()`` comes back in its place) and a ``Ref``
receives the cotangent added in place (``GradRef()`` comes back).
"""
from __future__ import annotations

import dataclasses
import enum
from types import SimpleNamespace

from jaxkit import tree_util

__all__ = ["DidntWant", "DontWant", "GradRef", "GradValue", "MemorySpace", "ad", "memory"]


@dataclasses.dataclass(frozen=True, slots=True)
class GradValue:
    """``with_refs`` marker: return this primal's cotangent (what a plain call does)."""


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class GradRef:
    """Returned for a primal whose cotangent went into a ``Ref`` (an empty pytree)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DontWant:
    """``with_refs`` marker: this primal's cotangent is not wanted."""


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class DidntWant:
    """Returned for a primal marked ``DontWant`` (an empty pytree)."""


class MemorySpace(enum.Enum):
    """Where an array's buffer lives: on the device, in host memory, or either."""

    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"

    # Enum hashes the member's name; members are singletons, so identity is the cheaper hash.
    __hash__ = object.__hash__


ad = SimpleNamespace(DontWant=DontWant, DidntWant=DidntWant, GradRef=GradRef,
                     GradValue=GradValue)
memory = SimpleNamespace(Space=MemorySpace)
