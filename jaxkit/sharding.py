"""``jax.sharding``: meshes, partition specs and the shardings that lay arrays out over them.

``jaxkit.device_put(x, NamedSharding(mesh, P('x')))`` splits an array over a mesh; ``jit``
partitions any call on such arrays (or with ``in_shardings``/``out_shardings``) with XLA's
SPMD partitioner, and ``jaxkit.lax.with_sharding_constraint`` pins layouts inside.
"""
from __future__ import annotations

import functools

import numpy as _np

from jaxkit import core as _core
from jaxkit import tree_util as _tree_util
from jaxkit.lax.mesh_cast import mesh_cast as _mesh_cast_p_bind
from jaxkit.lax.sharding import reshard_leaves as _reshard_leaves
from jaxkit.runtime import pjrt as _pjrt
from jaxkit.runtime import sharding as _runtime
from jaxkit.runtime.multi_device import AxisSharding as _AxisSharding
from jaxkit.runtime.sharding import (AbstractDevice, AbstractMesh, AxisType,
                                     DuplicateSpecError, IndivisibleError, Mesh, NamedSharding, P,
                                     PartitionSpec, SingleDeviceSharding, make_mesh)


class _ShardingMeta(type):
    def __instancecheck__(cls, x) -> bool:
        return isinstance(x, (NamedSharding, SingleDeviceSharding, _AxisSharding))


class Sharding(metaclass=_ShardingMeta):
    """What every sharding is an instance of: ``isinstance(x.sharding, Sharding)``."""


class set_mesh:  # noqa: N801  (a function in JAX; a class here so it is a context manager)
    """Make ``mesh`` the mesh that bare ``PartitionSpec``s refer to, for good or, used as
    ``with set_mesh(mesh):``, for the block."""

    def __init__(self, mesh: Mesh):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"set_mesh expects a Mesh, got {mesh!r}")
        self._mesh = mesh
        _runtime._mesh_stack.append(mesh)

    def __enter__(self) -> Mesh:
        return self._mesh

    def __exit__(self, *exc) -> None:
        stack = _runtime._mesh_stack
        if stack and stack[-1] is self._mesh:
            stack.pop()


# Its object prints as JAX's does (``<jax._src.sharding_impls.set_mesh object at ...>``), as
# the last expression of a notebook cell that calls ``jax.set_mesh(mesh)``.
set_mesh.__module__ = "jax._src.sharding_impls"
use_mesh = set_mesh


def get_mesh() -> Mesh | None:
    """The mesh set by ``set_mesh`` or ``with mesh:`` (None when there is none)."""
    return _runtime.current_mesh()


class use_abstract_mesh:  # noqa: N801  (a context manager, as in JAX)
    """Make ``mesh`` (an ``AbstractMesh``) the abstract mesh ``get_abstract_mesh`` returns
    within the block: what tracing sees when no concrete mesh is at hand."""

    def __init__(self, mesh: AbstractMesh):
        if not isinstance(mesh, AbstractMesh):
            raise ValueError("Expected mesh of type `jax.sharding.AbstractMesh`. Got type: "
                             f"{type(mesh)}")
        self._mesh = mesh

    def __enter__(self) -> AbstractMesh:
        _runtime._abstract_mesh_stack.append(self._mesh)
        return self._mesh

    def __exit__(self, *exc) -> None:
        _runtime._abstract_mesh_stack.pop()


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh in context: from ``use_abstract_mesh``, else that of the mesh set
    with ``set_mesh``/``with mesh:``, else the empty one."""
    return _runtime.current_abstract_mesh()


def make_single_device_sharding(device) -> SingleDeviceSharding:
    """The sharding of an array that lives whole on ``device``."""
    return _pjrt.backend_of(device).shardings[device]


def reshard(xs, out_shardings):
    """``xs`` (a pytree) laid out as ``out_shardings`` (a sharding or ``PartitionSpec`` on the
    mesh in context, one for all leaves or a pytree prefix): inside ``jit`` a constraint on the
    layout, outside it a copy in the new layout. A spec over ``Explicit`` axes comes out
    spelled for the value's rank (``P('y', None)``), as a JAX type spells it."""
    is_leaf = lambda s: isinstance(s, (NamedSharding, PartitionSpec))  # noqa: E731
    leaves, treedef = _tree_util.tree_flatten(xs)
    if is_leaf(out_shardings):
        per_leaf = [out_shardings] * len(leaves)
    else:
        per_leaf = _tree_util.tree_leaves(
            _tree_util.tree_broadcast(out_shardings, xs, is_leaf), is_leaf=is_leaf)
    typed = [_spelled_for_rank(s, _np.ndim(x)) for s, x in zip(per_leaf, leaves)]
    return _tree_util.tree_unflatten(treedef, [
        _reshard_leaves(x, s) for x, s in zip(leaves, typed)])


def _spelled_for_rank(s, ndim: int):
    mesh = s.mesh if isinstance(s, NamedSharding) else get_mesh()
    spec = s.spec if isinstance(s, NamedSharding) else s
    if mesh is None or not isinstance(spec, PartitionSpec) or len(spec) >= ndim:
        return s
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    used = [a for axes in spec._normalized(0) for a in axes]
    if not used or any(kinds.get(a) is not AxisType.Explicit for a in used):
        return s
    return NamedSharding(mesh, PartitionSpec(*spec, *[None] * (ndim - len(spec))))


