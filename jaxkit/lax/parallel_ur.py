"""Unreduced and reduced manual axes: ``pcast`` to them, and the collectives that leave them.

Inside a ``shard_map`` body that checks types (``check_vma=True``) a value may be, over a
manual axis, *varying* (each device its own block), *unreduced* (each device holds a summand
of the value: ``f32[2]{U:x}``) or *reduced* (each device holds the whole value and its
cotangent is unreduced: ``f32[2]{R:x}``). These are JAX 0.10.2's no-op casts between the
states, which move no data and only retype (their lowering is the operand itself):

* ``vary_unreduced_cast_p``: varying -> unreduced (``pcast(x, a, to='unreduced')``);
* ``reduced_vary_cast_p``: reduced -> varying (``pcast(x, a, to='varying')`` of a reduced
  value, and what an operation inserts to join a reduced operand to varying ones);
* ``preduced_p``: invariant -> reduced (``pcast(x, a, to='reduced')``);

and the collectives that take the sum an unreduced value stands for:

* ``unreduced_psum_p``: unreduced -> invariant (``psum`` of an unreduced value), an
  all-reduce; it transposes to ``preduced``;
* ``unreduced_reduce_scatter_p``: unreduced -> varying (``psum_scatter`` of one), a
  reduce-scatter; it transposes to ``all_gather_reduced_p`` (varying -> reduced, an
  all-gather; ``all_gather(..., to='reduced')``);
* ``all_gather_invariant_p``: varying -> invariant (``all_gather(..., to='invarying')``), an
  all-gather whose result every device holds whole; it transposes to a dynamic slice of the
  cotangent at the device's index (invariant -> varying), as JAX's.

The casts transpose to each other (varying->unreduced to reduced->varying), so reverse mode
through them needs no other rule. None but ``all_gather_invariant`` has a batching rule
(JAX 0.10.2's raise too): vmap of a body that uses them raises ``NotImplementedError`` naming
the primitive. Which state an
ordinary primitive's result has follows its ``sharding_ur`` rule (a sum of unreduced values
is unreduced, ``sin`` of one is refused), read by ``parallel_vma``'s typing hook.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from jaxkit import avals as avals_mod
from jaxkit import core, tree_util
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.lax import elementwise, parallel, parallel_vma, slicing, structural
from jaxkit.lax.parallel import _axes_tuple, axis_size

__all__ = ["all_gather", "all_gather_invariant", "all_gather_invariant_p",
           "all_gather_reduced", "all_gather_reduced_p", "pcast", "preduced",
           "preduced_p", "reduced_vary_cast", "reduced_vary_cast_p", "unreduced_psum",
           "unreduced_psum_p", "unreduced_psum_scatter", "unreduced_reduce_scatter_p",
           "vary_unreduced_cast", "vary_unreduced_cast_p"]

_ISSUE = "Please file an issue at https://github.com/jax-ml/jax/issues"


def _u(aval: ShapedArray) -> frozenset:
    return aval.mur[0]


def _r(aval: ShapedArray) -> frozenset:
    return aval.mur[1]


def _retype(aval: ShapedArray, shape=None, *, varying=None, unreduced=None,
            reduced=None) -> ShapedArray:
    """``aval`` with its manual states replaced (those not given kept)."""
    return aval.update(shape=shape, vma=aval.vma if varying is None else varying,
                       mur=(_u(aval) if unreduced is None else unreduced,
                            _r(aval) if reduced is None else reduced))


def check_unreduced_args(avals: Sequence[ShapedArray], axes, name: str) -> None:
    """JAX's refusal of an operand unreduced or reduced over one of a collective's axes."""
    axes = set(_axes_tuple(axes))
    for a in avals:
        if _u(a) & axes:
            raise ValueError(f"{name} cannot accept args which are unreduced. Got "
                             f"{a.str_short()} and axes={axes}")
        if _r(a) & axes:
            raise ValueError(f"{name} cannot accept args which are reduced. Got "
                             f"{a.str_short()} and axes={axes}")


def _raise_outside(name: str, *args, **params):
    raise ValueError(f"{name} should be called under jax.shard_map.")


def _cast_primitive(name: str, abstract_eval) -> core.Primitive:
    """A no-op retyping: checked and typed by ``abstract_eval``, lowered to its operand."""
    p = core.Primitive(name)
    p.def_impl(partial(_raise_outside, name.removesuffix("_p")))
    p.def_abstract_eval(abstract_eval)
    mlir.register_lowering(p, lambda ctx, x, *, axes: [x])
    parallel_vma.self_typed.add(p)
    return p


def check_axis_names(axes: tuple, api: str) -> None:
    """JAX's error for an axis name no enclosing shard_map (or pmap, vmap) binds."""
    for name in axes:
        try:
            axis_size(name)
        except NameError:
            raise NameError(f"Found an unbound axis name: {name}. To fix this, please call "
                            f"{api} under `jax.shard_map`.") from None


