"""Varying manual axes: the types of values inside a ``shard_map`` body that checks them.

Inside ``shard_map(..., check_vma=True)`` (the default) a value's type carries the set of
manual mesh axes it may vary over (``ShapedArray.vma``, printed ``f32[3]{V:i}``): an argument
varies over the axes its ``in_specs`` entry splits it over, ``axis_index`` over its axis. The
rules, as JAX 0.10.2's:

* ``pvary`` (``pcast(x, axes, to='varying')``) makes an invariant value varying; it moves no
  data and transposes to ``psum``. An operation whose operands vary over different axes first
  ``pvary``-s the others to their union (one mechanism at ``bind``, for every primitive that
  carries no jaxpr), and its result varies over that union.
* ``psum`` binds ``psum_invariant`` (varying to invariant over its axes, transposing to
  ``pvary``); ``pmax``/``pmin`` also make their result invariant over their axes. The other
  collectives (``all_gather``, ``psum_scatter``, ``ppermute``, ``all_to_all``) need their
  operand varying over their axes (it is ``pvary``-ed when not) and keep its type.
* Outside such a body (``pmap``, ``vmap``, ``check_vma=False``) types carry no axes, ``pvary``
  binds nothing and ``psum`` is the ``psum`` primitive, which transposes to itself.

Because the types say which values are invariant, reverse mode needs no extra rule: the
cotangent of a replicated parameter used against varying data comes back through the
transpose of its ``pvary``, a ``psum``, as JAX sums the gradients of replicated parameters.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from jaxkit import avals as avals_mod
from jaxkit import core
from jaxkit import tree_util
from jaxkit.avals import NO_MUR
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax import parallel, parallel_extra, sharding_ur
from jaxkit.lax.parallel import _allreduce_lowering, _axes_tuple, axis_size

__all__ = ["psum_invariant_p", "pvary", "pvary_p"]


class _Checking(threading.local):
    def __init__(self):
        self.stack: list[bool] = []  # per shard_map body being traced: does it check vma?


_checking = _Checking()


@contextlib.contextmanager
def checking_vma(check: bool) -> Iterator[None]:
    """Trace a shard_map body whose types carry varying manual axes (``check``) or not."""
    _checking.stack.append(bool(check))
    try:
        yield
    finally:
        _checking.stack.pop()


@contextlib.contextmanager
def outside_bodies() -> Iterator[None]:
    """No manual axis bound and no varying axes typed while the block runs: an eager
    shard_map runs a program, from inside the body it traces, as from outside any body."""
    saved, parallel._axis_env.frames = parallel._axis_env.frames, []
    try:
        with checking_vma(False):
            yield
    finally:
        parallel._axis_env.frames = saved


def checking() -> bool:
    """Whether the innermost shard_map body being traced checks varying manual axes."""
    return bool(_checking.stack) and _checking.stack[-1]


def _vma(x) -> frozenset:
    return getattr(core.get_aval(x), "vma", frozenset())


# --------------------------------------------------------------------------------------------
# pvary: invariant -> varying, and psum_invariant: varying -> invariant
# --------------------------------------------------------------------------------------------


def pvary(x, axis_name):
    """``x`` (a pytree) typed as varying over the named manual axes; its values are unchanged.
    Outside a body that checks varying manual axes it is ``x`` itself."""
    axes = _axes_tuple(axis_name) if axis_name else ()
    if not axes:
        return x
    if not checking():
        axis_size(axes)  # NameError for an unbound name
        return x
    ordered = avals_mod.mesh_ordered(axes)
    return tree_util.tree_map(lambda v: pvary_p.bind(v, axes=ordered), x)


def _check_not_ur(x: ShapedArray, axes, name: str) -> None:
    """JAX's refusal of an operand unreduced or reduced over one of ``axes``."""
    for what, have in (("unreduced", x.mur[0]), ("reduced", x.mur[1])):
        if have & set(axes):
            raise ValueError(f"{name} cannot accept args which are {what}. Got "
                             f"{x.str_short()} and axes={set(axes)}")


