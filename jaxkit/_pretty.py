"""A small document pretty-printer (Wadler/Lindig style), laid out as JAX 0.10.2 lays out jaxprs.

A document is built from ``text``, ``brk`` (a space, or a newline plus indentation when its
group is broken), ``nest`` (more indentation for the breaks inside), ``group`` and
``concat``. A group prints flat when its own flat width fits in what is left of the line
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

# Document nodes are tuples, cheap to build: ("text", s), ("brk", s), ("nest", n, doc),
# ("group", doc), ("concat", docs).
Doc = tuple


def text(s: str) -> Doc:
    return ("text", s)


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
        elif kind == "nest":
            agenda.append(d[2])
        else:  # group
            agenda.append(d[1])
    return width >= 0


def format(doc: Doc, width: int = 80) -> str:  # noqa: A001 (JAX's name for it)
    """Lay ``doc`` out in ``width`` columns."""
    out: list[str] = []
    col = 0
    agenda: list[tuple[int, int, Doc]] = [(0, _BREAK, doc)]
    while agenda:
        indent, mode, d = agenda.pop()
        kind = d[0]
        if kind == "text":
            out.append(d[1])
            col += len(d[1])
        elif kind == "concat":
            agenda.extend((indent, mode, c) for c in reversed(d[1]))
        elif kind == "brk":
            if mode == _BREAK:
                out.append("\n" + " " * indent)
                col = indent
            else:
                out.append(d[1])
                col += len(d[1])
        elif kind == "nest":
            agenda.append((indent + d[1], mode, d[2]))
        else:  # group
            agenda.append((indent, _FLAT if _fits(d[1], width - col) else _BREAK, d[1]))
    return "".join(out)


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
