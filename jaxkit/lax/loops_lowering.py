"""The lowering of ``while`` (which ``fori_loop`` and ``scan`` lower through) to
``stablehlo.while``, carrying the tokens of the ordered effects of its body (``mlir_tokens``) so
that ordered callbacks in the loop keep their order with those around it."""
from __future__ import annotations

from jaxkit import core
from jaxkit._util import split_list
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import mlir, mlir_tokens
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo, ir


def while_lowering(ctx: mlir.LoweringRuleContext, *args, cond_jaxpr, body_jaxpr, cond_nconsts,
                   body_nconsts):
    if mlir_tokens.ordered_effects(cond_jaxpr):
        return _cond_in_body(ctx, *args, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                             cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
    mctx = ctx.module_context
    kinds = mlir_tokens.ordered_effects(body_jaxpr)
    ntok = len(kinds)
    # The tokens lead the loop state; constants travel in it too (regions read only their
    # own arguments).
    state = [*mlir_tokens.current_tokens(mctx, kinds), *args]
    types = [*mlir_tokens.token_types(kinds), *(mlir.aval_to_ir_type(a) for a in ctx.avals_in)]
    loop = hlo.WhileOp(types, state)
    cond_block = loop.cond.blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        a = list(cond_block.arguments)[ntok:]
        (pred,) = mlir.closed_subcomp(mctx, cond_jaxpr, *a[:cond_nconsts],
                                      *a[cond_nconsts + body_nconsts:])
        hlo.ReturnOp([pred])
    body_block = loop.body.blocks.append(*types)
    with ir.InsertionPoint(body_block):
        tokens, a = split_list(list(body_block.arguments), [ntok])
        mlir_tokens.set_tokens(mctx, kinds, tokens)
        new = mlir.closed_subcomp(mctx, body_jaxpr, *a[cond_nconsts:cond_nconsts + body_nconsts],
                                  *a[cond_nconsts + body_nconsts:])
        hlo.ReturnOp([*mlir_tokens.current_tokens(mctx, kinds),
                      *a[:cond_nconsts + body_nconsts], *new])
    tokens, outs = split_list(list(loop.results), [ntok])
    mlir_tokens.set_tokens(mctx, kinds, tokens)
    return outs[cond_nconsts + body_nconsts:]


def _cond_in_body(ctx: mlir.LoweringRuleContext, *args, cond_jaxpr, body_jaxpr, cond_nconsts,
                  body_nconsts):
    """A loop whose condition has ordered effects (a ``stablehlo.while``'s condition region
    returns only its predicate, no tokens), as JAX lowers it: the condition is evaluated once
    before the loop and then at the end of each body, the loop testing the carried result."""
    cconsts, bconsts, carry = split_list(list(ctx.avals_in), [cond_nconsts, body_nconsts])
    pred_aval = cond_jaxpr.out_avals[0]

    def cond(*xs):
        return core.eval_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, *xs)[0]

    def new_body(*xs):
        cc, bc, _, c = split_list(list(xs), [cond_nconsts, body_nconsts, 1])
        c = core.eval_jaxpr(body_jaxpr.jaxpr, body_jaxpr.consts, *bc, *c)
        return [cond(*cc, *c), *c]

    new_cond = ClosedJaxpr(*pe.trace_to_jaxpr(lambda p, *_: [p], [pred_aval, *carry]))
    body = ClosedJaxpr(*pe.trace_to_jaxpr(new_body, [*cconsts, *bconsts, pred_aval, *carry]))
    prim = ctx.primitive

    def fun(*xs):
        cc, bc, c = split_list(list(xs), [cond_nconsts, body_nconsts])
        outs = prim.bind(*cc, *bc, cond(*cc, *c), *c, cond_jaxpr=new_cond, body_jaxpr=body,
                         cond_nconsts=0, body_nconsts=cond_nconsts + body_nconsts)
        return outs[1:]

    return mlir.lower_fun(fun, multiple_results=True)(ctx, *args)
