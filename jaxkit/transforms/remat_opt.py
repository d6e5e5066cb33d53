"""``remat_opt``: ``custom_vjp``'s ``defvjp(fwd, bwd, optimize_remat=True)``.

Without it, differentiating a ``custom_vjp`` function inlines its forward rule's operations,
and when the residuals end up unused (the function is rematerialized under ``checkpoint``,
or only its value is needed) DCE can only drop them one by one, which it cannot do through an
opaque kernel. With it, the forward rule runs as one ``remat_opt`` equation:

    res..., outs... = remat_opt[fwd_jaxpr=... num_consts=... num_res=... fun_jaxpr_thunk=...]

whose DCE rule, when no residual is used, puts the primal function back in its place (and
otherwise prunes the forward rule to what is used). Residuals that are inputs forwarded as
they are stay out of the equation's results, as in JAX. Forward-over-reverse works (its JVP
rule differentiates both jaxprs); transposing it (reverse over reverse) is JAX's
NotImplementedError.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from jaxkit import core, tree_util
from jaxkit._util import split_list
from jaxkit.core import ClosedJaxpr, Jaxpr
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe

__all__ = ["optimize_remat_of_custom_vjp_fwd", "remat_opt_p"]


def _memoize(thunk: Callable) -> Callable:
    """``thunk`` run once, when first called (JAX's ``pe._memoize``; the equation prints it
    by this function's name, as JAX shows ``_memoize.<locals>.memoized``)."""
    cell: list = []

    def memoized():
        if not cell:
            cell.append(thunk())
        return cell[0]
    return memoized


def _trace(fun: Callable, avals: Sequence) -> ClosedJaxpr:
    """``fun`` traced to a jaxpr with no consts: its constants become leading inputs, whose
    values are returned too."""
    jaxpr, consts = pe.trace_to_jaxpr(fun, list(avals))
    return ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []), list(consts)


def optimize_remat_of_custom_vjp_fwd(fun: Callable, fwd: Callable,
                                     nondiff_argnums: Sequence[int] = ()) -> Callable:
    """The forward rule ``fwd`` of the custom_vjp function ``fun``, run as one ``remat_opt``
    equation (arguments at ``nondiff_argnums`` are static)."""
    nondiff = frozenset(nondiff_argnums)

    @functools.wraps(fwd)
    def wrapped_fwd(*args):
        dyn = [a for i, a in enumerate(args) if i not in nondiff]
        flat, in_tree = tree_util.tree_flatten(dyn)
        avals = [core.get_aval(x) for x in flat]

        def full(xs):
            it = iter(tree_util.tree_unflatten(in_tree, xs))
            return [a if i in nondiff else next(it) for i, a in enumerate(args)]

        trees: list = []

        def flat_fwd(*xs):
            out = fwd(*full(xs))
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"Custom VJP fwd rule {getattr(fwd, '__name__', fwd)} must "
                                "produce a pair (list or tuple of length two) representing "
                                "primal outputs and residuals.")
            prims, prim_tree = tree_util.tree_flatten(out[0])
            res, res_tree = tree_util.tree_flatten(out[1])
            trees[:] = [prim_tree, res_tree, len(res)]
            return [*res, *prims]

        fwd_jaxpr, consts = _trace(flat_fwd, avals)
        prim_tree, res_tree, n_res = trees
        # Residuals that are inputs passed through stay out of the equation, as in JAX.
        ins = fwd_jaxpr.jaxpr.invars[len(consts):]
        res_vars = fwd_jaxpr.jaxpr.outvars[:n_res]
        fwds = [ins.index(v) if v in ins else None for v in res_vars]
        kept = [v for v, f in zip(res_vars, fwds) if f is None]
        j = fwd_jaxpr.jaxpr
        fwd_jaxpr = ClosedJaxpr(Jaxpr(j.constvars, j.invars, [*kept, *j.outvars[n_res:]],
                                      j.eqns, debug_info=j.debug_info), [])

        @_memoize
        def fun_jaxpr_thunk():  # the primal function: (jaxpr, consts) over the arguments
            return pe.trace_to_jaxpr(lambda *xs: tree_util.tree_leaves(fun(*full(xs))), avals)

        outs = remat_opt_p.bind(*consts, *flat, num_consts=len(consts), num_res=len(kept),
                                fwd_jaxpr=fwd_jaxpr, fun_jaxpr_thunk=fun_jaxpr_thunk)
        res_out, prims_out = split_list(outs, [len(kept)])
        res_it = iter(res_out)
        res = [next(res_it) if f is None else flat[f] for f in fwds]
        return (tree_util.tree_unflatten(prim_tree, prims_out),
                tree_util.tree_unflatten(res_tree, res))
    return wrapped_fwd


def _impl(*args, fwd_jaxpr: ClosedJaxpr, **_):
    return core.eval_jaxpr(fwd_jaxpr.jaxpr, fwd_jaxpr.consts, *args)


def _abstract_eval(*avals, fwd_jaxpr: ClosedJaxpr, **_):
    return list(fwd_jaxpr.out_avals)


