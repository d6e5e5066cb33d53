"""The ``sharding`` panel of ``%%jit``: how a partitioned call lays its values out on the mesh,
and which collectives XLA's SPMD partitioner inserted to make the program work.

Layouts come from the arrays themselves (``x.sharding``, public), drawn as the blocks that
``jaxkit.debug.visualize_array_sharding`` draws (the same ``devices_indices_map`` blocks,
labelled with the ids of the devices holding them), here as an HTML grid; collectives are read
from the optimised HLO text of the compiled executable (what XLA will actually run, after
partitioning). The panel exists only when the call is sharded: some input or output is spread
over more than one device.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jaxkit
from jaxkit import tree_util

from . import render

# XLA's names for the instructions that move data between devices (their asynchronous forms
# end in ``-start``; the matching ``-done`` only waits, so it is not counted again).
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute",
               "all-to-all")

_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.+?)\s+"
    r"(?P<op>" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_GROUPS = re.compile(r"(replica_groups=(?:mesh\[[^\]]*\]\s*\{[^}]*\}|\[[^\]]*\]<=\[[^\]]*\]"
                     r"(?:T\([^)]*\))?|\{(?:\{[^}]*\},?)*\})|source_target_pairs=\{[^=]*?\}\})")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_DIMS = re.compile(r"dimensions=\{([^}]*)\}")

# Device colours: one per block, in order, so the picture is the same on every run.
_PALETTE = ("#bfdbfe", "#bbf7d0", "#fde68a", "#fecaca", "#ddd6fe", "#fbcfe8", "#a5f3fc",
            "#fed7aa", "#d9f99d", "#e9d5ff", "#99f6e4", "#fecdd3", "#c7d2fe", "#fef08a",
            "#bae6fd", "#e5e7eb")


@dataclass(frozen=True)
class Collective:
    """One collective instruction of the optimised HLO."""

    kind: str        # all-reduce, all-gather, reduce-scatter, collective-permute, all-to-all
    name: str        # the instruction's name (%all-reduce.1)
    shape: str       # its result type as XLA prints it (f32[2,6]{1,0})
    groups: str      # replica_groups=... / source_target_pairs=... (the devices that talk)
    source: str      # the jaxkit operation it came from (op_name metadata), "" if unknown


def collectives_from_hlo(hlo_text: str) -> list[Collective]:
    """The collectives in optimised HLO text, in program order (fused computations are part of
    the text, so collectives inside them are found too)."""
    found = []
    for line in hlo_text.splitlines():
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        groups = _GROUPS.search(line)
        op_name = _OP_NAME.search(line)
        dims = _DIMS.search(line)
        where = groups.group(1) if groups else ""
        if dims and m.group("op") != "all-reduce":
            where = f"{where}, dimensions={{{dims.group(1)}}}" if where else \
                f"dimensions={{{dims.group(1)}}}"
        found.append(Collective(m.group("op"), m.group("name"), m.group("shape"), where,
                                op_name.group(1) if op_name else ""))
    return found


@dataclass(frozen=True)
class Placement:
    """One input or output leaf: its type and how it is spread over devices."""

    role: str                   # "in" or "out"
    label: str                  # x, params['w'], [0] ...
    type: str                   # f32[8,4]
    spec: str                   # P('x', 'y'), or the device for an unsplit array
    mesh: str                   # the mesh, as printed, or "" for a one-device array
    devices: int                # how many devices hold part of it
    blocks: tuple = ()          # ((row, col, ids), ...) for rank 1 and 2
    rows: int = 0
    cols: int = 0


def _blocks(arr) -> tuple[tuple, int, int]:
    """Per block of a rank-1 or rank-2 array: (row, column, device ids holding it), from the
    sharding's public ``devices_indices_map`` (a rank-1 array is one row)."""
    shape = tuple(arr.shape)
    indices = arr.sharding.devices_indices_map(shape)
    cells: dict[tuple, list[int]] = {}
    for device, index in indices.items():
        starts = [s.start or 0 for s in index]
        key = (0, starts[0]) if len(shape) == 1 else (starts[0], starts[1])
        cells.setdefault(key, []).append(device.id)
    rows = sorted({r for r, _ in cells})
    cols = sorted({c for _, c in cells})
    blocks = tuple((rows.index(r), cols.index(c), tuple(sorted(ids)))
                   for (r, c), ids in sorted(cells.items()))
    return blocks, len(rows), len(cols)


