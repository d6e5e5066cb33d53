"""Source maps of MLIR text printed with its locations (``lowered.as_text(debug_info=True)``).

An op line ends with ``loc(#locN)``; the ``#locN = loc(...)`` definitions at the end of the
module are file positions (``"file":line:col``, optionally `` to :endcol``), named
locations (``"name"(#locM)``: jaxkit writes ``op_name`` around the function name around the
file position) and call sites (``callsite(#callee at #caller)``: the callee is the innermost
frame). Names and call sites resolve to the file position they point at.
"""
from __future__ import annotations

import collections
import re

from jaxkit.experimental.source_mapper import sourcemap

__all__ = ["Location", "Redirect", "create_mlir_sourcemap", "parse_mlir_locations"]

Location = collections.namedtuple("Location", ["file", "line", "col"])
Redirect = collections.namedtuple("Redirect", ["tgt_id"])

_USE = re.compile(r"loc\(#loc(?P<id>\d+)\)")
_FILE = re.compile(r'#loc(?P<id>\d+) = loc\("(?P<file>.*)":(?P<line>\d+):(?P<col>\d+)'
                   r"( to (?P<end_line>\d+)?:(?P<end_col>\d+))?\)")
_NAMED = re.compile(r'#loc(?P<id>\d+) = loc\("(?P<name>.*)"\(#loc(?P<tgt>\d+)\)\)')
_CALLSITE = re.compile(r"#loc(?P<id>\d+) = loc\(callsite\(#loc(?P<callee>\d+) at"
                       r" #loc(?P<caller>\d+)\)\)")


def parse_mlir_locations(mlir_dump: list[str]) -> tuple[dict[int, sourcemap.Segment],
                                                        list[str]]:
    """The location definitions of ``mlir_dump`` (its lines): ``#locN`` id -> segment
    ``(0, source_idx, line - 1, col)`` for every id that resolves to a file position, and
    the source files in order of first definition. Unknown locations are left out."""
    locations: dict[int, Location | Redirect] = {}
    files: list[str] = []
    for line in mlir_dump:
        if not line.startswith("#loc"):
            continue
        if m := _FILE.match(line):
            locations[int(m["id"])] = Location(m["file"], int(m["line"]), int(m["col"]))
            if m["file"] not in files:
                files.append(m["file"])
        elif m := _NAMED.match(line):
            locations[int(m["id"])] = Redirect(int(m["tgt"]))
        elif m := _CALLSITE.match(line):
            locations[int(m["id"])] = Redirect(int(m["callee"]))
    segments: dict[int, sourcemap.Segment] = {}
    for loc_id in locations:
        target, seen = locations[loc_id], {loc_id}
        while isinstance(target, Redirect):  # names wrap names wrap call sites ...
            if target.tgt_id in seen or target.tgt_id not in locations:
                target = None  # points at an unknown location (or, malformed, at itself)
                break
            seen.add(target.tgt_id)
            target = locations[target.tgt_id]
        if target is not None:
            segments[loc_id] = (0, files.index(target.file), target.line - 1, target.col)
    return segments, files


def create_mlir_sourcemap(mlir_dump: str) -> sourcemap.SourceMap:
    """A source map of MLIR text: each line that uses a location resolving to a file maps
    its first non-blank column there. Only the sources some line uses are listed."""
    lines = mlir_dump.split("\n")
    segments, files = parse_mlir_locations(lines)
    gen = sourcemap.MappingsGenerator()
    used: list[int] = []
    for line in lines:
        gen.new_group()
        m = _USE.search(line)
        if m is None or int(m["id"]) not in segments:
            continue
        _, src, src_line, src_col = segments[int(m["id"])]
        if src not in used:
            used.append(src)
        gen.new_segment(len(line) - len(line.lstrip()), used.index(src), src_line, src_col)
    gen.new_group()
    sources = [files[i] for i in used]
    return sourcemap.SourceMap(version=3, sources=sources, sources_content=[""] * len(sources),
                               mappings=gen.mappings(), names=[])
