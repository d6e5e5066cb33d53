"""Pictures of traced programs: a jaxpr as a Graphviz DOT graph.

Variables carry the names the printed jaxpr gives them (so the picture and the text can be
read side by side), inputs can be labelled with the argument they come from
(``params[0][1]``), and parameters print as in the text. DOT is always
available; SVG is rendered only when the ``dot`` binary is installed.
"""
from __future__ import annotations

import html
import re
import shutil
import subprocess

from jaxkit import core

from .graph_scopes import fold_scopes, scope_p, scope_size

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
                 call_links: dict[int, str] | None = None,
                 expand: frozenset[str] | set[str] = frozenset(),
                 fold: bool = True) -> str:
    """The data-flow graph of ``jaxpr`` as DOT text: inputs, one node per equation (an
    equation holding a jaxpr, such as jit, cond or scan, is one node), outputs.

    Variables have the names the printed jaxpr gives them (nested jaxprs use up names there,
    so the names are taken from printing it); ``input_labels`` (one per input, e.g.
    ``params[0][1]``) says which argument each input is.

    ``namer``: the names of an enclosing jaxpr's text, for a nested jaxpr drawn on its own
    (its variables then read as in the enclosing text). ``call_links``: equation index ->
    URL, a link on the node of an equation holding jaxprs (the fold view opens the nested
    graph from it). ``expand``: paths of equations holding jaxprs (``"3"``, the fourth
    equation; ``"3.1"``, the second equation of its jaxpr) drawn unfolded, their jaxprs
    inside a box in place, between the equation's node and an end node.

    ``fold``: runs of equations in one name scope (``jax.named_scope``, a Flax layer) are
    drawn as one node holding them (``graph_scopes.fold_scopes``; the paths above count the
    folded equations). Pass False for a jaxpr folded already."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if namer is None:
        namer = core.Namer()
        core.pp_jaxpr(jaxpr, namer=namer)  # assigns every name exactly as the text shows it
    if fold:
        jaxpr = fold_scopes(jaxpr)  # after naming: the folded equations keep the text's names
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
    _Body(lines, namer, show_params, max_equations, call_links or {}, set(expand)).emit(
        jaxpr, producer, "", "", "  ")
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


def param_jaxprs(eqn: core.JaxprEqn) -> list[tuple[str, core.Jaxpr]]:
    """(parameter name, jaxpr) for every jaxpr among ``eqn``'s parameters, in order (a tuple
    of several, such as cond's branches, as ``branches[0]``, ``branches[1]``)."""
    out = []
    for key, value in eqn.params.items():
        items = value if isinstance(value, (tuple, list)) else (value,)
        many = isinstance(value, (tuple, list)) and len(items) > 1
        for i, item in enumerate(items):
            if isinstance(item, (core.ClosedJaxpr, core.Jaxpr)):
                inner = item.jaxpr if isinstance(item, core.ClosedJaxpr) else item
                out.append(((f"{key}[{i}]" if many else key), inner))
    return out


