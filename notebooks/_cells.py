"""Cell constructors shared by the notebook sources (``_seed_ports.py``, ``_showcases.py``).

``code(..., ignore_output=True)`` marks a cell whose output nbval does not compare (timings,
charts); ``raises=True`` tags a cell whose error is the point.
"""
from __future__ import annotations

import nbformat

IGNORE = "# NBVAL_IGNORE_OUTPUT\n"

SETUP = """\
import numpy as np
import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit import grad, jit, vmap, random, device_put
%load_ext jaxkit"""


def md(text: str):
    return nbformat.v4.new_markdown_cell(text.strip("\n"))


def code(text: str, ignore_output: bool = False, raises: bool = False):
    if raises:  # nbclient and nbval both expect the error of a cell tagged so
        cell = code(text, ignore_output)
        cell.metadata["tags"] = ["raises-exception"]
        return cell
    text = text.strip("\n")
    if ignore_output and text.startswith("%%"):  # a cell magic must stay on the first line
        first, _, rest = text.partition("\n")
        return nbformat.v4.new_code_cell(first + "\n" + IGNORE + rest)
    return nbformat.v4.new_code_cell((IGNORE if ignore_output else "") + text)