class ManualAxisType:
    """How a value inside a ``shard_map`` relates to its manual mesh axes: the axes it varies
    over, and those over which it is an unreduced or a reduced sum. Immutable and interned
    (equal ones are the same object), as JAX's. jaxkit's types do not carry one: its
    ``shard_map`` infers variation from the traced body instead (``check_vma``)."""

    __slots__ = ("varying", "unreduced", "reduced", "__weakref__")
    _interned: dict = {}

    def __new__(cls, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        if set(varying) & set(unreduced):
            raise ValueError("varying and unreduced cannot have common mesh axes. Got "
                             f"varying={varying} and unreduced={unreduced}")
        if set(varying) & set(reduced):
            raise ValueError("varying and reduced cannot have common mesh axes. Got "
                             f"varying={varying} and reduced={reduced}")
        key = (frozenset(varying), frozenset(unreduced), frozenset(reduced))
        self = cls._interned.get(key)
        if self is None:
            self = object.__new__(cls)
            for name, value in zip(cls.__slots__, key):
                object.__setattr__(self, name, value)
            self = cls._interned.setdefault(key, self)
        return self

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field '{name}'")

    def __getnewargs_ex__(self):
        return (), {"varying": self.varying, "unreduced": self.unreduced,
                    "reduced": self.reduced}

    def __getstate__(self):
        return None  # __new__ rebuilds (and interns) it from the fields above

    def __repr__(self) -> str:
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, "
                f"reduced={self.reduced})")

    def update(self, **kwargs) -> ManualAxisType:
        """The same with the fields given replaced."""
        fields = {"varying": self.varying, "unreduced": self.unreduced,
                  "reduced": self.reduced}
        return ManualAxisType(**{**fields, **kwargs})

    def to_ct_mat(self) -> ManualAxisType:
        """The type of the cotangent: unreduced and reduced swap."""
        return self.update(unreduced=self.reduced, reduced=self.unreduced)

    @property
    def empty(self) -> bool:
        return self is _empty_manual_axis_type

    @property
    def vur(self) -> frozenset:
        """Every axis the value varies over or is a partial sum over."""
        return self.varying | self.unreduced | self.reduced

    def invarying(self, mesh) -> frozenset:
        """The manual axes of ``mesh`` the value is the same over."""
        manual = {n for n, t in zip(mesh.axis_names, mesh.axis_types) if t is AxisType.Manual}
        return frozenset(manual) - self.vur


_empty_manual_axis_type = ManualAxisType()


def _mesh_with_axis_types(name: str, axes, axis_type: AxisType,
                          shardings=None) -> tuple[AbstractMesh, AbstractMesh] | None:
    """(the abstract mesh in context, the same with ``axes`` of ``axis_type``) as
    ``auto_axes``/``explicit_axes`` switch to, or None without a mesh. The mesh is the one in
    context, else that of the ``NamedSharding``s given (which must agree with it)."""
    current = get_abstract_mesh()
    given = None
    for s in _tree_util.tree_leaves(shardings):
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
                              abstract_device=mesh.abstract_device)


def _mesh_cast(x, mesh: AbstractMesh):
    """An array leaf typed over ``mesh`` (other axis types); anything else as it is."""
    return _mesh_cast_p_bind(x, mesh) if _is_array(x) else x


def _is_array(x) -> bool:
    return _core.is_array_like(x) and not isinstance(x, (int, float, complex, bool))


def auto_axes(f=None, /, *, axes: str | tuple[str, ...] | None = None, out_sharding=None):
    """``f`` run with ``axes`` (default: all the mesh's) typed ``Auto``, its results laid
    out as ``out_sharding`` (given here or as a keyword of the call).

    The arguments keep their layout, but their types drop those axes (XLA chooses how
    ``f``'s values are split over them); as in JAX, when the axes are ``Auto`` already ``f``
    is simply called."""
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        target = out_sharding
        if target is None:
            if "out_sharding" not in kwargs:
                raise TypeError("Missing required keyword argument: 'out_sharding'")
            target = kwargs.pop("out_sharding")
        meshes = _mesh_with_axis_types("auto_axes", axes, AxisType.Auto, target)
        if meshes is None or meshes[0].axis_types == meshes[1].axis_types:
            return f(*args, **kwargs)
        args, kwargs = _tree_util.tree_map(lambda x: _mesh_cast(x, meshes[1]), (args, kwargs))
        with use_abstract_mesh(meshes[1]):
            out = f(*args, **kwargs)
        return reshard(out, target)

    return wrapped


def explicit_axes(f=None, /, *, axes: str | tuple[str, ...] | None = None, in_sharding=None):
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
        meshes = _mesh_with_axis_types("explicit_axes", axes, AxisType.Explicit)
        if meshes is None:
            raise ValueError("Context mesh cannot be empty. Please use `jax.set_mesh` API to "
                             "enter into a mesh context when using `explicit_axes` API.")
        with use_abstract_mesh(meshes[1]):
            out = f(*reshard(args, target), **kwargs)
        return _tree_util.tree_map(lambda x: _mesh_cast(x, meshes[0]), out)

    return wrapped


__all__ = ["AbstractDevice", "AbstractMesh", "AxisType", "DuplicateSpecError",
           "IndivisibleError", "ManualAxisType", "Mesh", "NamedSharding", "P", "PartitionSpec",
           "Sharding", "SingleDeviceSharding", "auto_axes", "explicit_axes", "get_abstract_mesh",
           "get_mesh", "make_mesh", "make_single_device_sharding", "reshard", "set_mesh",
           "use_abstract_mesh", "use_mesh"]
