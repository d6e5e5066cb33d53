"""``jax.experimental.pallas.tpu`` (``pltpu``): the TPU-specific parts of Pallas.

What describes a kernel (memory spaces, compiler parameters, ``PrefetchScalarGridSpec``,
``InterpretParams``) exists so that code written for TPUs runs its CPU parts as it does under
JAX: a ``pallas_call`` without interpret mode fails with JAX's CPU error, and
``interpret=pltpu.InterpretParams()`` runs jaxkit's interpreter. Local copies (``sync_copy``,
``make_async_copy``/``async_copy``) complete at once there; JAX's TPU interpreter also
simulates remote DMAs, semaphore signalling and races: the operations needing those raise
``NotImplementedError`` here, naming themselves.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

from jaxkit import core, tree_util
from jaxkit.experimental.pallas.core import CompilerParams as _CompilerParamsBase
from jaxkit.experimental.pallas.core import GridSpec, MemoryRef, MemorySpaceMethods
from jaxkit.experimental.pallas.core import MemorySpace as _PlMemorySpace
from jaxkit.experimental.pallas.einshape import einshape
from jaxkit.experimental.pallas.pipeline import (BufferedRef, BufferedRefBase, BufferType,
                                                 Tiling, emit_pipeline,
                                                 emit_pipeline_with_allocations)
from jaxkit.experimental.pallas.tpu_ops import (LoweringException, bitcast, load,
                                                matmul_acc_lhs, matmul_pop, matmul_push_rhs,
                                                pack_elementwise, roll, store, touch,
                                                trace_value, unpack_elementwise,
                                                with_memory_space_constraint)

__all__ = ["ANY", "AsyncCopyDescriptor", "CMEM", "CompilerParams", "GridDimensionSemantics",
           "HBM",
           "InterpretParams", "MemorySpace", "PrefetchScalarGridSpec", "SMEM",
           "SemaphoreType", "VMEM", "VMEM_SHARED", "async_copy", "make_async_copy",
           "make_async_remote_copy", "sync_copy", "emit_pipeline",
           "BufferType", "BufferedRef", "BufferedRefBase", "Tiling",
           "emit_pipeline_with_allocations", "LoweringException", "bitcast", "einshape",
           "load", "matmul_acc_lhs", "matmul_pop", "matmul_push_rhs", "pack_elementwise",
           "roll", "store", "touch", "trace_value", "unpack_elementwise",
           "with_memory_space_constraint"]


class MemorySpace(MemorySpaceMethods, enum.Enum):
    """The TPU's memories: vector memory, scalar memory, HBM, semaphores."""

    VMEM = "vmem"
    VMEM_SHARED = "vmem_shared"
    SMEM = "smem"
    CMEM = "cmem"
    SEMAPHORE = "semaphore_mem"
    HBM = "hbm"


VMEM = MemorySpace.VMEM
VMEM_SHARED = MemorySpace.VMEM_SHARED
SMEM = MemorySpace.SMEM
CMEM = MemorySpace.CMEM
HBM = MemorySpace.HBM
ANY = _PlMemorySpace.ANY


class GridDimensionSemantics(enum.Enum):
    PARALLEL = "parallel"
    CORE_PARALLEL = "core_parallel"
    SUBCORE_PARALLEL = "subcore_parallel"
    ARBITRARY = "arbitrary"


PARALLEL = GridDimensionSemantics.PARALLEL
ARBITRARY = GridDimensionSemantics.ARBITRARY


class SemaphoreType(enum.Enum):
    """Semaphore kinds; ``SemaphoreType.DMA((n,))`` is a scratch buffer of semaphores (an
    ``int32`` array in jaxkit's interpret mode, where copies complete at once)."""

    REGULAR = "regular"
    DMA = "dma"
    BARRIER = "barrier"

    def __call__(self, shape: tuple[int, ...]) -> MemoryRef:
        return MemoryRef(core.ShapedArray(tuple(shape), np.dtype(np.int32)),
                         memory_space=MemorySpace.SEMAPHORE)


