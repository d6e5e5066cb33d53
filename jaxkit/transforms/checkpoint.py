"""``checkpoint`` (``remat``): trade memory for computation in reverse-mode differentiation.

``checkpoint(f)`` traces ``f`` and binds the ``checkpoint`` primitive carrying its jaxpr. Its
rules make the difference:

* partial evaluation (under ``linearize``/``vjp``/``grad``) runs the known (primal) part now
  but saves as residuals only what the ``policy`` allows (nothing by default: only the
  inputs); the staged (tangent) part is a new ``checkpoint`` equation that *recomputes* the
  rest from those inputs, so the forward computation appears again in the backward pass;
* the transpose of such an equation evaluates the recomputation forward, then the linear part
  backward, inside another ``checkpoint`` (``differentiated=True``), whose lowering puts an
  optimization barrier on its inputs when ``prevent_cse`` so that XLA does not merge the
  recomputation with the original forward pass.

A policy is called as ``policy(primitive, *input_avals, **params)`` for each equation of the
known part: True (or ``Saveable``) means its outputs may be saved, False (or ``Recompute``)
that they are recomputed. ``checkpoint_policies``
holds JAX's common ones. ``checkpoint_name(x, name)`` tags values for the name-based policies.
"""
from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple


from jaxkit import core, lax
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr, Jaxpr, Var
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax.bodies import trace_context_key
from jaxkit.literals import canonicalize_value

__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint", "checkpoint_name",
           "checkpoint_policies", "remat"]


# The traced body per function and argument types, as JAX's ``_trace_to_jaxpr`` cache: a
# function checkpointed again (with any policy) reuses its first trace, so a global it reads
# that changed since is not seen (JAX's gradient-checkpointing tutorial prints this). Bodies
# that close over tracers of an outer transformation are not kept.
_trace_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_NOT_GIVEN: Any = type("DeprecatedArg", (), {"__repr__": lambda self: "Deprecated"})()


def checkpoint(fun: Callable, *, prevent_cse: bool | Sequence[bool] = True,
               policy: Callable | None = None,
               static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
               concrete: Any = _NOT_GIVEN) -> Callable:
    """``fun`` whose intermediate values are recomputed in the backward pass instead of
    being stored (except those ``policy`` allows to be saved). Arguments listed in
    ``static_argnums`` (by position) or ``static_argnames`` (keyword arguments by name) are
    not traced (Python values the function may branch on). ``prevent_cse`` may be a tuple,
    a prefix of the (traced) positional arguments: then only the inputs marked True are
    kept from being merged with the forward computation."""
    if concrete is not _NOT_GIVEN:
        raise NotImplementedError(
            "The `concrete` option to `jax.checkpoint` was deprecated in JAX v0.8.2, and "
            "removed in JAX v0.10.0. In its place please use `static_argnums`; for details "
            "refer to https://docs.jax.dev/en/latest/jep/11830-new-remat-checkpoint.html.")
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    static_argnums = tuple(static_argnums)
    if isinstance(prevent_cse, Sequence):
        prevent_cse = tuple(prevent_cse)
    if not isinstance(prevent_cse, (tuple, bool)):
        raise TypeError("prevent_cse must be a bool or tuple of bools, got "
                        f"{type(prevent_cse)=}")
    static_argnames = ((static_argnames,) if isinstance(static_argnames, str)
                       else tuple(static_argnames))
    name = getattr(fun, "__name__", type(fun).__name__)

    @functools.wraps(fun)
    def fun_remat(*args, **kwargs):  # (the arguments are checked when called, as in JAX)
        if not all(type(d) is int for d in static_argnums):
            raise TypeError("the `static_argnums` argument to `jax.checkpoint` / `jax.remat` must "
                            f"be an int, tuple of ints or, bool, but got value {static_argnums}")
        if not all(-len(args) <= d < len(args) for d in static_argnums):
            raise ValueError(
                "the `static_argnums` argument to `jax.checkpoint` / `jax.remat` can only "
                "take integer values greater than or equal to `-len(args)` and less than "
                f"`len(args)`, but got {static_argnums}, while `len(args)` = {len(args)}")
        statics = {i % len(args): args[i] for i in static_argnums}
        static_kw = {k: kwargs[k] for k in static_argnames if k in kwargs}
        kwargs = {k: v for k, v in kwargs.items() if k not in static_kw}
        dyn = tuple(a for i, a in enumerate(args) if i not in statics)
        flat, in_tree = tree_util.tree_flatten((dyn, kwargs))
        def call(dyn_and_kwargs):
            d, kw = dyn_and_kwargs
            it = iter(d)
            return fun(*[statics[i] if i in statics else next(it) for i in range(len(args))],
                       **kw, **static_kw)

        avals = [core.get_aval(x) for x in flat]
        key = (in_tree, tuple(avals), trace_context_key())
        per_fun = _trace_cache.get(fun) if not statics and not static_kw else None
        if per_fun is not None and key in per_fun:
            closed, consts, out_tree = per_fun[key]
        else:
            debug = pe.debug_info("checkpoint", fun, [f"args[{i}]" for i in range(len(flat))])
            jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(call, in_tree, avals, debug)
            closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
            if not statics and not static_kw and not any(isinstance(c, core.Tracer)
                                                         for c in consts):
                try:
                    _trace_cache.setdefault(fun, {})[key] = (closed, consts, out_tree)
                except TypeError:  # a callable that cannot be weakly referenced
                    pass
        cse = prevent_cse
        if isinstance(prevent_cse, tuple):  # one flag per input, the constants' False
            cse = (False,) * len(consts) + tuple(tree_util.broadcast_prefix(
                prevent_cse, (dyn, kwargs) if kwargs else dyn))
        outs = checkpoint_p.bind(*consts, *flat, jaxpr=closed, prevent_cse=cse,
                                 differentiated=False, policy=policy)
        return tree_util.tree_unflatten(out_tree, outs)

    fun_remat.__name__ = f"checkpoint({name})"
    return fun_remat


