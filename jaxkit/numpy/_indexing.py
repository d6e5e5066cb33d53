"""NumPy indexing (``x[idx]``) through lax; indexed updates (``x.at[idx]``) build on its
analysis in ``_index_update``.

An index expression is parsed into one entry per index element (``None``, ``...``, slice,
integer, integer array, boolean array). It is then lowered by the cheapest strategy that fits,
as JAX does:

1. static ints and slices: ``lax.slice`` (+ ``rev`` for negative steps, ``squeeze`` for ints,
   ``expand_dims`` for ``None``);
2. scalar (possibly traced) ints and unit-step slices: ``lax.dynamic_slice``;
3. anything else (integer arrays, concrete boolean masks): ``lax.gather``, with NumPy's rules
   for where the advanced-index axes go.

Updates always use the gather's dimension numbers with the scatter family. Boolean masks must
be concrete: their number of true elements decides the result shape.
"""
from __future__ import annotations

import enum
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxkit import core, dtypes, lax, tree_util
from jaxkit.errors import NonConcreteBooleanIndexError
from jaxkit.indexing import Slice
from jaxkit.lax.elementwise import _const
from jaxkit.lax.sharding_axes import auto_axes_out
from jaxkit.lax.sharding_rules import resolve_out_sharding
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.numpy._promotion import (
    asarray,
    broadcast_arrays,
    promote_dtypes,
)


class _Kind(enum.Enum):
    NONE = "none"
    ELLIPSIS = "ellipsis"
    SLICE = "slice"
    INTEGER = "integer"     # a Python or NumPy integer
    ARRAY = "array"         # an integer array (any rank, possibly traced)
    BOOLEAN = "boolean"     # a boolean array or scalar


class _Idx(NamedTuple):
    index: Any
    kind: _Kind
    axes: tuple[int, ...]  # the operand axes this element consumes


def _is_int_scalar(i: Any) -> bool:
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _kind_of(idx: Any) -> _Kind:
    if idx is None:
        return _Kind.NONE
    if idx is Ellipsis:
        return _Kind.ELLIPSIS
    if isinstance(idx, slice):
        return _Kind.SLICE
    if _is_int_scalar(idx):
        return _Kind.INTEGER
    if isinstance(idx, (bool, np.bool_)):
        return _Kind.BOOLEAN
    if isinstance(idx, (Array, core.Tracer, np.ndarray)):
        dt = idx.dtype
        if dt == np.bool_:
            return _Kind.BOOLEAN
        if dtypes.issubdtype(dt, np.integer):
            return _Kind.ARRAY
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{dt}")
    if isinstance(idx, str):
        raise TypeError(f"JAX does not support string indexing; got idx={idx!r}")
    if isinstance(idx, Sequence):
        if not idx:
            return _Kind.ARRAY
        leaves = np.asarray(idx) if not _has_arrays(idx) else None
        dt = leaves.dtype if leaves is not None else dtypes.result_type(*_flat(idx))
        if dt == np.bool_:
            return _Kind.BOOLEAN
        if dtypes.issubdtype(dt, np.integer):
            return _Kind.ARRAY
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{dt}")
    if isinstance(idx, (float, complex, np.generic)):
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{np.dtype(type(idx)) if not isinstance(idx, np.generic) else idx.dtype}")
    raise IndexError("only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and "
                     f"integer or boolean arrays are valid indices. Got {idx}")


def _flat(seq: Any) -> list:
    out: list = []
    for s in seq:
        out.extend(_flat(s) if isinstance(s, (list, tuple)) else [s])
    return out


def _has_arrays(seq: Any) -> bool:
    return any(isinstance(s, (Array, core.Tracer)) for s in _flat(seq))


