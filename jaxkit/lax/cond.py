"""``cond`` and ``switch``: a jaxpr per branch, lowered to ``stablehlo.case``; all rules.

The wrappers trace every branch to a jaxpr (their constants joined so that all branches take the
same operands) and check that the branches return the same types. The ``cond`` primitive's
rules: JVP of each branch (their nonzero tangents unified); partial evaluation with the index
known splits every branch, each branch's residuals padded with zeros to a common list;
transpose of each branch; batching with a batched index turns into a ``select_n`` over all
branches' results.

``platform_dependent`` is a ``cond`` whose index is a ``platform_index`` and that carries
``branches_platforms``: lowering keeps only the branch for the platform lowered for (and the
batching rule re-makes a batched index, which is the same for every example).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr, Jaxpr, Var
from jaxkit.interpreters import ad, batching, dispatch, hijax, hijax_staging, mlir, mlir_tokens
from jaxkit.interpreters.ad import stop_gradient
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import mlir_platforms
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax.bodies import (avals_of, branch_mismatch, instantiate, make_closed_jaxpr,
                               run_jaxpr, strip_weak, trace_function, zeros_of_aval)
from jaxkit.lax.clamp import clamp
from jaxkit.lax.elementwise import _const, eq, ne, select_n
from jaxkit.lax.structural import broadcast_in_dim, convert_element_type, convert_element_type_p
from jaxkit.typing import Array, ArrayLike

# --------------------------------------------------------------------------------------------
# cond / switch
# --------------------------------------------------------------------------------------------


def _join_branch_consts(branches: Sequence[ClosedJaxpr], consts: Sequence[list]):
    """Make every branch take all branches' constants (each ignores the others')."""
    counts = [len(c) for c in consts]
    joined = []
    for i, br in enumerate(branches):
        j = br.jaxpr
        own = j.invars[:counts[i]]
        rest = j.invars[counts[i]:]
        invars = []
        for k, c in enumerate(consts):
            invars += own if k == i else [Var(core.get_aval(x)) for x in c]
        joined.append(ClosedJaxpr(Jaxpr([], invars + rest, j.outvars, j.eqns,
                                        debug_info=j.debug_info),
                                  br.consts))
    return joined, [x for c in consts for x in c]


# Marks "no ``operand=`` keyword given" to switch and cond (None is a valid operand).
_NO_OPERAND = object()


def _with_keyword_operand(operands: tuple, operand: Any) -> tuple:
    """The operands, the old ``operand=`` keyword's one if given (then alone, as in JAX)."""
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                        f"passed, got {operand=} and positional operands {operands}")
    return (operand,)


