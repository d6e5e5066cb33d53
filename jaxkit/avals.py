"""Abstract values: ``ShapedArray`` (shape, dtype, weak type and, over a mesh's ``Explicit``
axes, sharding) for arrays, ``AbstractToken`` for
XLA tokens, and the ``Token`` value. Interned, so equal types are the same object; also what
jaxlib reads when it wraps a result buffer. ``jaxkit.core`` re-exports them."""
from __future__ import annotations

import abc
import enum
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import dtypes



def aval_sharding_rule(aval: ShapedArray):
    raise NotImplementedError("the sharding of a type needs jaxkit.runtime.sharding loaded")


# Set once a mesh with Explicit axes or a type with an explicit sharding is made: until then
# no primitive's abstract evaluation looks for shardings (``jaxkit.core`` reads it on every
# shape rule).
explicit_shardings_seen = False


def sharding_hook(prim: Any, avals: Sequence, params: dict, out: Any) -> Any:
    """The result types of ``prim`` given those of its shape rule: replaced by
    ``jaxkit.lax.sharding_rules``, which adds the shardings over Explicit mesh axes."""
    return out


# Set once a type with varying manual axes is made (inside a ``shard_map`` body that checks
# them): until then no primitive's abstract evaluation or bind looks at them.
vma_seen = False

# The position of each mesh axis name in its mesh, as the last shard_map over it said: sets of
# manual axes print in mesh order (``{V:(i,j)}``) wherever the jaxpr is printed.
_axis_rank: dict = {}


def note_axis_order(names: Sequence) -> None:
    """Record the order of a mesh's axis names (for printing sets of them)."""
    _axis_rank.update((n, i) for i, n in enumerate(names))


def mesh_ordered(names) -> tuple:
    """``names`` in the order of the mesh they were last seen in."""
    return tuple(sorted(names, key=lambda n: (_axis_rank.get(n, len(_axis_rank)), str(n))))


class ManualAxisType:
    """The manual mesh axes a value inside a ``shard_map`` body varies over, is unreduced
    over (each device holds a summand) and is reduced over (JAX's ``aval.manual_axis_type``)."""

    __slots__ = ("varying", "unreduced", "reduced")

    def __init__(self, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        self.varying = frozenset(varying)
        self.unreduced = frozenset(unreduced)
        self.reduced = frozenset(reduced)

    @property
    def vur(self) -> frozenset:
        """Every manual axis the value is not plainly replicated over."""
        return self.varying | self.unreduced | self.reduced

    def __repr__(self):
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, "
                f"reduced={self.reduced})")


def vma_hook(prim: Any, avals: Sequence, params: dict, out: Any) -> Any:
    """The result types of ``prim`` with the manual axes they vary over: replaced by
    ``jaxkit.lax.parallel_vma``."""
    return out


def vma_join(prim: Any, args: Sequence, params: dict) -> Sequence:
    """The operands of ``prim``, those varying over fewer manual axes than the others made
    varying (``pvary``): replaced by ``jaxkit.lax.parallel_vma``."""
    return args


# The manual axes a value is (unreduced over, reduced over): none, for almost every type.
NO_MUR: tuple = (frozenset(), frozenset())


class MemorySpace(enum.Enum):
    """Where an array's buffer lives: on the device, in host memory, or either (JAX's
    ``jax.memory.Space``, also the ``memory_space`` of every abstract value)."""

    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"

    # Enum hashes the member's name; members are singletons, so identity is the cheaper hash.
    __hash__ = object.__hash__


_DEVICE = MemorySpace.Device

# Set once a type in another memory space than the device's is made (a value offloaded to
# host memory): until then no primitive's abstract evaluation looks at memory spaces.
memory_spaces_seen = False


def mem_kind_to_space(kind: str | None) -> MemorySpace:
    """The memory space a sharding's memory kind names (``pinned_host`` is the host's)."""
    return MemorySpace.Host if kind == "pinned_host" else MemorySpace.Device


def mem_space_to_kind(space: MemorySpace) -> str:
    """The memory kind of a device that a memory space names."""
    if space is MemorySpace.Any:
        raise ValueError("MemorySpace.Any names no memory kind; use MemorySpace.Device or "
                         "MemorySpace.Host")
    return "pinned_host" if space is MemorySpace.Host else "device"


# Primitives whose abstract evaluation types the memory space of their results itself
# (``device_put`` moves values between spaces); every other one keeps its operands'.
memory_space_typed: set = set()


