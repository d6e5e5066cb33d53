"""Pictures of traced programs: a jaxpr as a Graphviz DOT graph.

Nodes are named deterministically after the jaxpr's own variable names (``a``, ``b``, ...
in order of appearance), so the same function always gives the same text. DOT is always
available; SVG is rendered only when the ``dot`` binary is installed.
"""
from __future__ import annotations

import html
import shutil
import subprocess

from jaxkit import core

_INPUT_STYLE = 'shape=ellipse, style=filled, fillcolor="#dbeafe", color="#1d4ed8"'
_OUTPUT_STYLE = 'shape=ellipse, style=filled, fillcolor="#dcfce7", color="#15803d"'
_CONST_STYLE = 'shape=ellipse, style=filled, fillcolor="#f3f4f6", color="#6b7280"'
_EQN_STYLE = 'shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"'
_CALL_STYLE = 'shape=box3d, style=filled, fillcolor="#fde68a", color="#92400e"'


def _short_params(params: dict, limit: int = 40) -> str:
    parts = []
    for key in sorted(params):
        value = params[key]
        if isinstance(value, (core.ClosedJaxpr, core.Jaxpr)):
            continue
        if isinstance(value, tuple) and value and isinstance(value[0], (core.ClosedJaxpr,
                                                                        core.Jaxpr)):
            parts.append(f"{key}=[{len(value)} jaxprs]")
            continue
        text = f"{key}={getattr(value, 'name', value)}"
        parts.append(text if len(text) <= limit else text[:limit - 3] + "...")
    return NL.join(parts)


NL = "\\n"  # a line break inside a DOT label


def _quote(text: str) -> str:
    """A DOT string; line breaks in labels are written as the two characters \\n."""
    return '"' + text.replace('"', '\\"') + '"'


def jaxpr_to_dot(jaxpr: core.Jaxpr | core.ClosedJaxpr, name: str = "jaxpr",
                 show_params: bool = True) -> str:
    """The data-flow graph of ``jaxpr`` as DOT text: inputs, one node per equation, outputs."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    namer = core._Namer()
    lines = [f"digraph {_quote(name)} {{",
             '  rankdir=TB; node [fontname="Helvetica", fontsize=10]; '
             'edge [fontname="Helvetica", fontsize=9, color="#6b7280"];']
    producer: dict[core.Var, str] = {}
    for v in jaxpr.constvars:
        n = namer(v)
        producer[v] = n
        label = _quote(f"{n} (const){NL}{v.aval.str_short()}")
        lines.append(f"  {n} [label={label}, {_CONST_STYLE}];")
    for v in jaxpr.invars:
        n = namer(v)
        producer[v] = n
        label = _quote(f"{n}{NL}{v.aval.str_short()}")
        lines.append(f"  {n} [label={label}, {_INPUT_STYLE}];")
    for eqn in jaxpr.eqns:
        outs = [namer(v) for v in eqn.outvars]
        node = "eqn_" + "_".join(o for o in outs if o != "_") if any(o != "_" for o in outs) \
            else f"eqn_{len(lines)}"
        label = eqn.primitive.name
        if show_params and eqn.params:
            params = _short_params(eqn.params)
            if params:
                label += NL + params
        out_types = ", ".join(f"{o}:{v.aval.str_short()}" for o, v in zip(outs, eqn.outvars))
        label += NL + "→ " + out_types
        has_sub = any(True for _ in core.subjaxprs(eqn.params))
        lines.append(f"  {node} [label={_quote(label)}, {_CALL_STYLE if has_sub else _EQN_STYLE}];")
        for a in eqn.invars:
            if type(a) is core.Literal:
                lit = f"lit_{node}_{len(lines)}"
                lines.append(f"  {lit} [label={_quote(core.pp_literal(a))}, shape=plaintext];")
                lines.append(f"  {lit} -> {node};")
            else:
                lines.append(f"  {producer[a]} -> {node} [label={_quote(namer(a))}];")
        for v in eqn.outvars:
            producer[v] = node
    for i, v in enumerate(jaxpr.outvars):
        out = f"out{i}"
        label = _quote(f"out[{i}]{NL}{v.aval.str_short()}")
        lines.append(f"  {out} [label={label}, {_OUTPUT_STYLE}];")
        if type(v) is core.Literal:
            lines.append(f"  lit_out{i} [label={_quote(core.pp_literal(v))}, shape=plaintext];")
            lines.append(f"  lit_out{i} -> {out};")
        else:
            lines.append(f"  {producer[v]} -> {out} [label={_quote(namer(v))}];")
    lines.append("}")
    return "\n".join(lines)


def dot_available() -> bool:
    """Whether the Graphviz ``dot`` binary is installed (needed for SVG)."""
    return shutil.which("dot") is not None


def dot_to_svg(dot: str) -> str | None:
    """Render DOT to SVG with the ``dot`` binary; None when it is not installed."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    done = subprocess.run([exe, "-Tsvg"], input=dot.encode(), capture_output=True, timeout=60)
    if done.returncode != 0:
        return None
    svg = done.stdout.decode()
    return svg[svg.find("<svg"):] if "<svg" in svg else svg


def graph_fallback_html(jaxpr: core.Jaxpr | core.ClosedJaxpr) -> str:
    """A readable HTML table of the equations when no ``dot`` binary can draw the graph."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    namer = core._Namer()
    ins = ", ".join(f"{namer(v)}:{v.aval.str_short()}" for v in jaxpr.constvars + jaxpr.invars)
    rows = [f"<tr><td><b>inputs</b></td><td colspan=2>{html.escape(ins)}</td></tr>"]
    for eqn in jaxpr.eqns:
        outs = ", ".join(f"{namer(v)}:{v.aval.str_short()}" for v in eqn.outvars)
        args = " ".join(namer(a) for a in eqn.invars)
        rows.append(f"<tr><td>{html.escape(outs)}</td><td><code>{html.escape(eqn.primitive.name)}"
                    f"</code></td><td>{html.escape(args)}</td></tr>")
    outs = ", ".join(namer(v) for v in jaxpr.outvars)
    rows.append(f"<tr><td><b>outputs</b></td><td colspan=2>{html.escape(outs)}</td></tr>")
    return ("<table class='jaxkit-graph'><tr><th>result</th><th>primitive</th><th>operands"
            "</th></tr>" + "".join(rows) + "</table>")
