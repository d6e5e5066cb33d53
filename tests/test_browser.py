"""The magics tour as a person sees it: executed in a real Jupyter kernel, rendered to HTML,
opened in headless Chromium (Debian's ``chromium``, which ``.ci/run`` installs).

Checks the page: no error output except the cell that shows a usage error on purpose, graph
SVGs present inside their scrolling boxes, the IR blocks set in a monospace font, the gradient
tree and ``%memory`` tables there, and a screenshot that is not blank.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")

TOUR = Path(__file__).resolve().parent.parent / "notebooks" / "magics_tour.ipynb"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed here (.ci/run installs it)")
    out = tmp_path_factory.mktemp("tour")
    nb = nbformat.read(TOUR, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(TOUR.parent)}}).execute()
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    html_path = out / "tour.html"
    html_path.write_text(html)
    shot = out / "tour.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", "--window-size=1200,3000",
                    f"--screenshot={shot}", html_path.as_uri()],
                   check=True, capture_output=True, timeout=180)
    return nb, html, shot


def test_no_error_output_but_the_intended_one(page):
    nb, _, _ = page
    errors = [(c.source, o.get("ename")) for c in nb.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == [], errors
    # IPython prints a UsageError as one line on stderr, no traceback
    stderr = [(c.source, o.text) for c in nb.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.get("name") == "stderr"]
    assert len(stderr) == 1 and stderr[0][0] == "%grad mlp_loss(parms, xs, ys)", stderr
    assert stderr[0][1].startswith("UsageError: name 'parms' is not defined")
    assert stderr[0][1].count("\n") <= 1


def test_graphs_and_tables_are_on_the_page(page):
    _, html, _ = page
    views = re.findall(r"<div class=[\"']jaxkit-graph-view[\"'][^>]*>(.*?)"
                       r"</div><!-- /jaxkit-graph-view", html, re.S)
    assert views and all("<svg" in v for v in views), "a graph without its SVG"
    assert "overflow:auto" in html  # big graphs scroll instead of shrinking
    for text in ("params[0][0]", "random direction 1", "live arrays", "peak (XLA's plan)",
                 "mean ± std. dev."):
        assert text in html, text


def test_ir_blocks_are_monospace(page):
    _, html, _ = page
    rule = re.search(r"\.jaxkit-report pre \{([^}]*)\}", html)
    assert rule and "monospace" in rule.group(1) and "white-space: pre" in rule.group(1)
    # (in a notebook jaxprs are coloured, as JAX's: the keyword is in a styled span)
    assert re.search(r"<pre>\{ (<span style=[^>]*>)?lambda ", html)


def test_screenshot_is_not_blank(page):
    import matplotlib.image as mpimg
    _, _, shot = page
    pixels = mpimg.imread(shot)[:, :, :3]
    assert pixels.shape[0] >= 1000
    ink = (pixels < 0.9).any(axis=2).mean()
    assert 0.01 < ink < 0.9, ink  # text and tables, not an empty or a solid page
    assert np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0).shape[0] > 16
