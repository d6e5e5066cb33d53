"""Reading XLA's optimised HLO text: its instructions, where each came from, and what each costs.

``parse_hlo(text)`` returns the module's computations, each a list of ``Instruction`` (name,
opcode, result shape, operand names, the computations it calls, and its source location from
the ``metadata``: either ``source_file``/``source_line`` or, in newer XLA, a ``stack_frame_id``
into the module's ``FileLocations``/``StackFrames`` tables).

``inherit_locations(module)`` gives the instructions XLA adds (with no metadata) the location
of their user. ``executed_instructions(module)`` walks what runs: the entry computation, the
bodies of fusions, loops, conditionals and calls (each once, whatever the trip count), but not
the ``to_apply`` regions of reductions, whose cost is counted on the reduction.

``estimate_cost(inst, shapes)`` is an estimate, by shapes, in the spirit of XLA's
``HloCostAnalysis``: a dot costs ``2 * output elements * contracted size`` flops, a
convolution ``2 * output elements * kernel elements / output features``, a reduction one flop
per element it folds in (``input - output`` elements; a window of ``n`` costs ``n - 1`` per
output), an elementwise op one flop per output element (a transcendental one, such as
``exponential``, counts as a transcendental instead); data movement (broadcast, reshape,
slice, copy, ...) costs no flops. Bytes are the result's bytes plus the operands'.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

_ELEMENT_BYTES = {"pred": 1, "s2": 0.25, "u2": 0.25, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1,
                  "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
                  "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128|f8\w*|f4\w*)\[([\d,]*)\]")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][\w\-]*)\((.*)$")
_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")

# Opcodes that move or relabel data (no arithmetic), as HloCostAnalysis counts them.
_NO_FLOPS = frozenset("""
parameter constant broadcast reshape bitcast transpose copy copy-start copy-done slice
dynamic-slice dynamic-update-slice concatenate pad tuple get-tuple-element iota reverse gather
scatter bitcast-convert convert after-all partition-id replica-id custom-call infeed outfeed
send send-done recv recv-done all-reduce all-gather all-to-all collective-permute
reduce-scatter rng rng-bit-generator rng-get-and-update-state sort while conditional call
fusion optimization-barrier domain add-dependency get-dimension-size set-dimension-size
""".split())
_TRANSCENDENTAL = frozenset("""
exponential exponential-minus-one log log-plus-one logistic power sqrt rsqrt cbrt tanh sine
cosine tan atan2 erf
""".split())
# Attributes naming computations that run as part of the instruction (walked), and those
# applied per element by it (their cost is the instruction's own).
_CALLS = re.compile(r"\b(calls|body|condition|branch_computations|true_computation|"
                    r"false_computation)=(\{[^}]*\}|%?[\w.\-]+)")
_METADATA = re.compile(r"metadata=\{([^}]*)\}")


@dataclass
class Instruction:
    name: str
    opcode: str
    shape: str  # the result's shape text, e.g. ``f32[4,3]{1,0}``
    operands: list[str]
    attrs: str  # the text after the operands (dimension numbers, metadata, ...)
    calls: list[str] = field(default_factory=list)
    op_name: str | None = None
    file: str | None = None
    line: int | None = None
    inherited: bool = False  # no metadata of its own: located by ``inherit_locations``


@dataclass
class HloModule:
    computations: dict[str, list[Instruction]]
    entry: str

    def shapes(self) -> dict[str, str]:
        """Every instruction's result shape by name (names are unique in a module)."""
        return {i.name: i.shape for insts in self.computations.values() for i in insts}


def array_dims(shape: str) -> list[tuple[str, tuple[int, ...]]]:
    """The arrays in a shape text (one, or several for a tuple): (element type, dims)."""
    return [(m.group(1), tuple(int(d) for d in m.group(2).split(",") if d))
            for m in _ARRAY.finditer(shape)]


