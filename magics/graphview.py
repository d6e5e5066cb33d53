"""The interactive graph view: a big program's picture that stays readable.

Two pieces, both self-contained HTML (no external JavaScript, nothing to install), so that
they work alike in JupyterLab, in the classic notebook and in a static HTML render:

* a **zoom/pan viewer**: the SVG at its natural size in a scrolling box, with zoom buttons
  (−, +, fit to width, 1:1), ctrl+wheel zoom and drag to pan. Without JavaScript (a
  sanitised render) the box still scrolls, which is the old behaviour;
* **folding**: an equation that holds jaxprs (``jit``, ``custom_jvp_call``, ``scan``'s
  body, ``cond``'s branches, ...), and a run of equations in one name scope (a Flax layer,
  see ``graph_scopes``), is one node of its graph; each such node has a folded
  ``<details>`` section under the graph holding the nested program's own graph (folded the
  same way, recursively). ``<details>`` opens without JavaScript; with it, clicking the node
  in the picture opens its section and scrolls to it.

The handlers are inline attributes rather than a ``<script>``: notebook front ends run
those in trusted outputs without evaluating scripts, and each output stays independent.
"""
from __future__ import annotations

import html
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from jaxkit import core

from . import graph

# Past this many nested graphs one view stops drawing them (the rest are listed): each adds
# a picture to the page (the output is saved in the notebook), and hundreds help nobody.
MAX_NESTED_VIEWS = 40

# Graphviz sizes SVGs in points; the browser lays out CSS pixels (96 per inch, 72 points).
_PX_PER_PT = 96 / 72

_view_ids = itertools.count()


@dataclass
class Nested:
    """One jaxpr held by an equation: where it sits, what to call it, and what it holds."""

    path: str  # "3", "3.0.1": equation indices (and jaxpr positions) from the top
    title: str  # "jit layer", "scan", "cond branches[1]"
    jaxpr: core.Jaxpr
    children: list[Nested] = field(default_factory=list)
    eqn_path: str = ""  # the path of the equation holding it (``graph.jaxpr_to_dot``'s expand)


def _title(eqn: core.JaxprEqn, key: str, count: int) -> str:
    name = eqn.params.get("name")
    head = eqn.primitive.name + (f" {name}" if isinstance(name, str) else "")
    return head if count == 1 else f"{head} {key}"


def nested_tree(jaxpr: core.Jaxpr, prefix: str = "") -> list[Nested]:
    """The jaxprs nested in ``jaxpr``'s equations, as a tree in equation order."""
    out = []
    for k, eqn in enumerate(jaxpr.eqns):
        subs = graph.param_jaxprs(eqn)
        for j, (key, inner) in enumerate(subs):
            path = f"{prefix}{k}" if len(subs) == 1 else f"{prefix}{k}.{j}"
            out.append(Nested(path, _title(eqn, key, len(subs)), inner,
                              nested_tree(inner, path + "."), f"{prefix}{k}"))
    return out


def _svg_size(svg: str) -> tuple[float, float] | None:
    """The SVG's natural size in CSS pixels, from Graphviz's ``width="..pt"`` attributes."""
    w = re.search(r'<svg[^>]*?\swidth="([\d.]+)pt"', svg)
    h = re.search(r'<svg[^>]*?\sheight="([\d.]+)pt"', svg)
    if not (w and h):
        return None
    return float(w.group(1)) * _PX_PER_PT, float(h.group(1)) * _PX_PER_PT


# The viewer's handlers. ``v`` is the viewer, ``s`` its SVG; the zoom factor is kept in the
# viewer's data-k. Factor 0 fits the width of the box, factor 1 resets to natural size.
_ZOOM_JS = ("var v=this.closest('.jaxkit-zoom'),s=v.querySelector('.jk-canvas svg');"
            "var c=v.querySelector('.jk-canvas'),f={f};if(!s||f===0&&!c.clientWidth)return;"
            "var "
            "k=f===0?c.clientWidth/s.dataset.w:f===1?1:parseFloat(v.dataset.k||'1')*f;"
            "k=Math.max(0.05,Math.min(k,8));v.dataset.k=k;"
            "s.style.width=(s.dataset.w*k)+'px';s.style.height=(s.dataset.h*k)+'px';"
            "v.querySelector('.jk-pct').textContent=Math.round(k*100)+'%';")