def _as_tuple(idx: Any) -> tuple:
    if isinstance(idx, tuple):
        return idx
    if isinstance(idx, Sequence) and not isinstance(idx, (str, Array, np.ndarray)):
        nested = any(isinstance(i, (np.ndarray, Array, core.Tracer)) and np.ndim(i) != 0 or
                     isinstance(i, (Sequence, slice)) or i is Ellipsis or i is None for i in idx)
        fix = "arr[tuple(seq)]" if nested else "arr[array(seq)]"
        raise TypeError("Using a non-tuple sequence for multidimensional indexing is not "
                        f"allowed; use `{fix}` instead of `arr[seq]`. See "
                        "https://github.com/jax-ml/jax/issues/4564 for more information.")
    return (idx,)


def _parse(idx: Any, shape: tuple[int, ...]) -> list[_Idx]:
    items = _as_tuple(idx)
    kinds = [_kind_of(i) for i in items]
    consumed = []
    ellipses = []
    for n, (i, k) in enumerate(zip(items, kinds)):
        if k in (_Kind.NONE, _Kind.ELLIPSIS):
            consumed.append(0)
            if k is _Kind.ELLIPSIS:
                ellipses.append(n)
        elif k is _Kind.BOOLEAN:
            consumed.append(np.ndim(i) if not isinstance(i, Sequence) else np.ndim(
                np.asarray(i, dtype=bool) if not _has_arrays(i) else asarray(list(i))))
        else:
            consumed.append(1)
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    total = sum(consumed)
    if total > len(shape):
        raise IndexError(f"Too many indices: array is {len(shape)}-dimensional, but {total} "
                         "were indexed")
    if ellipses:
        consumed[ellipses[0]] = len(shape) - total
    out, dim = [], 0
    for i, k, n in zip(items, kinds, consumed):
        out.append(_Idx(i, k, tuple(range(dim, dim + n))))
        dim += n
    return out


def _expand_ellipses(parsed: list[_Idx], ndim: int) -> list[_Idx]:
    out, used = [], 0
    for p in parsed:
        used += len(p.axes)
        if p.kind is _Kind.ELLIPSIS:
            out.extend(_Idx(slice(None), _Kind.SLICE, (a,)) for a in p.axes)
        else:
            out.append(p)
    out.extend(_Idx(slice(None), _Kind.SLICE, (a,)) for a in range(used, ndim))
    return out


def _static_slice_elt(v: Any) -> bool:
    return v is None or _is_int_scalar(v) or (isinstance(v, Array) and np.ndim(v) == 0)


def _check_slices(parsed: list[_Idx]) -> None:
    for pos, p in enumerate(parsed):
        if p.kind is _Kind.SLICE:
            s = p.index
            if not all(_static_slice_elt(v) for v in (s.start, s.stop, s.step)):
                raise IndexError(f"Slice entries must be static integers. Got {s} at position "
                                 f"{pos}")


def _slice_bounds(s: slice, size: int) -> tuple[int, int, int]:
    start, stop, step = (None if v is None else operator.index(v)
                         for v in (s.start, s.stop, s.step))
    return slice(start, stop, step).indices(size)


# --------------------------------------------------------------------------------------------
# Strategy 1 and 2: static and dynamic slices
# --------------------------------------------------------------------------------------------

def _try_static(arr: Any, parsed: list[_Idx]) -> Any:
    """``arr[idx]`` with static slices and in-bounds integers, or ``None`` if not possible."""
    shape = arr.shape
    if any(p.kind in (_Kind.ARRAY, _Kind.BOOLEAN) for p in parsed):
        return None
    starts, limits, strides, rev, squeeze, newaxis = [], [], [], [], [], []
    for p in _expand_ellipses(parsed, len(shape)):
        if p.kind is _Kind.NONE:
            newaxis.append(len(starts) - len(squeeze) + len(newaxis))
        elif p.kind is _Kind.INTEGER:
            axis, = p.axes
            i = operator.index(p.index)
            i = i + shape[axis] if i < 0 else i
            if not 0 <= i < shape[axis]:
                return None  # out of bounds: dynamic_slice clamps, as JAX
            starts.append(i)
            limits.append(i + 1)
            strides.append(1)
            squeeze.append(axis)
        else:
            axis, = p.axes
            size = shape[axis]
            start, stop, step = _slice_bounds(p.index, size)
            if step < 0:
                new_start = min(size, stop + 1 + abs(start - stop - 1) % abs(step))
                starts.append(new_start)
                limits.append(max(new_start, start + 1))
                strides.append(-step)
                rev.append(axis)
            else:
                starts.append(start)
                limits.append(max(start, stop))
                strides.append(step)
    trivial = all(s == 1 for s in strides) and all(
        (a, b) == (0, n) for a, b, n in zip(starts, limits, shape))
    out = arr
    if not trivial:
        out = lax.slice(arr, starts, limits, None if all(s == 1 for s in strides) else strides)
    if rev:
        out = lax.rev(out, rev)
    if squeeze:
        out = lax.squeeze(out, squeeze)
    if newaxis:
        out = lax.expand_dims(out, newaxis)
    return out