remat = checkpoint


# --------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------


def _everything_saveable(*_, **__) -> bool:
    return True


def _nothing_saveable(*_, **__) -> bool:
    return False


def _dots_saveable(prim, *_, **__) -> bool:
    return prim is lax.dot_general_p


def _dots_with_no_batch_dims_saveable(prim, *_, **params) -> bool:
    if prim is not lax.dot_general_p:
        return False
    (_, (lhs_batch, rhs_batch)) = params["dimension_numbers"]
    return not lhs_batch and not rhs_batch


def _save_only_these_names(*names: str) -> Callable:
    names_set = frozenset(names)

    def policy(prim, *_, **params) -> bool:
        return prim is name_p and params["name"] in names_set
    return policy


def _save_and_offload_only_these_names(*, names_which_can_be_saved: Sequence[str],
                                       names_which_can_be_offloaded: Sequence[str],
                                       offload_src: str, offload_dst: str) -> Callable:
    """Save the values named in the first list, offload those named in the second from
    memory ``offload_src`` to ``offload_dst``, recompute the rest."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    both = saved & offloaded
    if both:
        raise ValueError(
            "The names should be exclusive and should not intersect in "
            "`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
            f"names_which_can_be_saved={saved}, names_which_can_be_offloaded={offloaded} "
            f"and the intersection={both}")

    def policy(prim, *_, **params):
        if prim is name_p and params["name"] in saved:
            return Saveable
        if prim is name_p and params["name"] in offloaded:
            return Offloadable(src=offload_src, dst=offload_dst)
        return Recompute
    return policy


def _offload_dot_with_no_batch_dims(offload_src: str, offload_dst: str) -> Callable:
    """Offload (instead of recomputing) the results of dots without batch dimensions."""
    def policy(prim, *_, **params):
        if _dots_with_no_batch_dims_saveable(prim, **params):
            return Offloadable(src=offload_src, dst=offload_dst)
        return Recompute
    return policy


def _save_from_both_policies(policy_1: Callable, policy_2: Callable) -> Callable:
    """Save what either policy saves (both must answer with booleans)."""
    def policy(prim, *args, **params) -> bool:
        out1, out2 = policy_1(prim, *args, **params), policy_2(prim, *args, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise ValueError(
                f"The return value of the policies should be a boolean. Got: {out1} and "
                f"{out2}. Please write a custom policy function directly, rather than using "
                "this helper function.")
        return out1 or out2
    return policy


def _save_any_names_but_these(*names: str) -> Callable:
    # Only named values are saved (unlike save_anything_except_these_names), as in JAX.
    names_set = frozenset(names)

    def policy(prim, *_, **params) -> bool:
        return prim is name_p and params["name"] not in names_set
    return policy


def _save_anything_except_these_names(*names: str) -> Callable:
    names_set = frozenset(names)

    def policy(prim, *_, **params) -> bool:
        return not (prim is name_p and params["name"] in names_set)
    return policy


class RecomputeType:
    """The type of ``Recompute``: a policy's answer "recompute this value in the backward
    pass" (the same as ``False``)."""


