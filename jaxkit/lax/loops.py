"""Loops: ``while_loop``/``fori_loop`` (the ``while`` primitive), ``scan``/``map``; all rules.

``while`` lowers to ``stablehlo.while``; ``scan`` is a while loop over an index, with the
per-iteration slices of ``xs`` and ``ys`` moved by dynamic slicing. ``fori_loop`` with static
bounds is a ``scan`` (so reverse mode works), otherwise a ``while``. Rules:

* ``while``: forward mode (the tangents of the carry become part of the carry, the nonzero
  pattern found by a fixpoint); partial evaluation of a loop whose carry is partly known runs
  the known loop now when its carry does not depend on unknowns; reverse mode is not supported
  (as in JAX). Batching with a batched predicate runs the body on every example and selects.
* ``scan``: forward and reverse mode: residuals of each iteration become extra stacked outputs
  of the known scan, and the transpose is a reverse scan accumulating the cotangents of the
  loop-invariant linear inputs in its carry.

``associative_scan`` (a parallel prefix scan built from slices) is here too.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import numpy as np

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit._util import split_list
from jaxkit.core import ClosedJaxpr
from jaxkit.jaxpr import operand_map_rules
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.runtime.array import device_put_value
from jaxkit.lax.bodies import (avals_of, carry_mismatch, forward_loop_io, hoist_forwarded_carry,
                               hoist_invariant_outputs, instantiate, make_closed_jaxpr,
                               merge_moved, output_sources, select_outputs, promote_weak_carry,
                               run_jaxpr, strip_weak, trace_function, zeros_of_aval)
from jaxkit.lax.elementwise import add, lt, select_n, sub
from jaxkit.lax.reductions import reduce_or
from jaxkit.lax.staging import ArrayCopySemantics, device_put_p
from jaxkit.lax.eval_jaxpr import eval_jaxpr
from jaxkit.lax.loops_lowering import while_lowering
from jaxkit.lax.slicing import (dynamic_index_in_dim, dynamic_update_index_in_dim, index_in_dim,
                                slice_in_dim)
from jaxkit.lax.structural import (broadcast_in_dim, concatenate, convert_element_type,
                                   expand_dims, full, reshape, rev)

# --------------------------------------------------------------------------------------------
# while_loop / fori_loop
# --------------------------------------------------------------------------------------------


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``while cond_fun(val): val = body_fun(val)``, staged. Lowers to ``stablehlo.while``.
    Reverse-mode differentiation is not supported (use ``scan`` or ``fori_loop`` with static
    bounds); forward mode is."""
    flat, in_tree = tree_util.tree_flatten(init_val)
    avals = avals_of(flat)
    arg_tree = tree_util.treedef_tuple([in_tree])  # the functions take the carry as one value
    body, body_consts, body_tree = trace_function(body_fun, arg_tree, avals, "body_fun of "
                                                  "while_loop", "while_body")
    if body_tree != in_tree:
        raise TypeError(f"body_fun output and input must have identical types; the input "
                        f"structure is {in_tree} but body_fun returned {body_tree}.")
    flat, promoted = promote_weak_carry(flat, avals, body.out_avals)
    if promoted:
        avals = avals_of(flat)
        body, body_consts, body_tree = trace_function(body_fun, arg_tree, avals, "body_fun of "
                                                      "while_loop", "while_body")
    if strip_weak(body.out_avals) != strip_weak(avals):
        raise TypeError(carry_mismatch("while_loop body", body_fun, "carry", in_tree, avals,
                                       body.out_avals))
    cond_j, cond_consts, _ = trace_function(cond_fun, arg_tree, avals, "cond_fun of "
                                                    "while_loop", "while_cond")
    out = cond_j.out_avals
    if len(out) != 1 or out[0].shape != () or out[0].dtype != np.bool_:
        raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                        f"{list(out)}.")
    cond_j, body, moved = hoist_forwarded_carry(cond_j, body, len(body_consts))
    fixed, flat = [x for x, m in zip(flat, moved) if m], [x for x, m in zip(flat, moved) if not m]
    outs = while_p.bind(*cond_consts, *fixed, *body_consts, *flat, cond_jaxpr=cond_j,
                        body_jaxpr=body, cond_nconsts=len(cond_consts),
                        body_nconsts=len(fixed) + len(body_consts))
    return tree_util.tree_unflatten(in_tree, merge_moved(moved, fixed, outs))