class _Body:
    """Writes a jaxpr's equations (and, for unfolded ones, their jaxprs in boxes)."""

    def __init__(self, lines, namer, show_params, max_equations, call_links, expand):
        self.lines, self.namer, self.show_params = lines, namer, show_params
        self.max_equations, self.call_links, self.expand = max_equations, call_links, expand

    def emit(self, jaxpr: core.Jaxpr, producer: dict, prefix: str, path: str,
             indent: str) -> None:
        """``prefix`` keeps node ids of a nested jaxpr apart (its names may repeat the
        enclosing ones); ``path`` is the equation path of the jaxpr (``""`` at the top)."""
        lines, namer = self.lines, self.namer
        used = {v for e in jaxpr.eqns for v in e.invars if type(v) is not core.Literal}
        used.update(v for v in jaxpr.outvars if type(v) is not core.Literal)
        shown = jaxpr.eqns[:self.max_equations]
        for k, eqn in enumerate(shown):
            outs = [namer(v) if v in used else "_" for v in eqn.outvars]
            node = f"{prefix}eqn{k}"
            label = eqn.primitive.name
            if eqn.primitive is scope_p:  # a folded name scope: its name and size
                n = scope_size(eqn)
                label = f"{eqn.params['name']}{NL}({n} equation{'s' if n != 1 else ''})"
            elif self.show_params and eqn.params:
                params = _params_text(eqn, namer)
                if params:
                    label += NL + params
            out_types = ", ".join(f"{o}:{v.aval.str_short()}"
                                  for o, v in zip(outs, eqn.outvars))
            if out_types:
                label += NL + "→ " + out_types
            subs = param_jaxprs(eqn)
            style = _CALL_STYLE if subs else _EQN_STYLE
            if subs and not prefix and k in self.call_links:
                tip = _quote("unfold " + eqn.primitive.name)
                style += f", URL={_quote(self.call_links[k])}, tooltip={tip}"
            lines.append(f"{indent}{node} [label={_quote(label)}, {style}];")
            for a in eqn.invars:
                if type(a) is core.Literal:
                    lit = f"lit_{node}_{len(lines)}"
                    lines.append(f"{indent}{lit} [label={_quote(core.pp_literal(a))}, "
                                 "shape=plaintext];")
                    lines.append(f"{indent}{lit} -> {node};")
                else:
                    lines.append(f"{indent}{producer[a]} -> {node} "
                                 f"[label={_quote(namer(a))}];")
            eqn_path = f"{path}{k}"
            end = node
            if subs and eqn_path in self.expand:
                end = self._unfold(node, eqn, subs, eqn_path, indent)
            for v in eqn.outvars:
                producer[v] = end
        rest = jaxpr.eqns[len(shown):]
        if rest:
            more = f"{prefix}more"
            text = _quote(f"… {len(rest)} more equations{NL}(the jaxpr text has them all)")
            lines.append(f'{indent}{more} [label={text}, shape=note, style=filled, '
                         'fillcolor="#f3f4f6"];')
            for eqn in rest:
                for v in eqn.outvars:
                    producer[v] = more
            fed = {producer[a] for e in rest for a in e.invars
                   if type(a) is not core.Literal and producer[a] != more}
            lines += [f"{indent}{src} -> {more};" for src in sorted(fed)]

    def _unfold(self, node: str, eqn: core.JaxprEqn, subs, eqn_path: str,
                indent: str) -> str:
        """Draw ``eqn``'s jaxprs in boxes below its node; return the id of the end node that
        its results come from. Which operand feeds which inner input depends on the
        primitive (cond's predicate, scan's consts), so the node feeds every inner input
        and the inner inputs are named as the jaxpr text names them."""
        lines, namer = self.lines, self.namer
        end = f"{node}_end"
        types = ", ".join(v.aval.str_short() for v in eqn.outvars)
        what = eqn.params["name"] if eqn.primitive is scope_p else eqn.primitive.name
        lines.append(f"{indent}{end} [label={_quote('end ' + what + NL + types)}"
                     ", shape=box3d, style=filled, fillcolor=\"#fef3c7\", color=\"#92400e\"];")
        for j, (key, inner) in enumerate(subs):
            sub_path = eqn_path if len(subs) == 1 else f"{eqn_path}.{j}"
            prefix = f"x{sub_path.replace('.', '_')}_"
            title = f"{eqn.primitive.name} {key}" if len(subs) > 1 else \
                f"{eqn.primitive.name} {eqn.params.get('name', key)}"
            lines.append(f"{indent}subgraph cluster_{prefix[:-1]} {{")
            inner_indent = indent + "  "
            lines.append(f'{inner_indent}label={_quote(title)}; style="rounded,dashed"; '
                         'color="#92400e"; fontname="Helvetica"; fontsize=10;')
            producer: dict[core.Var, str] = {}
            # Edges into and out of the box are written after it: an edge written inside a
            # subgraph would pull the equation's node and the end node into the box.
            outside = []
            for i, v in enumerate(list(inner.constvars) + list(inner.invars)):
                n = f"{prefix}in{i}"
                producer[v] = n
                label = _quote(f"{namer(v)}{NL}{v.aval.str_short()}")
                lines.append(f"{inner_indent}{n} [label={label}, shape=ellipse, fontsize=9];")
                outside.append(f"{indent}{node} -> {n} [style=dotted];")
            self.emit(inner, producer, prefix, sub_path + ".", inner_indent)
            for i, v in enumerate(inner.outvars):
                if type(v) is core.Literal:
                    lit = f"lit_{prefix}out{i}"
                    lines.append(f"{inner_indent}{lit} [label={_quote(core.pp_literal(v))}, "
                                 "shape=plaintext];")
                    outside.append(f"{indent}{lit} -> {end};")
                else:
                    outside.append(f"{indent}{producer[v]} -> {end} "
                                   f"[label={_quote(namer(v))}];")
            lines.append(f"{indent}}}")
            lines += outside
        return end


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


def dots_to_svgs(dots: list[str]) -> list[str | None]:
    """Render several DOT graphs in one run of ``dot`` (it writes one SVG per graph): a view
    with dozens of nested graphs then costs one process start, not dozens (~40 ms each)."""
    if not dots:
        return []
    exe = shutil.which("dot")
    if exe is None:
        return [None] * len(dots)
    done = subprocess.run([exe, "-Tsvg"], input="\n".join(dots).encode(), capture_output=True,
                          timeout=120)
    svgs = re.findall(r"<svg\b.*?</svg>", done.stdout.decode(), re.S)
    if done.returncode != 0 or len(svgs) != len(dots):
        return [dot_to_svg(d) for d in dots]  # find which one failed, graph by graph
    return svgs


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
