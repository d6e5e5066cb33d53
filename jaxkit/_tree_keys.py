"""Key paths: where a leaf sits in a pytree (``['a'][0].x``), as ``tree_util``'s
``*_with_path`` functions and structure-mismatch errors report it."""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any

KeyPath = tuple[Any, ...]


class _KeyEntry:
    """Shared eq/hash/repr for the key classes; each has exactly one field (its
    ``__match_args__``), so ``match`` statements work as with JAX's classes."""

    __slots__ = ()
    __match_args__: tuple[str, ...] = ()

    def _value(self) -> Any:
        return getattr(self, self.__match_args__[0])

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._value() == self._value()  # type: ignore

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._value()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__match_args__[0]}={self._value()!r})"


class SequenceKey(_KeyEntry):
    """Index of a tuple or list child: ``[0]``."""

    __slots__ = ("idx",)
    __match_args__ = ("idx",)

    def __init__(self, idx: int):
        self.idx = idx

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


class DictKey(_KeyEntry):
    """Key of a dict child: ``['a']``."""

    __slots__ = ("key",)
    __match_args__ = ("key",)

    def __init__(self, key: Hashable):
        self.key = key

    def __str__(self) -> str:
        return f"[{self.key!r}]"


class GetAttrKey(_KeyEntry):
    """Attribute of a namedtuple or dataclass child: ``.x``."""

    __slots__ = ("name",)
    __match_args__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return f".{self.name}"


class FlattenedIndexKey(_KeyEntry):
    """Position of a child of a custom node registered without key functions."""

    __slots__ = ("key",)
    __match_args__ = ("key",)

    def __init__(self, key: int):
        self.key = key

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: ``['a'][0].x``; ``simple=True`` drops brackets and quotes."""
    if simple:
        return separator.join(str(k._value()) if isinstance(k, _KeyEntry) else str(k)
                              for k in keys)
    return separator.join(map(str, keys))
