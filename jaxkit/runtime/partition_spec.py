"""``PartitionSpec`` (``jax.P``): per array dimension, the mesh axes that split it, and the
mesh axes over which the value is unreduced (a sum still to take) or reduced.

It is a plain value (compared and hashed by its entries and sets), kept apart from the
meshes and shardings that use it (``jaxkit.runtime.sharding``).
"""
from __future__ import annotations

__all__ = ["P", "PartitionSpec"]


class _Unconstrained:
    def __repr__(self):
        return "UNCONSTRAINED"


class PartitionSpec:
    """Per array dimension: the mesh axis (a name), axes (a tuple of names, major first) or
    ``None`` (not split) it is split over. Dimensions past the end are not split.

    ``unreduced`` names mesh axes over which the value is a sum of the devices' shards still
    to be taken; ``reduced`` names axes over which it is replicated and whose cotangent will
    be unreduced (both sets of Explicit mesh axes, as in JAX)."""

    UNCONSTRAINED = _Unconstrained()
    __slots__ = ("_partitions", "unreduced", "reduced")

    def __init__(self, *partitions, unreduced=frozenset(), reduced=frozenset()):
        partitions = tuple(_canonical_partition(p) for p in partitions)
        unreduced = _axis_set("unreduced", unreduced)
        reduced = _axis_set("reduced", reduced)
        _check_unreduced(partitions, unreduced, reduced)
        self._partitions = partitions
        self.unreduced = unreduced
        self.reduced = reduced

    @property
    def partitions(self) -> tuple:
        """The per-dimension entries (what indexing gives when no axis is unreduced)."""
        return self._partitions

    def _refuse_positional(self, what: str, instead: str) -> None:
        # As in JAX: positional use would silently drop the unreduced/reduced sets.
        if self.unreduced or self.reduced:
            raise ValueError(f"Using {what} is dangerous when PartitionSpec has non-empty "
                             f"unreduced/reduced set. Please use {instead}")

    def __getitem__(self, i):
        self._refuse_positional("pspec[...]", "spec.partitions[...]")
        return self._partitions[i]

    def __len__(self) -> int:
        return len(self._partitions)

    # tuple's two methods (JAX's PartitionSpec has them; Flax's linen spmd calls index)
    def index(self, value, *args) -> int:
        return self._partitions.index(value, *args)

    def count(self, value) -> int:
        return self._partitions.count(value)

    def __iter__(self):
        self._refuse_positional("*pspec", "*spec.partitions")
        return iter(self._partitions)

    def __eq__(self, other) -> bool:
        if isinstance(other, PartitionSpec):
            return (self._partitions == other._partitions and self.unreduced == other.unreduced
                    and self.reduced == other.reduced)
        if isinstance(other, tuple):
            return self._partitions == other and not self.unreduced and not self.reduced
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._partitions, self.unreduced, self.reduced))

    def __repr__(self) -> str:
        inner = repr(self._partitions)[1:-1]
        if not self.unreduced and not self.reduced:
            return f"P({inner})"
        sets = ", ".join(f"{name}={set(axes)!r}" for name, axes in
                         (("unreduced", self.unreduced), ("reduced", self.reduced)) if axes)
        inner = "" if not inner else f"{inner} " if inner.endswith(",") else f"{inner}, "
        return f"P({inner}{sets})"

    def update(self, partitions=None, unreduced=None, reduced=None) -> PartitionSpec:
        """This spec with the given fields replaced."""
        return PartitionSpec(*(self._partitions if partitions is None else partitions),
                             unreduced=self.unreduced if unreduced is None else unreduced,
                             reduced=self.reduced if reduced is None else reduced)

    def _normalized(self, ndim: int) -> tuple[tuple[str, ...], ...]:
        """The mesh axes of each of ``ndim`` dimensions (padded with unsplit dimensions)."""
        out = []
        for p in self._partitions:
            out.append(() if p is None or p is PartitionSpec.UNCONSTRAINED else
                       (p,) if isinstance(p, str) else tuple(p))
        return tuple(out) + ((),) * (ndim - len(out))


def _canonical_partition(p):
    """One entry as JAX keeps it: a list is a tuple, a 1-tuple its name, () None."""
    if isinstance(p, list):
        p = tuple(p)
    if isinstance(p, tuple):
        if not all(isinstance(a, str) for a in p):
            raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a tuple "
                            f"of names; got {p!r}")
        return None if not p else p[0] if len(p) == 1 else p
    if not (p is None or isinstance(p, str) or p is PartitionSpec.UNCONSTRAINED):
        raise TypeError(f"PartitionSpec entries must be None, a mesh axis name or a tuple of "
                        f"names; got {p!r}")
    return p


def _axis_set(name: str, axes) -> frozenset:
    if isinstance(axes, frozenset):
        return axes
    if not isinstance(axes, set):
        raise TypeError(f"{name} argument of PartitionSpec should of type `frozenset` or "
                        f"`set`. Got type {axes}")
    return frozenset(axes)


def _check_unreduced(partitions: tuple, unreduced: frozenset, reduced: frozenset) -> None:
    """JAX's checks (and words): the sets name mesh axes, apart from each other and from the
    axes that split dimensions."""
    if not unreduced and not reduced:
        return
    for name, axes in (("unreduced", unreduced), ("reduced", reduced)):
        if None in axes:
            raise ValueError(f"{name} cannot contain None. All elements in {name} should "
                             "refer to the mesh axes.")
    if unreduced & reduced:
        raise ValueError("`unreduced` and `reduced` argument to PartitionSpec cannot overlap. "
                         f"Got unreduced: {unreduced} and reduced: {reduced}")
    for p in partitions:
        for a in (p if isinstance(p, tuple) else (p,)):
            for name, axes in (("unreduced", unreduced), ("reduced", reduced)):
                if a in axes:
                    raise ValueError(f"partitions cannot overlap with {name} axes passed to "
                                     f"PartitionSpec. Got partitions: {partitions} and "
                                     f"{name} axes: {axes}")


P = PartitionSpec