def _while_abstract_eval(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    # The body's output types, as JAX: a weak initial value updated by a strong value of its
    # dtype gives a strong result.
    return list(body_jaxpr.out_avals)


while_p = core.Primitive("while")
while_p.multiple_results = True
while_p.def_impl(partial(dispatch.apply_primitive, while_p))
while_p.def_abstract_eval(_while_abstract_eval)
mlir.register_lowering(while_p, while_lowering)


def _while_operands(eqn) -> list:
    """For ``jaxpr.effects``: the cond's invars are its consts and the carry, the body's its
    consts and the carry; the operands are cond consts, body consts, carry."""
    nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    carry = list(range(nc + nb, len(eqn.invars)))
    return [(eqn.params["cond_jaxpr"].jaxpr, list(range(nc)) + carry),
            (eqn.params["body_jaxpr"].jaxpr, list(range(nc, nc + nb)) + carry)]


operand_map_rules[while_p] = _while_operands


def _is_host_int(x) -> bool:
    """A concrete integer: a Python or NumPy one, or a rank-0 integer array that is not a
    tracer (JAX's ``core.is_concrete``)."""
    if isinstance(x, (int, np.integer)):
        return not isinstance(x, bool)
    if isinstance(x, core.Tracer) or not hasattr(x, "dtype") or np.ndim(x) != 0:
        return False
    return dtypes.issubdtype(x.dtype, np.integer)


def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """``for i in range(lower, upper): val = body_fun(i, val)``. With static bounds it is a
    ``scan`` (so reverse-mode differentiation works), else a ``while_loop``."""
    lower_dt, upper_dt = (dtypes.dtype(x, canonicalize=True) for x in (lower, upper))
    dtype = lower_dt
    if lower_dt != upper_dt:
        # As JAX: only a weakly typed integer bound (a Python int) takes the other's type
        weak = [dtypes.is_weakly_typed(x) for x in (lower, upper)]
        ints = all(np.issubdtype(d, np.signedinteger) for d in (lower_dt, upper_dt))
        if not ints or weak[0] == weak[1]:
            raise TypeError("lower and upper arguments to fori_loop must have equal types, "
                            f"got {lower_dt.name} and {upper_dt.name}")
        dtype = upper_dt if weak[0] else lower_dt
        lower, upper = (convert_element_type(x, dtype) for x in (lower, upper))
    # As JAX 0.10.2: Python (or NumPy) integer bounds make a scan, whose index starts as
    # ``int(lower)``, a weakly typed Python int whatever the bound's type, as JAX's; traced
    # bounds make a while loop.
    # Errors in the body name it and its arguments (i, val), not the loop's wrappers
    debug = pe.debug_info("fori_loop", body_fun, pe.flat_arg_names(body_fun, (0, init_val)))
    if _is_host_int(lower) and _is_host_int(upper):
        length = max(int(upper) - int(lower), 0)
        start = int(lower)

        def step(loop_carry, _):  # the name JAX's carry-type errors show
            i, val = loop_carry
            one = 1 if dtypes.is_weakly_typed(i) else np.asarray(1, dtype)
            return (add(i, one),
                    body_fun(i, val)), None

        step._jaxkit_debug_info = debug
        (_, out), _ = scan(step, (start, init_val), None, length=length,
                           unroll=1 if unroll is None else unroll)
        return out
    if unroll not in (None, 1, False):
        raise ValueError("fori_loop unroll requires static (concrete) lower and upper bounds")

    def loop_cond(carry):
        return lt(carry[0], carry[1])

    def loop_body(carry):
        i, hi_, val = carry
        return add(i, np.asarray(1, dtype)), hi_, body_fun(i, val)

    loop_body._jaxkit_debug_info = dataclasses.replace(
        debug, arg_names=(debug.arg_names[0], "", *debug.arg_names[1:]))  # ("" for upper)

    return while_loop(loop_cond, loop_body, (lower, upper, init_val))[2]


# --------------------------------------------------------------------------------------------
# while
# --------------------------------------------------------------------------------------------


def _fixpoint(step: Callable[[list[bool]], list[bool]], start: list[bool]) -> list[bool]:
    """The least ``flags >= start`` with ``step(flags) <= flags`` (carry properties that
    propagate through a loop body)."""
    flags = list(start)
    while True:
        new = [a or b for a, b in zip(flags, step(flags))]
        if new == flags:
            return flags
        flags = new


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts, bconsts, carry = split_list(primals, [cond_nconsts, body_nconsts])
    _, bconst_t, carry_t = split_list(tangents, [cond_nconsts, body_nconsts])
    bconst_nz = [not ad.is_zero(t) for t in bconst_t]

    def step(carry_nz):
        return ad.jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, instantiate=carry_nz)[1]

    carry_nz = _fixpoint(step, [not ad.is_zero(t) for t in carry_t])
    jvp_body, _ = ad.jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, instantiate=carry_nz)
    nb, nc = len(bconsts), len(carry)
    n_bt = sum(bconst_nz)
    carry_avals = [core.get_aval(x) for x in carry]
    ct_avals = [a.to_tangent_aval() for a, nz in zip(carry_avals, carry_nz) if nz]
    bc_avals = [core.get_aval(x) for x in bconsts]
    bt_avals = [a.to_tangent_aval() for a, nz in zip(bc_avals, bconst_nz) if nz]

    # The loop state must be the body's inputs and outputs in one order:
    # body consts [bconsts, bconst tangents], carry [carry, carry tangents].
    def body(*args):
        bc, bt, c, t = split_list(args, [nb, n_bt, nc])
        return run_jaxpr(jvp_body, *bc, *c, *bt, *t)

    def cond_fun(*args):
        cc, c, _ = split_list(args, [cond_nconsts, nc])
        return run_jaxpr(cond_jaxpr, *cc, *c)

    new_body = make_closed_jaxpr(body, bc_avals + bt_avals + carry_avals + ct_avals)
    new_cond = make_closed_jaxpr(cond_fun, [core.get_aval(x) for x in cconsts] + carry_avals
                                 + ct_avals)
    carry_tans = [instantiate(t, a.to_tangent_aval()) for t, a, nz in
                  zip(carry_t, carry_avals, carry_nz) if nz]
    bconst_tans = [t for t, nz in zip(bconst_t, bconst_nz) if nz]
    outs = while_p.bind(*cconsts, *bconsts, *bconst_tans, *carry, *carry_tans,
                        cond_jaxpr=new_cond, body_jaxpr=new_body, cond_nconsts=cond_nconsts,
                        body_nconsts=nb + n_bt)
    it = iter(outs[nc:])
    return outs[:nc], [next(it) if nz else ad.Zero(a.to_tangent_aval())
                       for a, nz in zip(carry_avals, carry_nz)]