def _pvary_abstract_eval(x: ShapedArray, *, axes):
    axis_size(axes)
    _check_not_ur(x, axes, "pvary")
    if set(axes) & x.vma:
        raise ValueError("pvary is a invariant->variant collective. This means that the axis "
                         "names mentioned in `axes` passed to `pvary` must not be present in "
                         f"`jax.typeof(inp).mat.varying`. Got axes={axes} and "
                         f"jax.typeof(inp)={x}")
    return x.update(vma=x.vma | frozenset(axes))


def _pvary_impl(x, *, axes):
    raise ValueError("pvary should be called under jax.shard_map.")


pvary_p = core.Primitive("pvary")
pvary_p.def_impl(_pvary_impl)
pvary_p.def_abstract_eval(_pvary_abstract_eval)
ad.deflinear2(pvary_p, lambda ct, x, *, axes: [psum_invariant_p.bind(ct, axes=axes)])
batching.defrule(pvary_p, lambda axis_data, vals, dims, *, axes: (
    pvary_p.bind(vals[0], axes=axes), dims[0]))
mlir.register_lowering(pvary_p, lambda ctx, x, *, axes: [x])


def _psum_invariant_abstract_eval(x: ShapedArray, *, axes):
    axis_size(axes)
    if not set(axes) & x.vma:
        raise ValueError("psum is a variant->invariant collective. This means that the axis "
                         "names mentioned in `axes` passed to `psum` must be present in "
                         f"`jax.typeof(inp).mat.varying`. Got axes={axes} and "
                         f"jax.typeof(inp).mat.varying={x.vma}")
    _check_not_ur(x, axes, "psum_invariant")
    return x.update(vma=x.vma - frozenset(axes))


def _psum_invariant_batcher(axis_data, vals, dims, *, axes):
    if axis_data.name in axes:
        raise NotImplementedError("batching rule for 'psum_invariant' over a vmapped axis "
                                  "named in its axes is not implemented")
    return psum_invariant_p.bind(vals[0], axes=axes), dims[0]


_psum_lowering = _allreduce_lowering(hlo.AddOp, hlo.OrOp)

psum_invariant_p = core.Primitive("psum_invariant")
psum_invariant_p.def_impl(lambda x, *, axes: parallel._unbound_impl("psum", x, axes=axes))
psum_invariant_p.def_abstract_eval(_psum_invariant_abstract_eval)
ad.deflinear2(psum_invariant_p, lambda ct, x, *, axes: [pvary_p.bind(ct, axes=axes)])
batching.defrule(psum_invariant_p, _psum_invariant_batcher, named_axis=True)
mlir.register_lowering(psum_invariant_p, lambda ctx, x, *, axes: _psum_lowering(
    ctx, x, axes=axes, axis_index_groups=None))


def _bind_psum(x, axes: tuple, groups):
    """``psum`` of one traced leaf: ``psum_invariant`` in a body that checks varying manual
    axes (the operand first made varying over all ``axes``), else the ``psum`` primitive."""
    if not checking():
        return parallel.psum_p.bind(x, axes=axes, axis_index_groups=groups)
    if groups is not None:
        raise NotImplementedError("psum with axis_index_groups inside a shard_map with "
                                  "check_vma=True is not supported (as in JAX); pass "
                                  "check_vma=False to shard_map")
    missing = [a for a in axes if a not in _vma(x)]
    if missing:
        x = pvary_p.bind(x, axes=avals_mod.mesh_ordered(missing))
    return psum_invariant_p.bind(x, axes=axes)


parallel.bind_psum = _bind_psum


# --------------------------------------------------------------------------------------------
# The typing rules: result types, and operands joined at bind
# --------------------------------------------------------------------------------------------


def _named(params: dict) -> frozenset:
    return frozenset(_axes_tuple(params.get("axes", params.get("axis_name"))))


def _reduces(avals, params) -> frozenset:
    return frozenset().union(*(a.vma for a in avals)) - _named(params)


def _keeps(avals, params) -> frozenset:
    return frozenset().union(*(a.vma for a in avals))


def _axis_index(avals, params) -> frozenset:
    return _named(params) if checking() else frozenset()