def _try_dynamic(arr: Any, parsed: list[_Idx]) -> Any:
    """``arr[idx]`` with scalar (traced) integers and unit-step slices, or ``None``."""
    shape = arr.shape
    for p in parsed:
        if p.kind is _Kind.BOOLEAN:
            return None
        if p.kind is _Kind.ARRAY and (isinstance(p.index, Sequence) or np.ndim(p.index) != 0):
            return None
        if p.kind is _Kind.SLICE and p.index.step not in (None, 1, -1):
            return None
    starts, sizes, rev, squeeze, newaxis = [], [], [], [], []
    trivial = True
    for p in _expand_ellipses(parsed, len(shape)):
        if p.kind is _Kind.NONE:
            newaxis.append(len(starts) - len(squeeze) + len(newaxis))
        elif p.kind in (_Kind.INTEGER, _Kind.ARRAY):
            axis, = p.axes
            if shape[axis] == 0:
                raise IndexError(f"index is out of bounds for axis {axis} with size 0")
            trivial = False
            starts.append(p.index)
            sizes.append(1)
            squeeze.append(axis)
        else:
            axis, = p.axes
            if p.index != slice(None):
                trivial = False
            start, stop, step = _slice_bounds(p.index, shape[axis])
            if step < 0:
                new_start = stop + 1 + abs(start - stop - 1) % abs(step)
                starts.append(new_start)
                sizes.append(max(0, start + 1 - new_start))
                rev.append(axis)
            else:
                starts.append(start)
                sizes.append(max(0, stop - start))
    out = arr
    if not trivial:
        # One start keeps its dtype (an unsigned one is not normalised); several are all made
        # int32 (static ones too: staged, they are int32 literals that dynamic_slice
        # normalises), as dynamic_slice needs them of one dtype (as JAX's).
        if len(starts) > 1:
            starts = [lax.convert_element_type(s, np.int32) for s in starts]
        out = lax.dynamic_slice(arr, starts, sizes)
    if rev:
        out = lax.rev(out, rev)
    if squeeze:
        out = lax.squeeze(out, squeeze)
    if newaxis:
        out = lax.expand_dims(out, newaxis)
    return out


# --------------------------------------------------------------------------------------------
# Strategy 3: gather
# --------------------------------------------------------------------------------------------

def _expand_bool_indices(parsed: list[_Idx], shape: tuple[int, ...]) -> list[_Idx]:
    out = []
    for pos, p in enumerate(parsed):
        if p.kind is not _Kind.BOOLEAN:
            out.append(p)
            continue
        idx = p.index
        if isinstance(idx, core.Tracer):
            raise NonConcreteBooleanIndexError(idx.aval)
        if isinstance(idx, Sequence) and _has_arrays(idx):
            leaves = _flat(idx)
            for leaf in leaves:
                if isinstance(leaf, core.Tracer):
                    raise NonConcreteBooleanIndexError(leaf.aval)
        mask = np.asarray(idx if not isinstance(idx, Sequence) else
                          [np.asarray(v) for v in idx], dtype=bool)
        if mask.ndim == 0:
            out.append(_Idx(bool(mask), _Kind.BOOLEAN, ()))
            continue
        expected = [shape[a] for a in p.axes]
        if not all(s1 in (0, s2) for s1, s2 in zip(mask.shape, expected)):
            raise IndexError(f"boolean index did not match shape of indexed array in index "
                             f"{pos}: got {mask.shape}, expected {expected}")
        for i, axis in zip(np.nonzero(mask), p.axes):
            out.append(_Idx(i.astype(np.int32), _Kind.ARRAY, (axis,)))
    return out


