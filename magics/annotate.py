"""``%%jit -a``: the user's source, line by line, with what each line became (like Cython's
``%%cython -a``).

For every source line: the jaxpr equations traced from it (each equation remembers the user's
line, ``eqn.source_info``), the instructions of XLA's optimised HLO attributed to it (the
lowering gives every equation's ops the line as an MLIR location, which XLA keeps as the
instructions' ``metadata``; an instruction inside a fusion is attributed by its own metadata,
so one fusion can feed several lines; one XLA added itself, with no metadata, goes to the
line of the instruction using its result), and the flops and bytes of those instructions,
*estimated* from their shapes (see ``hlo_cost``). The whole program's ``cost_analysis``
(XLA's own count) is shown beside them for reference.
"""
from __future__ import annotations

import inspect
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jaxkit

from . import hlo_cost, render

# HLO opcodes XLA may re-create without metadata, and the primitives they come from: when
# one source line alone has such an equation, the instruction goes to that line.
_OPCODE_PRIMITIVES = {"convolution": ("conv_general_dilated",), "dot": ("dot_general",),
                      "fft": ("fft",), "sort": ("sort",),
                      "reduce": ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                                 "reduce_and", "reduce_or", "argmax", "argmin")}
_INHERITED = "°"

# Top-level instructions that move no data of their own (a loop's or call's traffic is that
# of the instructions it runs, counted there).
_NO_TRAFFIC = frozenset("parameter constant tuple get-tuple-element bitcast after-all while "
                        "conditional call partition-id replica-id".split())


@dataclass
class SourceLines:
    """The source shown: ``lines`` of ``file``, the first being line ``first``."""

    file: str
    first: int
    lines: list[str]

    @classmethod
    def of_function(cls, fn: Callable) -> SourceLines:
        fn = inspect.unwrap(fn)
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise ValueError(f"no source code for {getattr(fn, '__name__', fn)!r} ({e}); "
                             "define it in a %%jit -a cell to annotate it") from None
        return cls(inspect.getsourcefile(fn) or fn.__code__.co_filename, max(first, 1),
                   [line.rstrip("\n") for line in lines])


@dataclass
class AnnotatedLine:
    """One source line (or, for code outside the shown source, one location) and what it
    became."""

    number: int | None
    text: str
    equations: list[str] = field(default_factory=list)  # "dot_general f32[4,3]"
    hlo: list[str] = field(default_factory=list)  # "dot f32[4,3] in ynn_fusion"
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes: float = 0.0

    @property
    def empty(self) -> bool:
        return not (self.equations or self.hlo)


def _count(n: float) -> str:
    """192, 12.3k, 4.19M: short, for the table."""
    if n == 0:
        return ""
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:.0f}" if n == int(n) else f"{n:.3g}"


def _grouped(items: list[str]) -> list[str]:
    """Equal entries once, with their count: ``add f32[8] ×3``."""
    return [f"{k} ×{n}" if n > 1 else k for k, n in Counter(items).items()]