_WHEEL_JS = ("if(!event.ctrlKey)return;event.preventDefault();"
             "var b=this.parentNode.querySelector(event.deltaY<0?'.jk-in':'.jk-out');"
             "if(b)b.click();")
_PAN_JS = ("if(event.button!==0||event.target.closest('a'))return;"
           "var c=this,x=event.clientX,y=event.clientY,l=c.scrollLeft,t=c.scrollTop;"
           "function m(e){c.scrollLeft=l-(e.clientX-x);c.scrollTop=t-(e.clientY-y);}"
           "function u(){document.removeEventListener('mousemove',m);"
           "document.removeEventListener('mouseup',u);c.style.cursor='grab';}"
           "document.addEventListener('mousemove',m);document.addEventListener('mouseup',u);"
           "c.style.cursor='grabbing';event.preventDefault();")
# A click on a folded node (an SVG link to "#<section id>") opens that section.
_OPEN_JS = ("var a=event.target.closest('a');if(!a)return;"
            "var h=a.getAttribute('href')||a.getAttribute('xlink:href')||'';"
            "var d=h.charAt(0)==='#'&&document.getElementById(h.slice(1));"
            "if(!d)return;event.preventDefault();d.open=true;"
            "for(var p=d.parentElement;p;p=p.parentElement){if(p.tagName==='DETAILS')p.open=true;}"
            "d.scrollIntoView({block:'nearest'});")

STYLE = """<style>
.jaxkit-zoom { margin: 4px 0; }
.jaxkit-zoom .jk-toolbar { font-size: 12px; margin-bottom: 2px; }
.jaxkit-zoom .jk-toolbar button { font-size: 12px; padding: 0 6px; margin-right: 2px; }
.jaxkit-zoom .jk-canvas { border: 1px solid #e5e7eb;
  cursor: grab; }
.jaxkit-zoom .jk-canvas svg { max-width: none; }
.jaxkit-fold { margin: 2px 0 2px 12px; }
.jaxkit-fold > summary { cursor: pointer; }
</style>"""


# The scrolling box's own style attribute: it scrolls even where a sanitiser drops <style>.
_CANVAS = "<div class='jk-canvas' style='overflow:auto; max-height:640px'"


def _attr(js: str) -> str:
    return html.escape(js, quote=True)


def zoom_viewer(svg: str) -> str:
    """``svg`` at natural size in a scrolling box with zoom buttons; other content (the
    table shown without Graphviz) in the same box without the buttons."""
    size = _svg_size(svg) if svg.startswith("<svg") else None
    if size is None:
        return f"<div class='jaxkit-zoom'>{_CANVAS}>{svg}</div></div>"
    w, h = size
    svg = svg.replace("<svg ", f"<svg data-w='{w:.1f}' data-h='{h:.1f}' ", 1)
    buttons = "".join(
        f"<button type='button' class='{cls}' title='{tip}' "
        f"onclick=\"{_attr(_ZOOM_JS.format(f=factor))}\">{text}</button>"
        for cls, tip, factor, text in (("jk-out", "zoom out", "0.8", "−"),
                                       ("jk-in", "zoom in", "1.25", "+"),
                                       ("jk-fit", "fit to width", "0", "fit"),
                                       ("jk-one", "natural size", "1", "1:1")))
    return (f"<div class='jaxkit-zoom'><div class='jk-toolbar'>{buttons} "
            f"<span class='jk-pct'>100%</span> <span style='color:#6b7280'>(drag to pan, "
            f"ctrl+wheel to zoom)</span></div>"
            f"{_CANVAS} onwheel=\"{_attr(_WHEEL_JS)}\" "
            f"onmousedown=\"{_attr(_PAN_JS)}\" onclick=\"{_attr(_OPEN_JS)}\">{svg}</div></div>")


