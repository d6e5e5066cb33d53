"""Call primitives: ``CallPrimitive``, ``call_p``, ``closed_call_p`` and ``call_impl``.

A call primitive applies a function to its operands. As in JAX 0.10.2 it is bound either with
the function, ``prim.bind(*args, subfuns=(fun,))`` (``fun`` a ``linear_util.WrappedFun`` or a
plain callable returning a list), or, when a jaxpr equation is re-bound, with the traced body,
``prim.bind(*args, call_jaxpr=...)``; ``get_bind_params`` turns the second form into the first.

Eagerly the function simply runs (``call_impl``). Under a transformation the function is traced
to a jaxpr at the operands' types and the primitive is bound with it, so a staged program shows
``call[call_jaxpr={...}]`` (``call_p`` holds an open ``Jaxpr``, ``closed_call_p`` a
``ClosedJaxpr``), and each transformation (JVP, transpose, vmap, partial evaluation, lowering to
a private ``func.func``) is applied to that jaxpr and re-bound as a call, as JAX does.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import core
from jaxkit.core import ClosedJaxpr, Jaxpr
from jaxkit.extend import linear_util as lu
from jaxkit.interpreters import ad, batching, mlir, mlir_calls
from jaxkit.interpreters import partial_eval as pe

__all__ = ["CallPrimitive", "ClosedCallPrimitive", "call_impl", "call_p", "closed_call_p"]


def call_impl(f: lu.WrappedFun | Callable, *args, **params) -> list:
    """Run the called function on concrete operands (``params`` parameterise the primitive,
    not the function)."""
    del params
    out = f.call_wrapped(*args) if isinstance(f, lu.WrappedFun) else f(*args)
    return list(out)


class CallPrimitive(core.Primitive):
    """A primitive whose equation calls a jaxpr, ``call_jaxpr`` (an open ``Jaxpr``). Every
    instance gets the full rule set (a library's own call primitive too)."""

    multiple_results = True
    call_primitive = True

    def __init__(self, name: str):
        super().__init__(name)
        _make_rules(self)

    def bind(self, *args, **params):
        if "call_jaxpr" in params:
            if "subfuns" in params:
                raise TypeError(f"{self.name}.bind takes subfuns=(fun,) or call_jaxpr=..., "
                                "not both")
            return super().bind(*args, **params)
        if "subfuns" not in params:
            raise TypeError(f"{self.name}.bind needs the function to call: "
                            f"{self.name}.bind(*args, subfuns=(fun,)), or the traced body: "
                            f"{self.name}.bind(*args, call_jaxpr=...)")
        params = dict(params)
        fun, = params.pop("subfuns")
        if isinstance(core.current_trace(), core.EvalTrace):
            return call_impl(fun, *args, **params)
        avals = [core.get_aval(x) for x in args]
        jaxpr, consts = pe.trace_to_jaxpr(lambda *xs: call_impl(fun, *xs), avals)
        return _bind_closed(self, ClosedJaxpr(jaxpr, consts), args, params)

    def get_bind_params(self, params: dict) -> dict:
        """``params`` of an equation as ``bind`` takes them with the function form: the body
        becomes ``subfuns=(fun,)``."""
        new_params = dict(params)
        closed = _closed(new_params.pop("call_jaxpr"))
        new_params["subfuns"] = (lu.wrap_init(core.jaxpr_as_fun(closed)),)
        return new_params

    def wrap_body(self, closed: ClosedJaxpr):
        """The ``call_jaxpr`` parameter for a body without constants."""
        return closed.jaxpr


class ClosedCallPrimitive(CallPrimitive):
    """A call primitive whose ``call_jaxpr`` is a ``ClosedJaxpr``."""

    def wrap_body(self, closed: ClosedJaxpr):
        return closed


def _closed(call_jaxpr: Jaxpr | ClosedJaxpr) -> ClosedJaxpr:
    return call_jaxpr if isinstance(call_jaxpr, ClosedJaxpr) else ClosedJaxpr(call_jaxpr, [])


def _bind_closed(prim: CallPrimitive, closed: ClosedJaxpr, args: Sequence, params: dict):
    """Bind ``prim`` on ``args`` with body ``closed``. The body's constants become leading
    operands (they may be tracers of the transformation binding it; a jaxpr parameter must
    hold none), so the parameter is a body without constants."""
    if closed.consts:
        args = [*closed.consts, *args]
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(closed.jaxpr), [])
    return core.Primitive.bind(prim, *args, call_jaxpr=prim.wrap_body(closed), **params)


