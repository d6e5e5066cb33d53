"""``jax.ShapeDtypeStruct``: a shape, dtype and (optionally) sharding standing for an array,
as ``eval_shape``, the stages' ``out_info`` and ahead-of-time lowering take and give them."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes
from jaxkit.avals import ManualAxisType
from jaxkit.interpreters import state
from jaxkit.runtime.sharding import (NamedSharding, PartitionSpec, current_mesh,
                                     typed_aval)
from jaxkit.sharding import Sharding
from jaxkit.transforms import stages


class ShapeDtypeStruct:
    """A shape and dtype standing for an array (``jax.ShapeDtypeStruct``), with the
    ``sharding`` (a ``Sharding`` or ``PartitionSpec``) it is to have, if any."""

    __slots__ = ("shape", "dtype", "weak_type", "_sharding", "manual_axis_type", "is_ref",
                 "_layout")

    def __init__(self, shape: Sequence[int], dtype, weak_type: bool = False, *,
                 sharding: Any = None, manual_axis_type: ManualAxisType | None = None,
                 is_ref: bool = False):
        is_format = format_class is not None and isinstance(sharding, format_class)
        if sharding is not None and not (is_format or isinstance(sharding,
                                                                 (Sharding, PartitionSpec))):
            raise ValueError("sharding should be an instance of `jax.sharding.Sharding`, "
                             "`jax.sharding.PartitionSpec` or `jax.experimental.layout.Format`."
                             f" Got {sharding} of type {type(sharding)}.")
        if is_format and sharding.layout is not None and \
                not hasattr(sharding.layout, "major_to_minor"):
            raise TypeError("`Layout.AUTO` cannot be used in place of a device-local layout "
                            f"in a `ShapeDtypeStruct`. Got {sharding}")
        self.shape = tuple(shape)
        self.dtype = dtype if dtypes.is_extended(dtype) else np.dtype(dtype)  # key<fry> kept
        self.weak_type = weak_type
        # A Format gives the memory layout too (``format``); the struct keeps its sharding.
        self._layout = sharding.layout if is_format else None
        self._sharding = sharding.sharding if is_format else sharding
        if manual_axis_type is not None and not isinstance(manual_axis_type, ManualAxisType):
            raise TypeError("`manual_axis_type` argument passed to ShapeDtypeStruct should be "
                            "of type `jax.sharding.ManualAxisType`. Got type "
                            f"{type(manual_axis_type)}")
        self.manual_axis_type = manual_axis_type
        self.is_ref = is_ref  # stands for a mutable array (``jax.new_ref``) of this type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))

    @property
    def sharding(self) -> Any:
        """The sharding given; a bare ``PartitionSpec`` is over the mesh in context (which
        there must be, as in JAX)."""
        if isinstance(self._sharding, PartitionSpec):
            mesh = current_mesh()
            if mesh is None:
                raise TypeError("When specifying PartitionSpec to `ShapeDtypeStruct`, the "
                                "context mesh cannot be empty. Please use `jax.set_mesh` to set "
                                "the mesh context.")
            return NamedSharding(mesh, self._sharding)
        return self._sharding

    @property
    def format(self) -> Any:
        """The layout (None: the compiler's default) and sharding, as a ``Format``."""
        return format_class(self._layout, self.sharding)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def update(self, **kwargs) -> ShapeDtypeStruct:
        """A copy with the given fields (``shape``, ``dtype``, ``sharding``, ``weak_type``,
        ``manual_axis_type``, ``is_ref``) replaced."""
        fields = {k: getattr(self, k) for k in ("shape", "dtype", "sharding", "weak_type",
                                                "manual_axis_type", "is_ref")}
        unknown = set(kwargs) - set(fields)
        if unknown:
            raise TypeError(f"ShapeDtypeStruct.update() got unexpected keyword arguments "
                            f"{sorted(unknown)}")
        if self._layout is not None:  # the layout is kept, unless a plain sharding drops it
            if isinstance(kwargs.get("sharding"), Sharding):
                raise ValueError(
                    f"You are updating ShapeDtypeStruct with a {type(kwargs['sharding'])} "
                    f"when the original ShapeDtypeStruct had a concrete layout {self.format}. "
                    "This might lead to bugs. If you want to do this, create a new "
                    "ShapeDtypeStruct via the constructor.")
            fields["sharding"] = self.format
        fields.update(kwargs)
        return ShapeDtypeStruct(fields.pop("shape"), fields.pop("dtype"), **fields)

    @classmethod
    def like(cls, x: Any) -> ShapeDtypeStruct:
        """The shape, dtype and weak type of ``x`` (an array, a tracer, a NumPy value, a
        Python scalar or another ``ShapeDtypeStruct``)."""
        aval = core.get_aval(x)
        return cls(aval.shape, aval.dtype, aval.weak_type)

    def _key(self) -> tuple:
        return (self.shape, self.dtype, self.sharding, self._layout, self.weak_type,
                self.manual_axis_type, self.is_ref)

    def __eq__(self, other):
        return isinstance(other, ShapeDtypeStruct) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        sharding = f", sharding={self.sharding}" if self.sharding is not None else ""
        if self._layout is not None:
            sharding += f", format={self._layout}"
        weak = ", weak_type=True" if self.weak_type else ""
        mat = f", manual_axis_type={self.manual_axis_type}" if self.manual_axis_type else ""
        ref = f", is_ref={self.is_ref}" if self.is_ref else ""
        return (f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{sharding}{weak}"
                f"{mat}{ref})")


def _struct_aval(s: ShapeDtypeStruct):
    # A NamedSharding over Explicit mesh axes is part of the type, as for an array laid out
    # so; a struct standing for a ref has the ref's type.
    aval = typed_aval(core.ShapedArray(s.shape, dtypes.canonicalize_dtype(s.dtype),
                                       s.weak_type), s.sharding)
    return state.AbstractRef(aval) if s.is_ref else aval


core.pytype_aval_mappings[ShapeDtypeStruct] = _struct_aval

# ``jax.experimental.layout.Format``, which lives above this module: it sets this on import
# (as ``import jaxkit`` does).
format_class: Any = None
stages.out_struct = lambda a, weak, sharding=None: ShapeDtypeStruct(
    a.shape, a.dtype, a.weak_type and weak, sharding=sharding)
