"""The ``jit`` primitive: an equation that carries a traced program (``jaxpr``), with its
full rule set (abstract eval, eager impl, lowering, printing, batching, JVP, transpose and
partial evaluation). ``jit.py`` builds ``JitFunction`` (tracing, caches, dispatch) on it; under
a transformation a jitted function binds this primitive."""
from __future__ import annotations

import weakref
from collections.abc import Sequence

from jaxkit import core
from jaxkit._config import config
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import ad, batching, debug_nans, dispatch, mlir, mlir_calls, state
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax.sharding import sdy_constraint
from jaxkit.runtime.mesh import empty_concrete_mesh
from jaxkit.runtime.sharding import (UNSPECIFIED, AbstractMesh, AxisType, Mesh, NamedSharding,
                                     PartitionSpec, current_abstract_mesh, current_mesh)
from jaxkit.transforms import spmd

# --------------------------------------------------------------------------------------------
# The jit primitive
# --------------------------------------------------------------------------------------------

jit_p = core.Primitive("jit")
jit_p.multiple_results = True


def _jit_abstract_eval(*avals, jaxpr: ClosedJaxpr, **params):
    return jaxpr.out_avals


jit_p.def_abstract_eval(_jit_abstract_eval)


def ctx_mesh() -> Mesh | AbstractMesh:
    """The mesh in context when a jit equation is traced, as JAX records it: the concrete
    mesh of ``set_mesh``, else an abstract mesh with Explicit axes from
    ``use_abstract_mesh``, else the empty mesh."""
    mesh = current_mesh()
    if mesh is not None and not mesh.empty:
        return mesh
    abstract = current_abstract_mesh()
    if not abstract.empty and AxisType.Explicit in abstract.axis_types:
        return abstract
    return empty_concrete_mesh


def jit_params(jaxpr: ClosedJaxpr, name: str, *, in_shardings: Sequence | None = None,
               out_shardings: Sequence | None = None, donated_invars: Sequence | None = None,
               keep_unused: bool = False, inline: bool = False) -> dict:
    """The parameters of a jit equation running ``jaxpr``, JAX's whole set in JAX's order:
    per input and output the sharding asked for (``UNSPECIFIED``: the program's choice) and
    layout (None: the default), whether each input is donated, the mesh in context, ..."""
    n_in, n_out = len(jaxpr.in_avals), len(jaxpr.out_avals)
    return {"jaxpr": jaxpr,
            "in_shardings": (UNSPECIFIED,) * n_in if in_shardings is None
            else tuple(in_shardings),
            "out_shardings": (UNSPECIFIED,) * n_out if out_shardings is None
            else tuple(out_shardings),
            "in_layouts": (None,) * n_in, "out_layouts": (None,) * n_out,
            "donated_invars": (False,) * n_in if donated_invars is None
            else tuple(donated_invars),
            "ctx_mesh": ctx_mesh(), "name": name, "keep_unused": keep_unused,
            "inline": inline, "compiler_options_kvs": ()}


def _derived(params: dict, jaxpr: ClosedJaxpr, in_shardings: Sequence,
             out_shardings: Sequence, donated_invars: Sequence | None = None) -> dict:
    """The parameters of a jit equation derived from one with ``params`` (its JVP, transpose,
    known or unknown part, batched or pruned form), running ``jaxpr``."""
    n_in, n_out = len(jaxpr.in_avals), len(jaxpr.out_avals)
    assert len(in_shardings) == n_in and len(out_shardings) == n_out
    return dict(params, jaxpr=jaxpr, in_shardings=tuple(in_shardings),
                out_shardings=tuple(out_shardings), in_layouts=(None,) * n_in,
                out_layouts=(None,) * n_out,
                donated_invars=(False,) * n_in if donated_invars is None
                else tuple(donated_invars))


def _kept(xs: Sequence, keep: Sequence[bool]) -> list:
    """The ``xs`` whose flag in ``keep`` is set (a derived equation's per-value parameters)."""
    return [x for x, k in zip(xs, keep) if k]