def _bind_each(p: core.Primitive, x, axis_name):
    axes = _axes_tuple(axis_name) if axis_name else ()
    if not axes:
        return x
    check_axis_names(axes, p.name.removesuffix("_p"))
    if not parallel_vma.checking():  # pmap, vmap, check_vma=False: types carry no states
        return x
    ordered = avals_mod.mesh_ordered(axes)
    return tree_util.tree_map(lambda v: p.bind(v, axes=ordered), x)


# ---- varying -> unreduced ----

def vary_unreduced_cast(x, axis_name):
    """``x`` (a pytree), varying over the named axes, typed as unreduced over them."""
    return _bind_each(vary_unreduced_cast_p, x, axis_name)


def _vary_unreduced_cast_abstract_eval(x: ShapedArray, *, axes):
    axis_size(axes)
    check_unreduced_args([x], axes, "vary_unreduced_cast")
    if not x.vma:
        raise ValueError("vary_unreduced_cast only accepts inputs that are varying. Got "
                         f"{x.str_short()}")
    if not x.vma & set(axes):
        raise ValueError(
            "vary_unreduced_cast is a Varying->Unreduced collective. This means that the axis "
            "names mentioned in `axes` passed to `vary_unreduced_cast` must be present in "
            f"`jax.typeof(x).mat.varying`. Got axes={axes} and "
            f"jax.typeof(x).mat.varying={x.vma}")
    return _retype(x, varying=x.vma - set(axes), unreduced=_u(x) | frozenset(axes))


vary_unreduced_cast_p = _cast_primitive("vary_unreduced_cast_p",
                                        _vary_unreduced_cast_abstract_eval)


# ---- reduced -> varying ----

def reduced_vary_cast(x, axis_name):
    """``x`` (a pytree), reduced over the named axes, typed as varying over them."""
    return _bind_each(reduced_vary_cast_p, x, axis_name)


def _reduced_vary_cast_abstract_eval(x: ShapedArray, *, axes):
    axis_size(axes)
    if not _r(x):
        raise ValueError("reduced_vary_cast only accepts inputs that are reduced. Got "
                         f"{x.str_short()}")
    if not _r(x) & set(axes):
        raise ValueError(
            "reduced_vary_cast is a Reduced->Varying collective. This means that the axis "
            "names mentioned in `axes` passed to `reduced_vary_cast` must be present in "
            f"`jax.typeof(x).mat.reduced`. Got axes={axes} and "
            f"jax.typeof(x).mat.reduced={_r(x)}")
    if x.vma & set(axes):
        raise ValueError("reduced_vary_cast input cannot be varying across the axis_name "
                         f"provided. Got x={x.str_short()} and axis_name={axes}")
    return _retype(x, varying=x.vma | frozenset(axes), reduced=_r(x) - set(axes))


reduced_vary_cast_p = _cast_primitive("reduced_vary_cast_p", _reduced_vary_cast_abstract_eval)


# ---- invariant -> reduced ----

def preduced(x, axis_name):
    """``x`` (a pytree), invariant over the named axes, typed as reduced over them."""
    return _bind_each(preduced_p, x, axis_name)


def _preduced_abstract_eval(x: ShapedArray, *, axes):
    axis_size(axes)
    if x.vma & set(axes):
        raise ValueError(
            "preduced is a Invariant->Reduced collective. This means that the axis names "
            "mentioned in `axes` passed to `preduced` must not be present in "
            f"`jax.typeof(inp).mat.varying`. Got axes={axes} and "
            f"jax.typeof(inp).mat.varying={x.vma}")
    if _r(x) & set(axes):
        raise ValueError("preduced input cannot be reduced across the axis_name provided. Got "
                         f"x={x.str_short()} and axis_name={axes}")
    return _retype(x, reduced=_r(x) | frozenset(axes))


preduced_p = _cast_primitive("preduced", _preduced_abstract_eval)