def _picture(dot: str, jaxpr: core.Jaxpr, svg: str | None = "") -> str:
    """``svg`` (rendered from ``dot`` unless given; None when Graphviz is missing), or the
    equations as a table."""
    svg = graph.dot_to_svg(dot) if svg == "" else svg
    if svg is None:
        why = ("Graphviz's <code>dot</code> failed on this graph" if graph.dot_available()
               else "Graphviz's <code>dot</code> is not installed")
        return (f"<p><i>{why}; the graph as a table (install graphviz for a picture):</i></p>"
                + graph.graph_fallback_html(jaxpr))
    return svg


class _Budget:
    """What one view may still draw, and the graphs it has drawn (rendered together at the
    end, in one run of Graphviz; the HTML holds a placeholder for each until then)."""

    def __init__(self, n: int):
        self.left = n
        self.graphs: list[tuple[str, core.Jaxpr]] = []
        # A jaxpr traced once and called many times (a jitted layer in a loop) is one object
        # and draws the same (the text names its variables the same at each call): it is
        # drawn at its first section, the others link there. id -> (section id, path).
        self.drawn: dict[int, tuple[str, str]] = {}

    def placeholder(self, dot: str, jaxpr: core.Jaxpr) -> str:
        self.graphs.append((dot, jaxpr))
        return f"\x00graph{len(self.graphs) - 1}\x00"

    def fill(self, page: str) -> str:
        svgs = graph.dots_to_svgs([dot for dot, _ in self.graphs])
        pictures = [zoom_viewer(_picture(dot, jaxpr, svg))
                    for (dot, jaxpr), svg in zip(self.graphs, svgs)]
        return re.sub("\x00graph(\\d+)\x00", lambda m: pictures[int(m.group(1))], page)


def _sections(nested: list[Nested], namer: core.Namer, view: str, budget: _Budget) -> str:
    """The folded ``<details>`` of each nested jaxpr (with their own nested ones inside)."""
    out = []
    for node in nested:
        summary = _summary(node)
        first = budget.drawn.get(id(node.jaxpr))
        if first is not None:
            out.append(f"<details class='jaxkit-fold' id='{view}-{node.path}'><summary>"
                       f"{html.escape(summary)}</summary><p class='jk-same'>The same jaxpr "
                       f"as equation <a href='#{first[0]}' onclick=\"{_attr(_OPEN_JS)}\">"
                       f"{first[1]}</a>'s, drawn there.</p></details>")
            continue
        if budget.left <= 0:
            out.append(f"<div class='jaxkit-fold'>▸ {html.escape(summary)} <i>(not drawn: "
                       f"more than {MAX_NESTED_VIEWS} nested graphs; the jaxpr text has "
                       "them)</i></div>")
            continue
        budget.left -= 1
        budget.drawn[id(node.jaxpr)] = (f"{view}-{node.path}", node.path)
        out.append(f"<details class='jaxkit-fold' id='{view}-{node.path}'><summary>"
                   f"{html.escape(summary)}</summary>"
                   + _graph_block(node.jaxpr, node.title, namer, view, budget,
                                  node.children, f"{node.path}.")
                   + "</details>")
    return "".join(out)


def _walk(nested: list[Nested]) -> Iterator[Nested]:
    for node in nested:
        yield node
        yield from _walk(node.children)


def _graph_block(jaxpr: core.Jaxpr, name: str, namer: core.Namer, view: str,
                 budget: _Budget, nested: list[Nested], prefix: str,
                 input_labels: list[str] | None = None) -> str:
    links = {}
    for node in nested:
        k = int(node.path[len(prefix):].split(".")[0])
        links.setdefault(k, f"#{view}-{node.path}")
    dot = graph.jaxpr_to_dot(jaxpr, name, input_labels=input_labels, namer=namer,
                             call_links=links, fold=False)
    return budget.placeholder(dot, jaxpr) + _sections(nested, namer, view, budget)


