"""``pltpu.emit_pipeline``: a grid of blocks run *inside* a kernel, over refs the kernel holds
whole (``memory_space=pl.ANY`` operands, scratch buffers, views of them).

On a TPU the pipeline copies each block of its inputs from HBM into VMEM windows ahead of the
step that uses it (double buffering) and copies output windows back behind it. What a kernel
can observe of that is the *value* semantics, which interpret mode keeps:

- each operand gets one window (a new ref of the block's shape, uninitialized: NaN / the least
  integer, as the interpreter's fresh buffers), alive for the whole pipeline;
- at each step (row-major over ``grid``) the input blocks the index maps select are copied
  into their windows, the body runs on the windows (``pl.program_id``/``pl.num_programs``
  inside it and inside the index maps give the pipeline's own grid), and each output window
  is copied back to the block its index map selects. An output block visited on consecutive
  steps keeps its window, so accumulating into it across them works as on a TPU.

Blocks follow JAX's slicing rules: a ragged last ``Blocked`` block is cut to a multiple of the
TPU tiling (the rest of the window is not copied), ``pl.BoundedSlice`` dimensions take the
``pl.ds(start, size)`` of their index map, ``pl.Element`` ones an element offset, ``None``/
``pl.Squeezed`` ones an index. As in JAX, cutting blocks needs the TPU's tiling, so a pipeline
traced where the default device is a CPU raises JAX's ``ValueError`` (``Unsupported TPU device
kind: cpu``); under ``jax.sharding.use_abstract_mesh`` with a TPU ``AbstractDevice`` it runs.
The DMAs and semaphores of the real schedule are not emitted, so the kernel's jaxpr differs
from JAX's (its values do not).
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import api_devices, core, lax, tree_util
from jaxkit import numpy as jnp
from jaxkit import ref as ref_lib
from jaxkit import sharding as sharding_lib
from jaxkit.experimental.pallas import triton as _masked
from jaxkit.experimental.pallas.core import (BlockSpec, Blocked, BoundedSlice, Element,
                                             MemoryRef, Squeezed)
from jaxkit.experimental.pallas.interpret import uninitialized_value
from jaxkit.experimental.pallas.primitives import (num_programs, pipeline_grid, program_id)
from jaxkit.indexing import Slice, ds

__all__ = ["BufferType", "BufferedRef", "BufferedRefBase", "Tiling", "emit_pipeline",
           "emit_pipeline_with_allocations"]


class Tiling(enum.Enum):
    """How the TPU lays out the minor dimensions of a buffer in tiles."""

    COMPACT = enum.auto()
    SPARSE_CORE = enum.auto()

    @property
    def shape(self) -> tuple[int, ...]:
        return (8, 128) if self is Tiling.COMPACT else (8,)


# JAX's table of TPU device kinds -> chip generation (tpu_info.chip_version_from_device_kind).
_TPU_GENERATIONS = {"TPU v2": 2, "TPU v3": 3, "TPU v4": 4, "TPU v4 lite": 4, "TPU v5e": 5,
                    "TPU v5 lite": 5, "TPU v5": 5, "TPU v5p": 5, "TPU v6e": 6,
                    "TPU v6 lite": 6, "TPU7": 7, "TPU7x": 7, "TPU8i": 8}


def _tpu_generation() -> int:
    # A private, minimal form of pltpu.get_tpu_info().generation (pl_dist owns the public
    # one): the device kind comes from the abstract mesh in context, else the default device.
    abstract_device = sharding_lib.get_abstract_mesh().abstract_device
    if abstract_device is not None:
        kind = abstract_device.device_kind
    else:
        kind = api_devices.devices()[0].device_kind
    generation = _TPU_GENERATIONS.get(kind)
    if generation is None:
        raise ValueError(f"Unsupported TPU device kind: {kind}")
    return generation


def _infer_tiling(shape: tuple[int, ...], dtype: Any, tiling: Tiling | None) -> tuple:
    """The tile of the minor dimensions of a buffer (JAX's tpu_info.infer_tiling)."""
    dtype = np.dtype(dtype)
    packing = 8 if dtype.name == "int4" else max(1, 4 // dtype.itemsize)
    tiling = Tiling.COMPACT if tiling is None else tiling
    if tiling is Tiling.SPARSE_CORE:
        return (*(1,) * (len(shape) - 1), 8 * packing)
    if len(shape) == 1:
        return ((1 + int(_tpu_generation() < 4)) * packing * 128,)
    if len(shape) < 2:
        raise ValueError(f"Shape must have at least 2 dimensions: {shape=}")
    factor = (1 + int(_tpu_generation() < 4)) * packing
    while factor < min(shape[-2], 8):
        factor *= 2
    return (*(1,) * (len(shape) - 2), factor, 128)


class BufferType(enum.Enum):
    """What a pipeline operand is to the body: read, written, both, or managed by hand."""

    INPUT = 1
    OUTPUT = 2
    INPUT_OUTPUT = 3
    MANUAL = 4

    @property
    def is_input(self) -> bool:
        return self in (BufferType.INPUT, BufferType.INPUT_OUTPUT)

    @property
    def is_output(self) -> bool:
        return self in (BufferType.OUTPUT, BufferType.INPUT_OUTPUT)


def _block_dim_size(d: Any) -> int | None:
    if d is None or isinstance(d, Squeezed):
        return None
    if isinstance(d, (int, np.integer)):
        return int(d)
    if isinstance(d, (Blocked, Element, BoundedSlice)):
        return d.block_size
    raise ValueError(f"Unsupported block dimension type: {d}")


def _window_shape(spec: BlockSpec) -> tuple[int, ...]:
    if spec.block_shape is None:
        raise ValueError("Block shape must be specified.")
    return tuple(s for s in map(_block_dim_size, spec.block_shape) if s is not None)


class BufferedRefBase:
    """What the pipeline knows of one operand: its block spec and buffer type."""

    @property
    def spec(self) -> BlockSpec:
        raise NotImplementedError()

    @property
    def buffer_type(self) -> BufferType:
        raise NotImplementedError()

    @property
    def is_buffered(self) -> bool:
        return False

    is_input = property(lambda self: self.buffer_type.is_input)
    is_output = property(lambda self: self.buffer_type.is_output)
    is_input_output = property(lambda self: self.buffer_type is BufferType.INPUT_OUTPUT)
    is_manual = property(lambda self: self.buffer_type is BufferType.MANUAL)

    @property
    def block_shape(self):
        return self.spec.block_shape

    @property
    def compute_index(self) -> Callable:
        return self.spec.index_map


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class BufferedRef(BufferedRefBase):
    """An operand's pipeline buffer: ``window_ref`` holds ``buffer_count`` blocks (a buffer
    type such as ``pltpu.VMEM((2, *block), dtype)`` until allocated, then a ref)."""

    _spec: BlockSpec = dataclasses.field(metadata=dict(static=True))
    _buffer_type: BufferType = dataclasses.field(metadata=dict(static=True))
    window_ref: Any
    buffer_count: int = dataclasses.field(default=2, metadata=dict(static=True))

    spec = property(lambda self: self._spec)
    buffer_type = property(lambda self: self._buffer_type)
    is_buffered = property(lambda self: self.buffer_count > 0)

    @classmethod
    def create(cls, spec: BlockSpec, dtype_or_type: Any, buffer_type: BufferType,
               buffer_count: int = 2, **kwargs: Any) -> BufferedRef:
        # The window's type; its memory space is the kernel's default one (VMEM on a TPU).
        dtype = getattr(dtype_or_type, "dtype", None)  # a type (an aval), or a dtype
        dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype_or_type)
        block = _window_shape(spec)
        shape = ((buffer_count * block[0],) if len(block) == 1
                 and kwargs.get("tiling") is not Tiling.SPARSE_CORE
                 else (buffer_count, *block))
        window = MemoryRef(core.ShapedArray(shape, dtype), memory_space=spec.memory_space)
        return cls(spec, buffer_type, window, buffer_count)

    @classmethod
    def input(cls, spec, dtype_or_type, buffer_count=2, **kwargs) -> BufferedRef:
        return cls.create(spec, dtype_or_type, BufferType.INPUT, buffer_count, **kwargs)

    @classmethod
    def output(cls, spec, dtype_or_type, buffer_count=2, **kwargs) -> BufferedRef:
        return cls.create(spec, dtype_or_type, BufferType.OUTPUT, buffer_count, **kwargs)

    @classmethod
    def input_output(cls, spec, dtype_or_type, buffer_count=2, **kwargs) -> BufferedRef:
        return cls.create(spec, dtype_or_type, BufferType.INPUT_OUTPUT, buffer_count,
                          **kwargs)

    def with_spec(self, spec: BlockSpec) -> BufferedRef:
        return dataclasses.replace(self, _spec=spec)


# --------------------------------------------------------------------------------------------
# Cutting blocks
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Cut:
    """One dimension of a block of a source: an index (a dimension the window drops), or a
    window of ``size`` elements from ``start`` of which the first ``valid`` are copied
    (``valid`` None: all of them, statically in bounds)."""

    start: Any
    size: int | None = None
    valid: Any = None


def _cut_blocked(index, block: int, dim: int, tile: int | None) -> _Cut:
    start = index * block
    if dim % block == 0:
        return _Cut(start, block)
    # A ragged last block: copy a multiple of the tiling (JAX's _create_blocked_slice).
    if tile is None:
        raise ValueError("If tiling is None, block_size must divide dim_size.")
    if block % tile != 0:
        raise ValueError(f"Block size must divide tiling: block_size={block}, tiling={tile}")
    is_last = index == -(-dim // block) - 1
    rem = dim % block
    return _Cut(start, block, jnp.where(is_last, -(-rem // tile) * tile, block))


def _cut_bounded(start, size, block: int, dim: int, tile: int | None) -> _Cut:
    if tile is not None and block % tile != 0:
        raise ValueError(f"Block size must divide tiling: block_size={block}, tiling={tile}")
    if tile is not None:
        # Past the end the copy is rounded down to the tiling (JAX's _create_bounded_slice).
        is_oob = start + size > dim
        size = jnp.where(is_oob, -(-(dim - start) // tile) * tile, size)
    return _Cut(start, block, size)


def _cut(index, bd: Any, dim: int, tile: int | None) -> _Cut:
    if bd is None or isinstance(bd, Squeezed):
        return _Cut(index)
    if isinstance(bd, (int, np.integer, Blocked)):
        return _cut_blocked(index, _block_dim_size(bd), dim, tile)
    if isinstance(bd, Element):
        return _cut_bounded(index, bd.block_size, bd.block_size, dim, tile)
    if isinstance(bd, BoundedSlice):
        if not isinstance(index, Slice):
            raise ValueError("Must return a ds from the index_map for a BoundedSlice "
                             "dimension.")
        return _cut_bounded(index.start, index.size, bd.block_size, dim, tile)
    raise ValueError(f"Unsupported block dimension type: {bd}")


def _block_cuts(spec: BlockSpec, shape: tuple, dtype: Any, tiling: Tiling | None,
                indices: Sequence) -> list[_Cut]:
    if not shape:
        return []
    tiles = _infer_tiling(shape, dtype, tiling)
    block_shape = spec.block_shape
    out = spec.index_map(*indices) if spec.index_map is not None else (0,) * len(shape)
    out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if block_shape is None:
        block_shape = shape
    if len(out) != len(shape) or len(block_shape) != len(shape):
        raise ValueError(f"The block shape {tuple(block_shape)} and index map results "
                         f"{len(out)} must have one entry per dimension of the operand "
                         f"{shape}.")
    return [_cut(i, bd, d, t) for i, bd, d, t in zip(out, block_shape, shape, tiles)]


def _iota_mask(cuts: Sequence[_Cut]) -> Any:
    dims = [c for c in cuts if c.size is not None]
    shape = tuple(c.size for c in dims)
    mask = None
    for k, c in enumerate(dims):
        if c.valid is None:
            continue
        m = lax.broadcasted_iota(np.int32, shape, k) < c.valid
        mask = m if mask is None else mask & m
    return mask


def _source_view(src: Any, cuts: Sequence[_Cut]) -> Any:
    if not cuts:
        return src
    return src.at[tuple(c.start if c.size is None else ds(c.start, c.size) for c in cuts)]


def _copy_in(src: Any, window: Any, cuts: Sequence[_Cut]) -> None:
    if not cuts:
        window[...] = src[...]
        return
    view = _source_view(src, cuts)
    mask = _iota_mask(cuts)
    if mask is None:
        window[...] = view[...]
    else:
        # The padded read of Triton's masked load: a window running past the end reads
        # uninitialized values there instead of moving back to fit.
        window[...] = jnp.where(mask, _masked.load(view), window[...])


def _copy_out(window: Any, dst: Any, cuts: Sequence[_Cut]) -> None:
    if not cuts:
        dst[...] = window[...]
        return
    view = _source_view(dst, cuts)
    mask = _iota_mask(cuts)
    if mask is None:
        view[...] = window[...]
    else:
        _masked.store(view, window[...], mask=mask)


# --------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------


def _normalize_specs(specs: Any) -> tuple:
    if not isinstance(specs, (list, tuple)):
        specs = (specs,)
    return tuple(specs)


def _is_spec(x: Any) -> bool:
    return x is None or isinstance(x, BlockSpec)


def _partition_grid(grid: tuple, core_axis: Any, dimension_semantics: Any
                    ) -> tuple[tuple, tuple]:
    """The part of ``grid`` this core runs and its offsets (JAX's megacore split: the first
    parallel dimension divisible by the number of cores, else the largest one unevenly)."""
    if core_axis is None:
        return grid, (0,) * len(grid)
    if isinstance(core_axis, int):
        num_cores, core_id = num_programs(core_axis), program_id(core_axis)
    else:
        num_cores, core_id = lax.axis_size(core_axis), lax.axis_index(core_axis)
    if not isinstance(num_cores, int):
        raise NotImplementedError(
            f"Cannot partition grid over dynamic number of cores: core_axis={core_axis!r}")
    if num_cores == 1:
        return grid, (0,) * len(grid)
    if dimension_semantics is None:
        dimension_semantics = ("arbitrary",) * len(grid)
    if len(dimension_semantics) != len(grid):
        raise ValueError("dimension_semantics must be the same length as grid.")
    parallel = [i for i, d in enumerate(dimension_semantics)
                if getattr(d, "value", d) == "parallel"]
    if not parallel:
        raise NotImplementedError("Cannot partition over cores without parallel grid "
                                  f"dimensions: dimension_semantics={dimension_semantics}")
    divisible = [i for i in parallel if isinstance(grid[i], int) and grid[i] % num_cores == 0]
    offsets = [0] * len(grid)
    new_grid = list(grid)
    if divisible:
        i = divisible[0]
        new_grid[i] = grid[i] // num_cores
        offsets[i] = core_id * new_grid[i]
        return tuple(new_grid), tuple(offsets)
    dynamic = [i for i in parallel if not isinstance(grid[i], int)]
    static = [i for i in parallel if isinstance(grid[i], int)]
    if len(dynamic) > 1:
        raise NotImplementedError(
            f"Cannot partition over multiple dynamic parallel dimensions: grid={grid}")
    if dynamic and not static:
        i = dynamic[0]
    else:
        i = next(k for k in static if grid[k] == max(grid[j] for j in static))
    base, rem = grid[i] // num_cores, grid[i] % num_cores
    new_grid[i] = jnp.where(core_id < rem, base + 1, base)
    offsets[i] = jnp.where(core_id < rem, core_id * new_grid[i], core_id * base + rem)
    return tuple(new_grid), tuple(offsets)


def _unravel(step: Any, grid: tuple) -> list:
    idx = []
    for g in reversed(grid):
        idx.append(lax.rem(step, lax.convert_element_type(g, np.int32)))
        step = lax.div(step, lax.convert_element_type(g, np.int32))
    return idx[::-1]


def _value_type(x: Any) -> tuple[tuple, Any]:
    return tuple(x.shape), np.dtype(x.dtype)


def _space_name(space: Any) -> str:
    return str(getattr(space, "value", space))


def _source_space(src: Any) -> str | None:
    ref = getattr(src, "ref", src)  # a view's ref
    space = getattr(core.get_aval(ref), "memory_space", None)
    return None if space is None else _space_name(space)


def _window_for(bref: Any, spec: BlockSpec, src: Any) -> Any:
    """The ref the body sees for one operand: the allocation's first slot, a new buffer in
    the spec's memory space (VMEM by default), or None where the source is already in that
    memory space (JAX's pipeline then gives the body a view of the source itself)."""
    space = "vmem" if spec.memory_space is None else _space_name(spec.memory_space)
    if space not in ("smem", "vmem", "hbm"):
        raise ValueError(f"Unsupported buffer memory space: {space}")
    if _source_space(src) == space:
        return None
    window = getattr(bref, "window_ref", None)
    if window is not None and not isinstance(window, MemoryRef):
        # an allocated buffer: (count, *block), or (count * block,) for 1-D blocks
        block = _window_shape(spec)
        if tuple(window.shape) == block:
            return window
        if len(window.shape) == len(block) + 1:
            return window.at[0]
        return window.at[ds(0, block[0])]
    if space == "hbm":
        raise ValueError("Cannot allocate HBM in `run_scoped`.")
    return ref_lib.new_ref(uninitialized_value(_window_shape(spec), np.dtype(src.dtype)))


def _emit(body: Callable, grid: tuple, in_specs: tuple, out_specs: tuple, tiling: Any,
          core_axis: Any, dimension_semantics: Any, explicit_indices: bool, refs: tuple,
          scratches: Sequence, allocations: Any) -> None:
    n_in = len(in_specs)
    flat_in_specs = tree_util.tree_leaves(in_specs, is_leaf=_is_spec)
    flat_out_specs = tree_util.tree_leaves(out_specs, is_leaf=_is_spec)
    in_refs = tree_util.tree_leaves(refs[:n_in])
    out_refs = tree_util.tree_leaves(refs[n_in:])
    if len(in_refs) != len(flat_in_specs) or len(out_refs) != len(flat_out_specs):
        raise ValueError(f"emit_pipeline got {len(in_refs)} input and {len(out_refs)} output "
                         f"refs for {len(flat_in_specs)} in_specs and {len(flat_out_specs)} "
                         "out_specs; pass one ref per block spec.")
    specs = [BlockSpec() if s is None else s for s in (*flat_in_specs, *flat_out_specs)]
    operands = [*in_refs, *out_refs]
    brefs = (tree_util.tree_leaves(allocations, is_leaf=lambda x: isinstance(x, BufferedRef))
             if allocations is not None else [None] * len(operands))
    grid, offsets = _partition_grid(tuple(grid), core_axis, dimension_semantics)
    types = [_value_type(r) for r in operands]
    windows = [_window_for(b, s, r) for b, s, r in zip(brefs, specs, operands)]
    n_flat_in = len(in_refs)
    num_steps = math.prod(grid) if all(isinstance(g, int) for g in grid) else functools.reduce(
        lambda a, b: a * b, [lax.convert_element_type(g, np.int32) for g in grid])

    def step(i, _):
        local = _unravel(i, grid)
        indices = tuple(a + o for a, o in zip(local, offsets))
        with pipeline_grid(list(zip(indices, grid))):
            cuts = [_block_cuts(s, t[0], t[1], tiling, indices) for s, t in zip(specs, types)]
            # aliased operands: the body works on the source's block in place
            views = [_source_view(r, c) if w is None else w
                     for r, w, c in zip(operands, windows, cuts)]
            for src, w, c in zip(operands[:n_flat_in], windows, cuts):
                if w is not None:
                    _copy_in(src, w, c)
            in_w = tree_util.tree_unflatten(tree_util.tree_structure(refs[:n_in]),
                                            views[:n_flat_in])
            out_w = tree_util.tree_unflatten(tree_util.tree_structure(refs[n_in:]),
                                             views[n_flat_in:])
            args = (*in_w, *out_w, *scratches)
            if explicit_indices:
                body(indices, *args)
            else:
                body(*args)
            for dst, w, c in zip(operands[n_flat_in:], windows[n_flat_in:], cuts[n_flat_in:]):
                if w is not None:
                    _copy_out(w, dst, c)

    if isinstance(num_steps, int):
        if num_steps > 0:
            lax.fori_loop(np.int32(0), np.int32(num_steps), step, None)
    else:
        lax.fori_loop(np.int32(0), num_steps, step, None)


def emit_pipeline(body: Callable, *, grid: tuple, in_specs: Any = (), out_specs: Any = (),
                  tiling: Tiling | None = None, core_axis: Any = None,
                  core_axis_name: Any = None, dimension_semantics: Any = None,
                  trace_scopes: bool = True, no_pipelining: bool = False,
                  _explicit_indices: bool = False) -> Callable[..., None]:
    """A function ``pipeline(*refs, scratches=None, allocations=None)`` running ``body`` over
    ``grid`` inside a kernel: ``body(*input_windows, *output_windows, *scratches)`` sees, at
    each step, the blocks of ``refs`` that ``in_specs``/``out_specs`` select (as
    ``pallas_call`` does for its operands)."""
    if any(isinstance(g, int) and g <= 0 for g in grid):
        raise ValueError(
            f"All elements in the grid must be strictly positive, but got grid={tuple(grid)}")
    if any(not (isinstance(g, int) or isinstance(g, core.Tracer) or hasattr(g, "dtype"))
           for g in grid):
        raise ValueError("Grid must consist of Python integers and JAX Arrays: "
                         f"{tuple(type(g) for g in grid)}")
    if core_axis is not None and core_axis_name is not None:
        raise ValueError("core_axis and core_axis_name cannot both be provided.")
    in_specs, out_specs = _normalize_specs(in_specs), _normalize_specs(out_specs)
    axis = core_axis_name if core_axis is None else core_axis

    def pipeline(*refs: Any, scratches: Any = None, allocations: Any = None,
                 body_prologue: Callable | None = None) -> None:
        def run(*args):
            if body_prologue is not None:
                body_prologue()
            body(*args)
        _emit(run, tuple(grid), in_specs, out_specs, tiling, axis, dimension_semantics,
              _explicit_indices, refs, () if scratches is None else tuple(scratches),
              allocations)

    return pipeline


def _make_pipeline_allocations(*refs: Any, in_specs: Any = (), out_specs: Any = (),
                               tiling: Tiling | None = None, grid: tuple = ()) -> tuple:
    in_specs, out_specs = _normalize_specs(in_specs), _normalize_specs(out_specs)
    n_in = len(in_specs)

    def make(spec, ref, kind):
        count = 2
        if spec.pipeline_mode is not None and spec.pipeline_mode.buffer_count is not None:
            count = spec.pipeline_mode.buffer_count
        return BufferedRef.create(spec, np.dtype(ref.dtype), kind, count, tiling=tiling)

    ins = [make(s, r, BufferType.INPUT) for s, r in zip(in_specs, refs[:n_in])]
    outs = [make(s, r, BufferType.OUTPUT) for s, r in zip(out_specs, refs[n_in:])]
    return (*ins, *outs)


def emit_pipeline_with_allocations(body: Callable, *, grid: tuple, in_specs: Any = (),
                                   out_specs: Any = ()) -> tuple[Callable, Callable]:
    """``(pipeline, make_allocations)``: the pipeline of ``emit_pipeline`` and a function
    giving the ``BufferedRef`` buffers it can reuse across calls (``allocations=``)."""
    make_allocations = functools.partial(_make_pipeline_allocations, in_specs=in_specs,
                                         out_specs=out_specs, grid=grid)
    return emit_pipeline(body, grid=grid, in_specs=in_specs,
                         out_specs=out_specs), make_allocations