def switch(index: ArrayLike, branches: Sequence[Callable], *operands,
           operand: Any = _NO_OPERAND):
    """Apply ``branches[index](*operands)``, with ``index`` clamped into range (``operand=``
    is the old way to pass a single operand). Staged: all branches are traced; one runs.
    Lowers to ``stablehlo.case``."""
    if not all(callable(branch) for branch in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _with_keyword_operand(operands, operand)
    if np.ndim(index) != 0:
        raise TypeError(f"Branch index must be scalar, got {index} of shape "
                        f"{np.shape(index)}.")
    try:
        index_dtype = dtypes.result_type(index)
    except TypeError as err:
        raise TypeError(f"Index type must be an integer, got {index}.") from err
    if index_dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {index_dtype}")
    branches = tuple(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:  # as JAX: nothing to choose, so no cond is staged
        return branches[0](*operands)
    index = convert_element_type(index, np.int32)
    index = clamp(np.int32(0), index, np.int32(len(branches) - 1))
    return _switch(index, branches, operands)


def _switch(index, branches: Sequence[Callable], operands, branches_platforms=None):
    """Trace every branch at the operands' types and bind ``cond_p`` (with
    ``branches_platforms`` when the index is a ``platform_index``)."""
    flat, in_tree = tree_util.tree_flatten(operands)
    if hijax.has_hi(flat):  # as cond's
        if hijax.is_staged(flat) and branches_platforms is None:
            return _stage_hi(index, branches, flat, in_tree,
                             [f"branch {i} of switch" for i in range(len(branches))])
        spec, lo_flat, his, funs = hijax.lowered_branches(list(branches), flat, in_tree)
        out, final = _switch(index, funs, lo_flat, branches_platforms)
        hijax.write_back(spec, his, final)
        return out
    avals = avals_of(flat)
    traced = [trace_function(b, in_tree, avals, f"branch {i} of switch", "switch")
              for i, b in enumerate(branches)]
    _check_branch_types([t[0] for t in traced], [t[2] for t in traced], branches)
    jaxprs, consts = _join_branch_consts([t[0] for t in traced], [t[1] for t in traced])
    extra = {} if branches_platforms is None else {"branches_platforms": branches_platforms}
    outs = _bind_unforwarded(index, [*consts, *flat], jaxprs, **extra)
    return tree_util.tree_unflatten(traced[0][2], outs)


def _stage_hi(index, funs: Sequence[Callable], flat: list, in_tree, whats: list) -> Any:
    """In make_jaxpr or jit(...).trace/lower of high-level arguments, a cond of such staged
    values: as JAX's, its branches take them as values of their types (and must leave them
    with the same types); ``_cond_hi_lowering`` runs it on their leaves."""
    traced = [hijax_staging.trace_branch(f, flat, in_tree, w) for f, w in zip(funs, whats)]
    _check_branch_types([t[0] for t in traced], [t[2] for t in traced], funs)
    for f, t in zip(funs[1:], traced[1:]):
        if t[3] != traced[0][3]:
            raise TypeError(f"cond branches must leave their high-level operands with the same "
                            f"types; {whats[0]} left {traced[0][3]} but {whats[funs.index(f)]} "
                            f"left {t[3]}.")
    jaxprs, consts = _join_branch_consts([t[0] for t in traced], [t[1] for t in traced])
    outs = hijax_staging.stage_eqn(cond_p, [index, *consts, *flat], jaxprs[0].out_avals,
                                   {"branches": tuple(jaxprs)}, flat, traced[0][3])
    return tree_util.tree_unflatten(traced[0][2], outs)


def _cond_hi_lowering(operands: list, *, branches, **params) -> list:
    """A staged cond of high-level operands as its jaxpr is lowered: a cond of their leaves
    whose branches return the mutable ones' final leaves first, written back into them."""
    index, rest = operands[0], operands[1:]
    lowered = [hijax_staging.lower_jaxpr(b, rest, None) for b in branches]
    _, specs, finals = lowered[0]
    outs = cond_p.bind(index, *hijax_staging.lower_operands(specs, rest),
                       branches=tuple(lo for lo, _, _ in lowered), **params)
    n_state = sum(size for _, _, size in finals)
    hijax_staging.write_finals(specs, finals, rest, outs[:n_state])
    return outs[n_state:]


def _bind_unforwarded(index, inputs: list, jaxprs: Sequence[ClosedJaxpr], **params) -> list:
    """Bind ``cond_p`` without the outputs that every branch forwards from the same input, as
    JAX does: such an output is that input, unchanged (not batched under ``vmap`` when the
    input is not: Flax's nnx.vmap passes broadcast state through an nnx.cond), and the
    staged ``cond`` does not list it."""
    fwds = [[_input_index(j.jaxpr, v) for v in j.jaxpr.outvars] for j in jaxprs]
    in_fwd = [f[0] if len(set(f)) == 1 else None for f in zip(*fwds)]
    if any(f is not None for f in in_fwd):
        jaxprs = [ClosedJaxpr(Jaxpr(j.jaxpr.constvars, j.jaxpr.invars,
                                    [v for v, f in zip(j.jaxpr.outvars, in_fwd) if f is None],
                                    j.jaxpr.eqns, debug_info=j.jaxpr.debug_info), j.consts)
                  for j in jaxprs]
    outs = iter(cond_p.bind(index, *inputs, branches=tuple(jaxprs), **params))
    return [next(outs) if f is None else _as_array(inputs[f]) for f in in_fwd]


def _input_index(jaxpr: Jaxpr, v) -> int | None:
    """The position of outvar ``v`` among the invars (None for a computed value or a
    literal)."""
    if type(v) is not Var:
        return None
    return next((i for i, w in enumerate(jaxpr.invars) if w is v), None)


def _as_array(x):
    """An array for the input ``x`` (JAX's ``lax.asarray``): a forwarded Python scalar comes
    out as a (weakly typed) array, as the cond's output would have."""
    if isinstance(x, (core.Tracer, Array)):
        return x
    aval = core.get_aval(x)
    return convert_element_type_p.bind(x, new_dtype=aval.dtype, weak_type=aval.weak_type)


def _check_branch_types(jaxprs, out_trees, funs):
    for i, (j, t) in enumerate(zip(jaxprs[1:], out_trees[1:]), start=1):
        if t != out_trees[0]:
            raise TypeError(f"switch branches must have the same output structure; branch 0 "
                            f"returned {out_trees[0]} but branch {i} returned {t}.")
        if strip_weak(j.out_avals) != strip_weak(jaxprs[0].out_avals):
            # JAX's wording, "branch1" without a space included.
            raise TypeError(branch_mismatch("switch", [funs[0], funs[i]],
                                            ["branch 0", f"branch{i}"], t,
                                            jaxprs[0].out_avals, j.out_avals))


def cond(pred, true_fun: Callable, false_fun: Callable, *operands, operand: Any = _NO_OPERAND):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, staged (both are
    traced, one runs). ``pred`` is a scalar boolean (or number). The single operand may also
    come as the ``operand=`` keyword, JAX's older spelling (Optax's projections use it)."""
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cond: true_fun and false_fun arguments should be callable.")
    operands = _with_keyword_operand(operands, operand)
    aval = core.get_aval(pred)
    if aval.shape != ():
        raise TypeError(f"Pred must be a scalar, got {pred} of shape {aval.shape}.")
    if aval.dtype != np.bool_ and not dtypes.issubdtype(aval.dtype, np.number):
        raise TypeError(f"Pred type must be either boolean or number, got {aval.dtype}.")
    if aval.dtype != np.bool_:
        pred = ne(pred, np.zeros((), aval.dtype))
    index = convert_element_type(pred, np.int32)
    flat, in_tree = tree_util.tree_flatten(operands)
    if hijax.has_hi(flat):  # high-level operands (Flax's variables): a cond of their leaves
        if hijax.is_staged(flat):
            return _stage_hi(index, [false_fun, true_fun], flat, in_tree,
                             ["false_fun of cond", "true_fun of cond"])
        spec, lo_flat, his, (t, f) = hijax.lowered_branches([true_fun, false_fun], flat,
                                                            in_tree)
        out, final = cond(pred, t, f, *lo_flat)
        hijax.write_back(spec, his, final)
        return out
    avals = avals_of(flat)
    # true_fun first, as JAX traces them (what they print comes in that order)
    t_true = trace_function(true_fun, in_tree, avals, "true_fun of cond", "cond")
    t_false = trace_function(false_fun, in_tree, avals, "false_fun of cond", "cond")
    if t_true[2] != t_false[2]:
        raise TypeError("true_fun and false_fun output must have identical types; true_fun "
                        f"returned the structure {t_true[2]} but false_fun returned "
                        f"{t_false[2]}.")
    if strip_weak(t_true[0].out_avals) != strip_weak(t_false[0].out_avals):
        raise TypeError(branch_mismatch("cond", [true_fun, false_fun],
                                        ["true_fun", "false_fun"], t_true[2],
                                        t_true[0].out_avals, t_false[0].out_avals))
    jaxprs, consts = _join_branch_consts([t_false[0], t_true[0]], [t_false[1], t_true[1]])
    outs = _bind_unforwarded(index, [*consts, *flat], jaxprs)
    return tree_util.tree_unflatten(t_true[2], outs)


def _cond_abstract_eval(index, *args, branches, branches_platforms=None):
    outs = [a.strip_weak_type() if not all(b.out_avals[i].weak_type for b in branches) else a
            for i, a in enumerate(branches[0].out_avals)]
    return outs


def _cond_lowering(ctx: mlir.LoweringRuleContext, index, *args, branches,
                   branches_platforms=None):
    if branches_platforms is not None:
        index, branches = _platform_branches(ctx, index, branches, branches_platforms)
    # The tokens of the branches' ordered effects lead the results; each branch starts from
    # the tokens current before the ``case`` (regions see the values around them).
    mctx = ctx.module_context
    kinds = mlir_tokens.ordered_effects(*branches)
    tokens = mlir_tokens.current_tokens(mctx, kinds)
    result_types = [*mlir_tokens.token_types(kinds),
                    *(mlir.aval_to_ir_type(a) for a in ctx.avals_out)]
    case = hlo.CaseOp(result_types, index, len(branches))
    for i, br in enumerate(branches):
        block = case.regions[i].blocks.append()
        with ir.InsertionPoint(block):
            mlir_tokens.set_tokens(mctx, kinds, tokens)
            outs = mlir.closed_subcomp(mctx, br, *args)
            hlo.ReturnOp([*mlir_tokens.current_tokens(mctx, kinds), *outs])
    results = list(case.results)
    mlir_tokens.set_tokens(mctx, kinds, results[:len(kinds)])
    return results[len(kinds):]


def _platform_branches(ctx, index, branches, branches_platforms):
    """The branches of the platforms being lowered for (as JAX: a ``case`` maps the
    ``platform_index`` to the position among the kept branches)."""
    kept = sorted(set(_branch_per_platform(ctx.module_context, branches_platforms)))
    i32 = ir.RankedTensorType.get([], mlir.dtype_to_ir_type(np.dtype(np.int32)))
    remap = hlo.CaseOp([i32], index, len(branches))
    for i in range(len(branches)):
        with ir.InsertionPoint(remap.regions[i].blocks.append()):
            hlo.ReturnOp([mlir.ir_constant(np.int32(kept.index(i) if i in kept else 0))])
    return remap.result, [branches[k] for k in kept]


def _branch_per_platform(mctx, branches_platforms) -> list[int]:
    """For each platform the module is lowered for, the first branch naming it (or the
    default one)."""
    out = []
    for platform in mlir_platforms.targets(mctx):
        i = next((i for i, names in enumerate(branches_platforms)
                  if names is None or platform in names), None)
        if i is None:
            raise NotImplementedError(
                f"MLIR translation rule for primitive 'platform_index(platforms="
                f"{branches_platforms})' not found for platform {platform}")
        out.append(i)
    return out


cond_p = core.Primitive("cond")
cond_p.multiple_results = True
cond_p.def_impl(partial(dispatch.apply_primitive, cond_p))
cond_p.def_abstract_eval(_cond_abstract_eval)
hijax_staging.lower_rules[cond_p] = _cond_hi_lowering
mlir.register_lowering(cond_p, _cond_lowering)


# --------------------------------------------------------------------------------------------
# cond
# --------------------------------------------------------------------------------------------


def _cond_jvp(primals, tangents, *, branches, **params):
    index, ops = primals[0], primals[1:]
    nonzeros = [not ad.is_zero(t) for t in tangents[1:]]
    out_nz = [False] * len(branches[0].out_avals)
    for br in branches:
        _, nz = ad.jvp_jaxpr(br, nonzeros, instantiate=False)
        out_nz = [a or b for a, b in zip(out_nz, nz)]
    jvp_branches = tuple(ad.jvp_jaxpr(br, nonzeros, instantiate=out_nz)[0] for br in branches)
    tans = [t for t in tangents[1:] if not ad.is_zero(t)]
    outs = cond_p.bind(index, *ops, *tans, branches=jvp_branches, **params)
    n = len(branches[0].out_avals)
    it = iter(outs[n:])
    return outs[:n], [next(it) if nz else ad.Zero(a.to_tangent_aval())
                      for a, nz in zip(branches[0].out_avals, out_nz)]


def _join_residuals(knowns: Sequence[ClosedJaxpr], n_known_out: int):
    """Known branches that all output ``[*known outs, *res_0, *res_1, ...]`` (each branch its
    own residuals and zeros for the others')."""
    res_avals = [k.out_avals[n_known_out:] for k in knowns]
    joined = []
    for i, k in enumerate(knowns):
        def fun(*args, k=k, i=i):
            outs = run_jaxpr(k, *args)
            padded = list(outs[:n_known_out])
            for j, avals in enumerate(res_avals):
                padded += outs[n_known_out:] if j == i else [zeros_of_aval(a) for a in avals]
            return padded
        joined.append(make_closed_jaxpr(fun, k.in_avals))
    return joined, [a for avals in res_avals for a in avals]


def _cond_partial_eval(trace: pe.JaxprTrace, index, *ops, branches, **params):
    if not trace.is_known(index):
        out_avals = _cond_abstract(branches)
        return trace.stage(cond_p, [index, *ops], out_avals, {"branches": branches, **params})
    unknowns = [not trace.is_known(x) for x in ops]
    out_uk = [False] * len(branches[0].out_avals)
    for br in branches:
        out_uk = [a or b for a, b in zip(out_uk, pe.partial_eval_jaxpr(br, unknowns, False)[2])]
    splits = [pe.partial_eval_jaxpr(br, unknowns, out_uk) for br in branches]
    n_known_out = sum(1 for u in out_uk if not u)
    knowns, res_avals = _join_residuals([s[0] for s in splits], n_known_out)
    known_ops = [x for x, uk in zip(ops, unknowns) if not uk]
    with core.set_current_trace(trace.parent):
        known_outs = cond_p.bind(index, *known_ops, branches=tuple(knowns), **params)
    residuals = known_outs[n_known_out:]
    unknown_ops = [x for x, uk in zip(ops, unknowns) if uk]
    offsets = np.cumsum([0] + [s[3] for s in splits])
    unknown_branches = []
    for i, (_, unknown, _, nres) in enumerate(splits):
        def fun(*args, unknown=unknown, i=i):
            res, rest = args[:len(res_avals)], args[len(res_avals):]
            return run_jaxpr(unknown, *res[offsets[i]:offsets[i + 1]], *rest)
        unknown_branches.append(make_closed_jaxpr(fun, res_avals + [core.get_aval(x)
                                                              for x in unknown_ops]))
    out_avals = unknown_branches[0].out_avals
    staged = iter(trace.stage(cond_p, [index, *residuals, *unknown_ops], out_avals,
                              {"branches": tuple(unknown_branches), **params}))
    known_it = iter(known_outs[:n_known_out])
    return [next(staged) if uk else next(known_it) for uk in out_uk]


def _cond_abstract(branches):
    return cond_p.abstract_eval(None, branches=branches)


def _cond_transpose(cts, index, *ops, branches, **params):
    if ad.is_undefined_primal(index):
        raise ValueError("cond: the index of a cond cannot be a linear input")
    linear = [ad.is_undefined_primal(x) for x in ops]
    ct_avals = [a.to_tangent_aval() for a in branches[0].out_avals]
    cts = [instantiate(c, a) for c, a in zip(cts, ct_avals)]
    lin_avals = [x.aval for x, lin in zip(ops, linear) if lin]
    res = [x for x, lin in zip(ops, linear) if not lin]
    transposed = []
    for br in branches:
        t, nz = ad.transpose_jaxpr(br, linear, [True] * len(cts))

        def fun(*args, t=t, nz=nz):
            outs = iter(run_jaxpr(t, *args))
            return [next(outs) if n else zeros_of_aval(a) for n, a in zip(nz, lin_avals)]
        transposed.append(make_closed_jaxpr(fun, [core.get_aval(r) for r in res] + ct_avals))
    outs = iter(cond_p.bind(index, *res, *cts, branches=tuple(transposed), **params))
    return [None] + [next(outs) if lin else None for lin in linear]


def _bcast_select_n(which, *cases):
    """``select_n`` with ``which`` (one value per example) broadcast over the cases' shape."""
    if np.ndim(which) != np.ndim(cases[0]):
        shape = core.get_aval(cases[0]).shape
        which = broadcast_in_dim(which, shape, tuple(range(np.ndim(which))))
    return select_n(which, *cases)


def _cond_batch(axis_data, vals, dims, *, branches, **params):
    # What JAX refuses, for any index: a batched index runs every branch (an effect would run
    # for every example), and it keeps the rule one for both cases.
    kinds = set().union(*(pe.jaxpr_effect_kinds(br.jaxpr) for br in branches))
    if "state" in kinds:
        raise NotImplementedError("State effect not supported in vmap-of-cond.")
    if "io" in kinds:
        raise NotImplementedError("IO effect not supported in vmap-of-cond.")
    index, ops = vals[0], vals[1:]
    index_dim, op_dims = dims[0], dims[1:]
    size = axis_data.size
    if "branches_platforms" in params and index_dim is not batching.not_mapped:
        # The index of a platform_dependent is the same for every example: a fresh
        # platform_index replaces the batched one (as JAX does).
        index = platform_index_p.bind(platforms=params["branches_platforms"])
        index_dim = batching.not_mapped
    if index_dim is not batching.not_mapped:
        # A batched index: every branch runs on the whole batch and select_n picks each
        # example's result. Each branch sees its operands only where it is taken (elsewhere
        # through stop_gradient), so reverse mode gets no NaN from untaken branches (JAX
        # issue 1052). The order of operations is JAX's, so jaxprs print the same.
        index, *ops = (batching.bdim_at_front(x, d, size) for x, d in zip(vals, dims))
        n_out = len(branches[0].out_avals)
        branch_outs = []
        for i, br in enumerate(branches):
            bj, _ = batching.batch_jaxpr(br, axis_data, [True] * len(ops), [True] * n_out)
            taken = eq(index, _const(index, i))
            ops_i = [_bcast_select_n(taken, stop_gradient(x), x) for x in ops]
            branch_outs.append(run_jaxpr(bj, *ops_i))
        outs = [_bcast_select_n(index, *cases) for cases in zip(*branch_outs)]
        return outs, [0] * len(outs)
    in_batched = [d is not batching.not_mapped for d in op_dims]
    ops = [batching.moveaxis(x, d, 0) if d is not batching.not_mapped else x
           for x, d in zip(ops, op_dims)]
    out_b = [False] * len(branches[0].out_avals)
    for br in branches:
        out_b = [a or b for a, b in zip(out_b, batching.batch_jaxpr(br, axis_data, in_batched,
                                                                    False)[1])]
    batched = tuple(batching.batch_jaxpr(br, axis_data, in_batched, out_b)[0]
                    for br in branches)
    outs = cond_p.bind(index, *ops, branches=batched, **params)
    return outs, [0 if b else batching.not_mapped for b in out_b]


ad.defjvp_rule(cond_p, _cond_jvp)
ad.deftranspose(cond_p, _cond_transpose)
pe.defpartial_eval(cond_p, _cond_partial_eval)
batching.defrule(cond_p, _cond_batch, named_axis=True)



# --------------------------------------------------------------------------------------------
# platform_dependent: a cond on ``platform_index``, resolved when lowering
# --------------------------------------------------------------------------------------------

# ``platforms``/``branches_platforms``: per branch, the platform names it is for (a tuple), or
# None for the last, default branch.
BranchesPlatforms = tuple[tuple[str, ...] | None, ...]


def platform_dependent(*args: Any, default: Callable | None = None,
                       **per_platform: Callable) -> Any:
    """``per_platform[p](*args)`` for the platform ``p`` the program is lowered for (``cpu=``,
    ``cuda=``, ``rocm=``, ``tpu=``...), else ``default(*args)``. Staged, it is a ``cond`` on
    a ``platform_index`` whose branch is chosen at lowering; eagerly, the branch just runs.
    Platforms given the same function share one branch."""
    groups: list[tuple[list[str], Callable]] = []
    for name, fun in per_platform.items():
        if not callable(fun):
            raise TypeError(f"lax.platform_dependent: the '{name}' branch must be a callable.")
        if name == "gpu":
            raise ValueError("Use 'cuda' or 'rocm' for lax.platform_dependent.")
        for names, other in groups:
            if other == fun:
                names.append(name)
                break
        else:
            groups.append(([name], fun))
    platforms: BranchesPlatforms = tuple(tuple(names) for names, _ in groups)
    funs = [fun for _, fun in groups]
    if default is not None:
        if not callable(default):
            raise TypeError("lax.platform_dependent: the 'default' branch must be a callable.")
        funs.append(default)
        platforms += (None,)
    index = platform_index_p.bind(platforms=platforms)
    if not isinstance(index, core.Tracer):
        return funs[int(index)](*args)
    if not funs:  # (eagerly, lowering the platform_index above raised already)
        raise TypeError("lax.platform_dependent needs at least one branch: pass functions "
                        "per platform (cpu=..., cuda=..., ...) and/or default=...")
    return _switch(index, funs, args, branches_platforms=platforms)


def _platform_index_lowering(ctx: mlir.LoweringRuleContext, *, platforms: BranchesPlatforms):
    """The branch for the platform lowered for: a constant, or, for several platforms, one
    per-platform rule per branch (a constant each), as JAX lowers it."""
    mctx = ctx.module_context
    chosen = dict(zip(mlir_platforms.targets(mctx), _branch_per_platform(mctx, platforms)))
    if len(chosen) == 1:
        return mlir.ir_constant(np.int32(next(iter(chosen.values()))))
    constants = {i: partial(_constant_rule, i=i) for i in set(chosen.values())}
    rule = mlir_platforms.rule_for(mctx, platform_index_p, lambda p: constants[chosen[p]])
    return rule(ctx)


def _constant_rule(ctx: mlir.LoweringRuleContext, *, i: int):
    return mlir.ir_constant(np.int32(i))


platform_index_p = core.Primitive("platform_index")
platform_index_p.def_impl(partial(dispatch.apply_primitive, platform_index_p))
platform_index_p.def_abstract_eval(lambda *, platforms: core.ShapedArray((), np.dtype(np.int32)))
ad.defjvp_zero(platform_index_p)
mlir.register_lowering(platform_index_p, _platform_index_lowering)


__all__ = ["cond", "cond_p", "platform_dependent", "platform_index_p", "switch"]