def _while_partial_eval(trace: pe.JaxprTrace, *args, cond_jaxpr, body_jaxpr, cond_nconsts,
                        body_nconsts):
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    cconsts, bconsts, carry = split_list(args, [cond_nconsts, body_nconsts])
    uk = [not trace.is_known(x) for x in args]
    cc_uk, bc_uk, carry_uk0 = split_list(uk, [cond_nconsts, body_nconsts])

    def step(carry_uk):
        return pe.partial_eval_jaxpr(body_jaxpr, bc_uk + carry_uk, False)[2]

    carry_uk = _fixpoint(step, carry_uk0)
    pred_uk = pe.partial_eval_jaxpr(cond_jaxpr, cc_uk + carry_uk, False)[2][0]
    out_avals = [core.get_aval(x) for x in carry]
    if pred_uk or all(carry_uk) or not any(uk):
        if not any(uk):
            with core.set_current_trace(trace.parent):
                return while_p.bind(*args, **params)
        return trace.stage(while_p, list(args), out_avals, params)
    # The known carries depend only on known values: run them as a loop of their own now.
    known_body, _, _, _ = pe.partial_eval_jaxpr(body_jaxpr, bc_uk + carry_uk, carry_uk)
    n_known = sum(1 for u in carry_uk if not u)
    kb = [x for x, u in zip(bconsts, bc_uk) if not u]
    kc = [x for x, u in zip(carry, carry_uk) if not u]
    known_cond_split = pe.partial_eval_jaxpr(cond_jaxpr, cc_uk + carry_uk, False)[0]
    kcc = [x for x, u in zip(cconsts, cc_uk) if not u]
    body_k = make_closed_jaxpr(lambda *a: run_jaxpr(known_body, *a)[:n_known],
                         [core.get_aval(x) for x in kb + kc])
    cond_k = make_closed_jaxpr(lambda *a: run_jaxpr(known_cond_split, *a)[:1],
                         [core.get_aval(x) for x in kcc + kc])
    with core.set_current_trace(trace.parent):
        known_outs = while_p.bind(*kcc, *kb, *kc, cond_jaxpr=cond_k, body_jaxpr=body_k,
                                  cond_nconsts=len(kcc), body_nconsts=len(kb))
    # The unknown carries need the whole loop again (a while loop keeps no per-iteration
    # residuals); it is staged with every input.
    staged = iter(trace.stage(while_p, list(args), out_avals, params))
    known_it = iter(known_outs)
    results = []
    for u in carry_uk:
        s = next(staged)
        results.append(s if u else next(known_it))
    return results


def _while_transpose(cts, *args, **params):
    raise ValueError(
        "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with "
        "dynamic start/stop values. Try using lax.scan, or lax.fori_loop with static "
        "(Python int) start/stop values, or forward-mode differentiation (jvp, jacfwd).")


