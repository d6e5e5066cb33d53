"""``jax.experimental.pallas.tpu`` (``pltpu``): the TPU-specific parts of Pallas.

What describes a kernel (memory spaces, compiler parameters, ``PrefetchScalarGridSpec``,
``InterpretParams``) exists so that code written for TPUs runs its CPU parts as it does under
JAX: a ``pallas_call`` without interpret mode fails with JAX's CPU error, and
``interpret=pltpu.InterpretParams()`` (or ``True``) runs jaxkit's interpreter. There, local and
remote DMAs (``dma.py``), semaphores (``semaphores.py``) and core meshes (``core_map.py``) run
as JAX's HLO interpreter runs them: devices in lockstep, a copy done when it starts. JAX's TPU
interpreter also detects races; jaxkit's has none to detect.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit._deprecations import deprecation_getattr
from jaxkit.experimental.pallas.core import CompilerParams as _CompilerParamsBase
from jaxkit.experimental.pallas.core import GridSpec, MemoryRef, MemorySpaceMethods
from jaxkit.experimental.pallas.core import MemorySpace as _PlMemorySpace
from jaxkit.experimental.pallas.dma import (AsyncCopyDescriptor, async_copy, async_remote_copy,
                                            make_async_copy, make_async_remote_copy, sync_copy)
from jaxkit.experimental.pallas.core_map import (core_barrier, create_tensorcore_mesh,
                                                 run_on_first_core)
from jaxkit.experimental.pallas.tpu_info import (ChipVersion, CoreType, SideEffectType, TpuInfo,
                                                 get_tpu_info, get_tpu_info_for_chip,
                                                 is_tpu_device)
from jaxkit.experimental.pallas.tpu_interpret_state import (InterpretParams,
                                                            force_tpu_interpret_mode,
                                                            reset_tpu_interpret_mode_state,
                                                            set_tpu_interpret_mode)
from jaxkit.experimental.pallas.semaphores import new_semaphore
from jaxkit.experimental.pallas.semaphores import semaphore as _semaphore
from jaxkit.experimental.pallas.tpu_random import (prng_random_bits, prng_seed, sample_block,
                                                   stateful_bernoulli, stateful_bits,
                                                   stateful_normal, stateful_uniform,
                                                   stochastic_round, to_pallas_key)
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
           "make_async_remote_copy", "sync_copy", "emit_pipeline", "SEMAPHORE", "CORE_PARALLEL",
           "SUBCORE_PARALLEL", "async_remote_copy", "dma_semaphore", "get_barrier_semaphore",
           "ChipVersion", "CoreType",
           "SideEffectType", "TpuInfo", "core_barrier", "create_tensorcore_mesh",
           "force_tpu_interpret_mode", "get_tpu_info", "get_tpu_info_for_chip", "is_tpu_device",
           "reset_tpu_interpret_mode_state", "run_on_first_core", "set_tpu_interpret_mode",
           "prng_random_bits",
           "prng_seed", "sample_block", "stateful_bernoulli", "stateful_bits",
           "stateful_normal", "stateful_uniform", "stochastic_round", "to_pallas_key",
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

    def __repr__(self) -> str:  # as JAX prints the TPU's memory spaces
        return self.name


VMEM = MemorySpace.VMEM
VMEM_SHARED = MemorySpace.VMEM_SHARED
SMEM = MemorySpace.SMEM
CMEM = MemorySpace.CMEM
HBM = MemorySpace.HBM
SEMAPHORE = MemorySpace.SEMAPHORE
ANY = _PlMemorySpace.ANY


class GridDimensionSemantics(enum.Enum):
    PARALLEL = "parallel"
    CORE_PARALLEL = "core_parallel"
    SUBCORE_PARALLEL = "subcore_parallel"
    ARBITRARY = "arbitrary"


PARALLEL = GridDimensionSemantics.PARALLEL
ARBITRARY = GridDimensionSemantics.ARBITRARY
CORE_PARALLEL = GridDimensionSemantics.CORE_PARALLEL
SUBCORE_PARALLEL = GridDimensionSemantics.SUBCORE_PARALLEL


class SemaphoreType(enum.Enum):
    """Semaphore kinds; ``SemaphoreType.DMA((n,))`` is a scratch buffer of semaphores (an
    ``int32`` array in jaxkit's interpret mode, where copies complete at once)."""

    REGULAR = "regular"
    DMA = "dma"
    BARRIER = "barrier"

    def __call__(self, shape: tuple[int, ...]) -> MemoryRef:
        return MemoryRef(core.ShapedArray(tuple(shape), np.dtype(np.int32)),
                         memory_space=MemorySpace.SEMAPHORE)

    def memory_ref(self) -> MemoryRef:
        """The type of one semaphore of this kind (``SemaphoreType.DMA`` as a scratch type)."""
        return self(())


class dma_semaphore(_semaphore):  # noqa: N801  (JAX's name)
    """A DMA semaphore's element type."""


def get_barrier_semaphore() -> Any:
    """The kernel's barrier semaphore. Interpret mode gives each call a fresh semaphore at 0
    (signals and waits never block there, and a barrier is waited back down to 0)."""
    return new_semaphore((), MemorySpace.SEMAPHORE)


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


# As JAX 0.10.2: the names that moved to ``pl`` still work here, with a warning.
_deprecations = {
    name: (f"pltpu.{name} is deprecated, use pl.{name} instead.",
           f"jaxkit.experimental.pallas:{name}")
    for name in ("HOST", "semaphore", "DeviceIdType", "semaphore_read", "semaphore_signal",
                 "semaphore_wait")}
__getattr__ = deprecation_getattr(__name__, _deprecations)