# ---- unreduced -> invariant: the all-reduce an unreduced value needs ----

def unreduced_psum(x, axis_name):
    """The sum over the named axes of ``x`` (a pytree) unreduced over them: invariant."""
    axes = _axes_tuple(axis_name)
    return tree_util.tree_map(lambda v: unreduced_psum_p.bind(v, axes=axes), x)


def _unreduced_psum_abstract_eval(x: ShapedArray, *, axes):
    axis_size(axes)
    if not _u(x):
        raise ValueError(f"unreduced_psum only accepts inputs that are unreduced. Got "
                         f"{x.str_short()}")
    if not _u(x) & frozenset(axes):
        raise ValueError(
            "unreduced_psum is a Unreduced -> Invariant collective. This means that the "
            f"axes={axes!r} passed to `unreduced_psum` must be present in "
            f"jax.typeof(x).mat.unreduced={_u(x)}")
    if x.vma & set(axes):
        raise ValueError("unreduced_psum's input cannot be varying across the  axis_name "
                         f"provided. Got x={x.str_short()} and axes={axes!r}")
    return _retype(x, unreduced=_u(x) - set(axes))


unreduced_psum_p = core.Primitive("unreduced_psum")
unreduced_psum_p.def_impl(partial(parallel._unbound_impl, "unreduced_psum"))
unreduced_psum_p.def_abstract_eval(_unreduced_psum_abstract_eval)
mlir.register_lowering(unreduced_psum_p, lambda ctx, x, *, axes: parallel_vma._psum_lowering(
    ctx, x, axes=axes, axis_index_groups=None))
parallel_vma.self_typed.add(unreduced_psum_p)


# ---- unreduced -> varying: the reduce-scatter ----

def unreduced_psum_scatter(x, axis_name, *, scatter_dimension: int = 0, tiled: bool = False):
    """``psum_scatter`` of ``x`` (a pytree) unreduced over the named axes: each index of
    them keeps its block of the sum, varying over them."""
    names = _axes_tuple(axis_name)
    size = axis_size(names)
    return tree_util.tree_map(lambda v: unreduced_reduce_scatter_p.bind(
        v, axis_name=names, scatter_dimension=scatter_dimension, axis_size=size,
        tiled=bool(tiled)), x)


def _unreduced_reduce_scatter_abstract_eval(x: ShapedArray, *, axis_name, scatter_dimension,
                                            axis_size, tiled):
    parallel.axis_size(axis_name)
    if not _u(x):
        raise ValueError("unreduced_psum_scatter only accepts inputs that are unreduced. Got "
                         f"{x.str_short()}")
    if not _u(x) & frozenset(axis_name):
        raise ValueError(
            "unreduced_psum_scatter is a Unreduced -> Varying collective. This means that the "
            f"axis_name={axis_name!r} passed to `unreduced_psum_scatter` must be present in "
            f"jax.typeof(x).mat.unreduced={_u(x)}")
    if x.vma & set(axis_name):
        raise ValueError("unreduced_psum_scatter's input cannot be varying across the "
                         f"axis_name provided. Got x={x.str_short()} and "
                         f"axis_name={axis_name!r}")
    # the shape as psum_scatter's (its size checks and messages)
    shape = parallel._reduce_scatter_abstract_eval(
        x, scatter_dimension=scatter_dimension, axis_name=axis_name, axis_index_groups=None,
        axis_size=axis_size, tiled=tiled).shape
    return _retype(x, tuple(shape), varying=x.vma | frozenset(axis_name),
                   unreduced=_u(x) - set(axis_name))


def _unreduced_reduce_scatter_lowering(ctx, x, *, axis_name, scatter_dimension, axis_size,
                                       tiled):
    return parallel._reduce_scatter_lowering(
        ctx, x, scatter_dimension=scatter_dimension, axis_name=axis_name,
        axis_index_groups=None, axis_size=axis_size, tiled=tiled)


unreduced_reduce_scatter_p = core.Primitive("unreduced_reduce_scatter")
unreduced_reduce_scatter_p.def_impl(partial(parallel._unbound_impl, "unreduced_reduce_scatter"))
unreduced_reduce_scatter_p.def_abstract_eval(_unreduced_reduce_scatter_abstract_eval)
mlir.register_lowering(unreduced_reduce_scatter_p, _unreduced_reduce_scatter_lowering)
parallel_vma.self_typed.add(unreduced_reduce_scatter_p)