def _while_batch(axis_data, vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts,
                 body_nconsts):
    size = axis_data.size
    cconsts, bconsts, carry = split_list(vals, [cond_nconsts, body_nconsts])
    cc_d, bc_d, carry_d = split_list(dims, [cond_nconsts, body_nconsts])
    cc_b = [d is not batching.not_mapped for d in cc_d]
    bc_b = [d is not batching.not_mapped for d in bc_d]

    def step(carry_b):
        return batching.batch_jaxpr(body_jaxpr, axis_data, bc_b + carry_b, False)[1]

    carry_b = _fixpoint(step, [d is not batching.not_mapped for d in carry_d])
    pred_b = batching.batch_jaxpr(cond_jaxpr, axis_data, cc_b + carry_b, False)[1][0]
    if pred_b:
        carry_b = [True] * len(carry)  # each lane keeps its own state once it has stopped
    carry = [batching.bdim_at_front(x, d, size) if b else x
             for x, d, b in zip(carry, carry_d, carry_b)]
    cconsts = [batching.moveaxis(x, d, 0) if b else x for x, d, b in zip(cconsts, cc_d, cc_b)]
    bconsts = [batching.moveaxis(x, d, 0) if b else x for x, d, b in zip(bconsts, bc_d, bc_b)]
    body_bat, _ = batching.batch_jaxpr(body_jaxpr, axis_data, bc_b + carry_b, carry_b)
    cond_bat, _ = batching.batch_jaxpr(cond_jaxpr, axis_data, cc_b + carry_b, False)
    if not pred_b:
        outs = while_p.bind(*cconsts, *bconsts, *carry, cond_jaxpr=cond_bat, body_jaxpr=body_bat,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
        return outs, [0 if b else batching.not_mapped for b in carry_b]
    # A batched predicate: loop while any lane is running; finished lanes keep their state.
    nc, nb = len(cconsts), len(bconsts)
    carry_avals = [core.get_aval(x) for x in carry]

    def cond_any(*args):
        (pred,) = run_jaxpr(cond_bat, *args)
        return [reduce_or(pred, (0,))]

    def body_masked(*args):
        cc, bc, c = split_list(args, [nc, nb])
        (pred,) = run_jaxpr(cond_bat, *cc, *c)
        new = run_jaxpr(body_bat, *bc, *c)
        outs = []
        for old, upd in zip(c, new):
            shape = core.get_aval(old).shape
            mask = broadcast_in_dim(pred, shape, (0,))
            outs.append(select_n(mask, old, upd))
        return outs

    cc_avals = [core.get_aval(x) for x in cconsts]
    new_cond = make_closed_jaxpr(cond_any, cc_avals + carry_avals)
    new_body = make_closed_jaxpr(body_masked, cc_avals + [core.get_aval(x) for x in bconsts]
                           + carry_avals)
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *carry, cond_jaxpr=new_cond,
                        body_jaxpr=new_body, cond_nconsts=nc, body_nconsts=nc + nb)
    return outs, [0] * len(outs)


ad.defjvp_rule(while_p, _while_jvp)
ad.deftranspose(while_p, _while_transpose)
pe.defpartial_eval(while_p, _while_partial_eval)
batching.defrule(while_p, _while_batch, named_axis=True)



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
                         f"{', '.join(str(n) for n in sorted(lengths))}.")  # (map is lax's)
    elif not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    else:
        (length,) = lengths
    carry_flat, carry_tree = tree_util.tree_flatten(init)
    carry_avals = avals_of(carry_flat)
    x_avals = [core.get_aval(x).update(shape=core.get_aval(x).shape[1:]) for x in xs_flat]
    in_tree = tree_util.tree_structure((init, xs))
    in_tree = tree_util.tree_structure((tree_util.tree_unflatten(carry_tree, carry_avals),
                                        tree_util.tree_unflatten(xs_tree, x_avals)))

    def traced(carry_avals):
        return trace_function(f, in_tree, carry_avals + x_avals, "scan body", "scan")

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
    carry_flat, promoted = promote_weak_carry(carry_flat, carry_avals, new_carry_avals)
    if promoted:
        carry_avals = avals_of(carry_flat)
        body, consts, out_tree = traced(carry_avals)
        new_carry_avals = body.out_avals[:n_carry]
    if strip_weak(new_carry_avals) != strip_weak(carry_avals):
        raise TypeError(carry_mismatch("scan body", f, "carry", carry_tree, carry_avals,
                                       new_carry_avals))
    if unroll is True:
        unroll = max(length, 1)
    elif unroll is False:
        unroll = 1
    body, to_const, y_from_x = forward_loop_io(body, len(consts), n_carry)
    consts = [c for c, m in zip(carry_flat, to_const) if m] + list(consts)
    loop_carry = [c for c, m in zip(carry_flat, to_const) if not m]
    outs = scan_p.bind(*consts, *loop_carry, *xs_flat, jaxpr=body, length=length,
                       reverse=bool(reverse), num_consts=len(consts), num_carry=len(loop_carry),
                       unroll=int(unroll))
    carry_it, ys_it = iter(outs[:len(loop_carry)]), iter(outs[len(loop_carry):])
    carry_out = tree_util.tree_unflatten(
        carry_tree, [c if m else next(carry_it) for c, m in zip(carry_flat, to_const)])
    ys = tree_util.tree_unflatten(out_children[1], [
        next(ys_it) if f is None else _device_value(xs_flat[f]) for f in y_from_x])
    return carry_out, ys