# Primitives whose result's manual axes are not the union of their operands'. The ones that
# need their operand varying over their axes are joined to them at bind.
_vma_rules = {
    parallel.psum_p: _reduces, parallel.pmax_p: _reduces, parallel.pmin_p: _reduces,
    parallel_extra.pbroadcast_p: _reduces, parallel.axis_index_p: _axis_index,
    parallel.all_gather_p: _keeps, parallel.reduce_scatter_p: _keeps,
    parallel.ppermute_p: _keeps, parallel.all_to_all_p: _keeps,
    parallel_extra.ragged_all_to_all_p: _keeps,
}
# Primitives whose abstract evaluation types them (``parallel_ur`` adds its own).
self_typed: set = {pvary_p, psum_invariant_p}
reduced_vary_cast_p: Any = None  # set by ``parallel_ur``
_needs_varying = {parallel.pmax_p, parallel.pmin_p, parallel.all_gather_p,
                  parallel.reduce_scatter_p, parallel.ppermute_p, parallel.all_to_all_p,
                  parallel_extra.ragged_all_to_all_p}


def _carries_jaxpr(params: dict) -> bool:
    return next(core.subjaxprs(params), None) is not None


def _vma_hook(prim: core.Primitive, avals: Sequence, params: dict, out: Any) -> Any:
    if prim in self_typed:
        return out
    if prim in _vma_rules:
        vma = _vma_rules[prim]([a for a in avals if isinstance(a, ShapedArray)], params)
    else:
        # (every abstract evaluation passes here once a varying type exists: keep it cheap)
        if not any(getattr(a, "vma", None) or getattr(a, "mur", NO_MUR) is not NO_MUR
                   for a in avals) or _carries_jaxpr(params):
            return out  # a body's results are typed by the body
        vma = frozenset().union(*(getattr(a, "vma", frozenset()) for a in avals))
    murs = _result_mur(prim, avals, params)
    if prim.multiple_results:
        return [o.update(vma=vma, mur=m) if type(o) is ShapedArray else o
                for o, m in zip(out, murs or [NO_MUR] * len(out))]
    return out.update(vma=vma, mur=murs[0] if murs else NO_MUR) \
        if type(out) is ShapedArray else out


def _result_mur(prim: core.Primitive, avals: Sequence, params: dict) -> list | None:
    """The manual axes each result is unreduced/reduced over, by the primitive's ``ur`` rule
    (None when no operand is either); JAX's error for a primitive without a rule."""
    manual = frozenset().union(*(m[0] | m[1] for a in avals
                                 if (m := getattr(a, "mur", NO_MUR)) is not NO_MUR))
    if not manual:
        return None
    rule = sharding_ur.ur_rules.get(prim)
    if rule is None:
        raise sharding_ur.no_rule_error(prim.name)
    us, rs = rule(*avals, **params)
    if not prim.multiple_results:
        us, rs = [us], [rs]
    return [(u & manual, r & manual) for u, r in zip(us, rs)]


def _vma_join(prim: core.Primitive, args: Sequence, params: dict) -> Sequence:
    if not checking() or prim in self_typed:
        return args
    if prim in _needs_varying:
        want = _named(params)
    elif prim in _vma_rules or not args or _carries_jaxpr(params):
        return args
    else:
        want = frozenset()
    avals = [core.get_aval(a) for a in args]
    want = want.union(*(a.vma for a in avals))
    if not want or all(a.vma == want for a in avals):
        return args
    return [_join_one(x, a, want) if a.vma != want and type(a) is ShapedArray else x
            for x, a in zip(args, avals)]


def _join_one(x, a: ShapedArray, want: frozenset):
    """``x`` made varying over the axes of ``want`` it lacks: a reduced value over exactly
    those is cast (``reduced_vary_cast``, as JAX), any other one ``pvary``-ed."""
    rest = avals_mod.mesh_ordered(want - a.vma)
    if a.mur[1] and a.mur[1] == frozenset(rest):
        return reduced_vary_cast_p.bind(x, axes=rest)
    return pvary_p.bind(x, axes=rest)


avals_mod.vma_hook = _vma_hook
avals_mod.vma_join = _vma_join
