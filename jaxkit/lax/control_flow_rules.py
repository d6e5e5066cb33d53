"""Differentiation, partial evaluation and batching rules of ``cond``, ``while`` and ``scan``.

All rules work on the carried jaxprs with the interpreters' jaxpr-level tools
(``ad.jvp_jaxpr``, ``ad.transpose_jaxpr``, ``partial_eval_jaxpr``, ``batching.batch_jaxpr``);
small wrapper jaxprs reorder or pad inputs and outputs where a primitive needs a fixed layout
(a loop's state must be its body's inputs and outputs in the same order).

* ``cond``: JVP of each branch (their nonzero tangents unified); partial evaluation with the
  index known splits every branch, each branch's residuals padded with zeros for the others;
  the transpose transposes every branch; a batched index turns into a ``select_n`` of all
  branches, as in JAX.
* ``while``: forward-mode only, like JAX. Nonzero tangents and unknown or batched carries are
  found by fixpoint. Under partial evaluation, the known carries run as a loop of their own and
  the whole loop is staged again for the unknown ones; transposing it raises JAX's error. A
  batched predicate runs the loop until every lane has finished.
* ``scan``: forward and reverse mode: residuals of each iteration become extra stacked outputs
  of the known scan, and the transpose is a reverse scan accumulating the cotangents of the
  loop-invariant linear inputs in its carry.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from jaxkit import core
from jaxkit.core import ClosedJaxpr, ShapedArray
from jaxkit.interpreters import ad, batching
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import partial_eval_split as pes
from jaxkit.lax.control_flow import cond_p, scan_p, while_p
from jaxkit.lax.elementwise import add, select_n
from jaxkit.lax.reductions import reduce_or
from jaxkit.lax.structural import broadcast_in_dim, convert_element_type, full


def _make_jaxpr(fun: Callable[..., list], in_avals: Sequence[ShapedArray]) -> ClosedJaxpr:
    """A ClosedJaxpr of ``fun`` (flat arguments in, a flat list out) at ``in_avals``."""
    jaxpr, consts = pe.trace_to_jaxpr(lambda *a: list(fun(*a)), list(in_avals))
    return ClosedJaxpr(jaxpr, consts)


def _run(closed: ClosedJaxpr, *args) -> list:
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _zeros(aval: ShapedArray):
    return full(aval.shape, 0, aval.dtype)


def _instantiate(t, aval: ShapedArray):
    return ad.instantiate_zeros(t) if ad.is_zero(t) else t


def _split(xs, *sizes):
    out, i = [], 0
    for n in sizes:
        out.append(list(xs[i:i + n]))
        i += n
    out.append(list(xs[i:]))
    return out


# --------------------------------------------------------------------------------------------
# cond
# --------------------------------------------------------------------------------------------


def _cond_jvp(primals, tangents, *, branches):
    index, ops = primals[0], primals[1:]
    nonzeros = [not ad.is_zero(t) for t in tangents[1:]]
    out_nz = [False] * len(branches[0].out_avals)
    for br in branches:
        _, nz = ad.jvp_jaxpr(br, nonzeros, instantiate=False)
        out_nz = [a or b for a, b in zip(out_nz, nz)]
    jvp_branches = tuple(ad.jvp_jaxpr(br, nonzeros, instantiate=out_nz)[0] for br in branches)
    tans = [t for t in tangents[1:] if not ad.is_zero(t)]
    outs = cond_p.bind(index, *ops, *tans, branches=jvp_branches)
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
            outs = _run(k, *args)
            padded = list(outs[:n_known_out])
            for j, avals in enumerate(res_avals):
                padded += outs[n_known_out:] if j == i else [_zeros(a) for a in avals]
            return padded
        joined.append(_make_jaxpr(fun, k.in_avals))
    return joined, [a for avals in res_avals for a in avals]


def _cond_partial_eval(trace: pes.JaxprTrace, index, *ops, branches):
    if not trace.is_known(index):
        out_avals = _cond_abstract(branches)
        return trace.stage(cond_p, [index, *ops], out_avals, {"branches": branches})
    unknowns = [not trace.is_known(x) for x in ops]
    out_uk = [False] * len(branches[0].out_avals)
    for br in branches:
        out_uk = [a or b for a, b in zip(out_uk, pes.partial_eval_jaxpr(br, unknowns, False)[2])]
    splits = [pes.partial_eval_jaxpr(br, unknowns, out_uk) for br in branches]
    n_known_out = sum(1 for u in out_uk if not u)
    knowns, res_avals = _join_residuals([s[0] for s in splits], n_known_out)
    known_ops = [x for x, uk in zip(ops, unknowns) if not uk]
    with core.set_current_trace(trace.parent):
        known_outs = cond_p.bind(index, *known_ops, branches=tuple(knowns))
    residuals = known_outs[n_known_out:]
    unknown_ops = [x for x, uk in zip(ops, unknowns) if uk]
    offsets = np.cumsum([0] + [s[3] for s in splits])
    unknown_branches = []
    for i, (_, unknown, _, nres) in enumerate(splits):
        def fun(*args, unknown=unknown, i=i):
            res, rest = args[:len(res_avals)], args[len(res_avals):]
            return _run(unknown, *res[offsets[i]:offsets[i + 1]], *rest)
        unknown_branches.append(_make_jaxpr(fun, res_avals + [core.get_aval(x)
                                                              for x in unknown_ops]))
    out_avals = unknown_branches[0].out_avals
    staged = iter(trace.stage(cond_p, [index, *residuals, *unknown_ops], out_avals,
                              {"branches": tuple(unknown_branches)}))
    known_it = iter(known_outs[:n_known_out])
    return [next(staged) if uk else next(known_it) for uk in out_uk]


def _cond_abstract(branches):
    return cond_p.abstract_eval(None, branches=branches)


def _cond_transpose(cts, index, *ops, branches):
    if ad.is_undefined_primal(index):
        raise ValueError("cond: the index of a cond cannot be a linear input")
    linear = [ad.is_undefined_primal(x) for x in ops]
    ct_avals = [a.to_tangent_aval() for a in branches[0].out_avals]
    cts = [_instantiate(c, a) for c, a in zip(cts, ct_avals)]
    lin_avals = [x.aval for x, lin in zip(ops, linear) if lin]
    res = [x for x, lin in zip(ops, linear) if not lin]
    transposed = []
    for br in branches:
        t, nz = ad.transpose_jaxpr(br, linear, [True] * len(cts))

        def fun(*args, t=t, nz=nz):
            outs = iter(_run(t, *args))
            return [next(outs) if n else _zeros(a) for n, a in zip(nz, lin_avals)]
        transposed.append(_make_jaxpr(fun, [core.get_aval(r) for r in res] + ct_avals))
    outs = iter(cond_p.bind(index, *res, *cts, branches=tuple(transposed)))
    return [None] + [next(outs) if lin else None for lin in linear]


def _cond_batch(axis_data, vals, dims, *, branches):
    index, ops = vals[0], vals[1:]
    index_dim, op_dims = dims[0], dims[1:]
    size = axis_data.size
    if index_dim is not batching.not_mapped:
        # A batched index: run every branch on the whole batch and select per example.
        ops = [batching.bdim_at_front(x, d, size) for x, d in zip(ops, op_dims)]
        outs_per_branch = []
        for br in branches:
            bj, _ = batching.batch_jaxpr(br, axis_data, [True] * len(ops), True)
            outs_per_branch.append(_run(bj, *ops))
        index = batching.moveaxis(index, index_dim, 0)
        outs = []
        for k in range(len(branches[0].out_avals)):
            cases = [o[k] for o in outs_per_branch]
            shape = core.get_aval(cases[0]).shape
            which = broadcast_in_dim(convert_element_type(index, np.int32), shape, (0,))
            outs.append(select_n(which, *cases))
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
    outs = cond_p.bind(index, *ops, branches=batched)
    return outs, [0 if b else batching.not_mapped for b in out_b]


ad.defjvp_rule(cond_p, _cond_jvp)
ad.deftranspose(cond_p, _cond_transpose)
pes.partial_eval_rules[cond_p] = _cond_partial_eval
batching.defrule(cond_p, _cond_batch, named_axis=True)


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
    cconsts, bconsts, carry = _split(primals, cond_nconsts, body_nconsts)
    _, bconst_t, carry_t = _split(tangents, cond_nconsts, body_nconsts)
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
        bc, bt, c, t = _split(args, nb, n_bt, nc)
        return _run(jvp_body, *bc, *c, *bt, *t)

    def cond_fun(*args):
        cc, c, _ = _split(args, cond_nconsts, nc)
        return _run(cond_jaxpr, *cc, *c)

    new_body = _make_jaxpr(body, bc_avals + bt_avals + carry_avals + ct_avals)
    new_cond = _make_jaxpr(cond_fun, [core.get_aval(x) for x in cconsts] + carry_avals + ct_avals)
    carry_tans = [_instantiate(t, a.to_tangent_aval()) for t, a, nz in
                  zip(carry_t, carry_avals, carry_nz) if nz]
    bconst_tans = [t for t, nz in zip(bconst_t, bconst_nz) if nz]
    outs = while_p.bind(*cconsts, *bconsts, *bconst_tans, *carry, *carry_tans,
                        cond_jaxpr=new_cond, body_jaxpr=new_body, cond_nconsts=cond_nconsts,
                        body_nconsts=nb + n_bt)
    it = iter(outs[nc:])
    return outs[:nc], [next(it) if nz else ad.Zero(a.to_tangent_aval())
                       for a, nz in zip(carry_avals, carry_nz)]


def _while_partial_eval(trace: pes.JaxprTrace, *args, cond_jaxpr, body_jaxpr, cond_nconsts,
                        body_nconsts):
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    cconsts, bconsts, carry = _split(args, cond_nconsts, body_nconsts)
    uk = [not trace.is_known(x) for x in args]
    cc_uk, bc_uk, carry_uk0 = _split(uk, cond_nconsts, body_nconsts)

    def step(carry_uk):
        return pes.partial_eval_jaxpr(body_jaxpr, bc_uk + carry_uk, False)[2]

    carry_uk = _fixpoint(step, carry_uk0)
    pred_uk = pes.partial_eval_jaxpr(cond_jaxpr, cc_uk + carry_uk, False)[2][0]
    out_avals = [core.get_aval(x) for x in carry]
    if pred_uk or all(carry_uk) or not any(uk):
        if not any(uk):
            with core.set_current_trace(trace.parent):
                return while_p.bind(*args, **params)
        return trace.stage(while_p, list(args), out_avals, params)
    # The known carries depend only on known values: run them as a loop of their own now.
    known_body, _, _, _ = pes.partial_eval_jaxpr(body_jaxpr, bc_uk + carry_uk, carry_uk)
    n_known = sum(1 for u in carry_uk if not u)
    kb = [x for x, u in zip(bconsts, bc_uk) if not u]
    kc = [x for x, u in zip(carry, carry_uk) if not u]
    known_cond_split = pes.partial_eval_jaxpr(cond_jaxpr, cc_uk + carry_uk, False)[0]
    kcc = [x for x, u in zip(cconsts, cc_uk) if not u]
    body_k = _make_jaxpr(lambda *a: _run(known_body, *a)[:n_known],
                         [core.get_aval(x) for x in kb + kc])
    cond_k = _make_jaxpr(lambda *a: _run(known_cond_split, *a)[:1],
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
    cconsts, bconsts, carry = _split(vals, cond_nconsts, body_nconsts)
    cc_d, bc_d, carry_d = _split(dims, cond_nconsts, body_nconsts)
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
        (pred,) = _run(cond_bat, *args)
        return [reduce_or(pred, (0,))]

    def body_masked(*args):
        cc, bc, c = _split(args, nc, nb)
        (pred,) = _run(cond_bat, *cc, *c)
        new = _run(body_bat, *bc, *c)
        outs = []
        for old, upd in zip(c, new):
            shape = core.get_aval(old).shape
            mask = broadcast_in_dim(pred, shape, (0,))
            outs.append(select_n(mask, old, upd))
        return outs

    cc_avals = [core.get_aval(x) for x in cconsts]
    new_cond = _make_jaxpr(cond_any, cc_avals + carry_avals)
    new_body = _make_jaxpr(body_masked, cc_avals + [core.get_aval(x) for x in bconsts]
                           + carry_avals)
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *carry, cond_jaxpr=new_cond,
                        body_jaxpr=new_body, cond_nconsts=nc, body_nconsts=nc + nb)
    return outs, [0] * len(outs)


ad.defjvp_rule(while_p, _while_jvp)
ad.deftranspose(while_p, _while_transpose)
pes.partial_eval_rules[while_p] = _while_partial_eval
batching.defrule(while_p, _while_batch, named_axis=True)


# --------------------------------------------------------------------------------------------
# scan
# --------------------------------------------------------------------------------------------


def _bind_scan(consts, carry, xs, jaxpr, length, reverse, unroll):
    args = [*consts, *carry, *xs]
    return scan_p.bind(*args, jaxpr=jaxpr, length=length, reverse=reverse,
                       num_consts=len(consts), num_carry=len(carry), unroll=unroll,
                       linear=(False,) * len(args))


def _scan_jvp(primals, tangents, *, jaxpr, length, reverse, num_consts, num_carry, unroll,
              linear):
    consts, carry, xs = _split(primals, num_consts, num_carry)
    const_t, carry_t, xs_t = _split(tangents, num_consts, num_carry)
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
    c_av, ca_av, x_av = _split(avals, num_consts, num_carry)
    ct_av = [a.to_tangent_aval() for a, nz in zip(c_av, const_nz) if nz]
    cat_av = [a.to_tangent_aval() for a, nz in zip(ca_av, carry_nz) if nz]
    xt_av = [a.to_tangent_aval() for a, nz in zip(x_av, xs_nz) if nz]

    # scan's layout: consts [c, ct], carry [ca, cat], xs [x, xt] -> carry [ca, cat], ys [y, yt]
    def body(*args):
        c, ct, ca, cat, x, xt = _split(args, num_consts, nct, num_carry, ncat, len(x_av))
        outs = _run(jvp_body, *c, *ca, *x, *ct, *cat, *xt)
        ca_o, y_o, cat_o, yt_o = _split(outs, num_carry, n_ys, ncat)
        return [*ca_o, *cat_o, *y_o, *yt_o]

    new = _make_jaxpr(body, c_av + ct_av + ca_av + cat_av + x_av + xt_av)
    consts_t = [t for t, nz in zip(const_t, const_nz) if nz]
    carry_tans = [_instantiate(t, a) for t, a, nz in zip(carry_t, ca_av, carry_nz) if nz]
    xs_tans = [t for t, nz in zip(xs_t, xs_nz) if nz]
    outs = _bind_scan(consts + consts_t, carry + carry_tans, xs + xs_tans, new, length,
                      reverse, unroll)
    ca_o, cat_o, y_o, yt_o = _split(outs, num_carry, ncat, n_ys)
    cat_it, yt_it = iter(cat_o), iter(yt_o)
    y_avals = jaxpr.out_avals[num_carry:]
    carry_tan_out = [next(cat_it) if nz else ad.Zero(a.to_tangent_aval())
                     for a, nz in zip(ca_av, carry_nz)]
    ys_tan_out = [next(yt_it) if nz else
                  ad.Zero(a.update(shape=(length,) + a.shape).to_tangent_aval())
                  for a, nz in zip(y_avals, ys_nz)]
    return [*ca_o, *y_o], carry_tan_out + ys_tan_out


def _scan_partial_eval(trace: pes.JaxprTrace, *args, jaxpr, length, reverse, num_consts,
                       num_carry, unroll, linear):
    consts, carry, xs = _split(args, num_consts, num_carry)
    uk = [not trace.is_known(x) for x in args]
    c_uk, ca_uk0, x_uk = _split(uk, num_consts, num_carry)
    n_ys = len(jaxpr.out_avals) - num_carry
    if not any(uk):
        with core.set_current_trace(trace.parent):
            return _bind_scan(consts, carry, xs, jaxpr, length, reverse, unroll)

    def step(ca_uk):
        return pes.partial_eval_jaxpr(jaxpr, c_uk + ca_uk + x_uk, ca_uk + [False] * n_ys)[2][
            :num_carry]

    ca_uk = _fixpoint(step, ca_uk0)
    known, unknown, out_uk, num_res = pes.partial_eval_jaxpr(jaxpr, c_uk + ca_uk + x_uk,
                                                             ca_uk + [False] * n_ys)
    kc = [x for x, u in zip(consts, c_uk) if not u]
    kca = [x for x, u in zip(carry, ca_uk) if not u]
    kx = [x for x, u in zip(xs, x_uk) if not u]
    n_kca = len(kca)
    # Known scan: carry = known carries; ys = known ys and the residuals of every iteration.
    with core.set_current_trace(trace.parent):
        known_outs = _bind_scan(kc, kca, kx, known, length, reverse, unroll)
    k_carry, k_rest = known_outs[:n_kca], known_outs[n_kca:]
    n_kys = len(k_rest) - num_res
    k_ys, residuals = k_rest[:n_kys], k_rest[n_kys:]
    # Unknown scan: consts = unknown consts, carry = unknown carries, xs = residuals and
    # unknown xs. ``unknown`` takes [residuals, unknown consts, unknown carries, unknown xs].
    uc = [x for x, u in zip(consts, c_uk) if u]
    uca = [x for x, u in zip(carry, ca_uk) if u]
    ux = [x for x, u in zip(xs, x_uk) if u]
    res_avals = unknown.in_avals[:num_res]
    uc_av = [core.get_aval(x) for x in uc]
    uca_av = [core.get_aval(x) for x in uca]
    ux_av = [core.get_aval(x).update(shape=core.get_aval(x).shape[1:]) for x in ux]

    def body(*a):
        c, ca, r, x = _split(a, len(uc), len(uca), num_res)
        return _run(unknown, *r, *c, *ca, *x)

    ubody = _make_jaxpr(body, uc_av + uca_av + list(res_avals) + ux_av)
    u_out_avals = _scan_abstract(ubody, len(uc), len(uca), length)
    staged = trace.stage(scan_p, [*uc, *uca, *residuals, *ux], u_out_avals,
                         dict(jaxpr=ubody, length=length, reverse=reverse,
                              num_consts=len(uc), num_carry=len(uca), unroll=unroll,
                              linear=(False,) * (len(uc) + len(uca) + num_res + len(ux))))
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


def _scan_transpose(cts, *args, jaxpr, length, reverse, num_consts, num_carry, unroll,
                    linear):
    consts, carry, xs = _split(args, num_consts, num_carry)
    c_lin = [ad.is_undefined_primal(x) for x in consts]
    # Every carry of a linear scan is a tangent. One that arrives as a value rather than an
    # UndefinedPrimal is an instantiated zero tangent: transpose it all the same and drop its
    # cotangent.
    ca_given = [ad.is_undefined_primal(x) for x in carry]
    x_lin = [ad.is_undefined_primal(x) for x in xs]
    ct_carry, ct_ys = cts[:num_carry], cts[num_carry:]
    ca_av = jaxpr.in_avals[num_consts:num_consts + num_carry]
    y_av = jaxpr.out_avals[num_carry:]
    ct_carry = [_instantiate(c, a.to_tangent_aval()) for c, a in zip(ct_carry, ca_av)]
    ct_ys = [_instantiate(c, a.update(shape=(length,) + a.shape).to_tangent_aval())
             for c, a in zip(ct_ys, y_av)]
    res_consts = [x for x, lin in zip(consts, c_lin) if not lin]
    res_xs = [x for x, lin in zip(xs, x_lin) if not lin]
    lin_c_av = [x.aval for x, lin in zip(consts, c_lin) if lin]
    lin_x_av = [x.aval.update(shape=x.aval.shape[1:]) for x, lin in zip(xs, x_lin) if lin]
    linear_flags = c_lin + [True] * num_carry + x_lin
    t, nz = ad.transpose_jaxpr(jaxpr, linear_flags, [True] * len(jaxpr.out_avals))
    lin_avals = lin_c_av + list(ca_av) + lin_x_av
    n_rc, n_rx, n_lc = len(res_consts), len(res_xs), len(lin_c_av)

    # Transposed body: consts = residual consts; carry = (const-cotangent accumulators, carry
    # cotangents); xs = (residual xs, ys cotangents) -> ys = xs cotangents. It runs reversed.
    def body(*a):
        rc, acc, ct_ca, rx, ct_y = _split(a, n_rc, n_lc, num_carry, n_rx)
        outs = iter(_run(t, *rc, *rx, *ct_ca, *ct_y))
        cts_in = [next(outs) if n else _zeros(av.to_tangent_aval())
                  for n, av in zip(nz, lin_avals)]
        ct_c, ct_ca_in, ct_x = _split(cts_in, n_lc, num_carry)
        return [*(add(a_, c_) for a_, c_ in zip(acc, ct_c)), *ct_ca_in, *ct_x]

    x_res_av = [core.get_aval(x).update(shape=core.get_aval(x).shape[1:]) for x in res_xs]
    tbody = _make_jaxpr(body, [core.get_aval(x) for x in res_consts]
                        + [a.to_tangent_aval() for a in lin_c_av]
                        + [a.to_tangent_aval() for a in ca_av] + x_res_av
                        + [a.to_tangent_aval() for a in y_av])
    acc0 = [_zeros(a.to_tangent_aval()) for a in lin_c_av]
    outs = _bind_scan(res_consts, acc0 + ct_carry, res_xs + ct_ys, tbody, length,
                      not reverse, unroll)
    ct_consts, ct_carry_in, ct_xs = _split(outs, n_lc, num_carry)
    cc_it, cx_it = iter(ct_consts), iter(ct_xs)
    return ([next(cc_it) if lin else None for lin in c_lin]
            + [ct if given else None for ct, given in zip(ct_carry_in, ca_given)]
            + [next(cx_it) if lin else None for lin in x_lin])


def _scan_batch(axis_data, vals, dims, *, jaxpr, length, reverse, num_consts, num_carry,
                unroll, linear):
    size = axis_data.size
    consts, carry, xs = _split(vals, num_consts, num_carry)
    c_d, ca_d, x_d = _split(dims, num_consts, num_carry)
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
pes.partial_eval_rules[scan_p] = _scan_partial_eval
batching.defrule(scan_p, _scan_batch, named_axis=True)