def _expand_scalar_bools(parsed: list[_Idx], shape: tuple[int, ...]
                         ) -> tuple[list[_Idx], tuple[int, ...]]:
    """A scalar boolean index adds an axis of size 1 (True) or 0 (False) at its place."""
    new_shape, new, dim = list(shape), [], 0
    for n, p in enumerate(parsed):
        if p.kind is _Kind.BOOLEAN and np.ndim(p.index) == 0:
            new_shape.insert(n, 1)
            new.append(_Idx(np.arange(int(p.index), dtype=np.int32), _Kind.ARRAY, (dim,)))
            dim += 1
        else:
            new.append(_Idx(p.index, p.kind, tuple(range(dim, dim + len(p.axes)))))
            dim += len(p.axes)
    return new, tuple(new_shape)


def _normalize(index: Any, size: int) -> Any:
    """Negative indices count from the end (unsigned indices are left alone)."""
    if _is_int_scalar(index):
        return index + size if index < 0 else index
    dt = dtypes.dtype(index)
    if dtypes.issubdtype(dt, np.unsignedinteger):
        return index
    # A NumPy index is tested on the host, as JAX's: the mask is a constant of the program.
    negative = index < 0 if isinstance(index, np.ndarray) else \
        lax.lt(index, np.asarray(0, dt)[()])
    # A weakly typed index stays weak (JAX's ``_const``): its later int32 cast is staged.
    return lax.select(negative, lax.add(index, _const(index, size)), index)


class _GatherIndexer(NamedTuple):
    slice_shape: tuple[int, ...]
    gather_slice_shape: tuple[int, ...]
    gather_indices: Any
    dnums: Any
    unique_indices: bool
    indices_are_sorted: bool
    reversed_y_dims: tuple[int, ...]
    newaxis_dims: tuple[int, ...]
    scalar_bool_dims: tuple[int, ...]


def _to_array_index(i: Any) -> Any:
    if isinstance(i, (Array, core.Tracer)):
        return i
    if isinstance(i, Sequence):
        return _creation_array(i)
    if isinstance(i, np.ndarray):  # stays on the host until normalised (see _normalize)
        return i.astype(dtypes.canonicalize_dtype(i.dtype), copy=False)
    return i


def _creation_array(seq: Sequence) -> Any:
    """An index given as a (nested) list: host data, unless it holds jaxkit arrays."""
    if not _has_arrays(seq):
        arr = np.asarray(seq)
        if arr.size == 0:
            arr = arr.astype(np.int32)
        return asarray(arr.astype(dtypes.canonicalize_dtype(arr.dtype)))
    parts = [lax.expand_dims(_to_array_index(s) if not _is_int_scalar(s) else
                             asarray(np.int32(s)), (0,)) for s in seq]
    return lax.concatenate(promote_dtypes(*parts), 0)


