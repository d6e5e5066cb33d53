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
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo
from jaxkit.lax import parallel, parallel_extra
from jaxkit.lax.parallel import _allreduce_lowering, _axes_tuple, axis_size

__all__ = ["pcast", "psum_invariant_p", "pvary", "pvary_p"]


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


def _pvary_abstract_eval(x: ShapedArray, *, axes):
    axis_size(axes)
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
# pcast
# --------------------------------------------------------------------------------------------

_PCAST_TO = ("varying", "unreduced", "reduced")


def pcast(x, axis_name, *, to: str):
    """Cast ``x`` (a pytree) to be ``to`` over the named manual axes: 'varying' is ``pvary``
    (from invariant). jaxkit has no reduced/unreduced manual values, so the other targets raise
    JAX's error for a cast it does not support."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name!r}")
    if not axis_name:
        return x
    if to not in _PCAST_TO:
        raise ValueError("Got unexpected `to` value. Allowed `to` values are: "
                         f"{set(_PCAST_TO)}")
    axes = _axes_tuple(axis_name)
    axis_size(axes)  # NameError for an unbound name
    if not checking():  # pmap, vmap, check_vma=False: types carry no manual axes
        return x

    def cast(leaf):
        vma = _vma(leaf)
        states = {"varying" if a in vma else "invarying" for a in axes}
        if len(states) > 1:
            raise ValueError("jax.lax.pcast can only accept axis_name which corresponds to one "
                             "of varying, unreduced, reduced or invarying state of the input. "
                             f"Got input type: {core.get_aval(leaf)}, axes: {axes} and input "
                             f"state: {states}")
        from_ = states.pop()
        if (from_, to) != ("invarying", "varying"):
            raise ValueError(f"Unsupported pcast from={from_}, to={to!r}")
        return pvary(leaf, axes)

    return tree_util.tree_map(cast, x)


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
    pvary_p: None, psum_invariant_p: None,  # their abstract evaluation types them
}
_needs_varying = {parallel.pmax_p, parallel.pmin_p, parallel.all_gather_p,
                  parallel.reduce_scatter_p, parallel.ppermute_p, parallel.all_to_all_p,
                  parallel_extra.ragged_all_to_all_p}


def _carries_jaxpr(params: dict) -> bool:
    return next(core.subjaxprs(params), None) is not None


def _vma_hook(prim: core.Primitive, avals: Sequence, params: dict, out: Any) -> Any:
    if prim in _vma_rules:
        rule = _vma_rules[prim]
        if rule is None:
            return out
        vma = rule([a for a in avals if isinstance(a, ShapedArray)], params)
    else:
        # (every abstract evaluation passes here once a varying type exists: keep it cheap)
        if not any(getattr(a, "vma", None) for a in avals) or _carries_jaxpr(params):
            return out  # a body's results are typed by the body
        vma = frozenset().union(*(getattr(a, "vma", frozenset()) for a in avals))
    if prim.multiple_results:
        return [o.update(vma=vma) if type(o) is ShapedArray else o for o in out]
    return out.update(vma=vma) if type(out) is ShapedArray else out


def _vma_join(prim: core.Primitive, args: Sequence, params: dict) -> Sequence:
    if not checking() or prim is pvary_p or prim is psum_invariant_p:
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
    return [pvary_p.bind(x, axes=avals_mod.mesh_ordered(want - a.vma))
            if a.vma != want and type(a) is ShapedArray else x for x, a in zip(args, avals)]


avals_mod.vma_hook = _vma_hook
avals_mod.vma_join = _vma_join
