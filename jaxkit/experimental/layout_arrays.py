"""Device arrays whose buffer lies in memory in another order than row-major.

``device_put(x, Format(Layout((1, 0)), sharding))``, or ``with_layout_constraint`` applied
eagerly, gives an array whose buffer is laid out as asked (column-major here): its
``format`` reports it, as JAX's. jaxkit compiles every program for row-major parameters and
hands buffers to PjRt as they are, which would read such a buffer in the wrong order; so a
``LaidOutArray`` gives the computations that read its ``_buf`` a row-major copy, made once
on first use by a compiled identity program whose parameter and result carry the two
layouts (``mhlo.layout_mode``), as JAX relays out an argument whose layout a program does
not take. The same programs lay a row-major buffer out in the first place.

An array over several devices is laid out shard by shard with these same programs
(``layout_sharded``); ``relayout`` itself takes one-device arrays only.
"""
from __future__ import annotations

import functools
from typing import Any

from jaxkit import core, dtypes
from jaxkit.interpreters import mlir
from jaxkit.runtime import layouts, pjrt
from jaxkit.runtime.array import Array

__all__ = ["LaidOutArray", "layout_of", "relayout"]

MajorToMinor = tuple[int, ...]


def _row_major(ndim: int) -> MajorToMinor:
    return tuple(range(ndim))


def layout_of(x: Array) -> MajorToMinor:
    """The ``major_to_minor`` order of a one-device array's buffer."""
    return x._order if type(x) is LaidOutArray else _row_major(x.ndim)


def _layout_mode(major_to_minor: MajorToMinor) -> str:
    # XLA's attribute names the dimensions minor to major
    return "{" + ",".join(map(str, major_to_minor[::-1])) + "}"


@functools.lru_cache(maxsize=128)
def _relayout_program(aval: core.ShapedArray, device: Any, src: MajorToMinor,
                      dst: MajorToMinor) -> pjrt.Executable:
    """An identity program on ``device`` whose parameter is laid out ``src`` and whose result
    ``dst``: XLA copies the elements into the other order."""
    with mlir.make_ir_context(), mlir.ir.Location.unknown():
        t = str(mlir.aval_to_ir_type(aval))
    text = (f'module @relayout {{ func.func public @main(%arg0: {t} {{mhlo.layout_mode = '
            f'"{_layout_mode(src)}"}}) -> ({t} {{mhlo.layout_mode = "{_layout_mode(dst)}"}}) '
            f'{{ return %arg0 : {t} }} }}')
    return pjrt.compile_module(text, [aval], device)


def _run_relayout(buf: Any, aval: core.ShapedArray, src: MajorToMinor, dst: MajorToMinor,
                  committed: bool) -> Any:
    device = pjrt.device_of(buf)
    out, = _relayout_program(aval.strip_weak_type(), device, src, dst)([buf], committed)
    return out


class LaidOutArray(Array):
    """A one-device array whose buffer is laid out ``_order`` (major to minor, not row-major).

    ``_laid`` is that buffer; ``_buf`` (what computations read) is a row-major copy of it,
    made on first use and kept."""

    __slots__ = ("_laid", "_order", "_row_major")
    laid_out = True  # (read by device_put: one already on its device stays as it is)
    made = False  # whether one was ever made (calls skip looking for them until then)

    def __init__(self, laid: Any, aval: core.ShapedArray, order: MajorToMinor):
        LaidOutArray.made = True
        self._laid = laid
        self.aval = aval
        self._order = order
        self._row_major = None

    @property
    def _buf(self) -> Any:
        if self._laid.is_deleted():
            return self._laid  # (what reads it raises JAX's error for a deleted array)
        if self._row_major is None:
            self._row_major = _run_relayout(self._laid, self.aval, self._order,
                                            _row_major(self.ndim), self._laid._committed)
        return self._row_major

    @property
    def sharding(self):
        return self._laid._sharding

    @property
    def committed(self) -> bool:
        return self._laid._committed

    _committed = committed

    @property
    def device(self):
        return pjrt.device_of(self._laid)

    def is_deleted(self) -> bool:
        return self._laid.is_deleted()

    def is_ready(self) -> bool:
        return self._laid.is_ready()

    def _check_alive(self) -> None:
        if self._laid.is_deleted():
            raise RuntimeError(pjrt.deleted_message(self.aval))

    @property
    def _value(self) -> Any:
        # PjRt's transfer to the host reads the buffer in its own layout: no copy needed
        try:
            return self._npy
        except AttributeError:
            self._check_alive()
            npy = self._npy = pjrt.fetch(self._laid)
            return npy

    def delete(self) -> None:
        self._laid.delete()
        if self._row_major is not None:
            self._row_major.delete()
        try:
            del self._npy  # the host copy, if it was fetched
        except AttributeError:
            pass

    def block_until_ready(self) -> LaidOutArray:
        pjrt.block_until_ready_buffers([self._laid])
        return self

    def laid_out_buffer(self) -> Any:
        """The buffer in its own layout (what ``format`` describes)."""
        return self._laid


core.pytype_aval_mappings[LaidOutArray] = lambda x: x.aval


def relayout(x: Any, major_to_minor: MajorToMinor, commit: bool = False) -> Array:
    """``x`` (a one-device array) with its buffer laid out ``major_to_minor``: ``x`` itself
    when it already is, else a copy (a ``LaidOutArray`` unless row-major), committed to its
    device if ``x`` is or ``commit`` says so."""
    if type(x) not in (Array, LaidOutArray):
        raise NotImplementedError(
            f"a layout other than row-major for an array with sharding "
            f"{getattr(x, 'sharding', type(x).__name__)}: jaxkit lays out jax.Arrays only "
            f"(on one device, or over a mesh); jax.device_put the value first or keep the "
            f"row-major layout.")
    if dtypes.is_extended(x.dtype):
        raise NotImplementedError(f"a layout other than row-major for an array of "
                                  f"{x.dtype} elements (its data is a uint32 array)")
    order = tuple(major_to_minor)
    current = layout_of(x)
    if order == current:
        return x
    src = x._laid if type(x) is LaidOutArray else x._buf
    out = _run_relayout(src, x.aval, current, order, x.committed or commit)
    if order == _row_major(x.ndim):
        return Array(out)
    return LaidOutArray(out, x.aval, order)


def buffer_layout(x: Array) -> layouts.LayoutTuple | None:
    """The layout PjRt reports for the buffer ``x.format`` describes."""
    return layouts.buffer_layout(x._laid if type(x) is LaidOutArray else x._buf)
