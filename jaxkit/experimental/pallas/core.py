"""Pallas's descriptions of a kernel launch: memory spaces, block shapes (``BlockSpec``), the
grid (``GridSpec``) and their canonical forms carried by ``pallas_call_p`` (``GridMapping``,
``BlockMapping``, printed as JAX prints them), plus cost estimates and compiler parameters.

A ``BlockSpec`` says which block of an operand each kernel instance sees: the block's shape
and an ``index_map`` from the grid indices to the block's position (in blocks for ``Blocked``
dimensions, in elements for ``Element`` ones; a ``Squeezed``/``None`` dimension is one element
removed from the kernel's view). ``pallas_call`` traces each index map to a jaxpr once.
"""
from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core

__all__ = ["ANY", "BlockSpec", "Blocked", "BoundedSlice", "Buffered", "CompilerParams",
           "CostEstimate", "Element", "GridSpec", "HOST", "MemoryRef", "MemorySpace",
           "Squeezed", "no_block_spec", "squeezed"]


class MemorySpaceMethods:
    """What every memory-space enum does (Pallas's and the TPU's): print as its value, and
    allocate a buffer there when called (``pltpu.VMEM((8, 128), jnp.float32)``)."""

    value: str

    def __str__(self) -> str:
        return self.value

    def __call__(self, shape: tuple[int, ...], dtype: Any) -> MemoryRef:
        return MemoryRef(core.ShapedArray(tuple(shape), np.dtype(dtype)), memory_space=self)

    def from_type(self, ty: Any) -> MemoryRef:
        return MemoryRef(ty, memory_space=self)


class MemorySpace(MemorySpaceMethods, enum.Enum):
    """Logical memory spaces a kernel operand may live in (mapped to a device's memories
    when lowered; interpret mode keeps every operand in ordinary arrays)."""

    ANY = "any"
    DEFAULT = "default"
    ERROR = "error"
    INDEX = "index"
    KEY = "key"
    HOST = "host"



ANY = MemorySpace.ANY
HOST = MemorySpace.HOST


@dataclasses.dataclass(frozen=True)
class MemoryRef:
    """The type of a buffer in a memory space (a scratch operand of a kernel)."""

    inner_aval: Any
    memory_space: Any = None

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)


@dataclasses.dataclass(frozen=True)
class Blocked:
    """A block dimension of ``block_size`` elements; the index map gives the block number."""

    block_size: int

    def __repr__(self) -> str:
        return f"Blocked(block_size={self.block_size})"


@dataclasses.dataclass(frozen=True)
class Element:
    """A block dimension of ``block_size`` elements; the index map gives the element offset
    where the block starts (``padding``: elements of padding added at each end)."""

    block_size: int
    padding: tuple[int, int] = (0, 0)

    def __repr__(self) -> str:
        return f"Element(block_size={self.block_size}, padding={self.padding})"


@dataclasses.dataclass(frozen=True)
class Squeezed:
    """A block dimension of one element, removed from the kernel's view of the block."""

    def __repr__(self) -> str:
        return "Squeezed()"


squeezed = Squeezed()


@dataclasses.dataclass(frozen=True)
class BoundedSlice:
    """A dimension whose slice the index map gives as a ``pl.ds`` (of at most
    ``block_size`` elements); only the Mosaic GPU/TPU lowerings support it."""

    block_size: int


@dataclasses.dataclass(frozen=True)
class Buffered:
    """Pipelining hint (how many buffers a block uses); interpret mode ignores it."""

    buffer_count: int | None = None
    use_lookahead: bool = False


class _NoBlockSpec:
    def __repr__(self) -> str:
        return "NoBlockSpec"


no_block_spec = _NoBlockSpec()


@dataclasses.dataclass
class BlockSpec:
    """How each kernel instance sees an operand: ``block_shape`` (ints, ``None`` or block
    dimension objects) and ``index_map(*grid_indices) -> block indices``; with neither, the
    kernel sees the whole operand."""

    block_shape: Sequence[Any] | None = None
    index_map: Callable[..., Any] | None = None
    memory_space: Any = dataclasses.field(kw_only=True, default=None)
    pipeline_mode: Buffered | None = None


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    """What a kernel costs, for XLA's scheduler (interpret mode does not use it)."""

    flops: int
    transcendentals: int
    bytes_accessed: int
    remote_bytes_transferred: int = 0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int):
                raise ValueError("All fields in CostEstimate must be ints. "
                                 f"{f.name} is not an int: {type(v)}({v})")