def graph_view_html(jaxpr: core.Jaxpr | core.ClosedJaxpr, name: str = "jaxpr",
                    input_labels: list[str] | None = None) -> str:
    """The whole view: the zoomable top-level graph, nested programs folded under it.

    It sits between fixed markers (``<div class='jaxkit-graph-view'>`` ...
    ``<!-- /jaxkit-graph-view -->``) that notebooks/sanitize.cfg folds into one token: the
    picture depends on the machine's Graphviz, so nbval checks graphs through their text."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    namer = core.Namer()
    core.pp_jaxpr(jaxpr, namer=namer)  # nested graphs then use the names the text shows
    jaxpr = graph.fold_scopes(jaxpr)  # a named scope (a Flax layer) folds like a jit
    view = f"jkg{next(_view_ids)}"
    budget = _Budget(MAX_NESTED_VIEWS)
    body = budget.fill(_graph_block(jaxpr, name, namer, view, budget, nested_tree(jaxpr), "",
                                    input_labels))
    return f"<div class='jaxkit-graph-view'>{STYLE}{body}</div><!-- /jaxkit-graph-view -->"


def _summary(node: Nested) -> str:
    n_eqns = len(node.jaxpr.eqns)
    inner = sum(1 for _ in _walk(node.children))
    return (f"{node.title} (equation {node.path}): {n_eqns} equation{'s' if n_eqns != 1 else ''}"
            + (f", {inner} nested jaxpr{'s' if inner != 1 else ''}" if inner else ""))


def expand_paths(tree: list[Nested], chosen) -> frozenset[str]:
    """The equation paths to unfold so that each chosen nested jaxpr (by ``path``) is drawn:
    its own equation's and those of every jaxpr around it."""
    out: set[str] = set()

    def visit(nodes: list[Nested], above: tuple[str, ...]) -> None:
        for node in nodes:
            here = above + (node.eqn_path,)
            if node.path in chosen:
                out.update(here)
            visit(node.children, here)
    visit(tree, ())
    return frozenset(out)


class UnfoldView:
    """The graph with a list of its nested jaxprs: choosing some (``select``) redraws the
    graph with them unfolded in place, in boxes. Used through ``widget()`` (ipywidgets)."""

    def __init__(self, jaxpr: core.Jaxpr | core.ClosedJaxpr, name: str = "jaxpr",
                 input_labels: list[str] | None = None):
        self.jaxpr = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
        self.name, self.input_labels = name, input_labels
        self.namer = core.Namer()
        core.pp_jaxpr(self.jaxpr, namer=self.namer)
        self.jaxpr = graph.fold_scopes(self.jaxpr)  # named scopes fold like jits
        self.tree = nested_tree(self.jaxpr)
        self.chosen: tuple[str, ...] = ()

    def options(self) -> list[tuple[str, str]]:
        """(indented summary, path) of every nested jaxpr, in the order of the text."""
        def rows(nodes, depth):
            for node in nodes:
                yield "    " * depth + _summary(node), node.path
                yield from rows(node.children, depth + 1)
        return list(rows(self.tree, 0))

    def dot(self) -> str:
        return graph.jaxpr_to_dot(self.jaxpr, self.name, input_labels=self.input_labels,
                                  namer=self.namer, fold=False,
                                  expand=expand_paths(self.tree, set(self.chosen)))

    def select(self, paths) -> str:
        """Unfold the nested jaxprs at ``paths`` (and fold the others); the view's HTML."""
        known = {p for _, p in self.options()}
        unknown = [p for p in paths if p not in known]
        if unknown:
            raise ValueError(f"no nested jaxpr at {', '.join(map(repr, unknown))}; the "
                             f"paths are {', '.join(sorted(known)) or 'none'}")
        self.chosen = tuple(paths)
        return self.html()

    def html(self) -> str:
        return STYLE + zoom_viewer(_picture(self.dot(), self.jaxpr))

    def widget(self):
        """An ipywidgets box: a multiple-choice list of the nested jaxprs above the graph."""
        import ipywidgets

        picture = ipywidgets.HTML(self.html())
        options = self.options()
        if not options:
            return ipywidgets.VBox([picture])
        chooser = ipywidgets.SelectMultiple(
            options=options, value=self.chosen, rows=min(8, len(options)),
            description="unfold", layout=ipywidgets.Layout(width="100%"))

        def redraw(change):
            picture.value = self.select(change["new"])
        chooser.observe(redraw, names="value")
        return ipywidgets.VBox([chooser, picture])
