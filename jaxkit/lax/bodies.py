"""What control-flow constructs share: users' functions traced to jaxprs, jaxpr helpers.

``trace_function`` traces a Python function at given avals once per (function, types) (cached
on the function object, like JAX), closing over constants as explicit operands so enclosing
transformations see them. The type-check helpers build the messages for carries and branches
that change type; the small jaxpr helpers are used by the rules of ``cond``, ``while`` and
``scan`` (``cond.py``, ``loops.py``).
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence

import inspect

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit._config import config, global_trace_context
from jaxkit.core import ClosedJaxpr, ShapedArray
from jaxkit.interpreters import ad
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax.parallel import named_axes_key
from jaxkit.lax.structural import convert_element_type, full

# --------------------------------------------------------------------------------------------
# Tracing user functions (cached on the function object, like JAX)
# --------------------------------------------------------------------------------------------

_trace_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def trace_function(fun: Callable, in_tree, in_avals: Sequence[ShapedArray], what: str,
                   traced_for: str | None = None):
    """Trace ``fun`` (taking the unflattened ``in_tree``) to a jaxpr without constants.
    ``what`` names it in jaxkit's errors; ``traced_for`` (default ``what``) is what JAX's
    errors say traced it (``scan``, ``while_body``, ``cond``...), its arguments named by
    ``fun``'s parameters. A wrapper of the user's function stands for it in errors by
    carrying its debug info (``_jaxkit_debug_info``: ``fori_loop``'s step, as in JAX).

    Returns ``(closed_jaxpr, consts, out_tree)``: the jaxpr takes ``consts`` first, then the
    flat arguments. Cached per function object, argument types and trace context."""
    key = (in_tree, tuple(in_avals), what, trace_context_key())
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
        out_flat, out_tree = pe.flat_outputs(debug, out)
        out_tree_box.append(out_tree)
        return out_flat

    debug = getattr(fun, "_jaxkit_debug_info", None)  # a wrapper's, for what it wraps
    if debug is None:
        placeholders = tree_util.tree_unflatten(in_tree, [object() for _ in in_avals])
        debug = pe.debug_info(traced_for or what, fun, pe.flat_arg_names(fun, placeholders))
    jaxpr, consts = pe.trace_to_jaxpr(flat_fun, in_avals, debug)
    closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
    result = (closed, consts, out_tree_box[0])
    if not any(isinstance(c, core.Tracer) for c in consts):
        per_fun[key] = result
    return result


def trace_context_key() -> tuple:
    """What besides its arguments' types decides a function's trace: the options in JAX's
    trace context (``jax_enable_x64``...: a body traced with x64 off gives int32 where one
    traced with it on gives int64) and the named axes in scope, with their sizes."""
    return global_trace_context(config.trace_context), named_axes_key()


def avals_of(flat) -> list[ShapedArray]:
    return [core.get_aval(x) for x in flat]


def _src_info(fun: Callable) -> str:
    name = getattr(fun, "__name__", type(fun).__name__)
    code = getattr(fun, "__code__", None)
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code else name


def _type_differences(a, b) -> str:
    """How two avals differ, in the words of JAX's mismatch messages ("" if they agree)."""
    reasons = [f"the {what} do not match" for what, differ in
               (("dtypes", a.dtype != b.dtype), ("shapes", a.shape != b.shape),
                ("manual axis types", a.vma != b.vma)) if differ]
    return ", and ".join(reasons)


def _sentence_or_bullets(items: Sequence[str]) -> str:
    """One mismatch as a sentence, several as JAX's bullet list."""
    if len(items) == 1:
        return items[0][0].upper() + items[0][1:] + "."
    return ";\n".join(f"  * {item}" for item in items) + "."


def branch_mismatch(kind: str, funs: Sequence[Callable], labels: Sequence[str], tree,
                    avals_a, avals_b) -> str:
    """JAX's message for ``cond``/``switch`` branches whose output types differ; ``labels``
    name the two branches compared (``funs`` are those two)."""
    paths = [tree_util.keystr(p) for p, _ in
             tree_util.tree_flatten_with_path(tree_util.tree_unflatten(tree, avals_a))[0]]
    a_label, b_label = labels
    items, hints = [], []
    for path, a, b in zip(paths, avals_a, avals_b):
        if reasons := _type_differences(a, b):
            at = f" at path {path}" if path else ""
            items.append(f"the output of {a_label}{at} has type {_long(a)} but the "
                         f"corresponding output of {b_label} has type {_long(b)}, so "
                         f"{reasons}")
            # JAX's hint, word for word: it names the axes the *other* branch lacks
            hints += [f"applying `jax.lax.pcast(..., {tuple(v1.vma - v2.vma)}, to='varying')`"
                      f" to the output of {label}{at}"
                      for label, v1, v2 in ((a_label, b, a), (b_label, a, b)) if v2.vma - v1.vma]
    body = _sentence_or_bullets(items)
    srcs = "\n".join(f"{label} is {_src_info(f)}" for label, f in zip(labels, funs))
    hint = _pcast_hint(hints, "\n")
    return (f"{kind} branches must have equal output types but they differ.\n\n{srcs}\n\n"
            f"{body}\n\n{hint}Revise {a_label} and/or {b_label} so that all output types match.")


def _pcast_hint(hints: list[str], between: str) -> str:
    """JAX's hint to ``pcast`` values inside shard_map: one sentence, or bullets joined by
    ``between``; empty without hints."""
    if not hints:
        return ""
    text = (f"This might be fixed by {hints[0]}.\n" if len(hints) == 1 else
            "This might be fixed by:\n" + between.join(f"  * {h};" for h in hints[:-1])
            + f"\n  * {hints[-1]}.\n")
    return text + ("See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma for "
                   "more information.\n\n")


def carry_mismatch(what: str, fun: Callable, default_name: str, tree, in_avals, out_avals,
                   arg_index: int = 0) -> str:
    """JAX's message for a loop body whose carry output type differs from its input type;
    components are named from the body's carry parameter (``default_name`` if it has none)."""
    name = default_name
    try:
        params = list(inspect.signature(fun).parameters)
        name = params[arg_index] if len(params) > arg_index else default_name
    except (TypeError, ValueError):
        pass
    paths = [("component " + name + tree_util.keystr(p)) if p else name for p, _ in
             tree_util.tree_flatten_with_path(tree_util.tree_unflatten(tree, in_avals))[0]]
    items, hints = [], []
    for path, a, b in zip(paths, in_avals, out_avals):
        if reasons := _type_differences(a, b):
            items.append(f"the input carry {path} has type {_long(a)} but the "
                         f"corresponding output carry component has type {_long(b)}, "
                         f"so {reasons}")
        if b.vma - a.vma:  # inside shard_map: the initial carry is less varying
            hints.append(f"applying `jax.lax.pcast(..., {tuple(b.vma - a.vma)}, "
                         "to='varying')`, to the initial carry value corresponding to the "
                         f"input carry {path}")
    body = _sentence_or_bullets(items)
    hint = _pcast_hint(hints, "\n\n")  # JAX's carry hint leaves a blank line between bullets
    return (f"{what} function carry input and carry output must have equal types, but they "
            f"differ:\n\n{body}\n\n{hint}Revise the function so that all output types match "
            "the corresponding input types.")


def _long(aval) -> str:
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]{aval._ur()}"


