"""Primitives that call a jaxpr given as their ``jaxpr`` parameter, with the full rule set
(``xla_metadata_call`` of ``scheduling_groups`` and ``fused_call`` of ``fused``).

``make_jaxpr_call(name, lowering)`` returns such a primitive: eagerly it evaluates the body;
JVP, transpose, vmap, partial evaluation and DCE transform the body as a jaxpr and bind the
primitive again with it and the same static parameters, so the annotation the parameters carry
(a scheduling group, memory spaces) survives every transformation, as in JAX. ``bind_traced``
traces a Python function and binds the primitive: constants the body closes over that are
tracers become leading operands, so the ``jaxpr`` parameter holds concrete constants only.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import core, tree_util
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe

__all__ = ["bind_traced", "call_body", "make_jaxpr_call"]


def bind_traced(prim: core.Primitive, fun: Callable, args: tuple, kwargs: dict,
                **params: Any) -> Any:
    """``fun(*args, **kwargs)`` as one ``prim`` equation holding its jaxpr."""
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    avals = [core.get_aval(x) for x in flat]
    jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(lambda ak: fun(*ak[0], **ak[1]), in_tree,
                                                     avals)
    outs = _bind(prim, ClosedJaxpr(jaxpr, consts), flat, params)
    return tree_util.tree_unflatten(out_tree, outs)


def _bind(prim: core.Primitive, closed: ClosedJaxpr, args: Sequence, params: dict) -> list:
    """Bind ``prim`` with body ``closed``; traced constants become leading operands."""
    if any(isinstance(c, core.Tracer) for c in closed.consts):
        args = [*closed.consts, *args]
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(closed.jaxpr), [])
    return prim.bind(*args, jaxpr=closed, **params)


def _same_params(params: dict, sources: Sequence[int | None]) -> dict:
    return params


def make_jaxpr_call(name: str, lowering: Callable[..., Any], *, impl: Callable | None = None,
                    out_params: Callable[[dict, Sequence[int | None]], dict] = _same_params
                    ) -> core.Primitive:
    """A new multiple-results primitive ``name`` calling its ``jaxpr`` parameter, lowered by
    ``lowering(ctx, *args, jaxpr, **params)`` and evaluated eagerly by ``impl`` (default: the
    body). Params that describe the outputs are rewritten by ``out_params(params, sources)``
    whenever a rule builds a new body: ``sources[j]`` is the output of the old body that new
    output ``j`` derives from (its tangent, its batched value), or None (a residual or an
    input cotangent)."""
    prim = core.Primitive(name)
    prim.multiple_results = True

    def eval_body(*args, jaxpr: ClosedJaxpr, **_):
        return core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)

    def jvp(primals, tangents, *, jaxpr: ClosedJaxpr, **params):
        nonzeros = [not ad.is_zero(t) for t in tangents]
        jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
        n_out = len(jaxpr.out_avals)
        sources = [*range(n_out), *(i for i, nz in enumerate(out_nz) if nz)]
        outs = _bind(prim, jvp_closed, [*primals, *(t for t in tangents if not ad.is_zero(t))],
                     out_params(params, sources))
        tangents_it = iter(outs[n_out:])
        return outs[:n_out], [next(tangents_it) if nz else ad.Zero(a.to_tangent_aval())
                              for a, nz in zip(jaxpr.out_avals, out_nz)]

    def transpose(cts, *args, jaxpr: ClosedJaxpr, **params):
        linear = [ad.is_undefined_primal(x) for x in args]
        ct_nonzero = [not ad.is_zero(c) for c in cts]
        t_closed, cts_nz = ad.transpose_jaxpr(jaxpr, linear, ct_nonzero)
        ins = [x for x, lin in zip(args, linear) if not lin]
        ins += [c for c, nz in zip(cts, ct_nonzero) if nz]
        outs = iter(_bind(prim, t_closed, ins,
                          out_params(params, [None] * len(t_closed.out_avals))))
        nz_it = iter(cts_nz)
        return [(next(outs) if next(nz_it) else ad.Zero(x.aval)) if lin else None
                for x, lin in zip(args, linear)]

    def batch(axis_data, vals, dims, *, jaxpr: ClosedJaxpr, **params):
        batched, out_dims = batching.batch_jaxpr_axes(jaxpr, axis_data, dims)
        return _bind(prim, batched, vals, params), out_dims

    def partial_eval(trace: pe.JaxprTrace, *args, jaxpr: ClosedJaxpr, **params):
        unknowns = [not trace.is_known(x) for x in args]
        known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(jaxpr, unknowns, False)
        known_src = [*(i for i, uk in enumerate(out_uk) if not uk), *[None] * num_res]
        with core.set_current_trace(trace.parent):
            known_outs = _bind(prim, known, [x for x, uk in zip(args, unknowns) if not uk],
                               out_params(params, known_src))
        n_known = len(known_outs) - num_res
        unknown_args = [*known_outs[n_known:], *(x for x, uk in zip(args, unknowns) if uk)]
        if unknown.consts:
            unknown_args = [*unknown.consts, *unknown_args]
            unknown = ClosedJaxpr(pe.convert_constvars_jaxpr(unknown.jaxpr), [])
        staged = iter(trace.stage(prim, unknown_args, unknown.out_avals,
                                  {**out_params(params, [i for i, uk in enumerate(out_uk)
                                                         if uk]), "jaxpr": unknown}))
        known_it = iter(known_outs[:n_known])
        return [next(staged) if uk else next(known_it) for uk in out_uk]

    def dce(used_outputs: list[bool], eqn: core.JaxprEqn):
        # Drop the outputs nobody reads, then the inputs the pruned body no longer needs.
        closed = eqn.params["jaxpr"]
        if not any(used_outputs) and not pe.eqn_has_effects(eqn):
            return [False] * len(eqn.invars), None
        body, used_inputs = pe.dce_jaxpr(closed.jaxpr, used_outputs)
        body = core.Jaxpr(body.constvars, [v for v, u in zip(body.invars, used_inputs) if u],
                          body.outvars, body.eqns, debug_info=body.debug_info)
        new_eqn = eqn.replace(
            invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
            outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
            params=dict(out_params(eqn.params, [i for i, u in enumerate(used_outputs) if u]),
                        jaxpr=ClosedJaxpr(body, closed.consts)))
        return list(used_inputs), new_eqn

    prim.def_impl(impl if impl is not None else eval_body)
    prim.def_abstract_eval(lambda *avals, jaxpr, **_: list(jaxpr.out_avals))
    ad.defjvp_rule(prim, jvp)
    ad.deftranspose(prim, transpose)
    batching.defrule(prim, batch, named_axis=True)
    pe.defpartial_eval(prim, partial_eval)
    pe.dce_rules[prim] = dce
    mlir.register_lowering(prim, lowering)
    return prim


def call_body(ctx: mlir.LoweringRuleContext, name: str, jaxpr: ClosedJaxpr, args: Sequence):
    """A ``func.call`` of ``jaxpr`` emitted as a private function ``name`` of the module."""
    fn = mlir.private_function(ctx.module_context, name, jaxpr)
    result_types = [mlir.aval_to_ir_type(a) for a in jaxpr.out_avals]
    return mlir.func_dialect.CallOp(result_types, mlir.ir.FlatSymbolRefAttr.get(fn), list(args))