def _device_value(x):
    # A NumPy x that scan returns as a y comes back on the device, as JAX's ``_maybe_put``.
    return device_put_value(x) if isinstance(x, np.ndarray) else x


def _scan_abstract_eval(*args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    carry = list(jaxpr.out_avals[:num_carry])  # the body's output types, as JAX
    ys = [a.update(shape=(length,) + a.shape) for a in jaxpr.out_avals[num_carry:]]
    return carry + ys


def _scan_impl_fun(*args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    """The scan as a while loop over an index, laid out as JAX's (used to lower it, so that
    lowered text reads as JAX's): ``unroll`` iterations per trip of the loop, the body called
    as ``func.call @closed_call``, the slices taken with ``dynamic_index_in_dim`` and
    ``dynamic_update_index_in_dim`` (private functions too), the iterations left over after
    the last full trip run after the loop."""
    consts, carry, xs = split_list(list(args), [num_consts, num_carry])
    y_avals = jaxpr.out_avals[num_carry:]
    num_trips, remainder = (0, length) if unroll == 0 else divmod(length, unroll)
    if unroll != 1 and num_trips == 1 and remainder == 0:
        num_trips, remainder = 0, length  # one full trip: no loop at all
    xs_rem: list = []
    if unroll == 1:
        xss, yss = xs, [_empty((length,), a) for a in y_avals]
    else:
        if remainder:
            cut = num_trips * unroll if not reverse else remainder
            heads = [slice_in_dim(x, 0, cut) for x in xs]
            tails = [slice_in_dim(x, cut, x.shape[0]) for x in xs]
            xs, xs_rem = (heads, tails) if not reverse else (tails, heads)
        if num_trips:
            xss = [reshape(x, (num_trips, unroll, *x.shape[1:])) for x in xs]
            yss = [_empty((num_trips, unroll), a) for a in y_avals]
        else:
            xss, yss = [], [_empty((0,), a) for a in y_avals]

    def inner(n, carry, xs):
        if unroll == 1:
            return split_list(eval_jaxpr(jaxpr, *consts, *carry, *xs), [num_carry])
        ys = []
        for k in range(n):
            i = n - k - 1 if reverse else k
            x = [index_in_dim(x, i, keepdims=False) for x in xs]
            carry, y = split_list(eval_jaxpr(jaxpr, *consts, *carry, *x), [num_carry])
            ys.append(y)
        ys = ys[::-1] if reverse else ys
        return carry, [concatenate([expand_dims(y, (0,)) for y in col], 0)
                       for col in zip(*ys)]

    def body(state):
        trip, carry, yss = state
        i = sub(sub(np.int32(num_trips), trip), np.int32(1)) if reverse else trip
        xs = [dynamic_index_in_dim(x, i, keepdims=False, allow_negative_indices=False)
              for x in xss]
        carry, ys = inner(unroll, carry, xs)
        yss = [dynamic_update_index_in_dim(y, upd, i, 0, allow_negative_indices=False)
               for y, upd in zip(yss, ys)]
        return add(trip, np.int32(1)), carry, yss

    if num_trips:
        _, carry, yss = while_loop(lambda s: lt(s[0], np.int32(num_trips)), body,
                                   (np.int32(0), carry, yss))
    ys = yss
    if unroll != 1 and num_trips:
        ys = [reshape(y, (num_trips * unroll, *y.shape[2:])) for y in yss]
    if remainder:
        carry, ys_rem = inner(remainder, carry, xs_rem)
        ys = [concatenate([a, b] if not reverse else [b, a], 0) for a, b in zip(ys, ys_rem)]
    return list(carry) + list(ys)


def _empty(prefix: tuple, aval: core.ShapedArray):
    zeros = full(prefix + aval.shape, 0, aval.dtype)
    if aval.memory_space is core.MemorySpace.Device:
        return zeros
    # stacked results offloaded to host memory are stacked there (as JAX's empty2)
    return device_put_p.bind(zeros, devices=(aval.memory_space,), srcs=(None,),
                             copy_semantics=(ArrayCopySemantics.REUSE_INPUT,))[0]


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


# --------------------------------------------------------------------------------------------
# scan
# --------------------------------------------------------------------------------------------


def _bind_scan(consts, carry, xs, jaxpr, length, reverse, unroll):
    args = [*consts, *carry, *xs]
    return scan_p.bind(*args, jaxpr=jaxpr, length=length, reverse=reverse,
                       num_consts=len(consts), num_carry=len(carry), unroll=unroll)


def _scan_jvp(primals, tangents, *, jaxpr, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = split_list(primals, [num_consts, num_carry])
    const_t, carry_t, xs_t = split_list(tangents, [num_consts, num_carry])
    const_nz = [not ad.is_zero(t) for t in const_t]
    xs_nz = [not ad.is_zero(t) for t in xs_t]
    n_ys = len(jaxpr.out_avals) - num_carry

    def step(carry_nz):
        nz = ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                          instantiate=carry_nz + [False] * n_ys)[1]
        return nz[:num_carry]

    carry_nz = _fixpoint(step, [not ad.is_zero(t) for t in carry_t])
    jvp_body, out_nz = ad.jvp_jaxpr(jaxpr, const_nz + carry_nz + xs_nz,
                                    instantiate=carry_nz + [False] * n_ys)
    ys_nz = out_nz[num_carry:]
    nct, ncat = sum(const_nz), sum(carry_nz)
    avals = jaxpr.in_avals
    c_av, ca_av, x_av = split_list(avals, [num_consts, num_carry])
    ct_av = [a.to_tangent_aval() for a, nz in zip(c_av, const_nz) if nz]
    cat_av = [a.to_tangent_aval() for a, nz in zip(ca_av, carry_nz) if nz]
    xt_av = [a.to_tangent_aval() for a, nz in zip(x_av, xs_nz) if nz]

    # scan's layout: consts [c, ct], carry [ca, cat], xs [x, xt] -> carry [ca, cat], ys [y, yt]
    def body(*args):
        c, ct, ca, cat, x, xt = split_list(args, [num_consts, nct, num_carry, ncat, len(x_av)])
        outs = run_jaxpr(jvp_body, *c, *ca, *x, *ct, *cat, *xt)
        ca_o, y_o, cat_o, yt_o = split_list(outs, [num_carry, n_ys, ncat])
        return [*ca_o, *cat_o, *y_o, *yt_o]

    new = make_closed_jaxpr(body, c_av + ct_av + ca_av + cat_av + x_av + xt_av)
    consts_t = [t for t, nz in zip(const_t, const_nz) if nz]
    carry_tans = [instantiate(t, a) for t, a, nz in zip(carry_t, ca_av, carry_nz) if nz]
    xs_tans = [t for t, nz in zip(xs_t, xs_nz) if nz]
    outs = _bind_scan(consts + consts_t, carry + carry_tans, xs + xs_tans, new, length,
                      reverse, unroll)
    ca_o, cat_o, y_o, yt_o = split_list(outs, [num_carry, ncat, n_ys])
    cat_it, yt_it = iter(cat_o), iter(yt_o)
    y_avals = jaxpr.out_avals[num_carry:]
    carry_tan_out = [next(cat_it) if nz else ad.Zero(a.to_tangent_aval())
                     for a, nz in zip(ca_av, carry_nz)]
    ys_tan_out = [next(yt_it) if nz else
                  ad.Zero(a.update(shape=(length,) + a.shape).to_tangent_aval())
                  for a, nz in zip(y_avals, ys_nz)]
    return [*ca_o, *y_o], carry_tan_out + ys_tan_out


def _scan_partial_eval(trace: pe.JaxprTrace, *args, jaxpr, length, reverse, num_consts,
                       num_carry, unroll):
    consts, carry, xs = split_list(args, [num_consts, num_carry])
    uk = [not trace.is_known(x) for x in args]
    c_uk, ca_uk0, x_uk = split_list(uk, [num_consts, num_carry])
    n_ys = len(jaxpr.out_avals) - num_carry
    if not any(uk):
        with core.set_current_trace(trace.parent):
            return _bind_scan(consts, carry, xs, jaxpr, length, reverse, unroll)

    def step(ca_uk):
        return pe.partial_eval_jaxpr(jaxpr, c_uk + ca_uk + x_uk, ca_uk + [False] * n_ys)[2][
            :num_carry]

    ca_uk = _fixpoint(step, ca_uk0)
    known, unknown, out_uk, num_res = pe.partial_eval_jaxpr(jaxpr, c_uk + ca_uk + x_uk,
                                                             ca_uk + [False] * n_ys)
    kc = [x for x, u in zip(consts, c_uk) if not u]
    kca = [x for x, u in zip(carry, ca_uk) if not u]
    kx = [x for x, u in zip(xs, x_uk) if not u]
    n_kc, n_kca = len(kc), len(kca)
    n_kout = len(known.out_avals) - num_res
    # A residual that is a known const or x itself goes to the unknown scan as it is, and one
    # computed from known consts alone is computed once before the loop: only the others are
    # stacked by the known scan. A carry is never forwarded: it changes at every iteration;
    # nor is a NumPy array (as in JAX): it would become a constant of the staged jaxpr.
    k_in = kc + kca + kx
    fwd = [None if src is not None and src[0] == "in" and (
        n_kc <= src[1] < n_kc + n_kca or isinstance(k_in[src[1]], np.ndarray))
           else src for src in output_sources(known, n_kout)]
    known = select_outputs(known, [True] * n_kout + [f is None for f in fwd])
    with core.set_current_trace(trace.parent):
        known, k_consts, hoisted, hoisted_vals = hoist_invariant_outputs(known, kc, n_kout)
        known_outs = _bind_scan(k_consts, kca, kx, known, length, reverse, unroll)
    k_carry, k_ys, stacked = split_list(known_outs, [n_kca, n_kout - n_kca])
    stacked_it, hoisted_it, h_val_it = iter(stacked), iter(hoisted), iter(hoisted_vals)
    # Residuals in order, each either intensive (a const of the unknown scan) or extensive.
    residuals, res_const = [], []
    for src in fwd:
        if src is None:
            h = next(hoisted_it)
            residuals.append(next(h_val_it) if h else next(stacked_it))
            res_const.append(h)
        elif src[0] == "const":
            residuals.append(src[1])
            res_const.append(True)
        else:
            residuals.append(k_in[src[1]])
            res_const.append(src[1] < n_kc)
    # Unknown scan, laid out as JAX's: consts = [intensive residuals, unknown consts], carry =
    # unknown carries, xs = [unknown xs, extensive residuals]. ``unknown`` takes [residuals,
    # unknown consts, unknown carries, unknown xs].
    uc = [x for x, u in zip(consts, c_uk) if u]
    uca = [x for x, u in zip(carry, ca_uk) if u]
    ux = [x for x, u in zip(xs, x_uk) if u]
    int_res = [r for r, c in zip(residuals, res_const) if c]
    ext_res = [r for r, c in zip(residuals, res_const) if not c]
    res_avals = unknown.in_avals[:num_res]
    int_av = [a for a, c in zip(res_avals, res_const) if c]
    ext_av = [a for a, c in zip(res_avals, res_const) if not c]
    uc_av = [core.get_aval(x) for x in uc]
    uca_av = [core.get_aval(x) for x in uca]
    ux_av = [core.get_aval(x).update(shape=core.get_aval(x).shape[1:]) for x in ux]

    def body(*a):
        ir_, c, ca, x, er = split_list(a, [len(int_res), len(uc), len(uca), len(ux)])
        ir_it, er_it = iter(ir_), iter(er)
        r = [next(ir_it) if is_c else next(er_it) for is_c in res_const]
        return run_jaxpr(unknown, *r, *c, *ca, *x)

    ubody = make_closed_jaxpr(body, int_av + uc_av + uca_av + ux_av + ext_av)
    n_uc = len(int_res) + len(uc)
    u_out_avals = _scan_abstract(ubody, n_uc, len(uca), length)
    u_args = [*int_res, *uc, *uca, *ux, *ext_res]
    staged = trace.stage(scan_p, u_args, u_out_avals,
                         dict(jaxpr=ubody, length=length, reverse=reverse,
                              num_consts=n_uc, num_carry=len(uca), unroll=unroll))
    s_it = iter(staged)
    known_it = iter(list(k_carry) + list(k_ys))
    results = []
    for u in out_uk:
        results.append(next(s_it) if u else next(known_it))
    return results


def _scan_abstract(body: ClosedJaxpr, num_consts: int, num_carry: int, length: int):
    carry = body.out_avals[:num_carry]
    ys = [a.update(shape=(length,) + a.shape) for a in body.out_avals[num_carry:]]
    return list(carry) + ys


def _scan_transpose(cts, *args, jaxpr, length, reverse, num_consts, num_carry, unroll):
    consts, carry, xs = split_list(args, [num_consts, num_carry])
    c_lin = [ad.is_undefined_primal(x) for x in consts]
    # Every carry of a linear scan is a tangent. One that arrives as a value rather than an
    # UndefinedPrimal is an instantiated zero tangent: transpose it all the same and drop its
    # cotangent.
    ca_given = [ad.is_undefined_primal(x) for x in carry]
    x_lin = [ad.is_undefined_primal(x) for x in xs]
    ct_carry, ct_ys = cts[:num_carry], cts[num_carry:]
    ca_av = jaxpr.in_avals[num_consts:num_consts + num_carry]
    y_av = jaxpr.out_avals[num_carry:]
    ct_carry = [instantiate(c, a.to_tangent_aval()) for c, a in zip(ct_carry, ca_av)]
    # A symbolically zero ys cotangent is neither stacked in memory nor added in the body.
    ys_nz = [not ad.is_zero(c) for c in ct_ys]
    ct_ys = [c for c, nz in zip(ct_ys, ys_nz) if nz]
    res_consts = [x for x, lin in zip(consts, c_lin) if not lin]
    res_xs = [x for x, lin in zip(xs, x_lin) if not lin]
    lin_c_av = [x.aval for x, lin in zip(consts, c_lin) if lin]
    lin_x_av = [x.aval.update(shape=x.aval.shape[1:]) for x, lin in zip(xs, x_lin) if lin]
    linear_flags = c_lin + [True] * num_carry + x_lin
    t, nz = ad.transpose_jaxpr(jaxpr, linear_flags, [True] * num_carry + ys_nz)
    lin_avals = lin_c_av + list(ca_av) + lin_x_av
    n_rc, n_rx, n_lc = len(res_consts), len(res_xs), len(lin_c_av)

    # Transposed body: consts = residual consts; carry = (const-cotangent accumulators, carry
    # cotangents); xs = (residual xs, ys cotangents) -> ys = xs cotangents. It runs reversed.
    def body(*a):
        rc, acc, ct_ca, rx, ct_y = split_list(a, [n_rc, n_lc, num_carry, n_rx])
        outs = iter(run_jaxpr(t, *rc, *rx, *ct_ca, *ct_y))
        cts_in = [next(outs) if n else zeros_of_aval(av.to_tangent_aval())
                  for n, av in zip(nz, lin_avals)]
        ct_c, ct_ca_in, ct_x = split_list(cts_in, [n_lc, num_carry])
        return [*(ad.add_jaxvals_p.bind(a_, c_) for a_, c_ in zip(acc, ct_c)), *ct_ca_in, *ct_x]

    x_res_av = [core.get_aval(x).update(shape=core.get_aval(x).shape[1:]) for x in res_xs]
    tbody = make_closed_jaxpr(body, [core.get_aval(x) for x in res_consts]
                        + [a.to_tangent_aval() for a in lin_c_av]
                        + [a.to_tangent_aval() for a in ca_av] + x_res_av
                        + [a.to_tangent_aval() for a, nz in zip(y_av, ys_nz) if nz])
    acc0 = [zeros_of_aval(a.to_tangent_aval()) for a in lin_c_av]
    outs = _bind_scan(res_consts, acc0 + ct_carry, res_xs + ct_ys, tbody, length,
                      not reverse, unroll)
    ct_consts, ct_carry_in, ct_xs = split_list(outs, [n_lc, num_carry])
    cc_it, cx_it = iter(ct_consts), iter(ct_xs)
    return ([next(cc_it) if lin else None for lin in c_lin]
            + [ct if given else None for ct, given in zip(ct_carry_in, ca_given)]
            + [next(cx_it) if lin else None for lin in x_lin])


def _scan_batch(axis_data, vals, dims, *, jaxpr, length, reverse, num_consts, num_carry,
                unroll):
    size = axis_data.size
    consts, carry, xs = split_list(vals, [num_consts, num_carry])
    c_d, ca_d, x_d = split_list(dims, [num_consts, num_carry])
    c_b = [d is not batching.not_mapped for d in c_d]
    x_b = [d is not batching.not_mapped for d in x_d]
    n_ys = len(jaxpr.out_avals) - num_carry

    def step(ca_b):
        return batching.batch_jaxpr(jaxpr, axis_data, c_b + ca_b + x_b,
                                    ca_b + [False] * n_ys)[1][:num_carry]

    ca_b = _fixpoint(step, [d is not batching.not_mapped for d in ca_d])
    body, out_b = batching.batch_jaxpr(jaxpr, axis_data, c_b + ca_b + x_b,
                                       ca_b + [False] * n_ys)
    consts = [batching.moveaxis(x, d, 0) if b else x for x, d, b in zip(consts, c_d, c_b)]
    carry = [batching.bdim_at_front(x, d, size) if b else x
             for x, d, b in zip(carry, ca_d, ca_b)]
    # The scanned axis stays first, so a batched x carries its batch axis at 1.
    xs = [batching.moveaxis(x, d, 1) if b else x for x, d, b in zip(xs, x_d, x_b)]
    outs = _bind_scan(consts, carry, xs, body, length, reverse, unroll)
    y_b = out_b[num_carry:]
    return outs, ([0 if b else batching.not_mapped for b in ca_b]
                  + [1 if b else batching.not_mapped for b in y_b])


ad.defjvp_rule(scan_p, _scan_jvp)
ad.deftranspose(scan_p, _scan_transpose)
pe.defpartial_eval(scan_p, _scan_partial_eval)
batching.defrule(scan_p, _scan_batch, named_axis=True)


__all__ = ["associative_scan", "fori_loop", "map", "scan", "scan_p", "while_loop", "while_p"]
