"""Staged control flow: ``cond``/``switch``, ``while_loop``/``fori_loop``, ``scan``/``map``.

Each construct traces its Python functions to jaxprs once (closed-over values become explicit
operands, so enclosing transformations see them) and binds a primitive carrying those jaxprs:
``cond`` (one jaxpr per branch, lowered to ``stablehlo.case``), ``while`` (lowered to
``stablehlo.while``) and ``scan`` (a while loop over an index, with the per-iteration slices
of ``xs`` and ``ys`` moved by dynamic slicing). Their differentiation, batching and
partial-evaluation rules are in ``control_flow_rules.py``.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxkit import core, dtypes, tree_util
from jaxkit.interpreters import dispatch
from jaxkit.core import ClosedJaxpr, Jaxpr, ShapedArray, Var
from jaxkit.interpreters import mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax.clamp import clamp
from jaxkit.lax.elementwise import add, lt, ne, sub
from jaxkit.lax.slicing import dynamic_index_in_dim, dynamic_update_index_in_dim, slice_in_dim
from jaxkit.lax.structural import concatenate, convert_element_type, full, reshape, rev
from jaxkit.typing import ArrayLike

# --------------------------------------------------------------------------------------------
# Tracing user functions (cached on the function object, like JAX)
# --------------------------------------------------------------------------------------------

_trace_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def trace_function(fun: Callable, in_tree, in_avals: Sequence[ShapedArray], what: str):
    """Trace ``fun`` (taking the unflattened ``in_tree``) to a jaxpr without constants.

    Returns ``(closed_jaxpr, consts, out_tree)``: the jaxpr takes ``consts`` first, then the
    flat arguments. Cached per function object and argument types."""
    key = (in_tree, tuple(in_avals), what)
    try:
        per_fun = _trace_cache.setdefault(fun, {})
    except TypeError:
        per_fun = {}
    hit = per_fun.get(key)
    if hit is not None:
        return hit
    out_tree_box = []

    def flat_fun(*flat_args):
        out = fun(*tree_util.tree_unflatten(in_tree, flat_args))
        out_flat, out_tree = tree_util.tree_flatten(out)
        out_tree_box.append(out_tree)
        for leaf in out_flat:
            if not (isinstance(leaf, core.Tracer) or core.is_array_like(leaf)):
                raise TypeError(f"{what} returned a value of type {type(leaf).__name__}, which "
                                "is not a valid jaxkit type; return arrays (or pytrees of "
                                "arrays).")
        return out_flat

    debug = pe.debug_info(what, fun, [f"arg{i}" for i in range(len(in_avals))])
    jaxpr, consts = pe.trace_to_jaxpr(flat_fun, in_avals, debug)
    closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
    result = (closed, consts, out_tree_box[0])
    if not any(isinstance(c, core.Tracer) for c in consts):
        per_fun[key] = result
    return result


def _avals_of(flat) -> list[ShapedArray]:
    return [core.get_aval(x) for x in flat]


def _type_mismatch(what: str, tree, avals_a, avals_b, label_a: str, label_b: str) -> str:
    paths = [tree_util.keystr(p) or "(root)" for p, _ in
             tree_util.tree_flatten_with_path(tree_util.tree_unflatten(tree, avals_a))[0]]
    lines = [f"  {path}: {a.str_short()}{' (weak)' if a.weak_type else ''} vs "
             f"{b.str_short()}{' (weak)' if b.weak_type else ''}"
             for path, a, b in zip(paths, avals_a, avals_b) if not core.typematch(a, b)]
    return (f"{what} must have identical types, got {label_a} vs {label_b}:\n" +
            "\n".join(lines))


def _strip_weak(avals):
    return [a.strip_weak_type() for a in avals]


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
        joined.append(ClosedJaxpr(Jaxpr([], invars + rest, j.outvars, j.eqns, j.debug_info),
                                  br.consts))
    return joined, [x for c in consts for x in c]


def switch(index: ArrayLike, branches: Sequence[Callable], *operands):
    """Apply ``branches[index](*operands)``, with ``index`` clamped into range. Staged: all
    branches are traced; one runs. Lowers to ``stablehlo.case``."""
    if not branches:
        raise ValueError("switch requires at least one branch")
    idx_aval = core.get_aval(index)
    if idx_aval.shape != ():
        raise TypeError(f"switch index must be a scalar, got an array of shape {idx_aval.shape}")
    if not dtypes.issubdtype(idx_aval.dtype, np.integer):
        raise TypeError(f"switch index must be an integer scalar, got {idx_aval.dtype.name}")
    index = convert_element_type(index, np.int32)
    if len(branches) > 1:
        index = clamp(np.int32(0), index, np.int32(len(branches) - 1))
    flat, in_tree = tree_util.tree_flatten(operands)
    avals = _avals_of(flat)
    traced = [trace_function(b, in_tree, avals, f"branch {i} of switch")
              for i, b in enumerate(branches)]
    _check_branch_types([t[0] for t in traced], [t[2] for t in traced], "branch 0", "switch")
    jaxprs, consts = _join_branch_consts([t[0] for t in traced], [t[1] for t in traced])
    outs = cond_p.bind(index, *consts, *flat, branches=tuple(jaxprs))
    return tree_util.tree_unflatten(traced[0][2], outs)


def _check_branch_types(jaxprs, out_trees, first: str, what: str):
    for i, (j, t) in enumerate(zip(jaxprs[1:], out_trees[1:]), start=1):
        if t != out_trees[0]:
            raise TypeError(f"{what} branches must have the same output structure; branch 0 "
                            f"returned {out_trees[0]} but branch {i} returned {t}.")
        if _strip_weak(j.out_avals) != _strip_weak(jaxprs[0].out_avals):
            raise TypeError(_type_mismatch(f"{what} branch outputs", t, jaxprs[0].out_avals,
                                           j.out_avals, first, f"branch {i}"))


def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, staged (both are
    traced, one runs). ``pred`` is a scalar boolean (or number)."""
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cond: true_fun and false_fun arguments should be callable.")
    aval = core.get_aval(pred)
    if aval.shape != ():
        raise TypeError(f"Pred must be a scalar, got {pred!r} of shape {aval.shape}.")
    if aval.dtype != np.bool_ and not dtypes.issubdtype(aval.dtype, np.number):
        raise TypeError(f"Pred type must be either boolean or number, got {aval.dtype}.")
    if aval.dtype != np.bool_:
        pred = ne(pred, np.zeros((), aval.dtype))
    index = convert_element_type(pred, np.int32)
    flat, in_tree = tree_util.tree_flatten(operands)
    avals = _avals_of(flat)
    t_false = trace_function(false_fun, in_tree, avals, "false_fun of cond")
    t_true = trace_function(true_fun, in_tree, avals, "true_fun of cond")
    if t_true[2] != t_false[2]:
        raise TypeError("true_fun and false_fun output must have identical types; true_fun "
                        f"returned the structure {t_true[2]} but false_fun returned "
                        f"{t_false[2]}.")
    if _strip_weak(t_true[0].out_avals) != _strip_weak(t_false[0].out_avals):
        raise TypeError(_type_mismatch("true_fun and false_fun output", t_true[2],
                                       t_true[0].out_avals, t_false[0].out_avals,
                                       "true_fun", "false_fun"))
    jaxprs, consts = _join_branch_consts([t_false[0], t_true[0]], [t_false[1], t_true[1]])
    outs = cond_p.bind(index, *consts, *flat, branches=tuple(jaxprs))
    return tree_util.tree_unflatten(t_true[2], outs)