class CompilerParams:
    """Base class of the backend-specific compiler parameters (``pltpu.CompilerParams``,
    ``plgpu.CompilerParams``)."""

    BACKEND: str = ""


def _valid_grid_dim(g: Any) -> bool:
    return isinstance(g, int) and not isinstance(g, bool) and g >= 0


class GridSpec:
    """The grid of a ``pallas_call`` with the block specs of its inputs and outputs."""

    def __init__(self, grid: Any = (), in_specs: Any = no_block_spec,
                 out_specs: Any = no_block_spec, scratch_shapes: Sequence[Any] = ()):
        if isinstance(in_specs, list):
            in_specs = tuple(in_specs)
        elif in_specs is not no_block_spec and not isinstance(in_specs, Sequence):
            raise ValueError(f"`in_specs` must be a tuple or a list. Found: {in_specs}")
        if isinstance(out_specs, list):
            out_specs = tuple(out_specs)
        self.in_specs = in_specs
        self.out_specs = out_specs
        self.scratch_shapes = tuple(scratch_shapes)
        grid_names = None
        if isinstance(grid, int):
            grid = (grid,)
        elif grid and isinstance(grid[0], tuple):  # a named grid: ((name, size), ...)
            grid_names, grid = zip(*grid)
        if not all(_valid_grid_dim(g) for g in grid):
            raise ValueError(f"Grid must be a tuple of non-negative ints, got {grid}. "
                             "(Dynamic grid sizes are not supported in jaxkit.)")
        self.grid = tuple(grid)
        self.grid_names = grid_names

    def __repr__(self) -> str:
        return (f"GridSpec(grid={self.grid}, grid_names={self.grid_names}, in_specs="
                f"{self.in_specs}, out_specs={self.out_specs}, scratch_shapes="
                f"{self.scratch_shapes})")


# --------------------------------------------------------------------------------------------
# Canonical forms, parameters of pallas_call_p
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class BlockMapping:
    """One operand's block: its dimensions, the index map as a closed jaxpr (grid indices in,
    one index per dimension out), the operand's full type and its memory space."""

    block_shape: tuple[Any, ...]
    index_map: core.ClosedJaxpr
    array_aval: core.ShapedArray
    memory_space: Any = None

    def __repr__(self) -> str:
        return f"BlockMapping(block_shape={self.block_shape})"

    @property
    def kernel_shape(self) -> tuple[int, ...]:
        """The block's shape as the kernel sees it (squeezed dimensions left out)."""
        return tuple(d.block_size for d in self.block_shape if not isinstance(d, Squeezed))

    @property
    def full_block_shape(self) -> tuple[int, ...]:
        return tuple(1 if isinstance(d, Squeezed) else d.block_size for d in self.block_shape)


@dataclasses.dataclass(frozen=True, eq=False)
class GridMapping:
    """The grid and the block mappings of the inputs then outputs; ``vmapped_dims`` are the
    grid axes ``vmap`` added in front (the kernel's ``program_id`` does not count them);
    ``scratch_avals`` the ref types of the scratch buffers, ``index_avals`` those of the
    scalar-prefetch operands (whole arrays given to the index maps and the kernel first)."""

    grid: tuple[int, ...]
    block_mappings: tuple[BlockMapping, ...]
    num_inputs: int
    vmapped_dims: int = 0
    grid_names: tuple | None = None
    scratch_avals: tuple = ()  # kernel refs after the outputs, alive for the whole grid
    index_avals: tuple = ()  # refs to the scalar-prefetch operands, before the inputs

    def __repr__(self) -> str:
        return f"GridMapping(grid={self.grid}, block_mappings={self.block_mappings})"

    @property
    def num_programs(self) -> int:
        return math.prod(self.grid)

    @property
    def in_mappings(self) -> tuple[BlockMapping, ...]:
        return self.block_mappings[:self.num_inputs]

    @property
    def out_mappings(self) -> tuple[BlockMapping, ...]:
        return self.block_mappings[self.num_inputs:]