def shape_bytes(shape: str) -> float:
    total = 0.0
    for dtype, dims in array_dims(shape):
        size = _ELEMENT_BYTES.get(dtype, 1 if dtype.startswith(("f8", "f4")) else 4)
        total += size * math.prod(dims)
    return total


def shape_elements(shape: str) -> int:
    return sum(math.prod(dims) for _, dims in array_dims(shape))


def _split_operands(rest: str) -> tuple[list[str], str]:
    """``a, b), attrs`` -> (operand names, attrs): the operand list ends at the matching
    parenthesis."""
    depth = 1
    for i, c in enumerate(rest):
        depth += (c == "(") - (c == ")")
        if depth == 0:
            names = re.findall(r"%([\w.\-]+)", rest[:i])
            if not names:  # an older format: operands written with their shapes, no %
                names = [t.split()[-1] for t in rest[:i].split(",") if t.strip()]
            return names, rest[i + 1:]
    return [], rest


def _stack_frames(text: str) -> dict[int, tuple[str, int]]:
    """stack_frame_id -> (file, line), from the tables newer XLA prints above the module."""
    tables: dict[str, dict[int, str]] = {}
    current = None
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
        elif current is not None and (m := re.match(r"^(\d+) (.*)$", line)):
            current[int(m.group(1))] = m.group(2)
        elif line.startswith(("HloModule", "%", "ENTRY")):
            current = None
    files = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    locations = {}
    for k, v in tables.get("FileLocations", {}).items():
        f = re.search(r"file_name_id=(\d+)", v)
        n = re.search(r"\bline=(\d+)", v)
        if f and n:
            locations[k] = (files.get(int(f.group(1)), "?"), int(n.group(1)))
    frames = {}
    for k, v in tables.get("StackFrames", {}).items():
        loc = re.search(r"file_location_id=(\d+)", v)
        if loc and int(loc.group(1)) in locations:
            frames[k] = locations[int(loc.group(1))]
    return frames


def parse_hlo(text: str) -> HloModule:
    """The computations and instructions of an HLO module's text (``compiled.as_text()``)."""
    frames = _stack_frames(text)
    computations: dict[str, list[Instruction]] = {}
    entry = None
    current: list[Instruction] | None = None
    for line in text.splitlines():
        if current is None:
            m = _COMPUTATION.match(line)
            if m and not line.startswith("HloModule"):
                current = computations.setdefault(m.group(2), [])
                if m.group(1):
                    entry = m.group(2)
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        operands, attrs = _split_operands(m.group(4))
        inst = Instruction(m.group(1), m.group(3), m.group(2), operands, attrs)
        for _, names in _CALLS.findall(attrs):
            inst.calls += [n.strip().lstrip("%") for n in names.strip("{}").split(",")
                           if n.strip()]
        meta = _METADATA.search(attrs)
        if meta:
            body = meta.group(1)
            if (op := re.search(r'op_name="([^"]*)"', body)):
                inst.op_name = op.group(1)
            if (f := re.search(r'source_file="([^"]*)"', body)):
                inst.file = f.group(1)
            if (n := re.search(r"source_line=(\d+)", body)):
                inst.line = int(n.group(1))
            if (sf := re.search(r"stack_frame_id=(\d+)", body)) and int(sf.group(1)) in frames:
                inst.file, inst.line = frames[int(sf.group(1))]
        current.append(inst)
    if entry is None and computations:
        entry = list(computations)[-1]
    return HloModule(computations, entry or "")


# Instructions that never take a location from their neighbours: they are shown only where
# their own metadata puts them (they cost nothing).
_NO_INHERIT = frozenset("parameter constant tuple get-tuple-element bitcast".split())


