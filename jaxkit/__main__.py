"""``python -m jaxkit``: the tour (``jaxkit.magics.tour``; also the ``jaxkit-tour`` command).

``python -m jaxkit run script.py [args]`` runs an existing JAX program on jaxkit
(``install_as_jax()``, then the script as ``__main__``); ``run -m module [args]`` runs a module,
e.g. ``python -m jaxkit run -m pytest``.
"""
from __future__ import annotations

import runpy
import sys

from jaxkit.install import install_as_jax
from jaxkit.magics.tour import main as tour


def run_as_jax(argv: list[str]) -> None:
    """``run script.py args...`` or ``run -m module args...`` with ``import jax`` -> jaxkit."""
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m jaxkit run (script.py | -m module) [args ...]")
        raise SystemExit(0 if argv else 2)
    install_as_jax()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("python -m jaxkit run -m: a module name is needed")
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        run_as_jax(argv[1:])
    else:
        tour(argv)


if __name__ == "__main__":
    main()
