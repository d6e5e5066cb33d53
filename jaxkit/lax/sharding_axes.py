"""``reshard``, ``auto_axes`` and ``explicit_axes``: changing a value's layout, and which mesh
axes its type records, within a block.

They live below ``jaxkit.numpy`` (``jaxkit.sharding`` re-exports them) because jnp functions
with an ``out_sharding=`` argument run their bodies under ``auto_axes``, as JAX's do.

As in JAX, ``auto_axes`` enters a mesh whose chosen axes are ``Auto``, reshards its arguments
to their specs without those axes (their types drop them; their layout over them is left to
XLA), runs the function and reshards its results to ``out_sharding``; ``explicit_axes`` is the
converse. Both bind only ``reshard`` (JAX 0.10.2's jaxprs: ``b:f32[8,4] = reshard a``).
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, tree_util
from jaxkit.lax.sharding import reshard_p, resolve_sharding
from jaxkit.runtime import pjrt
from jaxkit.runtime import sharding as runtime_sharding
from jaxkit.runtime.sharding import (AbstractMesh, AxisType, Mesh, NamedSharding,
                                     PartitionSpec, current_abstract_mesh, current_mesh)

__all__ = ["auto_axes", "auto_axes_out", "explicit_axes", "reshard", "use_abstract_mesh"]


class use_abstract_mesh:  # noqa: N801  (a context manager, as in JAX)
    """Make ``mesh`` (an ``AbstractMesh``) the abstract mesh ``get_abstract_mesh`` returns
    within the block: what tracing sees when no concrete mesh is at hand."""

    def __init__(self, mesh: AbstractMesh):
        if not isinstance(mesh, AbstractMesh):
            raise ValueError("Expected mesh of type `jax.sharding.AbstractMesh`. Got type: "
                             f"{type(mesh)}")
        self._mesh = mesh
        self._placing: list = []  # (one per entry: the object may be entered again inside)

    def __enter__(self) -> AbstractMesh:
        # Computations decide their devices per call within (with only this abstract mesh in
        # context, one whose arguments name none is refused: ``runtime.array.placement``).
        placing = contextlib.nullcontext() if self._mesh.empty else \
            pjrt.placement_decided_per_call()
        placing.__enter__()
        self._placing.append(placing)
        runtime_sharding._abstract_mesh_stack.append(self._mesh)
        return self._mesh

    def __exit__(self, *exc) -> None:
        runtime_sharding._abstract_mesh_stack.pop()
        self._placing.pop().__exit__(None, None, None)


def reshard(xs: Any, out_shardings: Any) -> Any:
    """``xs`` (a pytree) laid out as ``out_shardings`` (a sharding or ``PartitionSpec`` on the
    mesh in context, one for all leaves or a pytree prefix): inside ``jit`` its type says
    the new layout over Explicit axes, outside it a copy in the new layout. A spec over
    ``Explicit`` axes comes out spelled for the value's rank (``P('y', None)``), as a JAX type
    spells it."""
    is_leaf = lambda s: isinstance(s, (NamedSharding, PartitionSpec))  # noqa: E731
    leaves, treedef = tree_util.tree_flatten(xs)
    if is_leaf(out_shardings):
        per_leaf = [out_shardings] * len(leaves)
    else:
        per_leaf = tree_util.tree_leaves(
            tree_util.tree_broadcast(out_shardings, xs, is_leaf), is_leaf=is_leaf)
    return tree_util.tree_unflatten(treedef, [
        _reshard_leaf(x, _spelled_for_rank(s, np.ndim(x))) for x, s in zip(leaves, per_leaf)])


def _reshard_leaf(x: Any, s: Any) -> Any:
    named = _typed_by_context(resolve_sharding(s, x))
    named.check_shape(np.shape(x))
    return reshard_p.bind(x, sharding=named)


def _typed_by_context(s: NamedSharding) -> NamedSharding:
    """``s`` over its mesh with the axis types of the abstract mesh in context when that is
    the same mesh typed otherwise (inside ``auto_axes``/``explicit_axes``): the lowering
    leaves Auto axes to XLA and the eager copy keeps its layout over them."""
    context = current_abstract_mesh()
    mesh = s.mesh
    if (context.empty or not isinstance(mesh, Mesh) or context.shape_tuple != mesh.shape_tuple
            or context.axis_types == mesh.axis_types):
        return s
    return NamedSharding(Mesh(mesh.devices, mesh.axis_names, context.axis_types), s.spec)


def _spelled_for_rank(s: Any, ndim: int) -> Any:
    # As JAX normalises the spec of its reshard for the value's rank.
    mesh = s.mesh if isinstance(s, NamedSharding) else current_mesh()
    spec = s.spec if isinstance(s, NamedSharding) else s
    if mesh is None or not isinstance(spec, PartitionSpec) or len(spec) >= ndim:
        return s
    return NamedSharding(mesh, PartitionSpec(*spec, *[None] * (ndim - len(spec)),
                                             unreduced=spec.unreduced, reduced=spec.reduced))


def _new_mesh(name: str, axes: Any, axis_type: AxisType,
              shardings: Any = None) -> tuple[AbstractMesh, AbstractMesh, tuple] | None:
    """(the abstract mesh in context, the same with ``axes`` of ``axis_type``, the axes) as
    ``auto_axes``/``explicit_axes`` switch to, or None without a mesh. The mesh is the one in
    context, else that of the ``NamedSharding``s given (which must agree with it)."""
    current = current_abstract_mesh()
    given = None
    for s in tree_util.tree_leaves(shardings):
        if isinstance(s, NamedSharding):
            if given is not None and given != s.mesh.abstract_mesh:
                raise ValueError(f"Shardings passed to {name} should have the same mesh. Got "
                                 f"one mesh {given} and another {s.mesh}")
            given = s.mesh.abstract_mesh
    if given is None and current.empty:
        return None
    if given is not None and not current.empty and given != current:
        raise ValueError(f"Context mesh {current} must match the mesh passed to shardings "
                         f"{given}. Recommended approach is to use `jax.set_mesh` context "
                         "manager.")
    mesh = current if not current.empty else given
    axes = mesh.axis_names if axes is None else axes if isinstance(axes, tuple) else (axes,)
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    if any(kinds[a] is AxisType.Manual for a in axes):
        raise NotImplementedError("Going from `Manual` AxisType to `Auto` or `Explicit` "
                                  "AxisType is not allowed. Please file a bug at "
                                  "https://github.com/jax-ml/jax/issues with your use case")
    types = tuple(axis_type if n in axes else kinds[n] for n in mesh.axis_names)
    return mesh, AbstractMesh(mesh.axis_sizes, mesh.axis_names, types,
                              abstract_device=mesh.abstract_device), axes


def _explicit_only(x: Any, mesh: AbstractMesh) -> PartitionSpec:
    """The spec of ``x``'s type with the axes that are not Explicit in ``mesh`` dropped."""
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    keep = lambda a: kinds.get(a) is AxisType.Explicit  # noqa: E731
    aval = core.get_aval(x)
    s = aval._sharding
    if s is None:
        return PartitionSpec(*[None] * len(aval.shape))
    parts = []
    for p in s.spec.partitions:
        if p is None:
            parts.append(None)
        elif isinstance(p, tuple):
            parts.append(tuple(a for a in p if keep(a)))
        else:
            parts.append(p if keep(p) else None)
    return PartitionSpec(*parts, unreduced={a for a in s.spec.unreduced if keep(a)},
                         reduced={a for a in s.spec.reduced if keep(a)})


