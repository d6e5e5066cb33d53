"""``eval_jaxpr_p``: apply a closed jaxpr as one equation, lowered as a call of a private
``func.func @closed_call``.

JAX's scan lowering runs the loop body this way, so its lowered programs show the body of
every ``scan`` (and of what lowers through one: ``fori_loop`` with static bounds, the rolled
Threefry loop) as ``func.call @closed_call`` inside the ``stablehlo.while``. The loop
lowerings here bind it for the same text. It is the identity on what the jaxpr computes: its
JVP and batching rules transform the jaxpr and bind it again.
"""
from __future__ import annotations

from collections.abc import Sequence

from jaxkit import core
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import ad, batching, mlir, mlir_calls

__all__ = ["eval_jaxpr", "eval_jaxpr_p"]


def eval_jaxpr(closed: ClosedJaxpr, *args) -> list:
    """``closed`` applied to ``args`` (one equation; lowered as ``func.call @closed_call``)."""
    return eval_jaxpr_p.bind(*args, jaxpr=closed)


def _eval_jaxpr_impl(*args, jaxpr: ClosedJaxpr):
    return core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


def _eval_jaxpr_jvp(primals: Sequence, tangents: Sequence, *, jaxpr: ClosedJaxpr):
    nonzeros = [not ad.is_zero(t) for t in tangents]
    jvp_closed, out_nonzeros = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    outs = eval_jaxpr_p.bind(*primals, *(t for t in tangents if not ad.is_zero(t)),
                             jaxpr=jvp_closed)
    n_out = len(jaxpr.out_avals)
    nonzero_tangents = iter(outs[n_out:])
    return outs[:n_out], [next(nonzero_tangents) if nz else ad.Zero(a.to_tangent_aval())
                          for a, nz in zip(jaxpr.out_avals, out_nonzeros)]


def _eval_jaxpr_batch(axis_data, args: Sequence, dims: Sequence, *, jaxpr: ClosedJaxpr):
    batched, out_dims = batching.batch_jaxpr_axes(jaxpr, axis_data, dims)
    return eval_jaxpr_p.bind(*args, jaxpr=batched), out_dims


def _eval_jaxpr_lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: ClosedJaxpr):
    return mlir_calls.call_jaxpr(ctx, "closed_call", jaxpr, *args)


eval_jaxpr_p = core.Primitive("eval_jaxpr")
eval_jaxpr_p.multiple_results = True
eval_jaxpr_p.def_impl(_eval_jaxpr_impl)
eval_jaxpr_p.def_abstract_eval(lambda *avals, jaxpr: list(jaxpr.out_avals))
ad.defjvp_rule(eval_jaxpr_p, _eval_jaxpr_jvp)
batching.defrule(eval_jaxpr_p, _eval_jaxpr_batch)
mlir.register_lowering(eval_jaxpr_p, _eval_jaxpr_lowering)
