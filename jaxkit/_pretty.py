"""A small document pretty-printer (Wadler/Lindig style), laid out as JAX 0.10.2 lays out jaxprs.

A document is built from ``text`` (optionally annotated: the annotation prints at the end of
its line, as a comment), ``brk`` (a space, or a newline plus indentation when its group is
broken), ``nest`` (more indentation for the breaks inside), ``group``, ``concat`` and
``color`` (ANSI colours, printed only when asked: ``format(..., use_color=True)``). A group
prints flat when its own flat width fits in what is left of the line
(JAX measures the group alone, not the text after it, unlike Lindig's paper), else its
breaks become newlines; groups inside a broken group decide again for themselves. So a list
of variables whose separators are each their own group fills lines (``pp_vars`` in JAX).
Also how a jaxpr literal prints (``pp_literal``) and which nested jaxprs print once, named
(``shared_names``).
"""
from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

# Document nodes are tuples, cheap to build: ("text", s) or ("text", s, annotation),
# ("brk", s), ("nest", n, doc), ("group", doc), ("concat", docs), ("color", style, doc).
Doc = tuple

# ANSI SGR codes, as JAX's printer numbers them.
BLUE, MAGENTA, RESET = 34, 35, 39
NORMAL, DIM, BRIGHT = 22, 2, 1
_DEFAULT_STYLE = (RESET, NORMAL)
_ANNOTATION_STYLE = (RESET, DIM)


def text(s: str, annotation: str | None = None) -> Doc:
    return ("text", s) if annotation is None else ("text", s, annotation)


def color(doc: Doc, foreground: int | None = None, intensity: int | None = None) -> Doc:
    return ("color", (foreground, intensity), doc)


def keyword(doc: Doc) -> Doc:
    """JAX's colour for ``lambda``, ``let`` and ``in``."""
    return color(doc, BLUE, BRIGHT)


def type_annotation(doc: Doc) -> Doc:
    """JAX's colour for a binder's type (``:f32[]``)."""
    return color(doc, MAGENTA, NORMAL)


def brk(s: str = " ") -> Doc:
    return ("brk", s)


def nest(n: int, doc: Doc) -> Doc:
    return ("nest", n, doc)


def group(doc: Doc) -> Doc:
    return ("group", doc)


def concat(docs: Sequence[Doc]) -> Doc:
    return ("concat", tuple(docs))


def join(sep: Doc, docs: Sequence[Doc]) -> Doc:
    out: list[Doc] = []
    for i, d in enumerate(docs):
        if i:
            out.append(sep)
        out.append(d)
    return concat(out)


_FLAT, _BREAK = 0, 1


def _fits(doc: Doc, width: int) -> bool:
    """Whether ``doc`` printed flat takes at most ``width`` columns."""
    agenda = [doc]
    while width >= 0 and agenda:
        d = agenda.pop()
        kind = d[0]
        if kind == "text" or kind == "brk":
            width -= len(d[1])
        elif kind == "concat":
            agenda.extend(reversed(d[1]))
        elif kind == "nest" or kind == "color":
            agenda.append(d[2])
        else:  # group
            agenda.append(d[1])
    return width >= 0


