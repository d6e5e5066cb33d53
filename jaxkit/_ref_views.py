"""Views of traced refs: ``ref.at[idx]`` inside a kernel (as Pallas kernels use them) is a
``RefView``, a window read and written through ``jax.ref.get``/``swap`` on the ref itself.
Installed on tracers at import (``jaxkit`` imports this module); ``.at`` of a traced array
stays the array's index-update helper.
"""
from __future__ import annotations

import numpy as np

from jaxkit import core
from jaxkit.indexing import Slice
from jaxkit.interpreters.state import is_ref_aval
from jaxkit.ref import get, swap

__all__ = ["RefView"]


def _aval(x):
    return core.get_aval(x)

class RefView:
    """``ref.at[idx]`` of a traced ref (as in Pallas kernels): a window of the ref, read and
    written through ``get``/``swap`` on the ref itself. Windows compose (``ref.at[:4][2:]``)
    into one index of the ref: per dimension, a fixed index or a ``(start, size)`` range
    (static or traced start, unit stride)."""

    __slots__ = ("ref", "dims")

    def __init__(self, ref, dims: tuple):
        self.ref = ref
        self.dims = dims

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d[1] for d in self.dims if isinstance(d, tuple))

    dtype = property(lambda self: _aval(self.ref).dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))

    @property
    def at(self) -> _RefAt:
        return _RefAt(self)

    def _base_index(self, idx) -> tuple:
        if not isinstance(idx, tuple):
            idx = (idx,)
        ranges = [i for i, d in enumerate(self.dims) if isinstance(d, tuple)]
        if any(i is Ellipsis for i in idx):
            k = idx.index(Ellipsis)
            idx = idx[:k] + (slice(None),) * (len(ranges) - len(idx) + 1) + idx[k + 1:]
        if len(idx) > len(ranges):
            raise IndexError(f"Too many indices for a Ref view of shape {self.shape}")
        idx = idx + (slice(None),) * (len(ranges) - len(idx))
        dims = list(self.dims)
        for pos, i in zip(ranges, idx):
            start, size = dims[pos]
            if isinstance(i, slice):
                lo, hi, step = i.indices(size)
                if step != 1:
                    raise NotImplementedError("strided slices of a Ref view are not "
                                              "implemented; use unit steps")
                dims[pos] = (start + lo, max(0, hi - lo))
            elif isinstance(i, Slice):
                if i.is_dynamic_size or i.stride != 1:
                    raise NotImplementedError("a Ref view takes jax.ds slices of static size "
                                              "and unit stride")
                dims[pos] = (start + i.start, int(i.size))
            elif isinstance(i, (int, np.integer)) or isinstance(i, core.Tracer) and not i.shape:
                dims[pos] = start + i
            else:
                raise NotImplementedError(f"indexing a Ref view with {i!r} is not implemented; "
                                          "use ints, slices and jax.ds")
        return tuple(dims)

    def _ref_index(self, dims) -> tuple:
        out = []
        for d in dims:
            if not isinstance(d, tuple):
                out.append(d)
            elif isinstance(d[0], core.Tracer):
                out.append(Slice(d[0], d[1]))
            else:
                out.append(slice(d[0], d[0] + d[1]))
        return tuple(out)

    def __getitem__(self, idx):
        return get(self.ref, self._ref_index(self._base_index(idx)))

    def __setitem__(self, idx, value):
        swap(self.ref, self._ref_index(self._base_index(idx)), value)

    def __repr__(self):
        return f"RefView(shape={self.shape}, dtype={self.dtype})"


class _RefAt:
    __slots__ = ("view",)

    def __init__(self, view: RefView):
        self.view = view

    def __getitem__(self, idx) -> RefView:
        return RefView(self.view.ref, self.view._base_index(idx))


_array_at = core.Tracer.at


def _tracer_at(self):
    if is_ref_aval(self.aval):
        return _RefAt(RefView(self, tuple((0, n) for n in self.aval.shape)))
    return _array_at.fget(self)


core.Tracer.at = property(_tracer_at)
