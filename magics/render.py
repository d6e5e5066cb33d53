"""HTML and chart building blocks shared by the magics' result objects.

matplotlib and ipywidgets are imported only when a chart or a widget is asked for, so that
``import jaxkit`` stays light and results still render as text and HTML without them.
"""
from __future__ import annotations

import html
import importlib.util
import io
import re
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


# The ANSI styles jaxprs print with in a notebook (as JAX's: keywords bright blue, binders'
# types magenta, annotations dim), as CSS.
_ANSI = re.compile(r"\x1b\[([0-9;]*)m")
_FOREGROUND = {"34": "color:#1d4ed8", "35": "color:#a21caf", "31": "color:#b91c1c",
               "32": "color:#15803d", "33": "color:#a16207", "36": "color:#0e7490"}
_INTENSITY = {"1": "font-weight:bold", "2": "opacity:0.6"}


def _ansi_to_html(escaped: str) -> str:
    """Escaped text with ANSI colour codes -> the same text in ``<span style=...>``s."""
    out, pos, fg, weight = [], 0, "", ""
    opened = False
    for m in _ANSI.finditer(escaped):
        out.append(escaped[pos:m.start()])
        pos = m.end()
        for code in (m.group(1) or "0").split(";"):
            if code in _FOREGROUND:
                fg = _FOREGROUND[code]
            elif code in _INTENSITY:
                weight = _INTENSITY[code]
            elif code == "39":  # default colour
                fg = ""
            elif code == "22":  # normal intensity
                weight = ""
            elif code == "0":  # reset
                fg = weight = ""
        if opened:
            out.append("</span>")
            opened = False
        style = ";".join(x for x in (fg, weight) if x)
        if style:
            out.append(f"<span style='{style}'>")
            opened = True
    out.append(escaped[pos:])
    if opened:
        out.append("</span>")
    return "".join(out)


def pre(text: str) -> str:
    """Preformatted text; the ANSI colours a jaxpr prints with in a notebook become CSS."""
    return f"<pre>{_ansi_to_html(escape(text))}</pre>"


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


def html_table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> str:
    """Like ``table``, for cells that are already HTML (a sparkline beside a number)."""
    out = ["<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def sparkline(runs: Sequence[float], mean: float, std: float, width: int = 96,
              height: int = 16, fmt=str) -> str:
    """The spread of per-run times as a small inline SVG: one tick per run on a time axis
    from the fastest to the slowest run, the band mean ± std shaded, the mean a dot and the
    fastest run (what speedups compare) green. ``fmt`` formats seconds for its tooltip."""
    lo, hi = min(runs), max(runs)
    span = hi - lo
    pad = 3.0

    def x(t: float) -> float:
        # All runs equal (or one run): everything sits in the middle.
        return width / 2 if span <= 0 else pad + (t - lo) / span * (width - 2 * pad)

    band_lo, band_hi = x(max(lo, mean - std)), x(min(hi, mean + std))
    parts = [f"<rect x='{band_lo:.1f}' y='2' width='{max(band_hi - band_lo, 1):.1f}' "
             f"height='{height - 4}' fill='#dbeafe'/>"]
    best = runs.index(lo)
    for i, t in enumerate(runs):
        color = "#15803d" if i == best else "#1f2937"
        parts.append(f"<line x1='{x(t):.1f}' x2='{x(t):.1f}' y1='3' y2='{height - 3}' "
                     f"stroke='{color}' stroke-width='1.5'/>")
    parts.append(f"<circle cx='{x(mean):.1f}' cy='{height / 2:.1f}' r='2.5' fill='#2563eb'/>")
    title = (f"{len(runs)} runs from {fmt(lo)} to {fmt(hi)}; mean {fmt(mean)} ± {fmt(std)} "
             "(shaded); fastest in green")
    return (f"<svg class='jaxkit-sparkline' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' style='vertical-align:middle' role='img' "
            f"aria-label='{escape(title)}'><title>{escape(title)}</title>"
            + "".join(parts) + "</svg>")