def _jit_pp_naming(eqn: core.JaxprEqn, namer: core.Namer) -> None:
    # As JAX prints jit: the body's binders and results take the names of the equation's
    # operands and results; a shared body (printed once as ``let name = ...``) keeps names
    # of its own, as in JAX.
    body = eqn.params["jaxpr"].jaxpr
    if body in namer.shared:
        return
    namer.suggest_same_names(body.invars, eqn.invars)
    namer.suggest_same_names(body.outvars, eqn.outvars)


core.pp_naming_rules[jit_p] = _jit_pp_naming

def _jit_impl(*args, jaxpr: ClosedJaxpr, name: str, donated_invars: tuple,
              in_shardings: tuple, out_shardings: tuple, **params):
    if any(type(a) is state.Ref for a in args):
        return state.call_with_refs(name, jaxpr, args, dispatch.run_closed)
    if spmd.needs_partitioning(jaxpr, args, in_shardings + out_shardings):
        return spmd.run_closed(name, jaxpr, donated_invars, args, in_shardings, out_shardings)
    outs = dispatch.run_closed(name, jaxpr, donated_invars, args)
    if config.jax_debug_nans:
        debug_nans.check_jaxpr_call(name, jaxpr, args, outs)
    return outs


jit_p.def_impl(_jit_impl)


state.defcall_discharge(jit_p)


def _jit_lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: ClosedJaxpr, name: str,
                  in_shardings: tuple, out_shardings: tuple, **params):
    # As JAX: a call of the body emitted once as a private function ``@name`` (an
    # ``inline=True`` jit was already inlined when it was traced), its parameters and
    # results constrained to the shardings asked for when the program is partitioned.
    if ctx.module_context.mesh is None:
        return mlir_calls.call_jaxpr(ctx, name, jaxpr, *args)
    return mlir_calls.call_jaxpr(
        ctx, name, jaxpr, *args,
        in_layouts=_layouts(ctx, in_shardings, jaxpr.in_avals, f"jit of {name}'s in_shardings"),
        out_layouts=_layouts(ctx, out_shardings, jaxpr.out_avals,
                             f"jit of {name}'s out_shardings"))


def _layouts(ctx: mlir.LoweringRuleContext, shardings: tuple, avals, what: str
             ) -> list[str | None]:
    return [sdy_constraint(ctx, s, len(core.physical_aval(a).shape), what)
            if isinstance(s, NamedSharding) else None for s, a in zip(shardings, avals)]


mlir.register_lowering(jit_p, _jit_lowering)
mlir.call_primitives.add(jit_p)


def _jit_pp_params(params: dict) -> dict:
    # As JAX prints it: the name first, then the rest sorted, those left at their defaults
    # (and ``inline``) left out; the body continues the enclosing names (its binders named
    # like the equation's operands by _jit_pp_naming).
    hidden = {
        "inline": True, "name": True, "donated_invars": not any(params["donated_invars"]),
        "in_shardings": all(s is UNSPECIFIED for s in params["in_shardings"]),
        "out_shardings": all(s is UNSPECIFIED for s in params["out_shardings"]),
        "in_layouts": all(x is None for x in params["in_layouts"]),
        "out_layouts": all(x is None for x in params["out_layouts"]),
        "keep_unused": not params["keep_unused"], "ctx_mesh": params["ctx_mesh"].empty,
        "compiler_options_kvs": not params["compiler_options_kvs"]}
    return {"name": params["name"],
            **{k: params[k] for k in sorted(params) if not hidden.get(k, False)}}


core.defpp_params(jit_p, _jit_pp_params)


# ---- batching rule of the jit primitive ----
# The body is batched as a jaxpr (cached per jaxpr object, so the batched program compiles
# once); each output keeps the batch axis its computation gives it. Registered as an
# axis-aware rule so that collectives inside the body see the vmapped axis name.


def _jit_batching_rule(axis_data, vals, dims, *, jaxpr: ClosedJaxpr, **params):
    batched, out_dims = batching.batch_jaxpr_axes(jaxpr, axis_data, dims)
    spmd_name = axis_data.spmd_name
    outs = jit_p.bind(*vals, **_derived(
        params, batched,
        [_batched_sharding(s, d, spmd_name) for s, d in zip(params["in_shardings"], dims)],
        [_batched_sharding(s, d, spmd_name) for s, d in zip(params["out_shardings"], out_dims)],
        params["donated_invars"]))
    return outs, out_dims


