"""``jax.extend.pallas``: what a library adding a Pallas backend uses: ``GridMapping`` (the
canonical grid a ``pallas_call`` carries) and ``register_lowering_rule``, which records a
lowering of ``pallas_call`` for kernels whose compiler parameters are of a given class on a
given platform. jaxkit lowers ``pallas_call`` only on the CPU, where (as in JAX) only interpret
mode runs, so such rules are kept and looked up by ``get_lowering_rule`` but never needed there.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxkit.experimental.pallas.core import GridMapping

__all__ = ["GridMapping", "get_lowering_rule", "register_lowering_rule"]

_backend_lowering_rules: dict[type, tuple[Callable, str]] = {}


def register_lowering_rule(params_cls: type, rule: Callable, platform: str) -> None:
    """Lower ``pallas_call``s whose ``compiler_params`` are a ``params_cls`` with ``rule``
    on ``platform``."""
    _backend_lowering_rules[params_cls] = (rule, platform)


def get_lowering_rule(params_cls: type, expected_platform: str) -> Any:
    """The rule registered for ``params_cls`` (None if none); a ``ValueError`` if it was
    registered for another platform."""
    found = _backend_lowering_rules.get(params_cls)
    if found is None:
        return None
    rule, platform = found
    if platform != expected_platform:
        raise ValueError(f"Compiler params for platform {platform} cannot be used for "
                         f"{expected_platform} lowering.")
    return rule