@dataclasses.dataclass(frozen=True)
class CompilerParams(_CompilerParamsBase):
    """Mosaic TPU compiler parameters (interpret mode ignores them)."""

    BACKEND = "mosaic_tpu"
    dimension_semantics: tuple | None = None
    allow_input_fusion: tuple | None = None
    vmem_limit_bytes: int | None = None
    collective_id: int | None = None
    has_side_effects: Any = False
    flags: Any = None
    internal_scratch_in_bytes: int | None = None
    serialization_format: int = 1
    kernel_type: Any = None
    disable_bounds_checks: bool = False
    skip_device_barrier: bool = False
    allow_collective_id_without_custom_barrier: bool = False
    shape_invariant_numerics: bool = False

    def __post_init__(self):
        for name in ("dimension_semantics", "allow_input_fusion"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))


@dataclasses.dataclass(frozen=True)
class InterpretParams:
    """Options of JAX's TPU interpreter; jaxkit runs such a kernel with its own interpreter
    (the same results for kernels without DMAs and semaphores)."""

    dma_execution_mode: str = "on_wait"
    detect_races: bool = False
    out_of_bounds_reads: str = "raise"
    skip_floating_point_ops: bool = False
    uninitialized_memory: str = "nan"
    num_cores_or_threads_per_device: int = 1
    vector_clock_size: int | None = None
    random_seed: int | None = None
    grid_point_recorder: Any = None
    allow_hbm_allocation_in_run_scoped: bool = False


class PrefetchScalarGridSpec(GridSpec):
    """A ``GridSpec`` whose first ``num_scalar_prefetch`` operands are scalars passed to the
    index maps and the kernel."""

    def __init__(self, num_scalar_prefetch: int, grid: Any = (), in_specs: Any = None,
                 out_specs: Any = None, scratch_shapes: Any = ()):
        specs = {} if in_specs is None else {"in_specs": in_specs}
        if out_specs is not None:
            specs["out_specs"] = out_specs
        super().__init__(grid, scratch_shapes=scratch_shapes, **specs)
        self.num_scalar_prefetch = num_scalar_prefetch
        self.index_memory_space = SMEM


def _copy(src: Any, dst: Any, add: bool) -> None:
    if add:
        dst[...] = dst[...] + src[...]
    else:
        dst[...] = src[...]


def sync_copy(src_ref: Any, dst_ref: Any, *, add: bool = False) -> None:
    """Copy ``src_ref`` into ``dst_ref`` (refs or ``ref.at[...]`` views, or pytrees of
    them); with ``add``, accumulate into it."""
    for s, d in zip(tree_util.tree_leaves(src_ref), tree_util.tree_leaves(dst_ref)):
        _copy(s, d, add)


class AsyncCopyDescriptor:
    """A local DMA ``src -> dst``. Interpret mode performs it at ``start`` (JAX's TPU
    interpreter may defer it to ``wait``; kernels that wait before reading see the same)."""

    def __init__(self, src_ref: Any, dst_ref: Any, sem: Any):
        self.src_ref, self.dst_ref, self.sem = src_ref, dst_ref, sem

    def start(self, priority: int = 0, add: bool = False) -> None:
        _copy(self.src_ref, self.dst_ref, add)

    def wait(self) -> None:
        """The copy is complete already."""


def make_async_copy(src_ref: Any, dst_ref: Any, sem: Any) -> AsyncCopyDescriptor:
    """A descriptor of the copy ``src_ref -> dst_ref`` signalling ``sem``; ``.start()``
    and ``.wait()`` it."""
    return AsyncCopyDescriptor(src_ref, dst_ref, sem)


def async_copy(src_ref: Any, dst_ref: Any, sem: Any, *, priority: int = 0,
               add: bool = False) -> AsyncCopyDescriptor:
    """Start the copy ``src_ref -> dst_ref`` and return its descriptor."""
    desc = make_async_copy(src_ref, dst_ref, sem)
    desc.start(priority=priority, add=add)
    return desc


def _tpu_only(name: str):
    def op(*args, **kwargs):
        raise NotImplementedError(f"pltpu.{name} is not implemented in jaxkit: it needs JAX's "
                                  "TPU interpreter (DMAs, semaphores) or a TPU")
    op.__name__ = name
    op.__doc__ = f"``pltpu.{name}`` (TPU only; raises NotImplementedError in jaxkit)."
    return op


make_async_remote_copy = _tpu_only("make_async_remote_copy")
async_remote_copy = _tpu_only("async_remote_copy")
get_barrier_semaphore = _tpu_only("get_barrier_semaphore")
semaphore_signal = _tpu_only("semaphore_signal")
semaphore_wait = _tpu_only("semaphore_wait")
semaphore_read = _tpu_only("semaphore_read")