def memory_space_rule(prim: Any, avals: Sequence, params: dict, out: Any) -> Any:
    """The result types of ``prim`` in the memory space of its operands, as JAX types
    them: every operand of rank > 0 must be in the same one (a scalar goes anywhere)."""
    if prim in memory_space_typed or next(_jaxprs_in(params), None) is not None:
        return out  # a move between spaces, or a body typing its own results
    space = None
    first = None
    for a in avals:
        if type(a) is not ShapedArray or not a.shape:
            continue
        if first is None:
            first, space = a, a.memory_space
        elif a.memory_space is not space:
            raise ValueError(
                f"memory_space of all inputs passed to `{prim.name}` must be the same. Got "
                f"one operand with type: {first._long()} and another operand with type: "
                f"{a._long()}")
    if space is None or space is _DEVICE:
        return out
    if prim.multiple_results:
        return [o.update(memory_space=space) if type(o) is ShapedArray else o for o in out]
    return out.update(memory_space=space) if type(out) is ShapedArray else out


def _jaxprs_in(params: dict):
    # (duck-typed: this layer is below the jaxpr types) jaxprs among a primitive's params
    for v in params.values():
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            if hasattr(item, "jaxpr") and hasattr(item.jaxpr, "eqns"):  # a ClosedJaxpr
                yield item.jaxpr
            elif hasattr(item, "eqns") and hasattr(item, "invars"):
                yield item


def uses_memory_spaces(jaxpr: Any) -> bool:
    """Whether some value of ``jaxpr`` (or of a jaxpr inside it) is typed outside device
    memory: then, as JAX's, a program declares the memory kind of its results."""
    if not memory_spaces_seen:
        return False
    for v in [*jaxpr.invars, *jaxpr.outvars, *(o for e in jaxpr.eqns for o in e.outvars)]:
        if getattr(getattr(v, "aval", None), "memory_space", _DEVICE) is not _DEVICE:
            return True
    return any(uses_memory_spaces(sub) for e in jaxpr.eqns for sub in _jaxprs_in(e.params))


def memory_kinds_of(avals: Sequence) -> list[str]:
    """The memory kind each value's type lives in."""
    return [mem_space_to_kind(getattr(a, "memory_space", _DEVICE)) for a in avals]


class ShardingTypeError(Exception):
    """Operands whose explicit shardings no result sharding follows from (JAX's class)."""


