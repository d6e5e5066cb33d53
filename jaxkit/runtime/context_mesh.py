"""Eager results under the mesh of ``jax.set_mesh``: replicated over it, as JAX lays them out.

In JAX every eager computation is a jitted call, and a jitted call whose operands are not
committed anywhere runs over the devices of the mesh set with ``jax.set_mesh`` (not the
legacy ``with mesh:``): its results are committed, fully replicated ``NamedSharding``s over
that mesh. jaxkit runs such a computation on the default device as before (the program and
its cache stay the one-device ones) and the dispatch paths then lay each uncommitted result
out here, replicated over the context mesh; a result already committed (an operand was) or
laid out (``ShardedArray``) is left alone.

The spec is what JAX prints: a mesh with an Explicit axis types its results with one entry
per dimension (``P(None, None)``); over an all-Auto mesh XLA chooses and JAX prints ``P()``;
a value converted from the host (``jnp.asarray(np_array)``) is ``P()`` over either. So is,
over an Explicit mesh, a result whose type in JAX carries no mesh: operands that carry none
(host data, values made before the mesh was set) give such a result through the primitives
whose sharding rule copies or narrows an operand's type (``sin``, ``reshape``, ``sort``,
``reduce_sum``...: ``untyped_results``, filled by ``lax.sharding_rules``), while the others
(``add``, ``broadcast_in_dim``, ``iota``...) type their result over the context mesh;
``typed_outputs`` follows this through a jaxpr (a ``jit``, a ``cond``'s first branch).

While a mesh is set, ``pjrt.placement.default`` is None, so no cached fast path takes an
uncommitted call: they all reach the general paths, which call ``lay_out_results``. With no
mesh set nothing here runs (the dispatch paths test one list).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import weakref

import numpy as np

from jaxkit import core, dtypes
from jaxkit.runtime import pjrt
from jaxkit.runtime.array import Array
from jaxkit.runtime.partition_spec import PartitionSpec
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import (AxisType, Mesh, NamedSharding, current_abstract_mesh,
                                     put_global)

__all__ = ["eager_meshes", "enter", "exit", "lay_out", "lay_out_results", "typed_outputs",
           "typed_results", "untyped_results"]

# The meshes set with ``jax.set_mesh``, innermost last (``with mesh:`` does not push here).
eager_meshes: list[Mesh] = []


def enter(mesh: Mesh) -> None:
    """``mesh`` becomes the one eager results are laid out over; the cached fast paths of
    uncommitted calls step aside (``pjrt.placement.default`` None) until it is left."""
    eager_meshes.append(mesh)
    placement = pjrt.placement
    placement.spread = True  # placement is decided per call from now on
    placement.mesh_devices = tuple(mesh._flat)
    pjrt.refresh_default()


def exit(mesh: Mesh) -> None:  # noqa: A001  (the pair of ``enter``)
    """Leave ``mesh`` (the innermost one set): the fast paths come back with the last one."""
    if eager_meshes and eager_meshes[-1] is mesh:
        eager_meshes.pop()
    pjrt.placement.mesh_devices = tuple(eager_meshes[-1]._flat) if eager_meshes else ()
    pjrt.refresh_default()


def _spec(mesh: Mesh, ndim: int, typed: bool) -> PartitionSpec:
    if not typed or not any(t is AxisType.Explicit for t in mesh.axis_types):
        return PartitionSpec()
    return PartitionSpec(*[None] * ndim)


_retyped: dict = {}


def _typed(mesh: Mesh) -> Mesh:
    """``mesh`` as the abstract mesh in context types it (``auto_axes``/``explicit_axes``
    and ``use_abstract_mesh`` inside ``set_mesh`` change its axis types, names or shape):
    values made in there are laid out over the devices of ``mesh`` with those types."""
    abstract = current_abstract_mesh()
    if abstract.empty or (abstract.axis_names == mesh.axis_names and abstract.axis_sizes ==
                          mesh.axis_sizes and abstract.axis_types == mesh.axis_types):
        return mesh
    if abstract.size != mesh.size:
        return mesh
    key = (mesh, abstract)
    out = _retyped.get(key)
    if out is None:
        if len(_retyped) > 64:
            _retyped.clear()
        out = _retyped[key] = Mesh(np.array(mesh._flat, dtype=object).reshape(
            abstract.axis_sizes), abstract.axis_names, abstract.axis_types)
    return out


def lay_out(x: Any, typed: bool = True, ndim: int | None = None) -> Any:
    """``x`` replicated over the context mesh when it is an uncommitted one-device array and
    a mesh is set; anything else unchanged. ``typed``: whether JAX's type of the value
    carries the context mesh (False for host data, ``jnp.asarray(np_array)``, and for the
    results ``typed_outputs`` says carry none: their spec is ``P()`` over any mesh); ``ndim``:
    the rank the spec is spelled for (a key array's, not its data's)."""
    if not eager_meshes:
        return x
    mesh = _typed(eager_meshes[-1])
    if type(x) is not Array:
        dtype = getattr(x, "dtype", None)
        if isinstance(dtype, dtypes.ExtendedDType) and not isinstance(x, ShardedArray):
            data = dtype.to_physical(x)  # a key array: its data is laid out
            if type(data) is Array and not data._buf._committed:
                # (spelled for the data's rank: its word axis whole, as JAX lays keys out)
                return dtype.from_physical(lay_out(data, typed))
        return x
    if x._buf._committed:
        return x
    aval = x.aval
    spec = _spec(mesh, len(aval.shape) if ndim is None else ndim, typed)
    sharding = NamedSharding(mesh, spec)
    return ShardedArray(put_global(np.asarray(x), aval, sharding), aval, sharding)


def lay_out_results(outs: Sequence, typed: Sequence[bool] | None = None) -> list:
    """Each of ``outs`` laid out as ``lay_out`` says (the results of one eager call);
    ``typed``: for each, whether its type carries the mesh (default: all do)."""
    if typed is None:
        return [lay_out(x) for x in outs]
    return [lay_out(x, t) for x, t in zip(outs, typed)]


# --------------------------------------------------------------------------------------------
# Which results JAX types over the context mesh
# --------------------------------------------------------------------------------------------

# The primitives whose result type is their operands' when none of those carries a mesh.
untyped_results: set[core.Primitive] = set()

_typed_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def typed_outputs(jaxpr: core.Jaxpr | core.ClosedJaxpr,
                  typed_in: Sequence[bool] | None = None,
                  in_context: bool = True) -> list[bool]:
    """For each output of ``jaxpr``, whether JAX's type of it carries the context mesh, when
    run on operands whose types carry none (an eager call under ``set_mesh`` with no
    committed operand; cached per jaxpr: the eager calls ask every time) or, given
    ``typed_in``, whose types carry it as that says (arrays laid out over a mesh do, host
    data does not). With no mesh in context (``in_context=False``) only what is computed
    from typed operands is typed: the rest is laid out as XLA propagates it, as in JAX."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if typed_in is not None:
        return _walk(jaxpr, typed_in, in_context)
    out = _typed_cache.get(jaxpr)
    if out is None:
        out = _typed_cache[jaxpr] = _walk(jaxpr, [False] * len(jaxpr.invars))
    return out