def _index_to_gather(parsed: list[_Idx], shape: tuple[int, ...],
                     normalize_indices: bool = True) -> _GatherIndexer:
    _check_slices(parsed)
    parsed = [_Idx(_to_array_index(p.index), p.kind, p.axes)
              if p.kind is _Kind.ARRAY else p for p in parsed]
    is_advanced = np.nonzero([p.kind in (_Kind.ARRAY, _Kind.INTEGER) for p in parsed])[0]
    contiguous = bool(np.all(np.diff(is_advanced) == 1))
    parsed = _expand_ellipses(parsed, len(shape))
    scalar_bool_dims = tuple(n for n, p in enumerate(parsed) if p.kind is _Kind.BOOLEAN)
    parsed, shape = _expand_scalar_bools(parsed, shape)
    if normalize_indices:
        parsed = [_Idx(_normalize(p.index, shape[p.axes[0]]), p.kind, p.axes)
                  if p.kind in (_Kind.ARRAY, _Kind.INTEGER) else p for p in parsed]
    advanced, idx_adv_pos, x_adv_axes = [], [], []
    if any(p.kind in (_Kind.ARRAY, _Kind.BOOLEAN) and np.ndim(p.index) > 0 for p in parsed):
        j = 0
        for n, p in enumerate(parsed):
            if p.kind is _Kind.NONE:
                continue
            if p.kind in (_Kind.ARRAY, _Kind.INTEGER):
                advanced.append(asarray(p.index) if not _is_int_scalar(p.index)
                                else asarray(np.int32(p.index)))
                idx_adv_pos.append(n)
                x_adv_axes.append(j)
            j += 1
    index_dtype = np.dtype(np.int32)
    x_axis = y_axis = collapsed_y_axis = 0
    offset_dims, collapsed, start_index_map = [], [], []
    gather_indices: list[tuple[Any, int]] = []
    gather_indices_shape: list[int] = []
    slice_shape, newaxis_dims, reversed_y_dims, gather_slice_shape = [], [], [], []
    for pos, p in enumerate(parsed):
        if advanced and ((contiguous and pos == idx_adv_pos[0]) or
                         (not contiguous and pos == 0)):
            arrs = broadcast_arrays(*advanced)
            adv_shape = arrs[0].shape
            start_dim = len(gather_indices_shape)
            gather_indices.extend((lax.convert_element_type(a, index_dtype), start_dim)
                                  for a in arrs)
            gather_indices_shape += adv_shape
            start_index_map.extend(x_adv_axes)
            collapsed.extend(x_adv_axes)
            slice_shape.extend(adv_shape)
            y_axis += len(adv_shape)
            collapsed_y_axis += len(adv_shape)
        if pos in idx_adv_pos:
            x_axis += 1
            gather_slice_shape.append(1)
            continue
        if p.kind in (_Kind.INTEGER, _Kind.ARRAY) and np.ndim(p.index) == 0:
            if shape[x_axis] == 0:
                raise IndexError(f"index is out of bounds for axis {x_axis} with size 0")
            i = np.asarray(p.index, index_dtype)[()] if _is_int_scalar(p.index) else \
                lax.convert_element_type(p.index, index_dtype)
            gather_indices.append((i, len(gather_indices_shape)))
            collapsed.append(x_axis)
            gather_slice_shape.append(1)
            start_index_map.append(x_axis)
            x_axis += 1
        elif p.kind is _Kind.NONE:
            slice_shape.append(1)
            newaxis_dims.append(y_axis)
            y_axis += 1
        elif p.kind is _Kind.SLICE:
            start, stop, step = _slice_bounds(p.index, shape[x_axis])
            size = len(range(start, stop, step))
            slice_shape.append(size)
            if step == 1:
                if size != shape[x_axis]:
                    gather_indices.append((np.asarray(start, index_dtype)[()],
                                           len(gather_indices_shape)))
                    start_index_map.append(x_axis)
                gather_slice_shape.append(size)
                offset_dims.append(collapsed_y_axis)
            else:
                idx = np.arange(start, stop, step, dtype=index_dtype)
                if step < 0:
                    reversed_y_dims.append(collapsed_y_axis)
                    idx = idx[::-1].copy()
                gather_slice_shape.append(1)
                gather_indices.append((asarray(idx), len(gather_indices_shape)))
                start_index_map.append(x_axis)
                gather_indices_shape.append(size)
                collapsed.append(x_axis)
            collapsed_y_axis += 1
            y_axis += 1
            x_axis += 1
        else:
            raise IndexError(f"Got unsupported indexer at position {pos}: {p.index!r}")
    if not gather_indices:
        indices_array: Any = asarray(np.zeros((0,), index_dtype))
    elif len(gather_indices) == 1:
        g, _ = gather_indices[0]
        indices_array = lax.expand_dims(g, (np.ndim(g),))
    else:
        last = len(gather_indices_shape)
        gather_indices_shape.append(1)
        indices_array = lax.concatenate([
            lax.broadcast_in_dim(g, tuple(gather_indices_shape),
                                 tuple(range(i, i + np.ndim(g)))) for g, i in gather_indices],
            last)
    dnums = lax.GatherDimensionNumbers(offset_dims=tuple(offset_dims),
                                       collapsed_slice_dims=tuple(sorted(collapsed)),
                                       start_index_map=tuple(start_index_map))
    return _GatherIndexer(tuple(slice_shape), tuple(gather_slice_shape), indices_array, dnums,
                          not advanced, not advanced, tuple(reversed_y_dims),
                          tuple(newaxis_dims), scalar_bool_dims)


