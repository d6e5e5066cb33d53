"""Views of traced refs: ``ref.at[idx]`` of a traced ref (as Pallas kernels and jitted code use
them) is a ``TransformedRef``: the ref and the transforms that lead from it to the view
(``NDIndexer`` windows, then ``.T``/``.transpose``, ``.reshape``, ``.bitcast``), as in JAX
(``jax.experimental.hijax.TransformedRef``). Reading ``view[idx]`` and writing
``view[idx] = v`` go through ``jax.ref.get``/``swap`` on the ref itself: the windows compose
into one index of the ref; a reshape or bitcast applies to what is read. As in JAX, a
transposed view is typed but not read, and nothing is written through a value transform.
Installed on tracers at import (``jaxkit`` imports this module); ``.at`` of a traced array
stays the array's index-update helper.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit.indexing import Slice
from jaxkit.interpreters.state import is_ref_aval
from jaxkit.ref import get, swap

__all__ = ["BitcastTransform", "NDIndexer", "RefView", "ReshapeTransform", "TransformedRef",
           "TransposeTransform"]


@dataclasses.dataclass(frozen=True)
class NDIndexer:
    """One window of a view of ``shape``: per dimension a ``Slice`` or an integer index."""

    indices: tuple
    shape: tuple[int, ...]
    int_indexer_shape: tuple[int, ...]
    validate: bool = True

    @staticmethod
    def from_indices_shape(idx: Any, shape: tuple[int, ...]) -> NDIndexer:
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis for i in idx):
            k = idx.index(Ellipsis)
            idx = idx[:k] + (slice(None),) * (len(shape) - len(idx) + 1) + idx[k + 1:]
        if len(idx) > len(shape):
            raise IndexError(f"Too many indices for a Ref view of shape {shape}")
        idx = idx + (slice(None),) * (len(shape) - len(idx))
        out = []
        for i, n in zip(idx, shape):
            if isinstance(i, slice):
                out.append(Slice.from_slice(i, n))
            elif isinstance(i, Slice) or isinstance(i, (int, np.integer)):
                out.append(i)
            elif isinstance(i, core.Tracer) and not i.shape:
                out.append(i)
            else:
                raise NotImplementedError(f"indexing a Ref view with {i!r} is not "
                                          "implemented; use ints, slices and jax.ds")
        return NDIndexer(tuple(out), tuple(shape), ())

    def out_shape(self) -> tuple[int, ...]:
        return tuple(i.size for i in self.indices if isinstance(i, Slice))


@dataclasses.dataclass(frozen=True)
class TransposeTransform:
    permutation: tuple[int, ...]

    def apply(self, x):
        # JAX types a transposed view but cannot read through it (its state discharge
        # has no rule for the transform): the same error here.
        raise NotImplementedError(f"Unsupported transform: {self!r}")

    def out_aval(self, aval):
        return aval.update(shape=tuple(aval.shape[p] for p in self.permutation))


@dataclasses.dataclass(frozen=True)
class ReshapeTransform:
    shape: tuple[int, ...]

    def apply(self, x):
        return lax.reshape(x, self.shape)


    def out_aval(self, aval):
        return aval.update(shape=self.shape)


@dataclasses.dataclass(frozen=True)
class BitcastTransform:
    dtype: np.dtype

    def apply(self, x):
        return lax.bitcast_convert_type(x, self.dtype)

    def out_aval(self, aval):
        return aval.update(dtype=self.dtype, weak_type=False)


class TransformedRef:
    """A view of the traced ref ``ref`` through ``transforms`` (``ref.at[...]``)."""

    __slots__ = ("ref", "transforms")

    def __init__(self, ref: Any, transforms: tuple):
        self.ref = ref
        self.transforms = tuple(transforms)

    def __eq__(self, other):
        return (type(other) is TransformedRef and self.ref is other.ref
                and self.transforms == other.transforms)

    __hash__ = None  # type: ignore[assignment]  (a dataclass in JAX: unhashable as well)

    @property
    def type(self) -> Any:
        """The view's type: a ref type (``Ref{float32[3]}``) of what it holds."""
        aval = core.get_aval(self.ref)
        for t in self.transforms:
            aval = (aval.update(shape=t.out_shape()) if type(t) is NDIndexer
                    else t.out_aval(aval))
        return aval

    shape = property(lambda self: self.type.shape)
    dtype = property(lambda self: self.type.dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    T = property(lambda self: self.transpose(tuple(reversed(range(self.ndim)))))

    @property
    def at(self) -> _RefIndexer:
        return _RefIndexer(self)

    def transpose(self, permutation: Sequence[int]) -> TransformedRef:
        return self._then(TransposeTransform(tuple(permutation)))

    def reshape(self, *shape) -> TransformedRef:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise ValueError(f"cannot reshape shape {self.shape} into shape {shape}")
        return self._then(ReshapeTransform(shape))

    def bitcast(self, dtype: Any) -> TransformedRef:
        dtype = dtypes.dtype(dtype)
        if dtype.itemsize != self.dtype.itemsize:
            raise NotImplementedError("bitcast of a Ref view to a dtype of another size is "
                                      "not implemented; bitcast the value read instead")
        return self._then(BitcastTransform(dtype))

    @staticmethod
    def from_window(ref: Any, dims: Sequence) -> TransformedRef:
        """The view of ``ref`` that is the window ``dims`` (as ``.dims`` gives it: per
        dimension a ``(start, size)`` range or a fixed index)."""
        shape = tuple(core.get_aval(ref).shape)
        indices = tuple(Slice(d[0], d[1]) if isinstance(d, tuple) else d for d in dims)
        return TransformedRef(ref, (NDIndexer(indices, shape, ()),))

    def _then(self, t: Any) -> TransformedRef:
        return TransformedRef(self.ref, (*self.transforms, t))

    # -- reading and writing through the ref -------------------------------------------------

    def _window(self) -> tuple[list, list]:
        """Per dimension of the ref, the window the indexers compose to (``(start, size)``
        or a fixed index), and the value transforms that follow them."""
        dims: list = [(0, n) for n in core.get_aval(self.ref).shape]
        values: list = []
        for t in self.transforms:
            if type(t) is not NDIndexer:
                values.append(t)
                continue
            if values:
                raise NotImplementedError("indexing a Ref view after .T, .reshape or .bitcast "
                                          "is not implemented; index before transforming it")
            ranges = iter(k for k, d in enumerate(dims) if isinstance(d, tuple))
            for i in t.indices:
                k = next(ranges)
                start = dims[k][0]
                if isinstance(i, Slice):
                    if i.is_dynamic_size or i.stride != 1:
                        raise NotImplementedError("a Ref view takes slices and jax.ds of "
                                                  "static size and unit stride")
                    dims[k] = (start + i.start, int(i.size))
                else:
                    dims[k] = start + i
        return dims, values

    @property
    def dims(self) -> tuple:
        """The window of the ref the view is (it must have no value transforms)."""
        dims, values = self._window()
        if values:
            raise NotImplementedError("this use of a Ref view after .T, .reshape or .bitcast "
                                      "is not implemented")
        return tuple(dims)

    def _index(self) -> tuple[tuple, list]:
        dims, values = self._window()
        index = tuple(d if not isinstance(d, tuple) else
                      Slice(d[0], d[1]) if isinstance(d[0], core.Tracer) else
                      slice(d[0], d[0] + d[1]) for d in dims)
        return index, values

    def __getitem__(self, idx):
        if self._window()[1]:  # read the window, then transform and index the value
            index, values = self._index()
            x = get(self.ref, index)
            for t in values:
                x = t.apply(x)
            return x[idx]
        return get(self.ref, self.at[idx]._index()[0])

    def __setitem__(self, idx, value):
        values = self._window()[1]
        if values:  # as in JAX, which writes through index windows only
            raise NotImplementedError(f"Unsupported transform: {values[0]!r}")
        swap(self.ref, self.at[idx]._index()[0], value)

    def __repr__(self):
        return f"TransformedRef(ref={self.ref!r}, transforms={self.transforms!r})"


RefView = TransformedRef  # jaxkit's earlier name (Pallas's interpreter checks for it)


class _RefIndexer:
    __slots__ = ("view",)

    def __init__(self, view: TransformedRef):
        self.view = view

    def __getitem__(self, idx) -> TransformedRef:
        return self.view._then(NDIndexer.from_indices_shape(idx, self.view.shape))


_array_at = core.Tracer.at


def _tracer_at(self):
    if is_ref_aval(self.aval):
        return _RefIndexer(TransformedRef(self, ()))
    return _array_at.fget(self)


core.Tracer.at = property(_tracer_at)
