"""The ``jaxpr`` pass: the program as ``make_jaxpr`` prints it, each equation mapped to the
user line (and column) that produced it.

The printer does not report where it put each equation, so the map finds them in the text:
equations are visited in the order they print (shared nested jaxprs first, as ``let name =
... in``, then the program; a nested jaxpr right after its equation) and each is searched
from where the previous one was found, by its binders' types and primitive (``x:f32[3] =
sin``), which no earlier text can match. Equations printed in a syntax of their own (the
ref primitives' ``a[...] <- b``) or with no results are not mapped.
"""
from __future__ import annotations

import re
from typing import Any

from jaxkit import _pretty as pp
from jaxkit import core
from jaxkit.api import make_jaxpr
from jaxkit.experimental.source_mapper import common, sourcemap

__all__ = ["canonicalize_filename", "compile_jaxpr", "make_jaxpr_dump"]

# JAX's ``jax_hlo_source_file_canonicalization_regex`` (a pattern removed from file names);
# jaxkit has no such option, so names stay as they are, JAX's default.
_CANONICALIZATION_REGEX: str | None = None


def compile_jaxpr(work_dir, f, f_args, f_kwargs, **_) -> core.ClosedJaxpr:
    """The pass's compile step: ``make_jaxpr(f)(*f_args, **f_kwargs)``."""
    del work_dir
    return make_jaxpr(f)(*f_args, **f_kwargs)


def canonicalize_filename(file_name: str) -> str:
    """``file_name`` with the canonicalization pattern removed (none by default)."""
    if _CANONICALIZATION_REGEX:
        return re.sub(_CANONICALIZATION_REGEX, "", file_name)
    return file_name


def _eqn_pattern(eqn: core.JaxprEqn) -> re.Pattern | None:
    if not eqn.outvars or eqn.primitive in core.pp_eqn_rules:
        return None
    binders = r"\s+".join(r"[A-Za-z_]\w*:" + re.escape(v.aval.str_short())
                          for v in eqn.outvars)
    return re.compile(binders + r" = " + re.escape(eqn.primitive.name) + r"(?![\w-])")


_IN = re.compile(r"\bin \(")


class _Spans:
    """Finds where each equation prints: ``(start, end, source_info)`` offsets into the
    text, an equation's span holding those of the jaxprs in its parameters."""

    def __init__(self, text: str, jaxpr: core.Jaxpr):
        self.text = text
        self.spans: list[tuple[int, int, Any]] = []
        self.shared = pp.shared_names(jaxpr, lambda j: [(e.params.get("name"),
                                                         list(core.subjaxprs(e.params)))
                                                        for e in j.eqns])
        pos = 0
        for sub in self.shared:  # printed first, as ``let name = { ... } in``
            pos = self._jaxpr(sub, pos)
        self._jaxpr(jaxpr, pos)

    def _back_over_separators(self, pos: int) -> int:
        while pos > 0 and self.text[pos - 1] in " \n;":
            pos -= 1
        return pos

    def _jaxpr(self, jaxpr: core.Jaxpr, pos: int) -> int:
        """Record the spans of ``jaxpr``'s equations, searching from ``pos``; return where
        its ``in (...)`` starts."""
        open_eqn = None  # (start, source_info) of the equation whose end is not known yet
        for eqn in jaxpr.eqns:
            pattern = _eqn_pattern(eqn)
            m = pattern.search(self.text, pos) if pattern is not None else None
            if m is None:
                continue
            if open_eqn is not None:
                self.spans.append((open_eqn[0], self._back_over_separators(m.start()),
                                   open_eqn[1]))
            open_eqn = (m.start(), eqn.source_info)
            pos = m.end()
            for sub in core.subjaxprs(eqn.params):
                if sub not in self.shared:
                    pos = self._jaxpr(sub, pos)
        m = _IN.search(self.text, pos)
        end = m.start() if m is not None else len(self.text)
        if open_eqn is not None:
            self.spans.append((open_eqn[0], self._back_over_separators(end), open_eqn[1]))
        return end + 3 if m is not None else end


def _segments_per_line(text: str, spans: list[tuple[int, int, Any]]) -> list[list]:
    """Per line of ``text``, ``(column, source_info)`` where the innermost enclosing
    equation changes: at the line's first printed column when inside one, where an
    equation starts, and where one ends inside another (the outer one resumes)."""
    spans = sorted(spans, key=lambda s: (s[0], -s[1]))
    out = []
    offset = 0
    for line in text.split("\n"):
        line_end = offset + len(line)
        first = offset + len(line) - len(line.lstrip())
        points = {first} | {s for s, _, _ in spans if first <= s < line_end}
        points |= {e for _, e, _ in spans if first <= e < line_end}
        segs = []
        for p in sorted(points):
            inner = None
            for span in spans:  # the last span holding p is the innermost
                if span[0] <= p < span[1]:
                    inner = span
            if inner is not None and (not segs or segs[-1][1] is not inner):
                segs.append((p - offset, inner))
        out.append([(col, span[2]) for col, span in segs])
        offset = line_end + 1
    return out


def make_jaxpr_dump(jaxpr: core.ClosedJaxpr | core.Jaxpr, **_) -> common.SourceMapDump:
    """The printed jaxpr and its source map: segments where each equation's text starts
    (and resumes after a nested equation, and on each line it continues on), pointing at
    its file, line and column (the start of the expression that made it)."""
    inner = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
    text = str(jaxpr)
    sources: list[str] = []
    gen = sourcemap.MappingsGenerator()
    for segments in _segments_per_line(text, _Spans(text, inner).spans):
        gen.new_group()
        for col, info in segments:
            if info is None or not info.file:
                continue
            name = canonicalize_filename(info.file)
            if name not in sources:
                sources.append(name)
            gen.new_segment(col, sources.index(name), info.line - 1, max(info.column, 0))
    gen.new_group()
    source_map = sourcemap.SourceMap(version=3, sources=sources, sources_content=[],
                                     mappings=gen.mappings(), names=[])
    return common.SourceMapDump(source_map=source_map, generated_code=text, pass_name="jaxpr")


common.register_pass(common.Pass(name="jaxpr", compile_fn=compile_jaxpr,
                                 generate_dump=make_jaxpr_dump))