class ShapedArray:
    """The abstract value of an array: shape, dtype, whether the dtype is weak and, for a
    value laid out over a mesh's ``Explicit`` axes, its sharding (a ``NamedSharding`` over the
    abstract mesh whose spec has one entry per dimension and names only Explicit axes;
    ``None`` for every other value, whose type says nothing of its layout).

    A weak type comes from a Python scalar: it takes the dtype of whatever it meets
    (``jnp.float16(1) + 1.0`` is float16). jaxlib reads exactly these three attributes when it
    wraps a result buffer, so instances double as jaxlib avals.
    """

    # Instances are interned: one object per (shape, dtype, weak_type). Equal avals are then the
    # same object, so hashing and comparing them is the default identity test, done in C: the
    # jit fast path looks its executables up by argument avals on every call.
    __slots__ = ("shape", "dtype", "weak_type", "_sharding", "vma", "mur", "memory_space",
                 "__weakref__")
    array_abstraction_level = 1
    _interned: dict[tuple, ShapedArray] = {}

    def __new__(cls, shape: Sequence[int], dtype: Any, weak_type: bool = False,
                sharding: Any = None, vma: frozenset = frozenset(), mur: tuple = NO_MUR,
                memory_space: MemorySpace = _DEVICE):
        global vma_seen, memory_spaces_seen
        dtype = dtype if isinstance(dtype, dtypes.ExtendedDType) else np.dtype(dtype)
        if type(vma) is not frozenset:
            vma = frozenset(vma)
        if mur is not NO_MUR:
            mur = (frozenset(mur[0]), frozenset(mur[1]))
            mur = NO_MUR if mur == NO_MUR else mur
        key = (tuple([int(d) for d in shape]), dtype, bool(weak_type), sharding, vma, mur,
               memory_space)
        self = cls._interned.get(key)
        if self is None:
            _check_shape(*key[:2])  # once per distinct aval: interning makes it free after
            if sharding is not None:
                _check_type_sharding(key[0], sharding)
            if vma or mur is not NO_MUR:
                vma_seen = True
            if memory_space is not _DEVICE:
                if not isinstance(memory_space, MemorySpace):
                    raise TypeError(f"memory_space must be a jax.memory.Space, got "
                                    f"{memory_space!r}")
                memory_spaces_seen = True
            self = object.__new__(cls)
            (self.shape, self.dtype, self.weak_type, self._sharding, self.vma, self.mur,
             self.memory_space) = key
            self = cls._interned.setdefault(key, self)  # one winner if threads race
        return self

    def __reduce__(self):
        return ShapedArray, (self.shape, self.dtype, self.weak_type, self._sharding, self.vma,
                             self.mur, self.memory_space)

    @property
    def manual_axis_type(self) -> ManualAxisType:
        """The manual mesh axes the value varies over inside a ``shard_map`` body (``vma``,
        ``frozenset()`` outside one or with ``check_vma=False``) and those it is unreduced or
        reduced over (``mur``), as JAX's attribute."""
        return ManualAxisType(self.vma, *self.mur)

    mat = manual_axis_type

    ndim = property(lambda self: len(self.shape))

    @property
    def sharding(self):
        """The sharding in the type, as JAX avals carry one: the explicit one when the value
        is laid out over Explicit mesh axes, else every dimension replicated (the object is
        built by ``jaxkit.runtime.sharding``, which sets ``aval_sharding_rule``)."""
        if self._sharding is not None:
            return self._sharding
        return aval_sharding_rule(self)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def update(self, shape=None, dtype=None, weak_type=None, sharding=None,
               vma=None, mur=None, memory_space=None) -> ShapedArray:
        """The same type with the fields given replaced. The sharding is kept while the rank
        is (a spec has one entry per dimension); pass ``sharding`` for a new rank. The
        manual axes (varying, unreduced/reduced) and the memory space are kept unless
        given."""
        if sharding is None and (shape is None or len(shape) == len(self.shape)):
            sharding = self._sharding
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type, sharding,
                           self.vma if vma is None else frozenset(vma),
                           self.mur if mur is None else mur,
                           self.memory_space if memory_space is None else memory_space)

    def strip_weak_type(self) -> ShapedArray:
        return self.update(weak_type=False) if self.weak_type else self

    def normalize(self) -> ShapedArray:
        return self.strip_weak_type()

    # An array is its own lowering: high-level types holding arrays (``interpreters.hijax``)
    # lower their leaves through these, as through any high-level type's.
    def lo_ty(self) -> list:
        return [self]

    def lower_val(self, val: Any) -> list:
        return [val]

    def raise_val(self, val: Any) -> Any:
        return val

    def strip_sharding(self) -> ShapedArray:
        """The type without its explicit sharding (what a layout-blind consumer sees)."""
        if self._sharding is None:
            return self
        return ShapedArray(self.shape, self.dtype, self.weak_type, None, self.vma, self.mur,
                           self.memory_space)

    def delete_dim(self, axis: int) -> ShapedArray:
        """The type without dimension ``axis`` (one example of a batch): its split goes."""
        shape = self.shape[:axis] + self.shape[axis + 1:]
        return ShapedArray(shape, self.dtype, self.weak_type,
                           self._respec(lambda spec: spec[:axis] + spec[axis + 1:]), self.vma,
                           self.mur, self.memory_space)

    def insert_dim(self, axis: int, size: int, split: Any = None) -> ShapedArray:
        """The type with a dimension of ``size`` at ``axis`` (a batch of examples), split
        over the mesh axis ``split`` (None: not split)."""
        shape = self.shape[:axis] + (size,) + self.shape[axis:]
        if self._sharding is None and split is None:
            return ShapedArray(shape, self.dtype, self.weak_type, None, self.vma, self.mur,
                               self.memory_space)
        return ShapedArray(shape, self.dtype, self.weak_type,
                           self._respec(lambda spec: spec[:axis] + (split,) + spec[axis:],
                                        force=True), self.vma, self.mur, self.memory_space)

    def _respec(self, change, force: bool = False) -> Any:
        """The sharding with its spec entries changed (None when no entry names an axis)."""
        s = self._sharding
        if s is None and not force:
            return None
        spec = (None,) * len(self.shape) if s is None else s.spec.partitions
        entries = change(spec)
        if all(p is None for p in entries) and (s is None or not s.spec.unreduced):
            return None
        if s is None:
            raise ValueError("insert_dim(split=...) of a type without a sharding: reshard the "
                             "value first")
        return type(s)(s.mesh, s.spec.update(partitions=entries))

    def to_tangent_aval(self) -> ShapedArray:
        """Integer and boolean values have ``float0`` tangents, as in JAX; the tangent is laid
        out as the primal."""
        return ShapedArray(self.shape, dtypes.tangent_dtype(self.dtype), self.weak_type,
                           self._sharding, self.vma, self.mur, self.memory_space)

    def to_ct_aval(self) -> ShapedArray:
        """The type of a cotangent: the tangent's, unreduced where the value is reduced over
        manual axes and reduced where it is unreduced (JAX's ``to_ct_aval``)."""
        t = self.to_tangent_aval()
        return t if self.mur is NO_MUR else t.update(mur=self.mur[::-1])

    def _dims(self) -> str:
        if self._sharding is None:
            return ",".join(map(str, self.shape))
        return shape_sharding_str(self.shape, self._sharding.spec.partitions)

    def _ur(self) -> str:
        """JAX's suffix for varying manual axes and unreduced/reduced mesh axes
        (``f32[3]{V:i}``, ``f32[8@X,4]{U:Y}``), in mesh order."""
        s = self._sharding
        sets = [_set_str("V", mesh_ordered(self.vma))] if self.vma else []
        if (s is None or not (s.spec.unreduced or s.spec.reduced)) and self.mur is NO_MUR:
            return "{" + sets[0] + "}" if sets else ""
        spec_ur = (s.spec.unreduced, s.spec.reduced) if s is not None else NO_MUR
        for tag, axes, manual in (("U", spec_ur[0], self.mur[0]),
                                  ("R", spec_ur[1], self.mur[1])):
            if s is not None and not manual:
                ordered = [a for a in s.mesh.axis_names if a in axes]
            else:
                ordered = list(mesh_ordered(axes | manual))
            if ordered:
                sets.append(_set_str(tag, ordered))
        return "{" + ", ".join(sets) + "}"

    def _ms(self) -> str:
        """JAX's tag for a value outside device memory, after the dtype (``f32<host>[8]``)."""
        return "" if self.memory_space is _DEVICE else f"<{self.memory_space.name.lower()}>"

    def _long(self) -> str:
        return f"{dtypes.dtype_name(self.dtype)}{self._ms()}[{self._dims()}]{self._ur()}"

    def str_short(self, short_dtypes: bool = True) -> str:
        # (jaxpr text wants the short names; JAX's default is the long ones, ``float32[3]``)
        if not short_dtypes:
            return self._long()
        return f"{dtypes.short_dtype_name(self.dtype)}{self._ms()}[{self._dims()}]{self._ur()}"

    def __repr__(self):
        # JAX: ``ShapedArray(float32[4@X,4@Y])``
        if self._sharding is not None or self.vma or self.mur is not NO_MUR or \
                self.memory_space is not _DEVICE:
            weak = ", weak_type=True" if self.weak_type else ""
            return f"ShapedArray({self._long()}{weak})"
        weak = ", weak_type=True" if self.weak_type else ""
        dims = str(list(self.shape)).replace(" ", "")
        return f"ShapedArray({dtypes.dtype_name(self.dtype)}{dims}{weak})"

    def __str__(self):
        # JAX's str of an aval: full dtype name, "~" marking a weak type (``~float32[]``).
        return f"{'~' if self.weak_type else ''}{self._long()}"


