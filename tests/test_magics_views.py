"""The magics' views of big results: folded nested graphs in a zoom/pan viewer, sparklines of
timing runs, and terminal progress. HTML is checked by structure (parsed), text by golden
strings, and the magics are driven through a real IPython InteractiveShell."""
import io
import json
import re
import shutil
import subprocess
import textwrap
from html.parser import HTMLParser

import pytest

IPython = pytest.importorskip("IPython")
from _shell import magic_shell, run  # noqa: E402
from IPython.lib.pretty import pretty  # noqa: E402

import jaxkit  # noqa: E402
import jaxkit.numpy as jnp  # noqa: E402
from jaxkit import lax  # noqa: E402
from jaxkit.magics import graph, graphview, progress, render, reports  # noqa: E402
from jaxkit.magics.timing import Timing  # noqa: E402

needs_dot = pytest.mark.skipif(not graph.dot_available(),
                               reason="Graphviz dot binary not installed")


class Tags(HTMLParser):
    """Every start tag of a document, with its attributes, and the text of <summary>s."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.summaries: list[str] = []
        self._in_summary = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_summary = self._in_summary or tag == "summary"
        if tag == "summary":
            self.summaries.append("")

    def handle_endtag(self, tag):
        if tag == "summary":
            self._in_summary = False

    def handle_data(self, data):
        if self._in_summary:
            self.summaries[-1] += data

    def find(self, tag, cls=None):
        return [a for t, a in self.tags
                if t == tag and (cls is None or cls in a.get("class", "").split())]


def layered_program(layers=25, shared=True):
    """A 25-layer MLP whose layer is a jit, then a scan and a cond: nested jaxprs of all
    kinds, inside one another (the scan's body holds a custom_jvp call). ``shared``: one
    jitted layer function (traced once: one jaxpr object in every layer), or one each."""
    shared_layer = jaxkit.jit(lambda x, w: jnp.tanh(x @ w))

    @jaxkit.custom_jvp
    def soft(v):
        return jnp.log1p(jnp.exp(v))

    soft.defjvp(lambda p, t: (soft(p[0]), t[0] / (1 + jnp.exp(-p[0]))))

    def mlp(x, ws):
        for w in ws:
            layer = shared_layer if shared else jaxkit.jit(lambda x, w: jnp.tanh(x @ w))
            x = layer(x, w)

        def body(c, _):
            return soft(c), c.sum()
        x, _ = lax.scan(body, x, None, length=3)
        return lax.cond(x.sum() > 0, lambda v: v + 1, lambda v: v * 2, x)

    ws = [jnp.ones((8, 8)) * 0.1 for _ in range(layers)]
    return jaxkit.make_jaxpr(mlp)(jnp.ones((4, 8)), ws)


# ---- folding ----------------------------------------------------------------------------


def test_nested_tree_lists_every_nested_jaxpr_in_order():
    tree = graphview.nested_tree(layered_program().jaxpr)
    titles = [n.title for n in tree]
    assert titles[:25] == ["jit <lambda>"] * 25
    assert titles[25] == "scan"
    assert titles[26:] == ["cond branches[0]", "cond branches[1]"]
    assert [n.path for n in tree][:2] == ["0", "1"] and tree[26].path.endswith(".0")
    scan_children = [c.title for c in tree[25].children]
    assert scan_children and scan_children[0].startswith("custom_jvp_call")
    assert tree[25].children[0].path.startswith(tree[25].path + ".")


def test_fold_view_structure():
    closed = layered_program()
    page = graphview.graph_view_html(closed, "mlp")
    assert page.startswith("<div class='jaxkit-graph-view'>")
    assert page.endswith("</div><!-- /jaxkit-graph-view -->")
    assert page.count("<!-- /jaxkit-graph-view -->") == 1  # sanitize.cfg's end marker
    doc = Tags(page)
    every = list(graphview._walk(graphview.nested_tree(closed.jaxpr)))
    sections = doc.find("details", "jaxkit-fold")
    assert len(sections) == len(every)  # one folded section per nested jaxpr
    assert all("open" not in a for a in sections)  # folded by default
    ids = [a["id"] for a in sections]
    assert len(set(ids)) == len(ids)
    assert doc.summaries[0] == "jit <lambda> (equation 0): 2 equations"
    scan = next(s for s in doc.summaries if s.startswith("scan"))
    assert re.fullmatch(r"scan \(equation 25\): \d+ equations?, 1 nested jaxpr", scan), scan
    # every graph, the top one and each nested one, sits in its own zoom viewer; the one
    # jitted layer's jaxpr (one object in all 25 layers) is drawn once, at its first section
    distinct = {id(n.jaxpr) for n in every}
    assert len(distinct) == 5 and len(doc.find("div", "jaxkit-zoom")) == len(distinct) + 1
    assert page.count("The same jaxpr as equation <a href='#") == 24
    assert len(doc.find("div", "jaxkit-zoom")) == len(
        Tags(graphview.graph_view_html(layered_program(shared=False), "mlp")).find(
            "div", "jaxkit-zoom")) - 24


@needs_dot
def test_fold_view_nodes_link_to_their_sections():
    page = graphview.graph_view_html(layered_program(), "mlp")
    doc = Tags(page)
    ids = {a["id"] for a in doc.find("details", "jaxkit-fold")}
    links = {a.get("xlink:href") or a.get("href") for a in doc.find("a")}
    links.discard(None)
    # each nested jaxpr is reached from its node (cond's two branches from the one node)
    assert links and links <= {f"#{i}" for i in ids}
    assert len(links) == 25 + 1 + 1 + 1  # 25 jits, the scan, cond, the scan body's call
    assert all(a.get("onclick") for a in doc.find("div", "jk-canvas"))


def test_nested_graphs_use_the_names_of_the_text():
    closed = layered_program(layers=2)
    namer = jaxkit.core.Namer()
    text = jaxkit.core.pp_jaxpr(closed.jaxpr, namer=namer)
    inner = graphview.nested_tree(closed.jaxpr)[0].jaxpr
    dot = graph.jaxpr_to_dot(inner, "inner", namer=namer)
    for v in inner.eqns[0].outvars:
        assert f"{namer(v)}:{v.aval.str_short()}" in dot and namer(v) in str(text)


def test_call_links_golden_dot():
    closed = jaxkit.make_jaxpr(lambda v: jaxkit.jit(lax.sin)(v))(jnp.ones(3))
    dot = graph.jaxpr_to_dot(closed, call_links={0: "#view-0"})
    node = next(line for line in dot.splitlines() if line.startswith("  eqn0"))
    assert node == ('  eqn0 [label="jit\\nname=sin\\njaxpr={1 equations}\\n→ b:f32[3]", '
                    'shape=box3d, style=filled, fillcolor="#fde68a", color="#92400e", '
                    'URL="#view-0", tooltip="unfold jit"];')
    # no links asked for: the DOT is as before
    assert "URL=" not in graph.jaxpr_to_dot(closed)


def test_too_many_nested_graphs_are_listed_not_drawn(monkeypatch):
    monkeypatch.setattr(graphview, "MAX_NESTED_VIEWS", 5)
    page = graphview.graph_view_html(layered_program(layers=8, shared=False), "mlp")
    doc = Tags(page)
    assert len(doc.find("details", "jaxkit-fold")) == 5
    # the rest of the top level listed (the scan's one nested jaxpr counted in its line)
    assert page.count("(not drawn: more than 5 nested graphs") == 8 + 1 + 2 - 5
    assert "▸ scan (equation 8): 2 equations, 1 nested jaxpr <i>(not drawn" in page


def test_text_form_is_unchanged_by_the_view():
    closed = jaxkit.make_jaxpr(lambda v: jaxkit.jit(lax.sin)(v) * 2.0)(jnp.ones(3))
    res = reports.JaxprResult("f", closed)
    assert pretty(res) == textwrap.dedent("""\
        { lambda ; a:f32[3]. let
            b:f32[3] = jit[
              name=sin
              jaxpr={ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }
            ] a
            c:f32[3] = mul b 2.0:f32[]
          in (c,) }""")
    assert "jaxkit-fold" in res.graph_html()


# ---- zoom/pan -----------------------------------------------------------------------------


@needs_dot
def test_zoom_viewer_structure():
    svg = graph.dot_to_svg(graph.jaxpr_to_dot(layered_program(layers=3)))
    width_pt = float(re.search(r'<svg[^>]*width="([\d.]+)pt"', svg).group(1))
    doc = Tags(graphview.zoom_viewer(svg))
    buttons = doc.find("button")
    assert [b["class"] for b in buttons] == ["jk-out", "jk-in", "jk-fit", "jk-one"]
    assert all(b.get("onclick") and b.get("type") == "button" for b in buttons)
    (canvas,) = doc.find("div", "jk-canvas")
    assert {"onwheel", "onmousedown", "onclick"} <= set(canvas)
    (shown,) = doc.find("svg")
    assert float(shown["data-w"]) == pytest.approx(width_pt * 96 / 72, abs=0.1)
    assert "max-width: none" in graphview.STYLE  # natural size, never squeezed
    assert "<script" not in graphview.zoom_viewer(svg)  # inline handlers only


def test_viewer_without_graphviz(monkeypatch):
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    page = reports.JaxprResult("f", layered_program(layers=2)).graph_html()
    doc = Tags(page)
    assert "not installed" in page and doc.find("table") and not doc.find("button")
    assert len(doc.find("details", "jaxkit-fold")) == 2 + 1 + 1 + 2


# ---- sparklines ---------------------------------------------------------------------------


def test_sparkline_structure():
    t = Timing(1e-3, [1.5e-3, 1e-3, 2e-3, 1.2e-3], 10)
    doc = Tags(t.sparkline())
    (svg,) = doc.find("svg", "jaxkit-sparkline")
    assert svg["width"] == "96" and svg["height"] == "16"
    ticks = doc.find("line")
    xs = [float(a["x1"]) for a in ticks]
    assert len(ticks) == 4 and xs[1] == min(xs) and xs[2] == max(xs)  # run order, time axis
    assert [a["stroke"] for a in ticks].count("#15803d") == 1  # the fastest, in green
    assert ticks[1]["stroke"] == "#15803d"
    (band,) = doc.find("rect")
    lo = float(band["x"])
    assert min(xs) <= lo and lo + float(band["width"]) <= max(xs) + 1e-6
    assert "4 runs from 1 ms to 2 ms; mean 1.43 ms ± 377 µs" in svg["aria-label"]


def test_sparkline_of_equal_runs():
    doc = Tags(render.sparkline([1.0, 1.0], 1.0, 0.0))
    assert {a["x1"] for a in doc.find("line")} == {"48.0"}


@pytest.fixture(scope="module")
def ip():
    return magic_shell("""
        import jaxkit as jax
        import jaxkit.numpy as jnp
        x = jnp.arange(8.0)
        def sq(v):
            return jnp.sum(jnp.sin(v) * v)
        mat = jnp.ones((4, 3)); v = jnp.ones(3)
        def apply_matrix(v):
            return jnp.dot(mat, v)
    """)


def test_jit_timeit_html_has_a_sparkline_per_method(ip):
    res = run(ip, "%jit_timeit -o -q -r 3 sq(x)")
    page = res._repr_html_()
    doc = Tags(page)
    assert len(doc.find("svg", "jaxkit-sparkline")) == 2
    assert all(len(t.all_runs) == 3 for t in res.timings.values())
    assert "sparkline" not in pretty(res) and "<svg" not in pretty(res)


def test_vmap_timeit_html_has_a_sparkline_per_cell(ip):
    res = run(ip, "%vmap_timeit -o -q --sizes 1,4 -r 2 apply_matrix v")
    assert [len(res.timings[m]) for m in res.series] == [2, 2, 2]
    assert res.series["jit(vmap)"] == [t.best for t in res.timings["jit(vmap)"]]
    doc = Tags(res._repr_html_())
    assert len(doc.find("svg", "jaxkit-sparkline")) == 2 * 3


# ---- terminal progress --------------------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_draws_updates_and_erases_on_a_terminal():
    out = FakeTerminal()
    with progress.TerminalProgress("compiling f", stream=out, delay=0) as bar:
        bar.update("timing f eagerly, run 2 of 5")
    text = out.getvalue()
    assert text.startswith("\rcompiling f… 0.")
    assert "\rtiming f eagerly, run 2 of 5… " in text
    last = text.rsplit("\r", 2)
    assert last[-1] == "" and last[-2].strip() == ""  # the line is blanked, cursor at 0
    assert len(last[-2]) == len("timing f eagerly, run 2 of 5… 0.0 s")


def test_progress_writes_nothing_off_a_terminal():
    out = io.StringIO()
    with progress.TerminalProgress("compiling f", stream=out, delay=0) as bar:
        bar.update("timing")
    assert out.getvalue() == "" and not progress.stderr_is_terminal(out)


def test_magics_print_no_progress_in_a_notebook_like_shell(ip, capfd):
    # stderr here is captured, as a kernel's is: not a terminal, so no progress text
    run(ip, "%jit -q --no-timeit sq(x)")
    run(ip, "%jit_timeit -q -r 1 sq(x)")
    run(ip, "%vmap_timeit -q --sizes 1 -r 1 apply_matrix v")
    assert "…" not in capfd.readouterr().err


def test_magics_show_progress_in_a_terminal(ip, monkeypatch):
    out = FakeTerminal()
    monkeypatch.setattr("sys.stderr", out)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    res = run(ip, "%jit_timeit -o -q -r 2 sq(x)")
    text = out.getvalue()
    assert "\rcompiling sq… " in text and "timing jit(sq), run 2 of 2… " in text
    assert text.endswith("\r") and text.rsplit("\r", 2)[-2].strip() == ""
    assert res.timings["jit"].best > 0


# ---- unfolding in place (ipywidgets) ------------------------------------------------------


GOLDEN_UNFOLDED = r'''digraph "jaxpr" {
  rankdir=TB; node [fontname="Helvetica", fontsize=10]; edge [fontname="Helvetica", fontsize=9, color="#6b7280"];
  a [label="a\nf32[3]", shape=ellipse, style=filled, fillcolor="#dbeafe", color="#1d4ed8"];
  eqn0 [label="jit\nname=sin\njaxpr={1 equations}\n→ b:f32[3]", shape=box3d, style=filled, fillcolor="#fde68a", color="#92400e"];
  a -> eqn0 [label="a"];
  eqn0_end [label="end jit\nf32[3]", shape=box3d, style=filled, fillcolor="#fef3c7", color="#92400e"];
  subgraph cluster_x0 {
    label="jit sin"; style="rounded,dashed"; color="#92400e"; fontname="Helvetica"; fontsize=10;
    x0_in0 [label="a\nf32[3]", shape=ellipse, fontsize=9];
    x0_eqn0 [label="sin\n→ b:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
    x0_in0 -> x0_eqn0 [label="a"];
  }
  eqn0 -> x0_in0 [style=dotted];
  x0_eqn0 -> eqn0_end [label="b"];
  eqn1 [label="mul\n→ c:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
  eqn0_end -> eqn1 [label="b"];
  lit_eqn1_16 [label="2.0:f32[]", shape=plaintext];
  lit_eqn1_16 -> eqn1;
  out0 [label="out[0]\nf32[3]", shape=ellipse, style=filled, fillcolor="#dcfce7", color="#15803d"];
  eqn1 -> out0 [label="c"];
}'''


def test_golden_unfolded_dot():
    closed = jaxkit.make_jaxpr(lambda v: jaxkit.jit(lax.sin)(v) * 2.0)(jnp.ones(3))
    assert graph.jaxpr_to_dot(closed, expand={"0"}) == GOLDEN_UNFOLDED


def test_unfolding_a_nested_jaxpr_unfolds_those_around_it():
    view = graphview.UnfoldView(layered_program(layers=3), "mlp")
    paths = [p for _, p in view.options()]
    assert paths == ["0", "1", "2", "3", "3.0", "7.0", "7.1"]
    assert view.options()[4][0].startswith("    custom_jvp_call")  # indented under scan
    assert graphview.expand_paths(view.tree, {"3.0"}) == {"3", "3.0"}
    assert graphview.expand_paths(view.tree, {"7.1"}) == {"7"}
    view.select(["3.0"])
    dot = view.dot()
    assert "subgraph cluster_x3 {" in dot and "subgraph cluster_x3_0 {" in dot
    assert dot.count("subgraph cluster") == 2
    assert "eqn3_end ->" in dot  # the scan's results come out of its end node
    # the folded jits stay one node each
    assert "cluster_x0" not in dot and dot.count('label="jit\\n') == 3
    with pytest.raises(ValueError, match="no nested jaxpr at '9'; the paths are 0, 1, 2"):
        view.select(["9"])


@needs_dot
def test_unfold_widget_redraws_on_choice():
    pytest.importorskip("ipywidgets")
    box = reports.JaxprResult("mlp", layered_program(layers=2)).graph_widget()
    chooser, picture = box.children
    assert [p for _, p in chooser.options][:2] == ["0", "1"]
    assert "end jit" not in picture.value and "<svg" in picture.value
    chooser.value = ("1",)
    assert "end jit" in picture.value and picture.value.count("class=\"cluster\"") == 1
    chooser.value = ()
    assert "end jit" not in picture.value


@needs_dot
def test_many_graphs_render_in_one_graphviz_run_in_order():
    dots = [f'digraph "g{i}" {{ n{i} [label="node {i}"]; }}' for i in range(3)]
    svgs = graph.dots_to_svgs(dots)
    assert [("node 0" in s, "node 1" in s, "node 2" in s) for s in svgs] == [
        (True, False, False), (False, True, False), (False, False, True)]
    # one broken graph: the others are still drawn, that one is None
    svgs = graph.dots_to_svgs([dots[0], "digraph { a -> }", dots[2]])
    assert "node 0" in svgs[0] and svgs[1] is None and "node 2" in svgs[2]


def test_vmap_timeit_in_a_terminal_prints_the_report_once(ip, monkeypatch, capsys):
    out = FakeTerminal()
    monkeypatch.setattr("sys.stderr", out)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    run(ip, "%vmap_timeit --sizes 1 -r 1 apply_matrix v")
    shown = capsys.readouterr().out
    assert "vmap timings for apply_matrix" in shown and "timing apply_matrix ..." not in shown
    assert "\rtiming apply_matrix: batch 1: jit(vmap)… " in out.getvalue()


def test_jit_report_speed_panel_has_sparklines(ip):
    res = run(ip, "%jit -o -q -r 2 --panels speed sq(x)")
    doc = Tags(res._repr_html_())
    assert len(doc.find("svg", "jaxkit-sparkline")) == 2
    assert "<svg" not in pretty(res)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@needs_dot
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed here")
def test_viewer_handlers_run_in_a_browser(tmp_path):
    """The inline handlers, run by headless Chromium: zoom buttons resize the SVG, clicking a
    folded node opens its section."""
    page = graphview.graph_view_html(layered_program(layers=3), "mlp")
    probe = """<script>
      var v = document.querySelector('.jaxkit-zoom'), s = v.querySelector('svg');
      var w0 = parseFloat(s.dataset.w);
      v.querySelector('.jk-in').click(); v.querySelector('.jk-in').click();
      var zoomed = parseFloat(s.style.width) / w0, pct = v.querySelector('.jk-pct').textContent;
      v.querySelector('.jk-one').click();
      var reset = parseFloat(s.style.width) / w0;
      var link = v.querySelectorAll('.jk-canvas a')[1];
      link.querySelector('text').dispatchEvent(new MouseEvent('click', {bubbles: true,
                                                                        cancelable: true}));
      var opened = Array.from(document.querySelectorAll('details.jaxkit-fold[open]'))
                        .map(function (d) { return d.id.split('-').slice(1).join('-'); });
      document.body.setAttribute('data-result', JSON.stringify(
          {zoomed: zoomed, pct: pct, reset: reset, opened: opened}));
    </script>"""
    html_path = tmp_path / "view.html"
    html_path.write_text(f"<html><body>{page}{probe}</body></html>")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--dump-dom", html_path.as_uri()],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    found = re.search(r"data-result=\"([^\"]*)\"", dom)
    assert found, dom[-2000:]
    result = json.loads(found.group(1).replace("&quot;", '"'))
    assert result["zoomed"] == pytest.approx(1.25 * 1.25, rel=1e-3)
    assert result["pct"] == "156%"
    assert result["reset"] == pytest.approx(1.0)
    assert result["opened"] == ["1"]  # the second jit's section, and only it


def test_jit_report_widget_graph_tab_is_the_unfold_view(ip):
    pytest.importorskip("ipywidgets")
    run(ip, "def twice_sin(v):\n    return jax.jit(jnp.sin)(v) * 2\n")
    tabs = run(ip, "%jit -o -q --no-timeit twice_sin(x)").widget()
    chooser, picture = tabs.children[0].children
    assert [p for _, p in chooser.options] == ["0"] and "jaxkit-zoom" in picture.value
    assert tabs.get_title(0) == "graph"