@dataclass
class AnnotateReport:
    """The annotated source of one jitted call (see the module docstring). Per-line flops
    and bytes are estimates from the optimised HLO's shapes; ``cost`` is XLA's
    ``cost_analysis`` of the whole program."""

    name: str
    source: SourceLines
    lines: list[AnnotatedLine]
    other: list[AnnotatedLine]  # code outside the shown source, and HLO with no location
    cost: dict
    optimized_hlo: str
    jaxpr: object

    def line(self, number: int) -> AnnotatedLine:
        """The row of source line ``number`` (as numbered in its file or cell)."""
        return self.lines[number - self.source.first]

    def totals(self) -> tuple[float, float, float]:
        rows = self.lines + self.other
        return (sum(r.flops for r in rows), sum(r.transcendentals for r in rows),
                sum(r.bytes for r in rows))

    def _max_flops(self) -> float:
        return max((r.flops for r in self.lines + self.other), default=0.0) or 1.0

    def summary_lines(self) -> list[str]:
        flops, trans, nbytes = self.totals()
        est = f"estimated from the optimised HLO: flops {flops:g}"
        if trans:
            est += f", transcendentals {trans:g}"
        xla = ", ".join(f"{k} {self.cost[k]:g}" for k in
                        ("flops", "transcendentals", "bytes accessed") if k in self.cost)
        out = [f"annotated jit({self.name}): {len(self.jaxpr.eqns)} equations",
               f"  {est}, bytes {nbytes:g}",
               f"  XLA's cost_analysis (whole program): {xla or 'not available'}"]
        if any(_INHERITED in h for r in self.lines + self.other for h in r.hlo):
            out.append(f"  {_INHERITED} made by XLA without a source line; shown at the line "
                       "doing that operation, or using its result")
        return out

    def text(self) -> str:
        top, own = self._max_flops(), {id(r) for r in self.lines}
        width = max([4] + [len(str(r.number)) for r in self.lines])
        out = self.summary_lines() + [
            "", f"{'line':>{width}}  {'':10}  {'flops':>7}  {'bytes':>7}  source"]
        pad = " " * (width + 2 + 10 + 2 + 7 + 2 + 7)
        for r in self.lines + self.other:
            bar = ("█" * round(10 * r.flops / top) or "▏") if r.flops else ""
            number = str(r.number) if id(r) in own else ""
            out.append(f"{number:>{width}}  {bar:10}  {_count(r.flops):>7}  "
                       f"{_count(r.bytes):>7}  {r.text}".rstrip())
            if r.equations:
                out.append(f"{pad}  jaxpr: {', '.join(r.equations)}")
            if r.hlo:
                out.append(f"{pad}  hlo:   {', '.join(r.hlo)}")
        return "\n".join(out)

    def __repr__(self):
        return self.text()

    def _repr_pretty_(self, p, cycle):
        p.text(self.text())

    def _repr_html_(self):
        top, own = self._max_flops(), {id(r) for r in self.lines}
        mono = "font-family: ui-monospace, Menlo, Consolas, monospace; white-space: pre"
        rows = []
        for r in self.lines + self.other:
            pct = 100.0 * r.flops / top
            bar = (f"<div style='background:#f97316; height:10px; width:{pct:.1f}%'></div>"
                   if r.flops else "")
            number = r.number if id(r) in own else ""
            cells = [f"<td style='color:#6b7280'>{number}</td>",
                     f"<td style='width:80px'>{bar}</td>",
                     f"<td style='text-align:right'>{_count(r.flops)}</td>",
                     f"<td style='text-align:right'>{_count(r.bytes)}</td>",
                     f"<td style='{mono}'>{render.escape(r.text)}</td>",
                     f"<td style='{mono}'>{render.escape(chr(10).join(r.equations))}</td>",
                     f"<td style='{mono}'>{render.escape(chr(10).join(r.hlo))}</td>"]
            rows.append("<tr>" + "".join(cells) + "</tr>")
        header = "".join(f"<th>{h}</th>" for h in ("line", "flops (heat)", "flops", "bytes",
                                                    "source", "jaxpr equations",
                                                    "optimised HLO"))
        table = (f"<table class='jaxkit-annotate'><tr>{header}</tr>" + "".join(rows)
                 + "</table>")
        notes = "".join(f"<p>{render.escape(s.strip())}</p>" for s in self.summary_lines()[1:])
        return render.report(f"annotated jit({self.name})", [
            table, notes,
            render.details("cost analysis (XLA, whole program)", render.table(sorted(
                (k, f"{v:g}") for k, v in self.cost.items()), ("metric", "value"))),
            render.details("optimised HLO", render.pre(self.optimized_hlo))])


def _walk_eqns(jaxpr) -> list:
    """Every equation, those of sub-jaxprs (jit bodies, loop bodies, branches) included."""
    out = []
    for eqn in jaxpr.eqns:
        out.append(eqn)
        for sub in jaxkit.core.subjaxprs(eqn.params):
            out += _walk_eqns(sub)
    return out


def _eqn_text(eqn) -> str:
    return " ".join([eqn.primitive.name] + [v.aval.str_short() for v in eqn.outvars])


def _short_shape(shape: str) -> str:
    """``f32[4,3]{1,0}`` -> ``f32[4,3]`` (layouts dropped)."""
    arrays = hlo_cost.array_dims(shape)
    text = ", ".join(f"{t}[{','.join(map(str, d))}]" for t, d in arrays)
    return f"({text})" if len(arrays) > 1 else text