def _set_str(tag: str, ordered: Sequence) -> str:
    return f"{tag}:{ordered[0]}" if len(ordered) == 1 else f"{tag}:({','.join(ordered)})"


def physical_aval(aval: ShapedArray) -> ShapedArray:
    """The type a value of ``aval`` is stored and lowered as: itself, or for an extended dtype
    (``key<fry>``) the physical element type's array with its shape appended
    (``key<fry>[3]`` is stored as ``u32[3,2]``), its explicit sharding with it."""
    dt = aval.dtype
    if not isinstance(dt, dtypes.ExtendedDType):
        return aval
    typed = getattr(aval, "_sharding", None)
    if typed is not None:  # the data's extra axes are not split (``key<fry>[8@x]``: u32[8@x,2])
        spec = typed.spec
        typed = typed.update(spec=type(spec)(*spec, *[None] * len(dt.physical_shape)))
    return ShapedArray((*aval.shape, *dt.physical_shape), dt.physical_dtype, sharding=typed)


def shape_sharding_str(shape: Sequence[int], spec: Sequence) -> str:
    """Dimensions as a sharded type prints them: ``8@x`` for one split over mesh axis ``x``,
    ``8@(x,y)`` over several, the bare size when unsplit."""
    out = []
    for d, p in zip(shape, spec):
        if p is None or p == ():
            out.append(str(d))
        elif isinstance(p, tuple):
            out.append(f"{d}@({','.join(p)})" if len(p) > 1 else f"{d}@{p[0]}")
        else:
            out.append(f"{d}@{p}")
    return ",".join(out)


