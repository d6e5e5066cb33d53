"""``jax.interpreters.partial_eval`` (reached by Flax's ``nn.scan`` and ``jax_utils`` to find
which outputs of a body are known without its traced inputs): JAX's tuple-shaped
``PartialVal`` and ``trace_to_jaxpr_nounits`` over jaxkit's partial evaluator."""
from __future__ import annotations

from typing import NamedTuple

from jaxkit import core
from jaxkit.extend import linear_util as lu
from jaxkit.interpreters import partial_eval as _pe
from jaxkit.interpreters.partial_eval import convert_constvars_jaxpr, dce_jaxpr  # noqa: F401
from jaxkit.interpreters.partial_eval import (  # noqa: F401  (the rest of JAX's public names)
    DynamicJaxprTracer, JaxprTracer, Val, custom_partial_eval_rules, dce_jaxpr_call_rule,
    dce_jaxpr_closed_call_rule, dce_jaxpr_consts, dce_rules, partial_eval_jaxpr_custom_rules,
    trace_to_jaxpr_dynamic)

__all__ = ["DynamicJaxprTracer", "JaxprTracer", "PartialVal", "Val", "convert_constvars_jaxpr",
           "custom_partial_eval_rules", "dce_jaxpr", "dce_jaxpr_call_rule",
           "dce_jaxpr_closed_call_rule", "dce_jaxpr_consts", "dce_rules",
           "partial_eval_jaxpr_custom_rules", "trace_to_jaxpr_dynamic", "trace_to_jaxpr_nounits"]


class PartialVal(NamedTuple):
    """``(aval, None)`` for an unknown value, ``(None, value)`` for a known one."""

    pv: core.ShapedArray | None
    const: object

    @classmethod
    def known(cls, const) -> PartialVal:
        return cls(None, const)

    @classmethod
    def unknown(cls, aval: core.ShapedArray) -> PartialVal:
        return cls(aval, None)

    def is_known(self) -> bool:
        return self.pv is None

    def get_known(self):
        return self.const if self.pv is None else None

    def get_aval(self):
        return core.get_aval(self.const) if self.pv is None else self.pv


def _to_jaxkit(p: PartialVal) -> _pe.PartialVal:
    return _pe.PartialVal.known(p.const) if p.pv is None else _pe.PartialVal.unknown(p.pv)


def trace_to_jaxpr_nounits(fun: lu.WrappedFun, pvals, instantiate=False):
    """Partially evaluate ``fun`` (flat in, flat out): returns the jaxpr of the unknown part,
    the outputs as ``PartialVal``s and the residuals (the jaxpr's constvars' values)."""
    jaxpr, out_pvals, residuals = _pe.trace_to_subjaxpr(
        lambda *args: list(fun.call_wrapped(*args)), [_to_jaxkit(p) for p in pvals],
        instantiate)
    outs = [PartialVal.known(p.value) if p.is_known else PartialVal.unknown(p.aval)
            for p in out_pvals]
    return jaxpr, outs, tuple(residuals)
