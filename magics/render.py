"""HTML and chart building blocks shared by the magics' result objects.

matplotlib and ipywidgets are imported only when a chart or a widget is asked for, so that
``import jaxkit`` stays light and results still render as text and HTML without them.
"""
from __future__ import annotations

import html
import importlib.util
import io
from collections.abc import Sequence

STYLE = """<style>
.jaxkit-report { font-family: -apple-system, Helvetica, sans-serif; font-size: 13px; }
.jaxkit-report table { border-collapse: collapse; margin: 4px 0 8px 0; }
.jaxkit-report td, .jaxkit-report th { border: 1px solid #d1d5db; padding: 2px 8px;
  text-align: left; }
.jaxkit-report th { background: #f3f4f6; }
.jaxkit-report pre { background: #f9fafb; padding: 6px; max-height: 420px; overflow: auto;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
  white-space: pre; font-size: 12px; line-height: 1.35; }
.jaxkit-report .hit { color: #15803d; font-weight: bold; }
.jaxkit-report .miss { color: #b45309; font-weight: bold; }
</style>"""


def escape(text) -> str:
    return html.escape(str(text))


def table(rows: Sequence[Sequence], header: Sequence[str] | None = None) -> str:
    out = ["<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def details(summary: str, body_html: str, open_: bool = False) -> str:
    return (f"<details{' open' if open_ else ''}><summary><b>{escape(summary)}</b></summary>"
            f"{body_html}</details>")


def pre(text: str) -> str:
    return f"<pre>{escape(text)}</pre>"


def report(title: str, sections: Sequence[str]) -> str:
    return (STYLE + f"<div class='jaxkit-report'><h4>{escape(title)}</h4>" + "".join(sections)
            + "</div>")


def text_table(rows: Sequence[Sequence], header: Sequence[str]) -> str:
    """A plain-text table with aligned columns (for ``_repr_pretty_``)."""
    cells = [list(map(str, header))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def widgets_available() -> bool:
    return importlib.util.find_spec("ipywidgets") is not None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def figure_to_svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    _pyplot().close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg"):]


def bar_chart(labels: Sequence[str], seconds: Sequence[float], title: str):
    """Horizontal bars of per-call times (a matplotlib Figure)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 0.5 + 0.45 * len(labels)))
    ax.barh(list(labels)[::-1], [s * 1e3 for s in seconds][::-1], color="#2563eb")
    ax.set_xlabel("time per call (ms, lower is better)")
    ax.set_title(title)
    for i, s in enumerate(list(seconds)[::-1]):
        ax.text(s * 1e3, i, f" {s * 1e3:.3g} ms", va="center", fontsize=8)
    fig.tight_layout()
    return fig


def line_chart(sizes: Sequence[int], series: dict[str, Sequence[float]], title: str):
    """Time per call against batch size, log-log, one line per method."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, values in series.items():
        ax.plot(list(sizes), [v * 1e3 for v in values], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("time per call (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