Recompute = RecomputeType()


class SaveableType:
    """The type of ``Saveable``: a policy's answer "save this value as a residual" (the same
    as ``True``)."""


Saveable = SaveableType()


class Offloadable(NamedTuple):
    """A policy's answer "save this value in memory space ``dst``, moving it from ``src``"
    (e.g. ``Offloadable("device", "pinned_host")``)."""

    src: Any
    dst: Any


def _saves(case) -> bool:
    """Whether a policy's answer means save; bad answers are refused as JAX refuses them."""
    if isinstance(case, bool):
        return case
    if isinstance(case, SaveableType):
        return True
    if isinstance(case, RecomputeType):
        return False
    msg = ("Value returned by a remat policy should be a bool or `ad_checkpoint.Recompute`, "
           "`ad_checkpoint.Saveable` or `ad_checkpoint.Offloadable(...)`. "
           f"Got {case} of type {type(case)}.")
    if case is Offloadable:
        msg += " Did you return `Offloadable` instead of an instantiated `Offloadable(...)`?"
    raise TypeError(msg)


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=_everything_saveable,
    nothing_saveable=_nothing_saveable,
    dots_saveable=_dots_saveable,
    checkpoint_dots=_dots_saveable,
    dots_with_no_batch_dims_saveable=_dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=_dots_with_no_batch_dims_saveable,
    save_only_these_names=_save_only_these_names,
    save_any_names_but_these=_save_any_names_but_these,
    save_anything_except_these_names=_save_anything_except_these_names,
    save_and_offload_only_these_names=_save_and_offload_only_these_names,
    offload_dot_with_no_batch_dims=_offload_dot_with_no_batch_dims,
    save_from_both_policies=_save_from_both_policies,
)


def checkpoint_name(x, name: str):
    """Tag the arrays of ``x`` with ``name`` for the name-based checkpoint policies."""
    return tree_util.tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


name_p = core.Primitive("name")
name_p.def_impl(lambda x, *, name: canonicalize_value(x))
name_p.def_abstract_eval(lambda x, *, name: x)
ad.deflinear2(name_p, lambda ct, x, *, name: [ct])
batching.defvectorized(name_p)
mlir.register_lowering(name_p, lambda ctx, x, *, name: x)


# --------------------------------------------------------------------------------------------
# The checkpoint primitive
# --------------------------------------------------------------------------------------------


def _checkpoint_impl(*args, jaxpr: ClosedJaxpr, **_):
    # (the operands as JAX's bind makes them: an input handed back is typed, as JAX's)
    return core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *map(canonicalize_value, args))


def _checkpoint_abstract_eval(*avals, jaxpr: ClosedJaxpr, **_):
    return jaxpr.out_avals


def _checkpoint_jvp(primals, tangents, *, jaxpr: ClosedJaxpr, prevent_cse: bool,
                    differentiated: bool, policy):
    nonzeros = [not ad.is_zero(t) for t in tangents]
    jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, False)
    args = [*primals, *(t for t in tangents if not ad.is_zero(t))]
    if isinstance(prevent_cse, tuple):  # (tangents are kept apart)
        prevent_cse += (True,) * (len(args) - len(primals))
    outs = checkpoint_p.bind(*args, jaxpr=jvp_closed, prevent_cse=prevent_cse,
                             differentiated=differentiated, policy=policy)
    n = len(jaxpr.out_avals)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else ad.Zero(a.to_tangent_aval())
                      for a, nz in zip(jaxpr.out_avals, out_nz)]


