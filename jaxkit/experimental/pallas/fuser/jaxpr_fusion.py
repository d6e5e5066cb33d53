"""``fuse``: trace a function containing one ``fusible`` call and fuse the computation around
it into the kernel.

The traced jaxpr is cut at the ``fusible`` equation: for each kernel input, the equations
before it that compute the input become an *input fusion* (a ``Fusion`` closing over the
function's arguments and constants); the equations after it, grouped by the kernel's
``output_fusion_prefix``, become *output fusions* taking the kernel's results. The kernel's
Python function is then called with them, under the caller's trace (so under ``jit`` the
fused computation is traced into the kernel's own code, e.g. its ``pallas_call``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import core, tree_util
from jaxkit.experimental.pallas.fuser.fusible import fusible_p
from jaxkit.experimental.pallas.fuser.fusion import Fusion
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import state

__all__ = ["fuse"]


def fuse(f: Callable | None = None, *, resolve_fusion_dtypes: bool = True, debug: bool = False,
         strict_mode: bool = True) -> Any:
    """Fuse ``f``'s computation around its single ``fusible`` call into that call.
    ``debug`` prints the jaxpr before fusion; ``strict_mode`` is handed to the output
    fusions (block-spec propagation checks colliding index maps for equality).
    ``resolve_fusion_dtypes`` concerns JAX's fusion dtypes, which jaxkit does not have."""
    def decorator(f):
        def wrapper(*args, **kwargs):
            flat_args, in_tree = tree_util.tree_flatten((args, kwargs))
            ref = next((x for x in flat_args if isinstance(x, state.Ref)), None)
            if ref is not None:
                info = pe.debug_info("fuse", f, ())
                raise NotImplementedError(
                    f"Fused function {info.func_name} at {info.func_src_info} was passed an "
                    f"argument of type "
                    f"{core.get_aval(ref)}.  Fused functions cannot take Refs as arguments "
                    "-- they must close over such Refs, instead.")
            avals = [core.get_aval(x) for x in flat_args]
            jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(
                lambda a: f(*a[0], **a[1]), in_tree, avals, pe.debug_info("fuse", f, ()))
            if debug:
                print("Jaxpr before fusion:")
                print(jaxpr)
            out = fuse_jaxpr(jaxpr, out_tree, consts, *flat_args, strict_mode=strict_mode)
            return tree_util.tree_unflatten(out_tree, out)

        return wrapper

    return decorator if f is None else decorator(f)


def _slice(eqns: Sequence[core.JaxprEqn], sources: Sequence[core.Var],
           invars: Sequence[core.Var], outvars: Sequence[Any]) -> tuple[core.Jaxpr, list[bool]]:
    """The equations of ``eqns`` that ``outvars`` need, as a jaxpr whose constvars are the
    ``sources`` used (mask returned) and whose invars are ``invars``."""
    whole = core.Jaxpr([], [*sources, *invars], list(outvars), list(eqns))
    pruned, used = pe.dce_jaxpr(whole)
    used_src = used[:len(sources)]
    return core.Jaxpr([v for v, u in zip(sources, used_src) if u], list(invars),
                      pruned.outvars, pruned.eqns), used_src


def _downstream(eqns: Sequence[core.JaxprEqn], starts: set, outvars: Sequence[Any]) -> list:
    """Which of ``outvars`` depend on the variables ``starts`` (written refs count)."""
    reached = set(starts)
    for eqn in eqns:
        if any(type(a) is not core.Literal and a in reached for a in eqn.invars):
            reached.update(eqn.outvars)
            reached.update(a for a in eqn.invars if type(a) is not core.Literal
                           and state.is_ref_aval(a.aval))
    return [type(v) is not core.Literal and v in reached for v in outvars]


def _pick(values: Sequence, mask: Sequence[bool]) -> list:
    return [v for v, u in zip(values, mask) if u]


def _input_fusion(eqns, sources, values, atom) -> Fusion:
    if type(atom) is core.Literal:
        return Fusion(lambda: atom.val, ((), {}), atom.aval)
    jaxpr, used = _slice(eqns, sources, [], [atom])
    vals = _pick(values, used)
    return Fusion(lambda: core.eval_jaxpr(jaxpr, vals)[0], ((), {}), atom.aval)


def _output_fusions(eqns, sources, values, outvars, fusible_eqn, strict_mode):
    params = fusible_eqn.params
    unflat = tree_util.tree_unflatten(params["out_tree"], fusible_eqn.outvars)
    prefix = tree_util.tree_structure(params["output_fusion_prefix"])
    groups = prefix.flatten_up_to(unflat)
    masks, claimed = [], set()
    for group in groups:
        mask = _downstream(eqns, set(tree_util.tree_leaves(group)), outvars)
        for i, used in enumerate(mask):
            if used and i in claimed:
                raise ValueError("Outputs must be disjoint in order to use separate output "
                                 "fusions")
        claimed.update(i for i, u in enumerate(mask) if u)
        masks.append(mask)
    if len(claimed) != len(outvars):
        free = sorted(set(range(len(outvars))) - claimed)
        raise ValueError(f"The outputs {free} of the fused function do not depend on the "
                         "fusible's results; compute them outside the fused function.")
    order = [i for mask in masks for i, u in enumerate(mask) if u]
    permutation = [order.index(i) for i in range(len(order))]
    fusions = []
    for group, mask in zip(groups, masks):
        group_vars = tree_util.tree_leaves(group)
        jaxpr, used = _slice(eqns, sources, group_vars, _pick(outvars, mask))
        if not jaxpr.eqns and jaxpr.outvars == jaxpr.invars:
            fusions.append(None)
            continue
        vals = _pick(values, used)

        def fn(*args, _jaxpr=jaxpr, _vals=vals, **kwargs):
            return tuple(core.eval_jaxpr(_jaxpr, _vals, *tree_util.tree_leaves((args, kwargs))))

        in_type = tree_util.tree_map(lambda v: v.aval, group)
        fusions.append(Fusion(fn, (in_type, {}), tuple(v.aval for v in jaxpr.outvars),
                              strict_mode=strict_mode))
    return tree_util.tree_unflatten(prefix, fusions), permutation


def fuse_jaxpr(jaxpr: core.Jaxpr, out_tree: Any, consts: Sequence, *args: Any,
               strict_mode: bool = True) -> list:
    """Run ``jaxpr`` (whose constvars hold ``consts``) on ``args`` with its ``fusible``
    equation called with the input and output fusions around it."""
    index = next((i for i, e in enumerate(jaxpr.eqns) if e.primitive is fusible_p), None)
    if index is None:
        raise ValueError("No fusible eqn found")
    eqn = jaxpr.eqns[index]
    sources = [*jaxpr.constvars, *jaxpr.invars]
    values = [*consts, *args]
    rest = jaxpr.eqns[:index] + jaxpr.eqns[index + 1:]
    if not any(_downstream(rest, set(eqn.outvars), jaxpr.outvars)):
        # nothing needs the kernel: run the rest without it
        independent, used = _slice(rest, sources, [], jaxpr.outvars)
        return core.eval_jaxpr(independent, _pick(values, used))
    before = jaxpr.eqns[:index]
    in_fusions = [_input_fusion(before, sources, values, a)
                  for a in eqn.invars[eqn.params["num_consts"]:]]
    in_fusions = tree_util.tree_unflatten(eqn.params["in_tree"], in_fusions)
    out_fusions, permutation = _output_fusions(rest, sources, values, jaxpr.outvars, eqn,
                                               strict_mode)
    out = tree_util.tree_leaves(eqn.params["func"](*in_fusions, out_fusions))
    return [out[i] for i in permutation]