def _apply_dslices(arr: Any, idx: Any) -> tuple[Any, tuple]:
    """Apply the ``jax.ds`` entries of ``idx`` to ``arr`` along their own axes; returns the
    sliced array and ``idx`` with those entries replaced by ``:``."""
    items = _as_tuple(idx)
    plain = tuple(slice(None) if isinstance(i, Slice) else i for i in items)
    for item, p in zip(items, _parse(plain, arr.shape)):
        if isinstance(item, Slice):
            arr = _dslice_axis(arr, item, p.axes[0])
    return arr, plain


def _dslice_axis(arr: Any, s: Slice, axis: int) -> Any:
    """``size`` elements of ``arr`` along ``axis`` from ``start`` every ``stride``: a
    ``dynamic_slice`` for unit stride (start clamped so the window fits), else a gather of
    the clamped indices. A negative unit-stride start counts from the end."""
    try:
        size = operator.index(s.size)
    except TypeError:
        raise IndexError(f"jax.ds size must be a static integer, got {s.size!r}; the shape of "
                         "the result depends on it. Pass it as a Python int (a static "
                         "argument under jit).") from None
    if s.stride == 1:
        return lax.dynamic_slice_in_dim(arr, _normalize(s.start, arr.shape[axis]), size, axis)
    # Strided: each index start + k * stride is clamped into range (a negative start is not
    # counted from the end here, as in JAX).
    idx = asarray(s.start) + s.stride * lax.iota(np.int32, size)
    idx = lax.clamp(lax.full_like(idx, 0), idx, lax.full_like(idx, arr.shape[axis] - 1))
    return getitem(arr, (slice(None),) * axis + (idx,))


def _dslice_update_index(idx: Any, shape: tuple[int, ...]) -> tuple:
    """The index of an update through one ``jax.ds`` entry as an integer-array index, with
    JAX's rule for out-of-bounds windows: a unit-stride window that does not fit is dropped
    whole, a strided one element by element (a negative start is not counted from the end)."""
    items = _as_tuple(idx)
    if sum(isinstance(i, Slice) or _kind_of(i) in (_Kind.INTEGER, _Kind.ARRAY, _Kind.BOOLEAN)
           for i in items) > 1:
        raise NotImplementedError(
            "jaxkit implements indexed updates through jax.ds only when it is the one "
            "non-slice index (with ':' , '...' and None around it); got "
            f"{items!r}. Apply the other indices with a separate .at[] update.")
    plain = tuple(slice(None) if isinstance(i, Slice) else i for i in items)
    out = list(plain)
    for n, (item, p) in enumerate(zip(items, _parse(plain, shape))):
        if isinstance(item, Slice):
            dim, size = shape[p.axes[0]], operator.index(item.size)
            start = asarray(item.start)
            steps = item.stride * lax.iota(start.dtype, size)
            if item.stride == 1:
                outside = lax.bitwise_or(lax.lt(start, lax.full_like(start, 0)),
                                         lax.gt(start, lax.full_like(start, dim - size)))
                start = lax.select(outside, lax.full_like(start, dim), start)
            where = start + steps
            out[n] = lax.select(lax.lt(where, lax.full_like(where, 0)),
                                lax.full_like(where, dim), where)
    return tuple(out)