# ---- varying -> reduced: the all-gather (the reduce-scatter's transpose) ----

def all_gather_reduced(x, axis_name, *, axis: int = 0, tiled: bool = False):
    """``all_gather`` of ``x`` (a pytree) varying over the named axes, typed as reduced over
    them (``all_gather(..., to='reduced')``)."""
    names = _axes_tuple(axis_name)
    size = axis_size(names)

    def bind(v):
        rank = len(core.get_aval(v).shape) + (0 if tiled else 1)
        return all_gather_reduced_p.bind(v, all_gather_dimension=int(axis) % rank,
                                         axis_name=names, axis_size=size, tiled=bool(tiled))

    return tree_util.tree_map(bind, x)


def _all_gather_reduced_abstract_eval(x: ShapedArray, *, all_gather_dimension, axis_name,
                                      axis_size, tiled):
    parallel.axis_size(axis_name)
    if not x.vma:
        raise ValueError("all_gather_reduced only accepts inputs that are varying. Got "
                         f"{x.str_short()}")
    if not x.vma & set(axis_name):
        raise ValueError(
            "all_gather_reduced is a Varying -> Reduced collective. This means that the "
            f"axis_name={axis_name!r} passed to `all_gather_reduced` must be present in "
            f"jax.typeof(x).mat.varying={x.vma}")
    if _r(x) & set(axis_name):
        raise ValueError("all_gather_reduced's input cannot be reduced across the axis_name "
                         f"provided. Got x={x.str_short()} and axis_name={axis_name!r}")
    shape = parallel._all_gather_abstract_eval(  # the shape as all_gather's
        x, all_gather_dimension=all_gather_dimension, axis_name=axis_name,
        axis_index_groups=None, axis_size=axis_size, tiled=tiled).shape
    return _retype(x, tuple(shape), varying=x.vma - set(axis_name),
                   reduced=_r(x) | frozenset(axis_name))


def _all_gather_reduced_lowering(ctx, x, *, all_gather_dimension, axis_name, axis_size,
                                 tiled):
    return parallel._all_gather_lowering(
        ctx, x, all_gather_dimension=all_gather_dimension, axis_name=axis_name,
        axis_index_groups=None, axis_size=axis_size, tiled=tiled)


all_gather_reduced_p = core.Primitive("all_gather_reduced")
all_gather_reduced_p.def_impl(partial(parallel._unbound_impl, "all_gather_reduced"))
all_gather_reduced_p.def_abstract_eval(_all_gather_reduced_abstract_eval)
mlir.register_lowering(all_gather_reduced_p, _all_gather_reduced_lowering)
parallel_vma.self_typed.add(all_gather_reduced_p)


# ---- varying -> invariant: the all-gather whose result every device holds whole ----

def all_gather_invariant(x, axis_name, *, axis: int = 0, tiled: bool = False):
    """``all_gather`` of ``x`` (a pytree) whose result is invariant over the named axes
    (``all_gather(..., to='invarying')``): every device holds the same gathered value, so
    it may leave a shard_map through an out_spec that does not name the axes. An operand
    invariant over some of them is first made varying (``pvary``), as JAX's."""
    names = _axes_tuple(axis_name)
    if not names:
        return x
    size = axis_size(names)

    def bind(v):
        rank = len(core.get_aval(v).shape) + (0 if tiled else 1)
        missing = [a for a in names if a not in core.get_aval(v).vma]
        if missing and parallel_vma.checking():
            v = parallel_vma.pvary(v, tuple(missing))
        elif missing and any(_vmapped(a) for a in missing):
            # JAX's pvary of a vmapped value reaches its eager impl, which refuses it
            raise ValueError("pvary should be called under jax.shard_map.")
        return all_gather_invariant_p.bind(v, all_gather_dimension=int(axis) % rank,
                                           axis_name=names, axis_size=size, tiled=bool(tiled))

    return tree_util.tree_map(bind, x)


def _vmapped(name: Any) -> bool:
    try:
        batching.find_axis(name)
    except NameError:
        return False
    return True


def _all_gather_invariant_abstract_eval(x: ShapedArray, *, all_gather_dimension, axis_name,
                                        axis_size, tiled):
    # (names were checked by the wrapper; under pmap they are not bound at lowering time)
    check_unreduced_args([x], axis_name, "all_gather_invariant")
    shape = parallel._all_gather_abstract_eval(  # the shape as all_gather's
        x, all_gather_dimension=all_gather_dimension, axis_name=axis_name,
        axis_index_groups=None, axis_size=axis_size, tiled=tiled).shape
    return _retype(x, tuple(shape), varying=x.vma - set(axis_name))