def inherit_locations(module: HloModule,
                      hint: Callable[[Instruction], tuple[str, int] | None] | None = None
                      ) -> None:
    """Give the instructions XLA made itself (a convolution rewritten for a layout, a
    reduction split in two), which carry no metadata, a location: ``hint(inst)``'s (the
    caller may know the one line doing that operation), else that of the first instruction
    using their result, else that of the fusion they are inside. They are marked
    ``inherited``."""
    done: set[str] = set()

    def resolve(name: str, outer: Instruction | None):
        if name in done:
            return
        done.add(name)
        insts = module.computations.get(name, [])
        users: dict[str, list[Instruction]] = {}
        for inst in insts:
            for operand in inst.operands:
                users.setdefault(operand, []).append(inst)
        for inst in reversed(insts):  # users come after what they use
            if inst.line is None and inst.opcode not in _NO_INHERIT:
                src = next((u for u in users.get(inst.name, ()) if u.line is not None), outer)
                known = hint(inst) if hint is not None else None
                if known is None and src is not None and src.line is not None:
                    known = (src.file, src.line)
                if known is not None:
                    inst.file, inst.line = known
                    inst.inherited = True
        for inst in insts:
            for callee in inst.calls:
                resolve(callee, inst if inst.opcode == "fusion" else None)

    resolve(module.entry, None)


def executed_instructions(module: HloModule) -> list[tuple[Instruction, Instruction | None]]:
    """(instruction, the top-level fusion it is inside, or None) for everything that runs:
    the entry computation and, recursively, what its fusions, loops, conditionals and calls
    run (once each)."""
    out: list[tuple[Instruction, Instruction | None]] = []

    def walk(name: str, fusion: Instruction | None, seen: frozenset):
        for inst in module.computations.get(name, []):
            out.append((inst, fusion))
            for callee in inst.calls:
                if callee not in seen:
                    walk(callee, fusion or (inst if inst.opcode == "fusion" else None),
                         seen | {callee})

    walk(module.entry, None, frozenset({module.entry}))
    return out


def _dims_attr(attrs: str, key: str) -> list[int]:
    m = re.search(key + r"=\{([\d,]*)\}", attrs)
    return [int(d) for d in m.group(1).split(",") if d] if m else []


def estimate_cost(inst: Instruction, shapes: dict[str, str]) -> tuple[float, float]:
    """(flops, transcendentals) of one instruction, estimated from shapes (see the module
    docstring)."""
    op = inst.opcode
    out = shape_elements(inst.shape)
    if op == "dot":
        lhs = array_dims(shapes.get(inst.operands[0], "")) if inst.operands else []
        contracted = math.prod(lhs[0][1][d] for d in _dims_attr(inst.attrs, "lhs_contracting_dims")
                               if lhs and d < len(lhs[0][1])) if lhs else 1
        return 2.0 * out * contracted, 0.0
    if op == "convolution":
        kernel = array_dims(shapes.get(inst.operands[1], "")) if len(inst.operands) > 1 else []
        labels = re.search(r"dim_labels=\w+_(\w+)->", inst.attrs)
        if kernel and labels and "o" in labels.group(1):
            dims = kernel[0][1]
            out_features = dims[labels.group(1).index("o")]
            return 2.0 * out * math.prod(dims) / max(out_features, 1), 0.0
        return 2.0 * out, 0.0
    if op in ("reduce", "reduce-window", "select-and-scatter"):
        reduced = inst.operands[:len(inst.operands) // 2]  # the inputs; then the inits
        ins = sum(shape_elements(shapes.get(o, "")) for o in reduced)
        if op == "reduce-window":
            window = re.search(r"size=([\dx]+)", inst.attrs)
            size = math.prod(int(s) for s in window.group(1).split("x")) if window else 1
            return float(out * (size - 1)), 0.0
        return float(max(ins - out, 0)), 0.0
    if op in _NO_FLOPS:
        return 0.0, 0.0
    if op in _TRANSCENDENTAL:
        return 0.0, float(out)
    return float(out), 0.0


def instruction_bytes(inst: Instruction, shapes: dict[str, str]) -> float:
    """The result's bytes plus the operands' (what a top-level instruction reads and writes;
    a fusion's are those of its boundary, not of the instructions inside)."""
    return shape_bytes(inst.shape) + sum(shape_bytes(shapes.get(o, "")) for o in inst.operands)