def promote_weak_carry(vals: Sequence, in_avals, out_avals) -> tuple[list, bool]:
    """JAX's rule for loop carries: a weakly typed initial value (a Python scalar) whose
    update has another dtype of the same shape is converted to the promoted type of both,
    taking the update's type as strong (as JAX does); the body must then be traced again. An
    update of the same dtype that is only strongly typed changes nothing (JAX's ``typematch``
    ignores weak types): the carry goes in weak and comes out strong. Returns the values and
    whether any changed."""
    vals, changed = list(vals), False
    for i, (a, b) in enumerate(zip(in_avals, out_avals)):
        if a.weak_type and a.shape == b.shape and a.dtype != b.dtype:
            dt = dtypes.result_type(_AvalOf(a), b.dtype)
            vals[i] = convert_element_type(vals[i], dt)
            changed = True
    return vals, changed


class _AvalOf:
    """An aval as a type-promotion input."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval


def strip_weak(avals):
    return [a.strip_weak_type() for a in avals]



# --------------------------------------------------------------------------------------------
# Jaxpr helpers for the rules
# --------------------------------------------------------------------------------------------


def make_closed_jaxpr(fun: Callable[..., list], in_avals: Sequence[ShapedArray]) -> ClosedJaxpr:
    """A ClosedJaxpr of ``fun`` (flat arguments in, a flat list out) at ``in_avals``."""
    jaxpr, consts = pe.trace_to_jaxpr(lambda *a: list(fun(*a)), list(in_avals))
    return ClosedJaxpr(jaxpr, consts)


def run_jaxpr(closed: ClosedJaxpr, *args) -> list:
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def zeros_of_aval(aval: ShapedArray):
    if dtypes.is_extended(aval.dtype):  # the dtype's own zero (Flax's fp8 meta dtype: -inf)
        return ad.zeros_like_aval(aval)
    return full(aval.shape, 0, aval.dtype)


def instantiate(t, aval: ShapedArray):
    return ad.instantiate_zeros(t) if ad.is_zero(t) else t


def output_sources(closed: ClosedJaxpr, start: int) -> list[tuple[str, object] | None]:
    """Where each output of ``closed`` from ``start`` on comes from, when it is passed through.

    ``("in", i)`` for an output that is input ``i`` itself, ``("const", value)`` for one that
    is a constant of the closed jaxpr, ``None`` for a computed one. Loop rules use it to hand a
    residual that is only a forwarded input to the other loop directly instead of stacking it
    once per iteration (JAX's ``partial_eval_jaxpr_nounits_fwd``).
    """
    where = {v: ("in", i) for i, v in enumerate(closed.jaxpr.invars)}
    where.update({v: ("const", c) for v, c in zip(closed.jaxpr.constvars, closed.consts)})
    return [where.get(v) if isinstance(v, core.Var) else None
            for v in closed.jaxpr.outvars[start:]]


# Derived bodies, cached on the body they come from so that a loop built from the same body
# again gets the same jaxpr object (and so hits the caches keyed on it: eager dispatch, jit).
_derived: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _derive(closed: ClosedJaxpr, key: tuple, build: Callable[[], ClosedJaxpr]) -> ClosedJaxpr:
    per = _derived.setdefault(closed, {})
    if key not in per:
        per[key] = build()
    return per[key]


def select_outputs(closed: ClosedJaxpr, keep: Sequence[bool]) -> ClosedJaxpr:
    """``closed`` with only the outputs where ``keep`` is true."""
    keep = tuple(bool(k) for k in keep)
    if all(keep):
        return closed
    return _derive(closed, ("select", keep), lambda: make_closed_jaxpr(
        lambda *a: [o for o, k in zip(run_jaxpr(closed, *a), keep) if k], closed.in_avals))


def forward_loop_io(body: ClosedJaxpr, num_consts: int, num_carry: int
                    ) -> tuple[ClosedJaxpr, list[bool], list[int | None]]:
    """Take out of a scan body the carries it returns unchanged and the ys that are its xs.

    ``body`` maps ``[*consts, *carry, *xs]`` to ``[*carry, *ys]``. A carry returned as it came
    in is read-only: it becomes a const (moved in front of the others) and the loop returns its
    initial value. A y that is an x is not copied into a new stack: the loop returns the x
    (JAX's ``scan`` does both before binding ``scan_p``). Returns ``(body, to_const, y_from_x)``:
    ``to_const[i]`` says whether carry ``i`` moved, ``y_from_x[j]`` is the x that y ``j`` is, or
    None.
    """
    src = [s[1] if s is not None and s[0] == "in" else None for s in output_sources(body, 0)]
    first_x = num_consts + num_carry
    to_const = [s == num_consts + i for i, s in enumerate(src[:num_carry])]
    y_from_x = [s - first_x if s is not None and s >= first_x else None
                for s in src[num_carry:]]
    if not any(to_const) and all(f is None for f in y_from_x):
        return body, to_const, y_from_x
    keep = [not m for m in to_const] + [f is None for f in y_from_x]
    moved = [num_consts + i for i, m in enumerate(to_const) if m]
    order = moved + [i for i in range(len(body.in_avals)) if i not in moved]

    def fun(*a):
        args = [None] * len(order)
        for pos, i in enumerate(order):
            args[i] = a[pos]
        return [o for o, k in zip(run_jaxpr(body, *args), keep) if k]

    new = _derive(body, ("loop_io", num_consts, num_carry), lambda: make_closed_jaxpr(
        fun, [body.in_avals[i] for i in order]))
    return new, to_const, y_from_x


def hoist_invariant_outputs(closed: ClosedJaxpr, consts: Sequence, num_outs: int
                            ) -> tuple[ClosedJaxpr, list, list[bool], list]:
    """Move out of a loop body what depends only on its consts, residuals included.

    ``closed`` takes ``[*consts, *others]``; its outputs from ``num_outs`` on are residuals of
    every iteration. What is computed from ``consts`` alone is the same at each iteration, so
    it is computed once here (under the current trace) rather than stacked ``length``
    times (JAX's ``_scan_known_hoisting``). Returns ``(body, body_consts, hoisted, values)``:
    ``body`` takes ``[*body_consts, *others]`` (``body_consts`` are the loop-invariant values it
    still uses) and gives the first ``num_outs`` outputs and the residuals not hoisted;
    ``hoisted[i]`` says whether residual ``i`` was; ``values`` are the hoisted ones in order.
    """
    n_res = len(closed.out_avals) - num_outs
    nc = len(consts)
    if not nc:
        return closed, list(consts), [False] * n_res, []
    unknowns = [False] * nc + [True] * (len(closed.in_avals) - nc)
    known, unknown, out_uk, _ = pe.partial_eval_jaxpr(
        closed, unknowns, [True] * num_outs + [False] * n_res)
    hoisted = [not u for u in out_uk[num_outs:]]
    if not known.jaxpr.eqns:  # nothing computed from the consts alone: keep the body as it is
        return closed, list(consts), [False] * n_res, []
    outs = run_jaxpr(known, *consts)
    n_h = sum(hoisted)
    return unknown, list(outs[n_h:]), hoisted, list(outs[:n_h])


def hoist_forwarded_carry(cond: ClosedJaxpr, body: ClosedJaxpr, body_nconsts: int
                          ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool]]:
    """Make the read-only carries of a ``while`` body consts, as JAX's ``while_loop`` does.

    ``cond`` maps ``[*cond consts, *carry]`` to the predicate and ``body`` maps ``[*body
    consts, *carry]`` to the carry. A carry the body returns as it came in and ``cond`` does
    not read is the same at every iteration: it moves in front of the body's consts (and out of
    ``cond``'s inputs). Returns ``(cond, body, moved)``, ``moved[i]`` saying whether carry ``i``
    moved; the loop's result for a moved carry is its initial value."""
    n_carry = len(body.out_avals)
    cond_nconsts = len(cond.in_avals) - n_carry
    src = output_sources(body, 0)
    forwarded = [s == ("in", body_nconsts + i) for i, s in enumerate(src)]
    dced, used = pe.dce_jaxpr(cond.jaxpr)
    moved = [f and not u for f, u in zip(forwarded, used[cond_nconsts:])]
    if not any(moved):
        return cond, body, moved
    keep = [True] * cond_nconsts + [not m for m in moved]
    cond = ClosedJaxpr(core.Jaxpr(dced.constvars, [v for v, k in zip(dced.invars, keep) if k],
                                  dced.outvars, dced.eqns, debug_info=dced.debug_info), cond.consts)
    order = ([body_nconsts + i for i, m in enumerate(moved) if m] + list(range(body_nconsts))
             + [body_nconsts + i for i, m in enumerate(moved) if not m])

    def fun(*a):
        args = [None] * len(order)
        for pos, i in enumerate(order):
            args[i] = a[pos]
        return [o for o, m in zip(run_jaxpr(body, *args), moved) if not m]

    new = _derive(body, ("while_fwd", body_nconsts, tuple(moved)), lambda: make_closed_jaxpr(
        fun, [body.in_avals[i] for i in order]))
    return cond, new, moved


def merge_moved(moved: Sequence[bool], fixed: Sequence, outs: Sequence) -> list:
    """A loop's whole carry: the ``fixed`` values where ``moved``, ``outs`` elsewhere."""
    fixed, outs = iter(fixed), iter(outs)
    return [next(fixed) if m else next(outs) for m in moved]

