"""``eval_jaxpr_p``: apply a closed jaxpr as one equation, lowered as a call of a private
``func.func @closed_call``.

JAX's scan lowering runs the loop body this way, so its lowered programs show the body of
every ``scan`` (and of what lowers through one: ``fori_loop`` with static bounds, the rolled
Threefry loop) as ``func.call @closed_call`` inside the ``stablehlo.while``. The loop
lowerings here bind it for the same text. It is bound only while lowering, after every
transformation ran, so it has no JVP or batching rule (the scan primitive has them).
"""
from __future__ import annotations

from jaxkit import core
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import mlir, mlir_calls

__all__ = ["eval_jaxpr", "eval_jaxpr_p"]


def eval_jaxpr(closed: ClosedJaxpr, *args) -> list:
    """``closed`` applied to ``args`` (one equation; lowered as ``func.call @closed_call``)."""
    return eval_jaxpr_p.bind(*args, jaxpr=closed)


def _eval_jaxpr_impl(*args, jaxpr: ClosedJaxpr):
    return core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


def _eval_jaxpr_lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: ClosedJaxpr):
    return mlir_calls.call_jaxpr(ctx, "closed_call", jaxpr, *args)


eval_jaxpr_p = core.Primitive("eval_jaxpr")
eval_jaxpr_p.multiple_results = True
eval_jaxpr_p.def_impl(_eval_jaxpr_impl)
eval_jaxpr_p.def_abstract_eval(lambda *avals, jaxpr: list(jaxpr.out_avals))
mlir.register_lowering(eval_jaxpr_p, _eval_jaxpr_lowering)