def typed_results(prim: core.Primitive, params: dict, n: int) -> list[bool]:
    """``typed_outputs`` of ``prim`` applied eagerly (its ``n`` results) to operands whose
    types carry no mesh."""
    return _eqn_typed(prim, params, (), n)


def _eqn_typed(prim: core.Primitive, params: dict, ins: Sequence[bool], n: int,
               in_context: bool = True) -> list[bool]:
    if prim in untyped_results:
        return [any(ins)] * n
    # A primitive carrying jaxprs (jit, cond: its first branch, whose operands are the
    # trailing ones) types its results as its first jaxpr does; any other primitive types
    # them over the context mesh.
    sub = next(core.subjaxprs(params), None)
    if sub is None or len(sub.outvars) != n or len(sub.invars) > len(ins) > 0:
        return [True if in_context else any(ins)] * n
    if not any(ins) and in_context:
        return typed_outputs(sub)
    return _walk(sub, ins[len(ins) - len(sub.invars):], in_context)


def _walk(jaxpr: core.Jaxpr, typed_in: Sequence[bool], in_context: bool = True) -> list[bool]:
    typed = dict(zip(jaxpr.invars, typed_in))
    for eqn in jaxpr.eqns:
        ins = [type(v) is core.Var and typed.get(v, False) for v in eqn.invars]
        typed.update(zip(eqn.outvars, _eqn_typed(eqn.primitive, eqn.params, ins,
                                                  len(eqn.outvars), in_context)))
    return [type(v) is core.Var and typed.get(v, False) for v in jaxpr.outvars]
