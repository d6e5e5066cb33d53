"""Source maps in the TC39 format (https://tc39.es/source-map), as browsers' devtools and
JAX's source mapper read them.

A map's ``mappings`` holds one group per line of the generated text; each group holds
segments ``(generated_col,)`` or ``(generated_col, source_idx, source_line, source_col[,
name_idx])``. In the stored form (and in ``mappings``) every field is relative: the
generated column to the previous segment of the same line, the others to the previous
segment anywhere. ``MappingsGenerator`` takes absolute values and does that bookkeeping;
``absolute_mappings`` undoes it. Serialized, each field is a base-64 VLQ: five bits per
character, the lowest bit of the first quantum the sign, bit 5 meaning "more follows".
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Union

__all__ = ["Mappings", "MappingsGenerator", "Segment", "SourceMap", "absolute_mappings",
           "decode_vlq", "deserialize_mappings", "encode_vlq", "serialize_mappings"]

Segment = Union[tuple[int], tuple[int, int, int, int], tuple[int, int, int, int, int]]
Mappings = Sequence[Sequence[Segment]]

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_DIGIT = {c: i for i, c in enumerate(_ALPHABET)}
_SHIFT, _MORE, _QUANTUM = 5, 0x20, 0x1F


@dataclass(frozen=True, slots=True)
class SourceMap:
    """A version-3 source map: the source files, their contents (may be empty), symbol
    names, and the relative ``mappings``."""

    version: int
    sources: Sequence[str]
    sources_content: Sequence[str]
    names: Sequence[str]
    mappings: Mappings

    @classmethod
    def from_json(cls, json_data: str) -> SourceMap:
        """Read a map from its JSON text."""
        data = json.loads(json_data)
        return cls(version=data["version"], sources=data["sources"],
                   sources_content=data["sourcesContent"], names=data["names"],
                   mappings=deserialize_mappings(data["mappings"]))

    def to_json(self) -> str:
        """The map as JSON text (the keys in the order the format lists them)."""
        return json.dumps({"version": self.version, "sources": self.sources,
                           "sourcesContent": self.sources_content, "names": self.names,
                           "mappings": serialize_mappings(self.mappings)})


def encode_vlq(value: int) -> bytes:
    """One integer as base-64 VLQ characters."""
    bits = (-value << 1) | 1 if value < 0 else value << 1
    out = bytearray()
    while True:
        quantum, bits = bits & _QUANTUM, bits >> _SHIFT
        out.append(_ALPHABET[quantum | (_MORE if bits else 0)])
        if not bits:
            return bytes(out)


def decode_vlq(chars: Iterable[int]) -> int:
    """The next integer of an iterator over VLQ characters (``StopIteration`` at its end)."""
    it = iter(chars)
    value, shift = 0, 0
    while True:
        digit = _DIGIT[next(it)]
        value |= (digit & _QUANTUM) << shift
        shift += _SHIFT
        if not digit & _MORE:
            break
    return -(value >> 1) if value & 1 else value >> 1


def _decode_segment(text: bytes) -> Segment:
    it = iter(text)
    fields = []
    while True:
        try:
            fields.append(decode_vlq(it))
        except StopIteration:
            break
    if len(fields) not in (1, 4, 5):
        raise ValueError(f"a source map segment has 1, 4 or 5 fields; {text!r} has "
                         f"{len(fields)}")
    return tuple(fields)  # type: ignore[return-value]


def serialize_mappings(mappings: Mappings) -> str:
    """Relative mappings as the ``mappings`` string: ``,`` between segments, ``;`` between
    lines."""
    return ";".join(",".join(b"".join(map(encode_vlq, seg)).decode("ascii") for seg in group)
                    for group in mappings)


def deserialize_mappings(mappings_str: str) -> list[list[Segment]]:
    """The ``mappings`` string as relative segments, one list per generated line."""
    return [[_decode_segment(s) for s in line.split(b",")] if line else []
            for line in mappings_str.encode("ascii").split(b";")]


def absolute_mappings(mappings: Mappings) -> list[list[Segment]]:
    """Relative mappings with every field made absolute (what a reader needs to look a
    line up)."""
    last = [0, 0, 0, 0]
    out = []
    for group in mappings:
        col = 0
        line = []
        for seg in group:
            col += seg[0]
            if len(seg) == 1:
                line.append((col,))
                continue
            for i in range(1, len(seg)):
                last[i - 1] += seg[i]
            line.append((col, *last[:len(seg) - 1]))
        out.append(line)
    return out


class MappingsGenerator:
    """Builds relative mappings from absolute segments: ``new_group()`` per generated line,
    then ``new_segment(col, source_idx, source_line, source_col[, name_idx])`` per mapped
    position in it."""

    def __init__(self):
        self._groups: list[list[Segment]] = []
        self._current: list[Segment] | None = None
        self._last_col = 0
        self._last = [0, 0, 0, 0]  # source, source line, source column, name

    def new_group(self) -> None:
        """Start the next generated line."""
        self._current = []
        self._groups.append(self._current)
        self._last_col = 0

    def new_segment(self, *seg: int) -> None:
        """Map a position of the current line (absolute values)."""
        if self._current is None:
            raise RuntimeError("No current group. Forgot to call new_group()?")
        if len(seg) not in (1, 4, 5):
            raise ValueError(f"a segment has 1, 4 or 5 fields, got {seg}")
        rel = [seg[0] - self._last_col]
        self._last_col = seg[0]
        for i, v in enumerate(seg[1:]):
            rel.append(v - self._last[i])
            self._last[i] = v
        self._current.append(tuple(rel))  # type: ignore[arg-type]

    def mappings(self) -> Mappings:
        """The relative mappings built so far."""
        return self._groups