def _placement(role: str, label: str, leaf) -> Placement:
    if not isinstance(leaf, jaxkit.Array):
        kind = type(leaf).__name__
        return Placement(role, label, kind, "host value", "", 0)
    sharding = leaf.sharding
    spread = len(sharding.device_set)
    if not isinstance(sharding, jaxkit.sharding.NamedSharding):  # one device, or pmap's
        where = str(next(iter(sharding.device_set))) if spread == 1 else repr(sharding)
        return Placement(role, label, leaf.aval.str_short(), where, "", spread)
    blocks, rows, cols = _blocks(leaf) if leaf.ndim in (1, 2) else ((), 0, 0)
    return Placement(role, label, leaf.aval.str_short(), str(sharding.spec),
                     str(sharding.mesh), spread, blocks, rows, cols)


@dataclass
class ShardingPanel:
    """Layouts of a call's inputs and outputs and the collectives of its program."""

    placements: list[Placement]
    collectives: list[Collective] = field(default_factory=list)

    @property
    def meshes(self) -> list[str]:
        return list(dict.fromkeys(p.mesh for p in self.placements if p.mesh))

    def collective_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self.collectives:
            counts[c.kind] = counts.get(c.kind, 0) + 1
        return counts

    def summary_lines(self) -> list[str]:
        """Stable text for ``_repr_pretty_``: one line per value, then the collectives."""
        lines = ["  sharding on " + "; ".join(self.meshes) if self.meshes else "  sharding"]
        width = max(len(p.label) for p in self.placements)
        type_width = max(len(p.type) for p in self.placements)
        for p in self.placements:
            lines.append(f"    {p.role:<3} {p.label:<{width}}  {p.type:<{type_width}}  "
                         f"{p.spec}")
        counts = self.collective_counts()
        lines.append("  collectives: " + (", ".join(f"{k} x{n}" for k, n in counts.items())
                                          if counts else "none"))
        return lines

    def _grid_html(self, p: Placement) -> str:
        if not p.blocks:
            return "<i>drawn for rank 1 and 2 only</i>" if p.mesh else ""
        colour = {}
        for _, _, ids in p.blocks:
            colour.setdefault(ids, _PALETTE[len(colour) % len(_PALETTE)])
        grid = [[""] * p.cols for _ in range(p.rows)]
        for r, c, ids in p.blocks:
            grid[r][c] = (f"<td style='background:{colour[ids]}; text-align:center; "
                          f"min-width:3.5em; padding:6px'>"
                          f"{render.escape(','.join(map(str, ids)))}</td>")
        body = "".join("<tr>" + "".join(row) + "</tr>" for row in grid)
        return (f"<table class='jaxkit-sharding-grid' title='device ids holding each block'>"
                f"{body}</table>")

    def html(self) -> str:
        rows = "".join(
            f"<tr><td>{p.role}</td><td>{render.escape(p.label)}</td>"
            f"<td>{render.escape(p.type)}</td><td>{render.escape(p.spec)}</td>"
            f"<td>{self._grid_html(p)}</td></tr>" for p in self.placements)
        layouts = ("<table><tr><th></th><th>leaf</th><th>type</th><th>spec</th>"
                   f"<th>devices holding each block</th></tr>{rows}</table>")
        meshes = "".join(f"<p>mesh: <code>{render.escape(m)}</code></p>" for m in self.meshes)
        if self.collectives:
            counts = ", ".join(f"{k} &times;{n}" for k, n in self.collective_counts().items())
            coll = (f"<p>collectives XLA inserted: {counts}</p>" + render.table(
                [(c.kind, c.name, c.shape, c.groups, c.source) for c in self.collectives],
                ("collective", "instruction", "result", "devices", "from")))
        else:
            coll = "<p>collectives XLA inserted: none (every device works on its own block)</p>"
        return render.details("sharding", meshes + layouts + coll, open_=True)


def sharding_panel(inputs: Sequence[Any], outputs: Any, hlo_text: str,
                   labels: Sequence[str] | None = None) -> ShardingPanel | None:
    """The panel for a call of ``inputs`` (positional arguments) giving ``outputs``, compiled to
    ``hlo_text`` (optimised HLO); None when nothing is spread over more than one device."""
    in_leaves = tree_util.tree_flatten_with_path(list(inputs))[0]
    names = list(labels) if labels is not None and len(labels) == len(in_leaves) else \
        [tree_util.keystr(path) for path, _ in in_leaves]
    placements = [_placement("in", n, leaf) for n, (_, leaf) in zip(names, in_leaves)]
    placements += [_placement("out", tree_util.keystr(path) or "(value)", leaf)
                   for path, leaf in tree_util.tree_flatten_with_path(outputs)[0]]
    if not any(p.devices > 1 and p.mesh for p in placements):
        return None
    return ShardingPanel(placements, collectives_from_hlo(hlo_text))