_remat_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _remat_split(closed: ClosedJaxpr, unknowns: tuple, policy):
    """Split for partial evaluation under ``policy``: ``(known_run, staged, out_unknowns,
    staged_used)``. ``known_run`` maps the known inputs to ``[*known outputs, *saved]``;
    ``staged`` maps ``[*known inputs, *saved, *unknown inputs]`` (those marked in
    ``staged_used``) to the unknown outputs, recomputing every residual that is not saved."""
    cacheable = not any(isinstance(c, core.Tracer) for c in closed.consts)
    per = _remat_cache.setdefault(closed, {}) if cacheable else {}
    hit = per.get((unknowns, policy))
    if hit is not None:
        return hit
    known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(closed, unknowns, False,
                                                            jaxpr_custom_rules=True)
    kj = known.jaxpr
    n_known_out = len(kj.outvars) - num_res
    known_outs, res_outs = kj.outvars[:n_known_out], kj.outvars[n_known_out:]
    saveable = policy or _nothing_saveable
    cut: list[Var] = []
    recompute_eqns = []
    known_eqns = []  # the forward pass, with a copy to host memory after each offloaded value
    for eqn in kj.eqns:
        known_eqns.append(eqn)
        case = saveable(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params)
        if isinstance(case, Offloadable):
            # As JAX's: the residual is a copy in memory space ``dst`` (typed there), and the
            # backward pass copies it back to ``src`` where the value was used.
            for v in eqn.outvars:
                if isinstance(v, core.DropVar):
                    continue
                moved = Var(v.aval.update(memory_space=core.mem_kind_to_space(case.dst)))
                known_eqns.append(_copy_eqn(v, moved, case.dst))
                recompute_eqns.append(_copy_eqn(moved, v, case.src))
                cut.append(moved)
        elif _saves(case):
            cut.extend(v for v in eqn.outvars if not isinstance(v, core.DropVar))
        else:
            recompute_eqns.append(eqn)
    # Residuals from the kept inputs and the saved (cut) values.
    recompute = Jaxpr(kj.constvars, kj.invars + cut, res_outs, recompute_eqns)
    recompute, used = pe.dce_jaxpr(recompute)
    saved = [v for v, u in zip(cut, used[len(kj.invars):]) if u]
    recompute = Jaxpr(kj.constvars, kj.invars + saved, recompute.outvars, recompute.eqns)
    known_run, _ = pe.dce_jaxpr(Jaxpr(kj.constvars, kj.invars, known_outs + saved,
                                      known_eqns))
    known_run = ClosedJaxpr(known_run, known.consts)

    n_kin, n_saved = len(kj.invars), len(saved)

    def staged_fun(*args):
        kin, sv, uin = args[:n_kin], args[n_kin:n_kin + n_saved], args[n_kin + n_saved:]
        res = core.eval_jaxpr(recompute, known.consts, *kin, *sv)
        return core.eval_jaxpr(unknown.jaxpr, unknown.consts, *res, *uin)

    unknown_in_avals = [a for a, uk in zip(closed.in_avals, unknowns) if uk]
    staged_avals = [v.aval for v in kj.invars] + [v.aval for v in saved] + unknown_in_avals
    staged_jaxpr, consts = pe.trace_to_jaxpr(staged_fun, staged_avals, closed.jaxpr.debug_info)
    staged_jaxpr, staged_used = pe.dce_jaxpr(staged_jaxpr, prune_invars=True)
    result = (known_run, ClosedJaxpr(staged_jaxpr, consts), out_uk, staged_used)
    per[(unknowns, policy)] = result
    return result


def _copy_eqn(src: Var, dst: Var, kind: str) -> core.JaxprEqn:
    """``dst = device_put(src)`` into the memory space of ``kind``, always a fresh copy."""
    return core.JaxprEqn([src], [dst], lax.device_put_p,
                         {"devices": (core.mem_kind_to_space(kind),), "srcs": (None,),
                          "copy_semantics": (lax.ArrayCopySemantics.ALWAYS_COPY,)})