def _batch(axis_data, args, dims, *, num_consts: int, num_res: int, fwd_jaxpr: ClosedJaxpr,
           fun_jaxpr_thunk: Callable):
    batched, out_dims = batching.batch_jaxpr_axes(fwd_jaxpr, axis_data, dims)
    batched, extra = ClosedJaxpr(pe.convert_constvars_jaxpr(batched.jaxpr), []), batched.consts

    @_memoize
    def batched_thunk():
        fun_jaxpr, fun_consts = fun_jaxpr_thunk()
        # Its results batched where the forward rule's are, for DCE may swap it in.
        b, _ = batching.batch_jaxpr_axes(ClosedJaxpr(fun_jaxpr, fun_consts), axis_data,
                                         list(dims[num_consts:]), out_dims[num_res:])
        return b.jaxpr, b.consts

    outs = remat_opt_p.bind(*extra, *args, num_consts=num_consts + len(extra), num_res=num_res,
                            fwd_jaxpr=batched, fun_jaxpr_thunk=batched_thunk)
    return outs, out_dims


def _permuted(closed: ClosedJaxpr, in_order: Sequence[int], out_order: Sequence[int]):
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in in_order],
                             [j.outvars[i] for i in out_order], j.eqns, debug_info=j.debug_info),
                       closed.consts)


def _jvp(primals, tangents, *, num_consts: int, num_res: int, fwd_jaxpr: ClosedJaxpr,
         fun_jaxpr_thunk: Callable):
    # Every tangent is instantiated: a later DCE may swap in the primal function, whose
    # JVP then needs them all.
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    n_in, n_out = len(primals), len(fwd_jaxpr.out_avals)
    jvp_closed, _ = ad.jvp_jaxpr(fwd_jaxpr, [True] * n_in, True)
    # (consts, args, const tangents, arg tangents) -> (consts, const tangents, args, ...);
    # (res, outs, res tangents, out tangents) -> (res, res tangents, outs, out tangents).
    c = num_consts
    in_order = [*range(c), *range(n_in, n_in + c), *range(c, n_in), *range(n_in + c, 2 * n_in)]
    r, o = num_res, n_out - num_res
    out_order = [*range(r), *range(n_out, n_out + r), *range(r, n_out),
                 *range(n_out + r, 2 * n_out)]
    permuted = _permuted(jvp_closed, in_order, out_order)
    extra = permuted.consts
    permuted = ClosedJaxpr(pe.convert_constvars_jaxpr(permuted.jaxpr), [])

    @_memoize
    def jvp_thunk():
        fun_jaxpr, fun_consts = fun_jaxpr_thunk()
        closed = ClosedJaxpr(fun_jaxpr, fun_consts)
        j, _ = ad.jvp_jaxpr(closed, [True] * len(closed.in_avals), True)
        return j.jaxpr, j.consts

    outs = remat_opt_p.bind(*extra, *primals[:c], *tangents[:c], *primals[c:], *tangents[c:],
                            num_consts=len(extra) + 2 * c, num_res=2 * r,
                            fwd_jaxpr=permuted, fun_jaxpr_thunk=jvp_thunk)
    res, res_dot, out, out_dot = split_list(outs, [r, r, o])
    return [*res, *out], [*res_dot, *out_dot]


def _transpose(cts, *args, **params):
    raise NotImplementedError(
        "remat optimization for custom_vjp does not support higher-order AD")


def _dce(used_outputs: list[bool], eqn: core.JaxprEqn):
    params = eqn.params
    if not any(used_outputs) and not pe.eqn_has_effects(eqn):
        return [False] * len(eqn.invars), None
    used_res = used_outputs[:params["num_res"]]
    outvars = [v for v, u in zip(eqn.outvars, used_outputs) if u]
    if any(used_res):  # the forward rule still runs: prune it to what is used
        body, used_ins = pe.dce_jaxpr(params["fwd_jaxpr"].jaxpr, used_outputs)
        used_ins = [u or i >= params["num_consts"] for i, u in enumerate(used_ins)]
        body = Jaxpr([], [v for v, u in zip(body.invars, used_ins) if u], body.outvars,
                     body.eqns, debug_info=body.debug_info)
        new = dict(params, fwd_jaxpr=ClosedJaxpr(body, []), num_res=sum(used_res),
                   num_consts=sum(used_ins[:params["num_consts"]]))
        return used_ins, eqn.replace(invars=[v for v, u in zip(eqn.invars, used_ins) if u],
                                     outvars=outvars, params=new)
    # No residual is used: the primal function takes the forward rule's place (JAX makes it
    # a closed_call; jaxkit has that primitive only above this layer, in jaxkit.extend, so it
    # stays a remat_opt equation, with no residuals).
    fun_jaxpr, fun_consts = params["fun_jaxpr_thunk"]()
    body, used_args = pe.dce_jaxpr(fun_jaxpr, used_outputs[params["num_res"]:])
    body = Jaxpr(body.constvars, [v for v, u in zip(body.invars, used_args) if u],
                 body.outvars, body.eqns, debug_info=body.debug_info)
    invars = [v for v, u in zip(eqn.invars[params["num_consts"]:], used_args) if u]
    new = dict(params, fwd_jaxpr=ClosedJaxpr(body, fun_consts), num_res=0, num_consts=0)
    return ([False] * params["num_consts"] + list(used_args),
            eqn.replace(invars=invars, outvars=outvars, params=new))


remat_opt_p = core.Primitive("remat_opt")
remat_opt_p.multiple_results = True
remat_opt_p.def_impl(_impl)
remat_opt_p.def_abstract_eval(_abstract_eval)
ad.defjvp_rule(remat_opt_p, _jvp)
ad.deftranspose(remat_opt_p, _transpose)
batching.defrule(remat_opt_p, _batch)
pe.dce_rules[remat_opt_p] = _dce
mlir.register_lowering(remat_opt_p, mlir.lower_fun(_impl, multiple_results=True))