def _check_type_sharding(shape: tuple[int, ...], sharding: Any) -> None:
    global explicit_shardings_seen
    if len(sharding.spec) != len(shape):
        raise ValueError(f"the sharding of a type has one spec entry per dimension: got "
                         f"{sharding.spec} for shape {shape}")
    explicit_shardings_seen = True


class AbstractToken(ShapedArray):
    """The abstract value of an XLA token, which orders side effects and carries no data
    (JAX's ``AbstractToken``, printed ``Tok``). It is a ShapedArray of ``bool[0]``, the
    buffer a token travels as across a program's boundary; inside a program it lowers to
    ``!stablehlo.token``."""

    __slots__ = ()
    _interned: dict = {}  # apart from ShapedArray's: a token is not the bool[0] array

    def __new__(cls):
        return super().__new__(cls, (0,), np.bool_)

    def __reduce__(self):
        return AbstractToken, ()

    def update(self, shape=None, dtype=None, weak_type=None, **_) -> AbstractToken:
        return self

    def to_tangent_aval(self) -> AbstractToken:
        return self

    def str_short(self) -> str:
        return "Tok"

    def __str__(self):
        return "AbstractToken()"

    __repr__ = __str__



class Token:
    """A token value, as ``lax.create_token`` returns (JAX's ``core.Token``): it only orders
    side effects. It holds the zero-sized buffer it crosses program boundaries as."""

    __slots__ = ("_buf",)

    def __init__(self, buf):
        self._buf = buf

    def block_until_ready(self) -> Token:
        self._buf.block_until_ready()
        return self


# XLA counts elements and bytes in int64, and aborts the process (an uncaught absl status in
# C++) when a shape's product overflows it; negative dimensions fail in MLIR with no hint.
# Every array type passes through ShapedArray, so this is where bad shapes are stopped.
_MAX_BYTES = 2 ** 63 - 1


def _check_shape(shape: tuple[int, ...], dtype: np.dtype) -> None:
    if any(d < 0 for d in shape):
        raise TypeError(f"Shapes must have every element be nonnegative, got {shape}. A "
                        "negative dimension usually comes from a size computed from other "
                        "shapes; check it before building the array.")
    size = math.prod(shape)
    if size * max(dtype.itemsize, 1) > _MAX_BYTES:
        raise ValueError(f"Array of shape {shape} and dtype {dtype.name} is too big: "
                         f"{size} elements of {dtype.itemsize} bytes exceed what XLA can "
                         "address (2**63 - 1 bytes). Use a smaller shape.")


abstract_token = AbstractToken()


def typematch(a: ShapedArray, b: ShapedArray) -> bool:
    """Same shape and dtype; weak types may differ (as JAX's type checker allows)."""
    return a.shape == b.shape and a.dtype == b.dtype


# ---- JAX's ``jax.core`` names about types and dimension sizes -----------------------------


class AbstractValue(abc.ABC):
    """The type of a value (JAX's base class of them): ``ShapedArray``, ``AbstractRef``, the
    high-level types. jaxkit's types share no base class; each has ``to_tangent_aval`` and
    ``str_short``, and that is what ``isinstance`` checks (a subclass is one too)."""

    @classmethod
    def __subclasshook__(cls, c):
        if cls is AbstractValue and all(hasattr(c, m) for m in ("to_tangent_aval",
                                                                  "str_short")):
            return True
        return NotImplemented


def _dim_extremum(name: str, pick: Callable, d1: Any, d2: Any) -> Any:
    try:
        operator.index(d1), operator.index(d2)
    except TypeError:
        raise TypeError(f"core.{name}: ({d1!r}, {d2!r}) are not both integer dimension sizes "
                        "(jaxkit's symbolic dimensions, jax.export's, have no min/max yet)"
                        ) from None
    return pick(d1, d2)


def min_dim(d1: Any, d2: Any) -> Any:
    """``min(d1, d2)`` of two dimension sizes."""
    return _dim_extremum("min_dim", min, d1, d2)


def max_dim(d1: Any, d2: Any) -> Any:
    """``max(d1, d2)`` of two dimension sizes."""
    return _dim_extremum("max_dim", max, d1, d2)
