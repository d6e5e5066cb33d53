"""Pictures of traced programs: a jaxpr as a Graphviz DOT graph.

Variables carry the names the printed jaxpr gives them (so the picture and the text can be
read side by side), inputs can be labelled with the argument they come from
(``params[0][1]``), and parameters print as in the text. DOT is always
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


NL = "\\n"  # a line break inside a DOT label

# Programs bigger than this draw their first equations and one node for the rest: Graphviz
# takes seconds beyond a few hundred nodes, and nobody reads such a picture whole.
MAX_EQUATIONS = 150


def _wrap(text: str, width: int = 48) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken after commas or spaces
    where possible (a parameter is shown whole, never cut off)."""
    lines = []
    while len(text) > width:
        cut = max(text.rfind(", ", 0, width), text.rfind(" ", 0, width))
        cut = cut + 1 if cut > 0 else width
        lines.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    return lines + [text]


def _params_text(eqn: core.JaxprEqn, namer) -> str:
    """The equation's parameters as the jaxpr text prints them (the same rules: defaults
    left out, functions by name, dimension numbers as lists), nested jaxprs as a count."""
    rule = core.pp_params_rules.get(eqn.primitive)
    params = rule(eqn.params) if rule is not None else dict(sorted(eqn.params.items()))
    lines = []
    for key, value in params.items():
        if isinstance(value, (core.ClosedJaxpr, core.Jaxpr)):
            n = len((value.jaxpr if isinstance(value, core.ClosedJaxpr) else value).eqns)
            lines.append(f"{key}={{{n} equations}}")
            continue
        if isinstance(value, tuple) and value and all(
                isinstance(v, (core.ClosedJaxpr, core.Jaxpr)) for v in value):
            lines.append(f"{key}=[{len(value)} jaxprs]")
            continue
        lines += _wrap(f"{key}={core.pp_param_value(value, 0, namer)}")
    return NL.join(lines)


def _quote(text: str) -> str:
    """A DOT string; line breaks in labels are written as the two characters \\n."""
    return '"' + text.replace('"', '\\"') + '"'


def jaxpr_to_dot(jaxpr: core.Jaxpr | core.ClosedJaxpr, name: str = "jaxpr",
                 show_params: bool = True, input_labels: list[str] | None = None,
                 max_equations: int = MAX_EQUATIONS, namer: core.Namer | None = None,
                 call_links: dict[int, str] | None = None) -> str:
    """The data-flow graph of ``jaxpr`` as DOT text: inputs, one node per equation (an
    equation holding a jaxpr, such as jit, cond or scan, is one node), outputs.

    Variables have the names the printed jaxpr gives them (nested jaxprs use up names there,
    so the names are taken from printing it); ``input_labels`` (one per input, e.g.
    ``params[0][1]``) says which argument each input is.

    ``namer``: the names of an enclosing jaxpr's text, for a nested jaxpr drawn on its own
    (its variables then read as in the enclosing text). ``call_links``: equation index ->
    URL, a link on the node of an equation holding jaxprs (the fold view opens the nested
    graph from it)."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if namer is None:
        namer = core.Namer()
        core.pp_jaxpr(jaxpr, namer=namer)  # assigns every name exactly as the text shows it
    used = {v for e in jaxpr.eqns for v in e.invars if type(v) is not core.Literal}
    used.update(v for v in jaxpr.outvars if type(v) is not core.Literal)
    lines = [f"digraph {_quote(name)} {{",
             '  rankdir=TB; node [fontname="Helvetica", fontsize=10]; '
             'edge [fontname="Helvetica", fontsize=9, color="#6b7280"];']
    producer: dict[core.Var, str] = {}
    for v in jaxpr.constvars:
        n = namer(v)
        producer[v] = n
        label = _quote(f"{n} (const){NL}{v.aval.str_short()}")
        lines.append(f"  {n} [label={label}, {_CONST_STYLE}];")
    for i, v in enumerate(jaxpr.invars):
        n = namer(v)
        producer[v] = n
        title = n if input_labels is None or i >= len(input_labels) else \
            f"{input_labels[i]}{NL}({n})"
        label = _quote(f"{title}{NL}{v.aval.str_short()}")
        lines.append(f"  {n} [label={label}, {_INPUT_STYLE}];")
    shown = jaxpr.eqns[:max_equations]
    for k, eqn in enumerate(shown):
        outs = [namer(v) if v in used else "_" for v in eqn.outvars]
        node = f"eqn{k}"
        label = eqn.primitive.name
        if show_params and eqn.params:
            params = _params_text(eqn, namer)
            if params:
                label += NL + params
        out_types = ", ".join(f"{o}:{v.aval.str_short()}" for o, v in zip(outs, eqn.outvars))
        if out_types:
            label += NL + "→ " + out_types
        has_sub = any(True for _ in core.subjaxprs(eqn.params))
        style = _CALL_STYLE if has_sub else _EQN_STYLE
        if has_sub and call_links and k in call_links:
            tip = _quote("unfold " + eqn.primitive.name)
            style += f", URL={_quote(call_links[k])}, tooltip={tip}"
        lines.append(f"  {node} [label={_quote(label)}, {style}];")
        for a in eqn.invars:
            if type(a) is core.Literal:
                lit = f"lit_{node}_{len(lines)}"
                lines.append(f"  {lit} [label={_quote(core.pp_literal(a))}, shape=plaintext];")
                lines.append(f"  {lit} -> {node};")
            else:
                lines.append(f"  {producer[a]} -> {node} [label={_quote(namer(a))}];")
        for v in eqn.outvars:
            producer[v] = node
    rest = jaxpr.eqns[len(shown):]
    if rest:
        more = "more"
        text = _quote(f"… {len(rest)} more equations{NL}(the jaxpr text has them all)")
        lines.append(f'  {more} [label={text}, shape=note, style=filled, fillcolor="#f3f4f6"];')
        for eqn in rest:
            for v in eqn.outvars:
                producer[v] = more
        fed = {producer[a] for e in rest for a in e.invars
               if type(a) is not core.Literal and producer[a] != more}
        lines += [f"  {src} -> {more};" for src in sorted(fed)]
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
    namer = core.Namer()
    core.pp_jaxpr(jaxpr, namer=namer)  # the names the jaxpr text shows
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