def _batched_sharding(s, dim: int | None, spmd_name):
    """A sharding asked for a value, for that value with a batch axis at ``dim``: the new
    axis split over ``spmd_axis_name`` (or whole), the others laid out as before."""
    if not isinstance(s, NamedSharding) or dim is None or dim is batching.not_mapped:
        return s
    if spmd_name is None and (dim >= len(s.spec) or all(p is None for p in s.spec)):
        return s  # the same layout (JAX keeps the sharding as written)
    parts = list(s.spec) + [None] * max(0, dim - len(s.spec))
    parts.insert(dim, spmd_name)
    return NamedSharding(s.mesh, PartitionSpec(*parts), memory_kind=s.memory_kind)


batching.defrule(jit_p, _jit_batching_rule, named_axis=True)


# ---- autodiff rules of the jit primitive ----
# The body is differentiated as a jaxpr (cached per jaxpr object, so each derived program is
# traced and compiled once): the JVP is a jit of the JVP jaxpr; under linearize/vjp the partial
# evaluation rule binds the known part as a jit now and stages the unknown (tangent) part as a
# jit; the transpose is a jit of the transposed jaxpr.


def _jit_jvp(primals, tangents, *, jaxpr: ClosedJaxpr, **params):
    nonzeros = [not ad.is_zero(t) for t in tangents]
    jvp_closed, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    n_in = len(primals)
    tangents_nz = [t for t in tangents if not ad.is_zero(t)]
    assert len(tangents_nz) == len(jvp_closed.in_avals) - n_in
    args = [*primals, *tangents_nz]
    # a tangent is laid out as its primal is
    ins, outs_s = params["in_shardings"], params["out_shardings"]
    outs = jit_p.bind(*args, **_derived(
        params, jvp_closed, [*ins, *_kept(ins, nonzeros)], [*outs_s, *_kept(outs_s, out_nz)]))
    n_out = len(jaxpr.out_avals)
    tangents_it = iter(outs[n_out:])
    tangents_out = [next(tangents_it) if nz else ad.Zero(a.to_tangent_aval())
                    for a, nz in zip(jaxpr.out_avals, out_nz)]
    return outs[:n_out], tangents_out


def _jit_transpose(cts, *args, jaxpr: ClosedJaxpr, **params):
    linear = [ad.is_undefined_primal(x) for x in args]
    ct_nonzero = [not ad.is_zero(c) for c in cts]
    t_closed, cts_nz = ad.transpose_jaxpr(jaxpr, linear, ct_nonzero)
    ins = [x for x, lin in zip(args, linear) if not lin]
    ins += [c for c, nz in zip(cts, ct_nonzero) if nz]
    # a cotangent is laid out as its primal is
    in_s, out_s = params["in_shardings"], params["out_shardings"]
    outs = iter(jit_p.bind(*ins, **_derived(
        params, t_closed,
        [*_kept(in_s, [not lin for lin in linear]), *_kept(out_s, ct_nonzero)],
        _kept(_kept(in_s, linear), cts_nz))))
    nz_it = iter(cts_nz)
    return [(next(outs) if next(nz_it) else ad.Zero(x.aval)) if lin else None
            for x, lin in zip(args, linear)]


_forwarding_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _forwarding(known: ClosedJaxpr, num_res: int
                ) -> tuple[ClosedJaxpr, list[int | None], list[int | None]]:
    """Drop from ``known``'s outputs those that are one of its inputs (``in_fwd[i]``: that
    input's position) and the residuals that are also a primal output (``out_fwd[i]``: that
    output's position among the kept ones), as JAX does: the outer program then uses the
    value it already has instead of a copy coming out of the ``jit``. Cached per ``known``
    (itself cached per body), so the pruned program is one object and compiles once."""
    hit = _forwarding_cache.get(known)
    if hit is not None:
        return hit
    jaxpr = known.jaxpr
    n_primal = len(jaxpr.outvars) - num_res
    in_pos = {v: i for i, v in enumerate(jaxpr.invars)}
    in_fwd = [in_pos.get(v) if type(v) is core.Var else None for v in jaxpr.outvars]
    kept = [v for v, f in zip(jaxpr.outvars, in_fwd) if f is None]
    n_kept_primal = sum(f is None for f in in_fwd[:n_primal])
    primal_pos = {v: i for i, v in enumerate(kept[:n_kept_primal]) if type(v) is core.Var}
    out_fwd = [None] * n_kept_primal + [primal_pos.get(v) for v in kept[n_kept_primal:]]
    outvars = [v for v, f in zip(kept, out_fwd) if f is None]
    pruned = ClosedJaxpr(core.Jaxpr(jaxpr.constvars, jaxpr.invars, outvars, jaxpr.eqns,
                                    debug_info=jaxpr.debug_info), known.consts)
    hit = _forwarding_cache[known] = (pruned, in_fwd, out_fwd)
    return hit