def _call_abstract_eval(*avals, call_jaxpr, **params):
    return _closed(call_jaxpr).out_avals


def _call_eval(*args, call_jaxpr, **params):
    closed = _closed(call_jaxpr)
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _call_lowering(ctx: mlir.LoweringRuleContext, *args, call_jaxpr, prim_name: str, **params):
    # As JAX: the body is a private function of the module, called where the equation is.
    # The tokens of the body's ordered effects pass through the call (``mlir_calls``).
    return mlir_calls.call_function(ctx, prim_name, _closed(call_jaxpr), *args)


def _make_rules(prim: CallPrimitive) -> None:
    """The JVP, transpose, batching and partial-evaluation rules of ``prim``: each transforms
    the body as a jaxpr and binds ``prim`` again with the result."""

    def jvp(primals, tangents, *, call_jaxpr, **params):
        closed = _closed(call_jaxpr)
        nonzeros = [not ad.is_zero(t) for t in tangents]
        jvp_closed, out_nz = ad.jvp_jaxpr(closed, nonzeros, instantiate=False)
        outs = _bind_closed(prim, jvp_closed,
                            [*primals, *(t for t in tangents if not ad.is_zero(t))], params)
        n_out = len(closed.out_avals)
        tangents_it = iter(outs[n_out:])
        return outs[:n_out], [next(tangents_it) if nz else ad.Zero(a.to_tangent_aval())
                              for a, nz in zip(closed.out_avals, out_nz)]

    def transpose(cts, *args, call_jaxpr, **params):
        closed = _closed(call_jaxpr)
        linear = [ad.is_undefined_primal(x) for x in args]
        ct_nonzero = [not ad.is_zero(c) for c in cts]
        t_closed, cts_nz = ad.transpose_jaxpr(closed, linear, ct_nonzero)
        ins = [x for x, lin in zip(args, linear) if not lin]
        ins += [c for c, nz in zip(cts, ct_nonzero) if nz]
        outs = iter(_bind_closed(prim, t_closed, ins, params))
        nz_it = iter(cts_nz)
        return [(next(outs) if next(nz_it) else ad.Zero(x.aval)) if lin else None
                for x, lin in zip(args, linear)]

    def batch(axis_data, vals, dims, *, call_jaxpr, **params):
        batched, out_dims = batching.batch_jaxpr_axes(_closed(call_jaxpr), axis_data, dims)
        return _bind_closed(prim, batched, vals, params), out_dims

    def partial_eval(trace: pe.JaxprTrace, *args, call_jaxpr, **params):
        closed = _closed(call_jaxpr)
        unknowns = [not trace.is_known(x) for x in args]
        known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(closed, unknowns, False)
        with core.set_current_trace(trace.parent):
            known_outs = _bind_closed(prim, known,
                                      [x for x, uk in zip(args, unknowns) if not uk], params)
        n_known = len(known_outs) - num_res
        unknown_args = [*known_outs[n_known:], *(x for x, uk in zip(args, unknowns) if uk)]
        staged = iter(trace.stage(prim, unknown_args, unknown.out_avals,
                                  {**params, "call_jaxpr": prim.wrap_body(unknown)}))
        known_it = iter(known_outs[:n_known])
        return [next(staged) if uk else next(known_it) for uk in out_uk]

    prim.def_impl(_call_eval)
    prim.def_abstract_eval(_call_abstract_eval)
    ad.defjvp_rule(prim, jvp)
    ad.deftranspose(prim, transpose)
    batching.defrule(prim, batch, named_axis=True)
    pe.defpartial_eval(prim, partial_eval)
    mlir.register_lowering(prim, _lowering_for(prim))


def _lowering_for(prim: CallPrimitive) -> Callable[..., Any]:
    def rule(ctx, *args, **params):
        return _call_lowering(ctx, *args, prim_name=prim.name, **params)
    return rule


call_p: CallPrimitive = CallPrimitive("call")
closed_call_p: ClosedCallPrimitive = ClosedCallPrimitive("closed_call")
# As in JAX, a call's unused outputs prune its body (and the operands only they read).
pe.dce_rules[call_p] = pe.dce_jaxpr_call_rule
pe.dce_rules[closed_call_p] = pe.dce_jaxpr_closed_call_rule
