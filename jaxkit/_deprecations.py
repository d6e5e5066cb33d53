"""Names that JAX 0.10.2 deprecated or removed, answered as JAX answers them.

A module's table maps each name to ``(message, value)``. A removed name (``value`` None) raises
``AttributeError(message)``, so that code reaching for it learns what replaces it; a deprecated
one warns ``DeprecationWarning(message)`` and returns its value. A value given as
``"module:attribute"`` is imported on first use, for a name served from a layer above the
module's own (``jax.core.gensym`` is ``jax.extend.core.gensym``). As in JAX, each name is
resolved once per module: the warning comes on the first read.
"""
from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable
from typing import Any

Deprecations = dict[str, tuple[str, Any]]


def deprecation_getattr(module: str, deprecations: Deprecations) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``module`` serving ``deprecations``."""

    @functools.cache
    def __getattr__(name: str) -> Any:
        if name not in deprecations:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        message, value = deprecations[name]
        if value is None:
            raise AttributeError(message)
        if isinstance(value, str):
            where, _, attr = value.partition(":")
            value = getattr(importlib.import_module(where), attr)
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return value

    return __getattr__


def removed(message: str) -> tuple[str, None]:
    """A table entry for a name JAX no longer has."""
    return message, None
