"""Regenerate the notebooks from their sources and execute them in place.

    python notebooks/_build.py [name ...]      # needs nbformat and nbclient

The notebooks are stored with their outputs: under ``pytest --nbval`` every code cell is re-run
and its output compared (timing and chart cells are marked ``# NBVAL_IGNORE_OUTPUT``), so they
are regression tests of the numbers the tutorials print. The sources: ``_seed_ports.py`` (the
seed tutorials, 01-05), ``_showcases.py`` (the magics tour, 06 and 07), built from the cell
constructors in ``_cells.py``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

import _seed_ports
import _showcases

HERE = Path(__file__).parent
NOTEBOOKS = {**_seed_ports.NOTEBOOKS, **_showcases.NOTEBOOKS}


def build(name: str, cells: list) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    path = HERE / f"{name}.ipynb"
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    nbformat.write(nb, path)
    return path


def main(names: list[str]) -> None:
    for name in names or list(NOTEBOOKS):
        print("built", build(name, NOTEBOOKS[name]))


if __name__ == "__main__":
    main(sys.argv[1:])