def _all_gather_invariant_transpose(ct, x, *, all_gather_dimension, axis_name, axis_size,
                                    tiled):
    """Each device's cotangent is its own block of the (invariant) gathered cotangent: a
    dynamic slice at its index along the axes, which makes it varying over them again."""
    block = ct.aval.shape[all_gather_dimension] // axis_size
    index = 0  # the row-major index over the named axes, built as JAX's axis_index does
    inner = 1
    for name in reversed(axis_name):
        index = elementwise.add(index, parallel._times(parallel.axis_index(name), inner))
        inner *= parallel.axis_size(name)
    start = parallel._times(index, block)
    out = slicing.dynamic_slice_in_dim(ct, start, block, all_gather_dimension)
    return [out if tiled else structural.squeeze(out, (all_gather_dimension,))]


def _all_gather_invariant_batcher(axis_data, vals, dims, *, all_gather_dimension, axis_name,
                                  axis_size, tiled):
    (x,), (d,) = vals, dims
    dim = all_gather_dimension
    if axis_data.name not in axis_name:  # gather the examples' blocks alongside each other
        if d is not None:
            if d <= dim:
                dim += 1
            elif not tiled:
                d += 1
        return all_gather_invariant_p.bind(x, all_gather_dimension=dim, axis_name=axis_name,
                                           axis_size=axis_size, tiled=tiled), d
    if len(axis_name) > 1:
        raise NotImplementedError("batching rule for 'all_gather_invariant' over several "
                                  "axes one of which is vmapped is not implemented")
    y = parallel._insert_axis(x, dim, axis_data.size) if d is None else \
        parallel._moveaxis(x, d, dim)
    return (parallel._foldaxis(y, dim) if tiled else y), None


def _all_gather_invariant_lowering(ctx, x, *, all_gather_dimension, axis_name, axis_size,
                                   tiled):
    return parallel._all_gather_lowering(
        ctx, x, all_gather_dimension=all_gather_dimension, axis_name=axis_name,
        axis_index_groups=None, axis_size=axis_size, tiled=tiled)


all_gather_invariant_p = core.Primitive("all_gather_invariant")
all_gather_invariant_p.def_impl(partial(parallel._unbound_impl, "all_gather_invariant"))
all_gather_invariant_p.def_abstract_eval(_all_gather_invariant_abstract_eval)
ad.deflinear2(all_gather_invariant_p, _all_gather_invariant_transpose)
batching.defrule(all_gather_invariant_p, _all_gather_invariant_batcher, named_axis=True)
mlir.register_lowering(all_gather_invariant_p, _all_gather_invariant_lowering)
parallel_vma.self_typed.add(all_gather_invariant_p)


# ---- transposes: each cast to its mirror, each collective to its dual ----

ad.deflinear2(vary_unreduced_cast_p, lambda ct, x, *, axes: [
    reduced_vary_cast_p.bind(ct, axes=axes)])
ad.deflinear2(reduced_vary_cast_p, lambda ct, x, *, axes: [
    vary_unreduced_cast_p.bind(ct, axes=axes)])
ad.deflinear2(preduced_p, lambda ct, x, *, axes: [unreduced_psum_p.bind(ct, axes=axes)])
ad.deflinear2(unreduced_psum_p, lambda ct, x, *, axes: [preduced_p.bind(ct, axes=axes)])
ad.deflinear2(unreduced_reduce_scatter_p, lambda ct, x, *, axis_name, scatter_dimension,
              axis_size, tiled: [all_gather_reduced_p.bind(
                  ct, all_gather_dimension=scatter_dimension, axis_name=axis_name,
                  axis_size=axis_size, tiled=tiled)])
ad.deflinear2(all_gather_reduced_p, lambda ct, x, *, all_gather_dimension, axis_name,
              axis_size, tiled: [unreduced_reduce_scatter_p.bind(
                  ct, axis_name=axis_name, scatter_dimension=all_gather_dimension,
                  axis_size=axis_size, tiled=tiled)])


# ---- pcast, all_gather(to=), and psum/psum_scatter of an unreduced value ----


