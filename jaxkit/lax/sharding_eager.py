"""Eager results of the primitives whose parameter types their result's layout.

``iota``, ``broadcast_in_dim`` and ``reshape`` (``sharding``) and ``dot_general``
(``out_sharding``) take the layout an ``out_sharding=`` argument asks for as a parameter
(over Explicit mesh axes the result's type says it). Under ``jit`` the partitioner lays the
result out as its type says; run eagerly, the one-primitive program runs on one device, so
the result is then laid out as asked, as JAX's eager results are (``x.sharding.spec``
spelled for the result's rank: ``P('x', None)``). ``full_like``'s result takes the layout
of ``x`` (``like_type_sharding`` over Explicit axes, ``like_concrete`` for a concrete ``x``
over any mesh), as JAX's.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit.lax.sharding import constrain, reshard_leaves
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.runtime.sharding import AbstractMesh, NamedSharding, PartitionSpec, current_mesh

__all__ = ["lay_out_eager_results", "like_concrete", "like_type_sharding"]


def _for_rank(s: NamedSharding, ndim: int) -> NamedSharding:
    parts = tuple(s.spec.partitions)
    if len(parts) >= ndim:
        return s
    return s.update(spec=PartitionSpec(*parts, *[None] * (ndim - len(parts))))


def lay_out_eager_results(prim: core.Primitive) -> None:
    """Make ``prim``'s eager impl lay its result out as its ``sharding`` (or
    ``out_sharding``) parameter says, when given."""
    impl: Callable[..., Any] = prim.impl

    def laid_out(*args, **params):
        out = impl(*args, **params)
        sharding = params.get("sharding", params.get("out_sharding"))
        if sharding is None or sharding.spec.unreduced or sharding.spec.reduced:
            return out  # partial sums: only a partitioned program decides who holds which
        _check_devices(out, sharding)
        return reshard_leaves(out, _for_rank(sharding, np.ndim(out)))

    prim.def_impl(laid_out)


def _check_devices(out: Any, sharding: NamedSharding) -> None:
    """JAX's error for a result typed over an abstract mesh of Explicit axes made on one
    device, with no mesh set to say which devices the type's mesh means (an eager ``grad``
    of a function of arrays laid out over such a mesh, called outside ``jax.set_mesh``)."""
    mesh = sharding.mesh
    if not isinstance(mesh, AbstractMesh) or not mesh.are_all_axes_explicit or \
            mesh.size == 1 or isinstance(out, ShardedArray) or current_mesh() is not None:
        return
    raise ValueError(
        f"Length of device assignment 1 is not equal to the size of the mesh {mesh.size} of "
        f"aval {core.get_aval(out).str_short()}({{Explicit: {tuple(mesh.axis_names)}}}). "
        "Please enter your `jit` into a mesh context via `jax.set_mesh`.")


def like_type_sharding(x: Any, shape: Sequence[int] | None, sharding: Any) -> Any:
    """The type-level sharding of ``full_like(x, ..., shape, sharding)``: ``sharding`` when
    given; else over Explicit mesh axes the result is laid out as ``x`` (as in JAX: a
    concrete ``x`` also when ``shape`` is its own)."""
    if sharding is not None:
        return sharding
    same = shape is None or (not isinstance(x, core.Tracer) and tuple(shape) == np.shape(x))
    return getattr(core.get_aval(x), "_sharding", None) if same else None


def like_concrete(out: Any, x: Any, fill_shape: Sequence[int], weak: bool,
                  sharding: Any) -> Any:
    """JAX's ``full_like`` of a concrete array laid out over a mesh (committed, not weak, of
    the result's shape or fully replicated) lays the result out as ``x`` is, whatever the
    mesh's axis types (optax's ``zeros_like`` state of a sharded parameter keeps its
    layout); an Explicit layout is already the result's type."""
    xs = getattr(x, "sharding", None) if sharding is None and not weak and \
        not isinstance(x, core.Tracer) else None
    if not isinstance(xs, NamedSharding) or not getattr(x, "_committed", True) or (
            tuple(fill_shape) != np.shape(x) and not xs.is_fully_replicated):
        return out
    return constrain(out, xs) if getattr(out, "sharding", None) != xs else out