def auto_axes(f: Callable | None = None, /, *, axes: str | tuple[str, ...] | None = None,
              out_sharding: Any = None) -> Callable:
    """``f`` run with ``axes`` (default: all the mesh's) typed ``Auto``, its results laid
    out as ``out_sharding`` (given here or as a keyword of the call).

    The arguments keep their layout, but their types drop those axes (XLA chooses how
    ``f``'s values are split over them); as in JAX, when exactly those axes are ``Auto``
    already ``f`` is simply called."""
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        target = out_sharding
        if target is None:
            if "out_sharding" not in kwargs:
                raise TypeError("Missing required keyword argument: 'out_sharding'")
            target = kwargs.pop("out_sharding")
        info = _new_mesh("auto_axes", axes, AxisType.Auto, target)
        if info is None:
            return f(*args, **kwargs)
        prev, new, chosen = info
        auto = {n for n, t in zip(prev.axis_names, prev.axis_types) if t is AxisType.Auto}
        if auto == set(chosen):
            return f(*args, **kwargs)
        # The arguments' new layouts are over the concrete mesh of the context, else of the
        # shardings given (else each argument's own).
        concrete = current_mesh()
        for s in tree_util.tree_leaves(target):
            if concrete is None and isinstance(s, NamedSharding) and isinstance(s.mesh, Mesh):
                concrete = s.mesh
        with use_abstract_mesh(new):
            args = reshard(args, tree_util.tree_map(
                lambda a: NamedSharding(new if concrete is None else concrete,
                                        _explicit_only(a, new)), args))
            out = f(*args, **kwargs)
        return reshard(out, target)

    return wrapped


def explicit_axes(f: Callable | None = None, /, *, axes: str | tuple[str, ...] | None = None,
                  in_sharding: Any = None) -> Callable:
    """``f`` run on its arguments laid out as ``in_sharding`` (given here or as a keyword of
    the call) with ``axes`` (default: all the mesh's) typed ``Explicit``: within ``f`` the
    types carry the layout and the sharding rules follow it; the results' types drop those
    axes again."""
    if f is None:
        return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        target = in_sharding
        if target is None:
            if "in_sharding" not in kwargs:
                raise TypeError("Missing required keyword argument: 'in_sharding'")
            target = kwargs.pop("in_sharding")
        info = _new_mesh("explicit_axes", axes, AxisType.Explicit)
        if info is None:
            raise ValueError("Context mesh cannot be empty. Please use `jax.set_mesh` API to "
                             "enter into a mesh context when using `explicit_axes` API.")
        with use_abstract_mesh(info[1]):
            out = f(*reshard(args, target), **kwargs)
        prev = current_abstract_mesh()
        return reshard(out, tree_util.tree_map(lambda o: _explicit_only(o, prev), out))

    return wrapped


def auto_axes_out(f: Callable, out_sharding: NamedSharding) -> Callable:
    """``f`` under ``auto_axes`` over the Explicit axes of ``out_sharding``'s mesh, its result
    laid out as ``out_sharding``: how JAX's jnp functions with an ``out_sharding=`` argument
    (``repeat``, ``percentile``, ``take``, ``einsum``) run a body whose sharding rules cannot
    say the layout asked for."""
    mesh = out_sharding.mesh
    explicit = tuple(n for n, t in zip(mesh.axis_names, mesh.axis_types)
                     if t is AxisType.Explicit)
    return auto_axes(f, out_sharding=out_sharding, axes=explicit)