def annotate_report(jitted, args: Sequence, kwargs: dict, name: str,
                    source: SourceLines | None = None) -> AnnotateReport:
    """Trace, lower and compile ``jitted`` for the call and annotate ``source`` (default:
    the source of the function ``jitted`` wraps) line by line."""
    if source is None:
        wrapped = jaxkit.transforms.jit.jit_object(jitted)
        source = SourceLines.of_function(wrapped._fun if wrapped is not None else jitted)
    traced = jitted.trace(*args, **kwargs)
    # Off the persistent cache: an executable from another process may carry the lines of an
    # older version of this source in its metadata (the in-process cache keys on the lines).
    with jaxkit.config.override(jax_enable_compilation_cache=False):
        compiled = traced.lower().compile()
    hlo_text = compiled.as_text()
    cost = {k: v for k, v in compiled.cost_analysis().items() if "{" not in k}

    lines = [AnnotatedLine(source.first + i, text) for i, text in enumerate(source.lines)]
    other: dict[tuple[str, int] | None, AnnotatedLine] = {}
    own_file = os.path.abspath(source.file) if os.path.exists(source.file) else source.file

    def row(file: str | None, line: int | None) -> AnnotatedLine:
        if file is not None and line is not None:
            same = file == source.file or (os.path.exists(file) and
                                           os.path.abspath(file) == own_file)
            if same and source.first <= line < source.first + len(lines):
                return lines[line - source.first]
            key = (file, line)
            text = f"{os.path.basename(file)}:{line} (outside the source shown)"
        else:
            key, text = None, "(no source location)"
        if key not in other:
            other[key] = AnnotatedLine(line if key is not None else None, text)
        return other[key]

    eqns_by_row: dict[int, tuple[AnnotatedLine, list[str]]] = {}
    for eqn in _walk_eqns(traced.jaxpr.jaxpr):
        info = eqn.source_info
        r = row(info.file if info else None, info.line if info else None)
        eqns_by_row.setdefault(id(r), (r, []))[1].append(_eqn_text(eqn))
    for r, texts in eqns_by_row.values():
        r.equations = _grouped(texts)

    prim_lines: dict[str, set[tuple[str, int]]] = {}
    for eqn in _walk_eqns(traced.jaxpr.jaxpr):
        if eqn.source_info is not None:
            prim_lines.setdefault(eqn.primitive.name, set()).add(
                (eqn.source_info.file, eqn.source_info.line))

    def same_operation(inst: hlo_cost.Instruction) -> tuple[str, int] | None:
        found = set().union(*(prim_lines.get(p, set())
                              for p in _OPCODE_PRIMITIVES.get(inst.opcode, ())))
        return found.pop() if len(found) == 1 else None

    module = hlo_cost.parse_hlo(hlo_text)
    hlo_cost.inherit_locations(module, same_operation)
    shapes = module.shapes()
    hlo_by_row: dict[int, tuple[AnnotatedLine, list[str]]] = {}
    fusion_rows: dict[str, set[int]] = {}
    for inst, fusion in hlo_cost.executed_instructions(module):
        flops, trans = hlo_cost.estimate_cost(inst, shapes)
        nbytes = (hlo_cost.instruction_bytes(inst, shapes)
                  if fusion is None and inst.opcode not in _NO_TRAFFIC else 0.0)
        located = inst.line is not None
        if not located and not (flops or trans or nbytes):
            continue  # parameters, constants: nothing to show
        r = row(inst.file, inst.line)
        r.flops += flops
        r.transcendentals += trans
        r.bytes += nbytes
        if inst.opcode == "fusion":
            continue  # listed through its fused instructions (below, if none is here)
        where = f" in {fusion.name}" if fusion is not None else ""
        mark = _INHERITED if inst.inherited else ""
        hlo_by_row.setdefault(id(r), (r, []))[1].append(
            f"{inst.opcode}{mark} {_short_shape(inst.shape)}{where}")
        if fusion is not None:
            fusion_rows.setdefault(fusion.name, set()).add(id(r))
    for inst, fusion in hlo_cost.executed_instructions(module):
        if inst.opcode == "fusion" and fusion is None and inst.line is not None:
            r = row(inst.file, inst.line)
            if id(r) not in fusion_rows.get(inst.name, ()):
                hlo_by_row.setdefault(id(r), (r, []))[1].append(
                    f"fusion {inst.name} {_short_shape(inst.shape)}")
    for r, texts in hlo_by_row.values():
        r.hlo = _grouped(texts)
    extra = [r for k, r in other.items() if k is not None] + (
        [other[None]] if None in other else [])
    return AnnotateReport(name, source, lines, extra, cost, hlo_text, traced.jaxpr.jaxpr)
