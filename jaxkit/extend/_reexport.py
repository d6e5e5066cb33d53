"""How ``jaxkit.extend`` re-exports a jaxlib module as JAX does with ``from jaxlib... import *``.

The module comes from ``jaxkit.interpreters.mlir.jaxlib_module`` (the one layer besides the
runtime allowed to import jaxlib); the names are those a star import would bind: the module's
``__all__`` when it has one, otherwise every name without a leading underscore.
"""
from __future__ import annotations

from jaxkit.interpreters import mlir


def star_exports(name: str) -> dict[str, object]:
    """The names ``from <name> import *`` binds, with their objects."""
    module = mlir.jaxlib_module(name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    return {n: getattr(module, n) for n in names}