def format(doc: Doc, width: int = 80, *, use_color: bool = False,  # noqa: A001 (JAX's name)
           annotation_prefix: str = " # ") -> str:
    """Lay ``doc`` out in ``width`` columns. Annotations print after the widest line, one per
    line (a line with several continues on lines of their own), as JAX's printer does; with
    ``use_color``, colours are ANSI escapes that change only where the style changes."""
    lines: list[tuple[str, int, list[str]]] = []  # (text, width, annotations)
    out: list[str] = []
    notes: list[str] = []
    col = 0
    style = [_DEFAULT_STYLE]  # the style printed so far (only tracked with use_color)

    def restyle(want):
        if use_color and want != style[0]:
            codes = [str(new) for old, new in zip(style[0], want) if old != new]
            out.append(f"\x1b[{';'.join(codes)}m")
            style[0] = want

    def end_line():
        if notes:
            restyle(_DEFAULT_STYLE)
        lines.append(("".join(out), col, list(notes)))

    agenda: list[tuple[int, int, tuple, Doc]] = [(0, _BREAK, _DEFAULT_STYLE, doc)]
    while agenda:
        indent, mode, sty, d = agenda.pop()
        kind = d[0]
        if kind == "text":
            restyle(sty)
            out.append(d[1])
            col += len(d[1])
            if len(d) == 3:
                notes.append(d[2])
        elif kind == "concat":
            agenda.extend((indent, mode, sty, c) for c in reversed(d[1]))
        elif kind == "brk":
            if mode == _BREAK:
                end_line()
                out, notes, col = [" " * indent], [], indent
            else:
                restyle(sty)
                out.append(d[1])
                col += len(d[1])
        elif kind == "nest":
            agenda.append((indent + d[1], mode, sty, d[2]))
        elif kind == "color":
            fg, intensity = d[1]
            agenda.append((indent, mode, (fg if fg is not None else sty[0],
                                          intensity if intensity is not None else sty[1]),
                           d[2]))
        else:  # group
            agenda.append((indent, _FLAT if _fits(d[1], width - col) else _BREAK, sty, d[1]))
    end_line()
    widest = max(w for _, w, _ in lines)
    rendered = []
    for text_, w, line_notes in lines:
        out = [text_]  # (``restyle`` writes to ``out``)
        for j, note in enumerate(line_notes):
            if j:
                out.append("\n")
            restyle(_ANNOTATION_STYLE)
            out.append(" " * (widest - w if j == 0 else widest) + annotation_prefix + note)
            restyle(_DEFAULT_STYLE)
        rendered.append("".join(out))
    out = []
    restyle(_DEFAULT_STYLE)
    return "\n".join(rendered) + "".join(out)


def encode_name(n: int) -> str:
    """0 -> a, 25 -> z, 26 -> ba, ... (JAX's variable naming)."""
    s = ""
    while True:
        n, r = divmod(n, 26)
        s = chr(ord("a") + r) + s
        if n == 0:
            return s


def shared_names(top: Hashable, children: Callable[[Hashable], list]) -> dict:
    """The nested programs JAX prints once, before the top one, as ``let name = ... in``:
    those reached more than once, or with more than 10 equations; ``children(p)`` lists, per
    equation of ``p``, ``(its name parameter or None, the programs in its parameters)``.
    Each is named after the first equation with a string ``name`` that holds it (``jaxpr``
    otherwise), numbered when names repeat; the search is breadth first, as JAX's."""
    counts: dict = {}
    names: dict = {}
    queue = collections.deque([top])
    while queue:
        prog = queue.popleft()
        kids = children(prog)
        counts[prog] = counts.get(prog, 0) + 1 + (prog is not top and len(kids) > 10)
        for name, subs in kids:
            for sub in subs:
                queue.append(sub)
                if isinstance(name, str):
                    names.setdefault(sub, name.strip("<>"))
    shared: dict = {}
    used: dict[str, int] = {}
    for prog, count in counts.items():
        if count > 1:
            name = names.get(prog, "jaxpr")
            n = used.get(name, 0)
            used[name] = n + 1
            if n:
                name += str(n)
                used[name] = used.get(name, 0) + 1
            shared[prog] = name
    return shared


def pp_literal(lit: Any) -> str:
    """``2.0:f32[]``. As JAX: a literal holding a Python float prints that float (``1.67``);
    one holding a NumPy value prints it widened to a Python float (``1.6699999570846558``)."""
    val = lit.val
    if isinstance(val, np.ndarray) and val.shape:
        return f"{val.tolist()}:{lit.aval.str_short()}"
    if type(val) is float:
        return f"{val!r}:{lit.aval.str_short()}"
    val = np.asarray(val).item() if isinstance(val, (np.ndarray, np.generic)) else val
    if isinstance(val, bool):
        shown = str(val)
    elif isinstance(val, float):
        shown = repr(float(np.asarray(val, lit.aval.dtype)))
    else:
        shown = str(val)
    return f"{shown}:{lit.aval.str_short()}"