def _checkpoint_partial_eval(trace: pe.JaxprTrace, *args, jaxpr: ClosedJaxpr,
                             prevent_cse: bool, differentiated: bool, policy):
    unknowns = tuple(not trace.is_known(x) for x in args)
    known_run, staged, out_uk, staged_used = _remat_split(jaxpr, unknowns, policy)
    known_args = [x for x, uk in zip(args, unknowns) if not uk]
    with core.set_current_trace(trace.parent):
        outs = core.eval_jaxpr(known_run.jaxpr, known_run.consts, *known_args)
    n_known_out = sum(1 for uk in out_uk if not uk)
    known_outs, saved = outs[:n_known_out], outs[n_known_out:]
    staged_args = [*known_args, *saved, *(x for x, uk in zip(args, unknowns) if uk)]
    staged_args = [x for x, u in zip(staged_args, staged_used) if u]
    if isinstance(prevent_cse, tuple):  # the inputs' flags, and residuals kept apart
        flags = [*(f for f, uk in zip(prevent_cse, unknowns) if not uk), *(True,) * len(saved),
                 *(f for f, uk in zip(prevent_cse, unknowns) if uk)]
        prevent_cse = tuple(f for f, u in zip(flags, staged_used) if u)
    params = {"jaxpr": staged, "prevent_cse": prevent_cse, "differentiated": True,
              "policy": policy}
    unknown_outs = iter(trace.stage(checkpoint_p, staged_args, staged.out_avals, params))
    known_it = iter(known_outs)
    return [next(unknown_outs) if uk else next(known_it) for uk in out_uk]


def _checkpoint_transpose(cts, *args, jaxpr: ClosedJaxpr, prevent_cse: bool,
                          differentiated: bool, policy):
    linear = [ad.is_undefined_primal(x) for x in args]
    ct_nonzero = [not ad.is_zero(c) for c in cts]
    t_closed, cts_nz = ad.transpose_jaxpr(jaxpr, linear, ct_nonzero)
    ins = [x for x, lin in zip(args, linear) if not lin]
    ins += [c for c, nz in zip(cts, ct_nonzero) if nz]
    if isinstance(prevent_cse, tuple):  # the residual inputs' flags, cotangents kept apart
        prevent_cse = (*(f for f, lin in zip(prevent_cse, linear) if not lin),
                       *(True,) * sum(ct_nonzero))
    outs = iter(checkpoint_p.bind(*ins, jaxpr=t_closed, prevent_cse=prevent_cse,
                                  differentiated=True, policy=policy))
    nz_it = iter(cts_nz)
    return [(next(outs) if next(nz_it) else ad.Zero(x.aval)) if lin else None
            for x, lin in zip(args, linear)]


def _checkpoint_batch(axis_data, args, dims, *, jaxpr: ClosedJaxpr, prevent_cse: bool,
                      differentiated: bool, policy):
    batched, out_dims = batching.batch_jaxpr_axes(jaxpr, axis_data, dims)
    outs = checkpoint_p.bind(*args, jaxpr=batched, prevent_cse=prevent_cse,
                             differentiated=differentiated, policy=policy)
    return outs, out_dims


def _checkpoint_lowering(ctx, *args, jaxpr: ClosedJaxpr, prevent_cse: bool,
                         differentiated: bool, policy):
    flags = (prevent_cse,) * len(args) if isinstance(prevent_cse, bool) else prevent_cse
    if differentiated and any(flags):
        # Keep XLA from merging the recomputation with the original forward computation:
        # the marked inputs pass through one barrier.
        kept = iter(hlo.OptimizationBarrierOp([a for a, f in zip(args, flags) if f]).results)
        args = [next(kept) if f else a for a, f in zip(args, flags)]
    return mlir.closed_subcomp(ctx.module_context, jaxpr, *args)


checkpoint_p = core.Primitive("remat2")  # the name JAX 0.10.2 prints
checkpoint_p.multiple_results = True
checkpoint_p.def_impl(_checkpoint_impl)
checkpoint_p.def_abstract_eval(_checkpoint_abstract_eval)
ad.defjvp_rule(checkpoint_p, _checkpoint_jvp)
ad.deftranspose(checkpoint_p, _checkpoint_transpose)
pe.defpartial_eval(checkpoint_p, _checkpoint_partial_eval)
batching.defrule(checkpoint_p, _checkpoint_batch, named_axis=True)
mlir.register_lowering(checkpoint_p, _checkpoint_lowering)