# ---- dead-code rule of the jit primitive ----
# As JAX's: the body keeps only the outputs used and the inputs they need (so a lowered
# program calls a function computing just those). Cached per (body, used outputs), so that
# equations pruned alike share one body: one private function, one compilation.
_dce_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _jit_dce(used_outputs: list[bool], eqn: core.JaxprEqn):
    closed = eqn.params["jaxpr"]
    per_body = _dce_cache.setdefault(closed, {})
    hit = per_body.get(tuple(used_outputs))
    if hit is None:
        jaxpr, used_inputs = pe.dce_jaxpr(closed.jaxpr, used_outputs, prune_invars=True)
        live = set(jaxpr.constvars)
        consts = [c for v, c in zip(closed.jaxpr.constvars, closed.consts) if v in live]
        hit = per_body[tuple(used_outputs)] = (ClosedJaxpr(jaxpr, consts), used_inputs)
    pruned, used_inputs = hit
    if all(used_inputs) and all(used_outputs):  # nothing to prune: the equation stays as is
        return used_inputs, eqn
    p = eqn.params
    params = _derived(p, pruned, _kept(p["in_shardings"], used_inputs),
                      _kept(p["out_shardings"], used_outputs),
                      _kept(p["donated_invars"], used_inputs))
    return used_inputs, eqn.replace(
        invars=[x for x, u in zip(eqn.invars, used_inputs) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u], params=params)


pe.dce_rules[jit_p] = _jit_dce


def _jit_partial_eval(trace: pe.JaxprTrace, *args, jaxpr: ClosedJaxpr, **params):
    unknowns = [not trace.is_known(x) for x in args]
    known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(jaxpr, unknowns, False)
    known, in_fwd, out_fwd = _forwarding(known, num_res)
    known_args = [x for x, uk in zip(args, unknowns) if not uk]
    in_s, out_s = params["in_shardings"], params["out_shardings"]
    # the known part's outputs: its primal outputs laid out as asked, then the residuals
    # (the program's choice), less those forwarded
    known_out_s = [*_kept(out_s, [not uk for uk in out_uk]), *[UNSPECIFIED] * num_res]
    known_out_s = _kept(_kept(known_out_s, [f is None for f in in_fwd]),
                        [f is None for f in out_fwd])
    with core.set_current_trace(trace.parent):
        outs = jit_p.bind(*known_args, **_derived(
            params, known, _kept(in_s, [not uk for uk in unknowns]), known_out_s))
    outs_it = iter(outs)
    kept = [next(outs_it) if f is None else None for f in out_fwd]
    kept = [kept[f] if f is not None else x for x, f in zip(kept, out_fwd)]
    kept_it = iter(kept)
    known_outs = [next(kept_it) if f is None else known_args[f] for f in in_fwd]
    n_known = len(known_outs) - num_res
    residuals = known_outs[n_known:]
    unknown_args = [*residuals, *(x for x, uk in zip(args, unknowns) if uk)]
    unknown_params = _derived(
        params, unknown, [*[UNSPECIFIED] * num_res, *_kept(in_s, unknowns)], _kept(out_s, out_uk))
    unknown_outs = iter(trace.stage(jit_p, unknown_args, unknown.out_avals, unknown_params))
    known_it = iter(known_outs[:n_known])
    return [next(unknown_outs) if uk else next(known_it) for uk in out_uk]


ad.defjvp_rule(jit_p, _jit_jvp)
ad.deftranspose(jit_p, _jit_transpose)
pe.defpartial_eval(jit_p, _jit_partial_eval)

