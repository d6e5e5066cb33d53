"""Python started in a source checkout finds ``jaxkit.magics``.

The magics live in the repository's top-level ``magics/`` folder and are *installed* as
``jaxkit.magics`` (pyproject's ``package-dir``). Python started at the repository root imports
``jaxkit`` from the source folder ``./jaxkit/`` instead of the installed copy (the current
directory comes first on ``sys.path``), and that folder has no ``magics`` subpackage: ``python -m
jaxkit`` and ``%load_ext jaxkit`` would fail right after a successful install. When this package
is such a source folder, a finder at the front of ``sys.meta_path`` maps ``jaxkit.magics`` onto
the sibling folder; an installed package (which has its own ``magics``) is left alone.
"""
from __future__ import annotations

import importlib.util
import os
import sys

MAGICS_NAME = "jaxkit.magics"


class CheckoutMagicsFinder:
    """Finds ``jaxkit.magics`` in ``magics_dir``; its submodules then resolve through the
    package's own ``__path__``."""

    def __init__(self, magics_dir: str):
        self.magics_dir = magics_dir

    def find_spec(self, name, path=None, target=None):
        if name != MAGICS_NAME:
            return None
        return importlib.util.spec_from_file_location(
            name, os.path.join(self.magics_dir, "__init__.py"),
            submodule_search_locations=[self.magics_dir])

    def __repr__(self):
        return f"CheckoutMagicsFinder({self.magics_dir!r})"


def checkout_magics_dir(package_dir: str) -> str | None:
    """The ``magics/`` folder beside ``package_dir`` when ``package_dir`` is a source checkout's
    ``jaxkit/`` (no ``magics`` inside it, one beside it), else None."""
    if os.path.isdir(os.path.join(package_dir, "magics")):
        return None
    sibling = os.path.join(os.path.dirname(os.path.abspath(package_dir)), "magics")
    return sibling if os.path.isfile(os.path.join(sibling, "__init__.py")) else None


def install(package_dir: str) -> None:
    magics_dir = checkout_magics_dir(package_dir)
    if magics_dir is None:
        return
    if any(isinstance(f, CheckoutMagicsFinder) for f in sys.meta_path):
        return
    # First in line: the magics must come from the same checkout as this ``jaxkit`` (an
    # installed or editable copy elsewhere would otherwise supply another version's).
    sys.meta_path.insert(0, CheckoutMagicsFinder(magics_dir))
