"""``jax.extend.lowering``: what a library needs to build MLIR for jaxkit's lowering: the
context class, the rule context handed to lowering rules, and the registry of upstream
dialects (``func``, ``arith``, ...) a StableHLO module uses."""
from __future__ import annotations

from jaxkit.extend.mlir import ir
from jaxkit.interpreters.mlir import LoweringRuleContext, upstream_dialects

__all__ = ["JaxIrContext", "LoweringRuleContext", "upstream_dialects"]


class JaxIrContext(ir.Context):
    """An MLIR context that starts with no dialects loaded.

    ``ir.Context()`` loads every dialect linked into jaxlib; this one skips that
    initialisation so that only the dialects appended afterwards are known (append
    ``upstream_dialects``, then register ``stablehlo``/``chlo``/``sdy``)."""

    def __init__(self, *args, **kwargs):
        # Deliberately the grandparent's __init__: see the class docstring.
        super(ir.Context, self).__init__(*args, **kwargs)