def _refuse_unreduced_sharded(arr: Any, parsed: list[_Idx]) -> None:
    """JAX indexes an array over several devices by a gather (for an integer or array index,
    or a slice short of its axis) that reads the array's spec position by position: a spec
    with unreduced/reduced axes refuses that (``PartitionSpec.__iter__``'s ValueError)."""
    spec = getattr(arr.sharding, "spec", None) if isinstance(arr, ShardedArray) else None
    if spec is None or not (spec.unreduced or spec.reduced) or arr.sharding.num_devices == 1:
        return
    for p in parsed:
        if p.kind is _Kind.SLICE and all(_static_slice_elt(v) for v in (
                p.index.start, p.index.stop, p.index.step)):
            start, stop, step = p.index.indices(arr.shape[p.axes[0]])
            if abs(step) == 1 and abs(stop - start) == arr.shape[p.axes[0]]:
                continue
        if p.kind not in (_Kind.NONE, _Kind.ELLIPSIS):
            tuple(spec)


def getitem(arr: Any, idx: Any, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None, fill_value: Any = None,
            out_sharding: Any = None) -> Any:
    """``arr[idx]`` with NumPy semantics (out-of-bounds integer indices are clamped). A
    gather with ``out_sharding`` (over Explicit mesh axes) runs under ``auto_axes`` over the
    array and the index arrays, laid out so; a slice is typed by its own rules (both as
    JAX's)."""
    arr = asarray(arr)
    if any(isinstance(i, Slice) for i in _as_tuple(idx)):
        arr, idx = _apply_dslices(arr, idx)
    parsed = _parse(idx, arr.shape)
    _refuse_unreduced_sharded(arr, parsed)
    if mode is None or lax.GatherScatterMode.from_any(mode) in (
            lax.GatherScatterMode.PROMISE_IN_BOUNDS, lax.GatherScatterMode.CLIP):
        try:
            _check_slices(parsed)
            out = _try_static(arr, parsed)
            if out is None:
                out = _try_dynamic(arr, parsed)
        except (TypeError, ValueError):
            out = None
        if out is not None:
            return out
    sharding = resolve_out_sharding("take", out_sharding)
    if sharding is not None:
        leaves, tree = tree_util.tree_flatten(idx)
        dynamic = [i for i, leaf in enumerate(leaves)
                   if isinstance(leaf, (Array, core.Tracer, np.ndarray))]

        def body(arr, *arrays):
            index = list(leaves)
            for i, a in zip(dynamic, arrays):
                index[i] = a
            return getitem(arr, tree_util.tree_unflatten(tree, index),
                           indices_are_sorted=indices_are_sorted,
                           unique_indices=unique_indices, mode=mode, fill_value=fill_value)

        return auto_axes_out(body, sharding)(arr, *[leaves[i] for i in dynamic])
    parsed = _expand_bool_indices(parsed, arr.shape)
    indexer = _index_to_gather(parsed, arr.shape)
    y = arr
    if fill_value is not None:
        core.concrete_or_error(fill_value, "fill_value argument to indexed get()")
        if np.ndim(fill_value) != 0:
            raise ValueError("fill_value argument to indexed get() must be a scalar")
        if isinstance(fill_value, np.ndarray):
            fill_value = fill_value.item()
    if indexer.scalar_bool_dims:
        y = lax.expand_dims(y, indexer.scalar_bool_dims)
    if 0 in indexer.slice_shape:
        return lax.full_like(y, 0, shape=indexer.slice_shape)
    if 0 not in np.shape(indexer.gather_indices):
        y = lax.gather(y, indexer.gather_indices, indexer.dnums, indexer.gather_slice_shape,
                       unique_indices=unique_indices or indexer.unique_indices,
                       indices_are_sorted=indices_are_sorted or indexer.indices_are_sorted,
                       mode=mode, fill_value=fill_value)
    if indexer.reversed_y_dims:
        y = lax.rev(y, indexer.reversed_y_dims)
    return lax.expand_dims(y, indexer.newaxis_dims) if indexer.newaxis_dims else y