def _cond_abstract_eval(index, *args, branches):
    outs = [a.strip_weak_type() if not all(b.out_avals[i].weak_type for b in branches) else a
            for i, a in enumerate(branches[0].out_avals)]
    return outs


def _cond_lowering(ctx: mlir.LoweringRuleContext, index, *args, branches):
    result_types = [mlir.aval_to_ir_type(a) for a in ctx.avals_out]
    case = hlo.CaseOp(result_types, index, len(branches))
    for i, br in enumerate(branches):
        block = case.regions[i].blocks.append()
        with ir.InsertionPoint(block):
            hlo.ReturnOp(mlir.closed_subcomp(ctx.module_context, br, *args))
    return list(case.results)


cond_p = core.Primitive("cond")
cond_p.multiple_results = True
cond_p.def_impl(partial(dispatch.apply_primitive, cond_p))
cond_p.def_abstract_eval(_cond_abstract_eval)
mlir.register_lowering(cond_p, _cond_lowering)


# --------------------------------------------------------------------------------------------
# while_loop / fori_loop
# --------------------------------------------------------------------------------------------


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``while cond_fun(val): val = body_fun(val)``, staged. Lowers to ``stablehlo.while``.
    Reverse-mode differentiation is not supported (use ``scan`` or ``fori_loop`` with static
    bounds); forward mode is."""
    flat, in_tree = tree_util.tree_flatten(init_val)
    avals = _avals_of(flat)
    arg_tree = tree_util.treedef_tuple([in_tree])  # the functions take the carry as one value
    body, body_consts, body_tree = trace_function(body_fun, arg_tree, avals, "body_fun of "
                                                  "while_loop")
    if body_tree != in_tree:
        raise TypeError(f"body_fun output and input must have identical types; the input "
                        f"structure is {in_tree} but body_fun returned {body_tree}.")
    if _strip_weak(body.out_avals) != _strip_weak(avals):
        raise TypeError(_type_mismatch("body_fun output and input", in_tree, avals,
                                       body.out_avals, "input", "output"))
    if [a.weak_type for a in body.out_avals] != [a.weak_type for a in avals]:
        # A weakly typed init value (a Python scalar) whose update is strongly typed: make the
        # carry strong from the start, as JAX does.
        flat = [convert_element_type(x, a.dtype, a.weak_type and b.weak_type)
                for x, a, b in zip(flat, avals, body.out_avals)]
        avals = _avals_of(flat)
        body, body_consts, body_tree = trace_function(body_fun, arg_tree, avals, "body_fun of "
                                                      "while_loop")
    cond_j, cond_consts, _ = trace_function(cond_fun, arg_tree, avals, "cond_fun of "
                                                    "while_loop")
    out = cond_j.out_avals
    if len(out) != 1 or out[0].shape != () or out[0].dtype != np.bool_:
        raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                        f"{[a.str_short() for a in out]}.")
    outs = while_p.bind(*cond_consts, *body_consts, *flat, cond_jaxpr=cond_j, body_jaxpr=body,
                        cond_nconsts=len(cond_consts), body_nconsts=len(body_consts))
    return tree_util.tree_unflatten(in_tree, outs)


def _while_abstract_eval(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    return list(args[cond_nconsts + body_nconsts:])


def _while_lowering(ctx: mlir.LoweringRuleContext, *args, cond_jaxpr, body_jaxpr, cond_nconsts,
                    body_nconsts):
    # Constants travel in the loop state (regions read only their own arguments).
    cconsts = list(args[:cond_nconsts])
    bconsts = list(args[cond_nconsts:cond_nconsts + body_nconsts])
    carry = list(args[cond_nconsts + body_nconsts:])
    state = cconsts + bconsts + carry
    state_avals = list(ctx.avals_in)
    types = [mlir.aval_to_ir_type(a) for a in state_avals]
    loop = hlo.WhileOp(types, state)
    cond_block = loop.cond.blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        a = list(cond_block.arguments)
        (pred,) = mlir.closed_subcomp(ctx.module_context, cond_jaxpr, *a[:cond_nconsts],
                                      *a[cond_nconsts + body_nconsts:])
        hlo.ReturnOp([pred])
    body_block = loop.body.blocks.append(*types)
    with ir.InsertionPoint(body_block):
        a = list(body_block.arguments)
        new = mlir.closed_subcomp(ctx.module_context, body_jaxpr,
                                  *a[cond_nconsts:cond_nconsts + body_nconsts],
                                  *a[cond_nconsts + body_nconsts:])
        hlo.ReturnOp(a[:cond_nconsts + body_nconsts] + list(new))
    return list(loop.results)[cond_nconsts + body_nconsts:]


while_p = core.Primitive("while")
while_p.multiple_results = True
while_p.def_impl(partial(dispatch.apply_primitive, while_p))
while_p.def_abstract_eval(_while_abstract_eval)
mlir.register_lowering(while_p, _while_lowering)


def _static_int(x):
    """The Python int value of ``x`` if it is known at trace time, else None."""
    if isinstance(x, core.Tracer):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    aval = core.get_aval(x)
    if aval.shape == () and dtypes.issubdtype(aval.dtype, np.integer):
        return int(np.asarray(x))
    return None


def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """``for i in range(lower, upper): val = body_fun(i, val)``. With static bounds it is a
    ``scan`` (so reverse-mode differentiation works), else a ``while_loop``."""
    lo, hi = _static_int(lower), _static_int(upper)
    if lo is not None and hi is not None:
        length = max(hi - lo, 0)
        dtype = dtypes.canonicalize_dtype(dtypes.result_type(lower, upper))

        def step(carry, _):
            i, val = carry
            return (add(i, np.asarray(1, dtype)), body_fun(i, val)), None

        start = convert_element_type(np.asarray(lo, dtype), dtype)
        (_, out), _ = scan(step, (start, init_val), None, length=length,
                           unroll=1 if unroll is None else unroll)
        return out
    if unroll not in (None, 1, False):
        raise ValueError("fori_loop unroll requires static (concrete) lower and upper bounds")
    dtype = dtypes.result_type(lower, upper)
    lower = convert_element_type(lower, dtype)
    upper = convert_element_type(upper, dtype)

    def loop_cond(carry):
        return lt(carry[0], carry[1])

    def loop_body(carry):
        i, hi_, val = carry
        return add(i, np.asarray(1, dtype)), hi_, body_fun(i, val)

    return while_loop(loop_cond, loop_body, (lower, upper, init_val))[2]


# --------------------------------------------------------------------------------------------
# scan / map
# --------------------------------------------------------------------------------------------


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1, _split_transpose: bool = False):
    """``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns the final carry and
    the stacked ``y``s. Lowered as a while loop with dynamic slicing."""
    xs_flat, xs_tree = tree_util.tree_flatten(xs)
    lengths = {core.get_aval(x).shape[0] if core.get_aval(x).shape else None for x in xs_flat}
    if None in lengths:
        raise ValueError("scan got value with no leading axis to scan over: every leaf of xs "
                         "must be an array with at least one dimension.")
    if length is not None:
        length = int(core.concrete_or_error(length, "the length argument of scan"))
        if lengths and lengths != {length}:
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {sorted(lengths)}.")
    elif len(lengths) > 1:
        raise ValueError(f"scan got values with different leading axis sizes: "
                         f"{', '.join(map(str, sorted(lengths)))}.")
    elif not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    else:
        (length,) = lengths
    carry_flat, carry_tree = tree_util.tree_flatten(init)
    carry_avals = _avals_of(carry_flat)
    x_avals = [core.get_aval(x).update(shape=core.get_aval(x).shape[1:]) for x in xs_flat]
    in_tree = tree_util.tree_structure((init, xs))
    in_tree = tree_util.tree_structure((tree_util.tree_unflatten(carry_tree, carry_avals),
                                        tree_util.tree_unflatten(xs_tree, x_avals)))

    def traced(carry_avals):
        return trace_function(f, in_tree, carry_avals + x_avals, "scan body")

    body, consts, out_tree = traced(carry_avals)
    placeholder = tree_util.tree_unflatten(out_tree, [0] * out_tree.num_leaves)
    if not isinstance(placeholder, (tuple, list)) or len(placeholder) != 2:
        raise TypeError("scan body output must be a pair (carry, y), got the structure "
                        f"{out_tree}.")
    out_children = tree_util.treedef_children(out_tree)
    n_carry = len(carry_flat)
    new_carry_avals = body.out_avals[:n_carry]
    if out_children[0] != carry_tree:
        raise TypeError(f"scan body function carry input and carry output must have the same "
                        f"pytree structure, but they differ: input {carry_tree}, output "
                        f"{out_children[0]}.")
    if _strip_weak(new_carry_avals) != _strip_weak(carry_avals):
        raise TypeError(_type_mismatch("scan body function carry input and carry output",
                                       carry_tree, carry_avals, new_carry_avals, "input",
                                       "output"))
    if [a.weak_type for a in new_carry_avals] != [a.weak_type for a in carry_avals]:
        carry_flat = [convert_element_type(x, a.dtype, a.weak_type and b.weak_type)
                      for x, a, b in zip(carry_flat, carry_avals, new_carry_avals)]
        carry_avals = _avals_of(carry_flat)
        body, consts, out_tree = traced(carry_avals)
    if unroll is True:
        unroll = max(length, 1)
    elif unroll is False:
        unroll = 1
    outs = scan_p.bind(*consts, *carry_flat, *xs_flat, jaxpr=body, length=length,
                       reverse=bool(reverse), num_consts=len(consts), num_carry=n_carry,
                       unroll=int(unroll), linear=(False,) * (len(consts) + n_carry +
                                                            len(xs_flat)))
    carry_out = tree_util.tree_unflatten(carry_tree, outs[:n_carry])
    ys = tree_util.tree_unflatten(out_children[1], outs[n_carry:])
    return carry_out, ys


def _scan_abstract_eval(*args, jaxpr, length, reverse, num_consts, num_carry, unroll, linear):
    carry = list(args[num_consts:num_consts + num_carry])
    ys = [a.update(shape=(length,) + a.shape) for a in jaxpr.out_avals[num_carry:]]
    return carry + ys


def _scan_impl_fun(*args, jaxpr, length, reverse, num_consts, num_carry, unroll, linear):
    """The scan as a while loop over an index (used to lower it)."""
    consts = list(args[:num_consts])
    carry = list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [full((length,) + a.shape, 0, a.dtype) for a in y_avals]
    unroll = max(1, min(unroll, max(length, 1)))
    n_outer, remainder = divmod(length, unroll)

    def one_step(i, carry, ys):
        idx = sub(np.int32(length - 1), i) if reverse else i
        x_slices = [dynamic_index_in_dim(x, idx, 0, keepdims=False) for x in xs]
        outs = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *consts, *carry, *x_slices)
        carry, y = outs[:num_carry], outs[num_carry:]
        ys = [dynamic_update_index_in_dim(buf, yv, idx, 0) for buf, yv in zip(ys, y)]
        return carry, ys

    def body(state):
        i, carry, ys = state
        for k in range(unroll):
            carry, ys = one_step(add(i, np.int32(k)), carry, ys)
        return add(i, np.int32(unroll)), carry, ys

    state = (np.int32(0), carry, ys)
    if n_outer:
        state = while_loop(lambda s: lt(s[0], np.int32(n_outer * unroll)), body, state)
    i, carry, ys = state
    for k in range(remainder):
        carry, ys = one_step(add(i, np.int32(k)), carry, ys)
    return list(carry) + list(ys)


scan_p = core.Primitive("scan")
scan_p.multiple_results = True
scan_p.def_impl(partial(dispatch.apply_primitive, scan_p))
scan_p.def_abstract_eval(_scan_abstract_eval)
mlir.register_lowering(scan_p, mlir.lower_fun(_scan_impl_fun, multiple_results=True))


def map(f: Callable, xs, *, batch_size: int | None = None):
    """``stack([f(x) for x in xs])`` as a scan (sequential, memory-light)."""
    if batch_size is not None:
        raise NotImplementedError("lax.map(batch_size=...) is not implemented yet")
    _, ys = scan(lambda c, x: (c, f(x)), (), xs)
    return ys


def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """Inclusive prefix scan of an associative ``fn`` over ``axis`` (parallel, O(log n) depth,
    as in Blelloch's algorithm)."""
    flat, tree = tree_util.tree_flatten(elems)
    if not flat:
        return elems
    ndim = core.get_aval(flat[0]).ndim
    axis = axis % ndim
    if reverse:
        flat = [rev(x, (axis,)) for x in flat]
    n = core.get_aval(flat[0]).shape[axis]
    if any(core.get_aval(x).shape[axis] != n for x in flat):
        raise ValueError("associative_scan: all elems must have the same size along axis")

    def combine(a, b):
        out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        return tree_util.tree_leaves(out)

    def sl(x, start, stop, step=1):
        return slice_in_dim(x, start, stop, step, axis)

    def scan_rec(xs):
        k = core.get_aval(xs[0]).shape[axis]
        if k < 2:
            return xs
        reduced = combine([sl(x, 0, k - 1, 2) for x in xs], [sl(x, 1, k, 2) for x in xs])
        odd = scan_rec(reduced)
        if k % 2 == 0:
            even = combine([sl(o, 0, -1 if core.get_aval(o).shape[axis] else 0) for o in odd],
                           [sl(x, 2, k, 2) for x in xs])
        else:
            even = combine(odd, [sl(x, 2, k, 2) for x in xs])
        even = [concatenate([sl(x, 0, 1), e], axis) for x, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = scan_rec(flat)
    if reverse:
        out = [rev(x, (axis,)) for x in out]
    return tree_util.tree_unflatten(tree, out)


def _interleave(a, b, axis: int):
    """Elements of ``a`` and ``b`` alternating along ``axis``, ``a`` first; ``a`` may be one
    element longer than ``b``."""
    sa, sb = core.get_aval(a).shape, core.get_aval(b).shape
    n_a, n_b = sa[axis], sb[axis]
    if n_a == n_b + 1:
        b = concatenate([b, full(sb[:axis] + (1,) + sb[axis + 1:], 0, core.get_aval(b).dtype)],
                        axis)
    pair_shape = sa[:axis + 1] + (1,) + sa[axis + 1:]
    pairs = concatenate([reshape(a, pair_shape), reshape(b, pair_shape)], axis + 1)
    flat = reshape(pairs, sa[:axis] + (2 * n_a,) + sa[axis + 1:])
    return slice_in_dim(flat, 0, n_a + n_b, 1, axis)


__all__ = [
    "associative_scan",
    "cond",
    "cond_p",
    "fori_loop",
    "map",
    "scan",
    "scan_p",
    "switch",
    "trace_function",
    "while_loop",
    "while_p",
]