def all_gather(x, axis_name, *, axis_index_groups=None, axis: int = 0, tiled: bool = False,
               to: str = "varying"):
    """Gather ``x`` from every index of the named axis, stacked at position ``axis`` (or
    concatenated along it when ``tiled``); lowers to ``stablehlo.all_gather``. Inside a typed
    shard_map body the result varies over the axis (``to='varying'``) or, with
    ``to='reduced'``, is reduced over it (``all_gather_reduced``)."""
    if to not in ("varying", "reduced", "invarying"):
        raise ValueError("Got unexpected `to` value for `jax.lax.all_gather`. Allowed `to` "
                         "values are: {'varying', 'reduced', 'invarying'}")
    if to == "varying":
        return parallel.all_gather(x, axis_name, axis_index_groups=axis_index_groups,
                                   axis=axis, tiled=tiled)
    if axis_index_groups is not None:
        raise NotImplementedError(f"all_gather(to={to!r}) with axis_index_groups")
    if to == "invarying":
        return all_gather_invariant(x, axis_name, axis=axis, tiled=tiled)
    return all_gather_reduced(x, axis_name, axis=axis, tiled=tiled)


_PCAST_TO = ("varying", "unreduced", "reduced")


def state_of(aval: ShapedArray, axes: tuple, name: str) -> str:
    """The one state ``aval`` has over all of ``axes`` (JAX's error when they differ)."""
    states = set()
    for a in axes:
        states.add("varying" if a in aval.vma else "unreduced" if a in _u(aval)
                   else "reduced" if a in _r(aval) else "invarying")
    if len(states) > 1:
        raise ValueError(f"{name} can only accept axis_name which corresponds to one of "
                         "varying, unreduced, reduced or invarying state of the input. Got "
                         f"input type: {aval}, axes: {axes} and input state: {states}")
    return states.pop()


def _pvary(x, axes: tuple):
    check_axis_names(axes, "pvary")
    return parallel_vma.pvary(x, axes)


_CASTS = {("invarying", "varying"): _pvary,
          ("invarying", "reduced"): preduced,
          ("varying", "unreduced"): vary_unreduced_cast,
          ("reduced", "varying"): reduced_vary_cast}


def pcast(x, axis_name, *, to: str):
    """Cast ``x`` (a pytree) to be ``to`` ('varying', 'unreduced' or 'reduced') over the
    named manual axes, from the state it has over them: invariant to varying (``pvary``) or
    reduced, varying to unreduced, reduced to varying. Other casts raise JAX's error."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name!r}")
    if not axis_name:
        return x
    if to not in _PCAST_TO:
        raise ValueError("Got unexpected `to` value. Allowed `to` values are: "
                         f"{set(_PCAST_TO)}")
    axes = _axes_tuple(axis_name)

    # (an unbound name is refused by the cast, as JAX's; under pmap, vmap or check_vma=False
    # types carry no states, so every value is invariant there and the casts it allows
    # return it as it is, as JAX's)
    def cast(leaf):
        from_ = state_of(core.get_aval(leaf), axes, "jax.lax.pcast")
        fn = _CASTS.get((from_, to))
        if fn is None:
            raise ValueError(f"Unsupported pcast from={from_}, to={to!r}")
        return fn(leaf, axes)

    return tree_util.tree_map(cast, x)


_plain_bind_psum = parallel.bind_psum


def _bind_psum(x, axes: tuple, groups):
    if parallel_vma.checking() and state_of(core.get_aval(x), axes,
                                            "jax.lax.psum") == "unreduced":
        if groups is not None:
            raise NotImplementedError("psum of an unreduced value with axis_index_groups")
        return unreduced_psum_p.bind(x, axes=axes)
    return _plain_bind_psum(x, axes, groups)


_plain_bind_reduce_scatter = parallel.bind_reduce_scatter


def _bind_reduce_scatter(x, **params: Any):
    axes = params["axis_name"]
    if parallel_vma.checking() and state_of(core.get_aval(x), axes,
                                            "jax.lax.psum_scatter") == "unreduced":
        if params["axis_index_groups"] is not None:
            raise NotImplementedError("psum_scatter of an unreduced value with "
                                      "axis_index_groups")
        params.pop("axis_index_groups")
        return unreduced_reduce_scatter_p.bind(x, **params)
    return _plain_bind_reduce_scatter(x, **params)


parallel.bind_psum = _bind_psum
parallel.bind_reduce_scatter = _bind_reduce_scatter
parallel_vma.reduced_vary_cast_p = reduced_vary_cast_p
