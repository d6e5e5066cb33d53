"""``linear_call``: call a function linear in some arguments, with a user-given transpose.

``linear_call(fun, fun_transpose, residual_args, linear_args)`` traces ``fun`` and binds the
``linear_call`` primitive carrying its jaxpr (``callee``) and a thunk that traces
``fun_transpose`` when first needed. Its rules:

* JVP: ``fun`` is linear in ``linear_args``, so the tangent output is the same call applied
  to the tangents (the residuals cannot be differentiated: ``fun`` need not be linear, or even
  differentiable, in them);
* transpose: a ``linear_call`` of ``fun_transpose`` whose own transpose is ``fun`` again, so
  transposing twice gives back the original call;
* lowering: the callee's jaxpr inline.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxkit import core
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import ad, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.literals import canonicalize_value

__all__ = ["linear_call", "linear_call_p"]


def _trace(fun: Callable, in_tree, avals, what: str):
    """``fun`` (two positional pytrees) traced to a closed jaxpr taking its constants as
    leading inputs: ``(closed, consts, out_tree)``."""
    debug = pe.debug_info(what, fun, [f"args[{i}]" for i in range(len(avals))])
    jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(lambda args: fun(*args), in_tree,
                                                     list(avals), debug)
    return ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), []), consts, out_tree


def linear_call(fun: Callable, fun_transpose: Callable, residual_args: Any,
                linear_args: Any) -> Any:
    """``fun(residual_args, linear_args)``, where ``fun`` is linear in ``linear_args`` and
    ``fun_transpose(residual_args, cotangents)`` is its transpose with respect to them: the
    transposition (``linear_transpose``, ``vjp``, ``grad``) uses ``fun_transpose`` instead
    of transposing ``fun``'s body. ``fun_transpose`` must return a pytree of the structure of
    ``linear_args``."""
    res_flat, res_tree = tree_util.tree_flatten(residual_args)
    lin_flat, lin_tree = tree_util.tree_flatten(linear_args)
    in_tree = tree_util.tree_structure((residual_args, linear_args))
    res_avals = [core.get_aval(x) for x in res_flat]
    lin_avals = [core.get_aval(x) for x in lin_flat]
    callee, consts, out_tree = _trace(fun, in_tree, res_avals + lin_avals, "linear_call fun")
    out_avals = list(callee.out_avals)
    cell: list = []

    def transpose_thunk():
        # Traced once, on the first transposition.
        if not cell:
            t_in_tree = tree_util.tree_structure(
                (residual_args, tree_util.tree_unflatten(out_tree, out_avals)))
            t_closed, t_consts, t_out_tree = _trace(fun_transpose, t_in_tree,
                                                    res_avals + out_avals,
                                                    "linear_call fun_transpose")
            if t_out_tree != lin_tree:
                raise TypeError("transpose output pytree structure must match that of linear "
                                f"inputs, got output structure {t_out_tree} and input "
                                f"structure {lin_tree}.")
            cell.append((t_closed, t_consts))
        return cell[0]

    out = linear_call_p.bind(*consts, *res_flat, *lin_flat, callee=callee,
                             transpose_thunk=transpose_thunk, num_callee_consts=len(consts),
                             num_res=len(res_flat))
    return tree_util.tree_unflatten(out_tree, out)


def _linear_call_impl(*args, callee: ClosedJaxpr, **_):
    # (the operands as JAX's bind makes them: an input handed back is typed, as JAX's)
    return core.eval_jaxpr(callee.jaxpr, callee.consts, *map(canonicalize_value, args))


def _linear_call_abstract_eval(*avals, callee: ClosedJaxpr, **_):
    return list(callee.out_avals)


def _linear_call_jvp(primals, tangents, *, callee: ClosedJaxpr, transpose_thunk: Callable,
                     num_callee_consts: int, num_res: int):
    n_fixed = num_callee_consts + num_res
    params = dict(callee=callee, transpose_thunk=transpose_thunk,
                  num_callee_consts=num_callee_consts, num_res=num_res)
    if any(not ad.is_zero(t) for t in tangents[:n_fixed]):
        raise TypeError("linear_call: cannot differentiate with respect to residual_args (or "
                        "values that fun closes over): fun is only known to be linear in "
                        "linear_args. Pass the values to differentiate as linear_args, or "
                        "compute with them outside the linear_call.")
    primals_out = linear_call_p.bind(*primals, **params)
    lin_tangents = tangents[n_fixed:]
    if all(ad.is_zero(t) for t in lin_tangents):
        return primals_out, [ad.Zero(a.to_tangent_aval()) for a in callee.out_avals]
    lin_tangents = [ad.instantiate_zeros(t) for t in lin_tangents]
    tangents_out = linear_call_p.bind(*primals[:n_fixed], *lin_tangents, **params)
    return primals_out, tangents_out


def _linear_call_transpose(cts, *args, callee: ClosedJaxpr, transpose_thunk: Callable,
                           num_callee_consts: int, num_res: int):
    f_consts = args[:num_callee_consts]
    res = args[num_callee_consts:num_callee_consts + num_res]
    lin = args[num_callee_consts + num_res:]
    if any(ad.is_undefined_primal(x) for x in (*f_consts, *res)):
        raise TypeError("linear_call: residual_args must not depend on the linear inputs of "
                        "the function being transposed.")
    transpose, t_consts = transpose_thunk()
    cts = [ad.instantiate_zeros(c) for c in cts]
    cts_out = linear_call_p.bind(*t_consts, *res, *cts, callee=transpose,
                                 transpose_thunk=lambda: (callee, f_consts),
                                 num_callee_consts=len(t_consts), num_res=num_res)
    return [None] * (num_callee_consts + num_res) + [
        ct if ad.is_undefined_primal(x) else None for x, ct in zip(lin, cts_out)]


def _linear_call_lowering(ctx, *args, callee: ClosedJaxpr, **_):
    return mlir.closed_subcomp(ctx.module_context, callee, *args)


linear_call_p = core.Primitive("linear_call")
linear_call_p.multiple_results = True
linear_call_p.def_impl(_linear_call_impl)
linear_call_p.def_abstract_eval(_linear_call_abstract_eval)
ad.defjvp_rule(linear_call_p, _linear_call_jvp)
ad.deftranspose(linear_call_p, _linear_call_transpose)
mlir.register_lowering(linear_call_p, _linear_call_lowering)
