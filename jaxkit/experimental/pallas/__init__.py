"""``jax.experimental.pallas``: kernels written on refs to blocks, run over a grid.

jaxkit runs them in *interpret mode* (``pallas_call(..., interpret=True)``), as JAX does on a
CPU: the kernel becomes ordinary XLA code looping over the grid. Without ``interpret`` a
``pallas_call`` fails on the CPU with JAX's ``ValueError``; the TPU (Mosaic) and GPU (Triton,
Mosaic GPU) compilers are not part of jaxkit.
"""
from jaxkit._deprecations import deprecation_getattr as _deprecation_getattr

from jaxkit.experimental.pallas.core import (ANY, HOST, BlockSpec, Blocked, BoundedSlice,
                                             Buffered, CompilerParams, CostEstimate, Element,
                                             GridSpec, MemoryRef, MemorySpace, Squeezed,
                                             no_block_spec, squeezed)
from jaxkit.experimental.pallas.core_map import core_map, kernel
from jaxkit.experimental.pallas.cost_estimate import estimate_cost
from jaxkit.experimental.pallas.export_mlir import lower_as_mlir, pallas_export_experimental
from jaxkit.experimental.pallas.helpers import (Indirect, RevisitMode, broadcast_to,
                                                debug_check, empty, empty_like, empty_ref_like,
                                                enable_debug_checks, enable_poison_buffers,
                                                run_state, select_ref)
from jaxkit.experimental.pallas.pallas_call import pallas_call, pallas_call_p
from jaxkit.experimental.pallas.primitives import (align_to, cdiv, debug_print, loop,
                                                   multiple_of, next_power_of_2, num_programs,
                                                   program_id, reciprocal, strides_from_shape,
                                                   when)
from jaxkit.experimental.pallas.primitives import dot as _dot
from jaxkit.experimental.pallas.semaphores import (DeviceIdType, delay, get_global, run_scoped,
                                                   semaphore, semaphore_read, semaphore_signal,
                                                   semaphore_wait, with_scoped)
from jaxkit.indexing import Slice, ds, dslice

__all__ = ["ANY", "HOST", "BlockSpec", "Blocked", "BoundedSlice", "Buffered",
           "CompilerParams", "CostEstimate", "Element", "GridSpec", "MemoryRef", "MemorySpace",
           "Slice", "Squeezed", "align_to", "cdiv", "debug_print", "ds", "dslice",
           "estimate_cost", "lower_as_mlir", "loop", "pallas_export_experimental",
           "multiple_of", "next_power_of_2", "no_block_spec", "num_programs", "pallas_call",
           "pallas_call_p", "program_id", "reciprocal", "squeezed", "strides_from_shape",
           "when", "DeviceIdType", "delay", "get_global", "run_scoped", "semaphore",
           "semaphore_read", "semaphore_signal", "semaphore_wait", "with_scoped", "core_map",
           "kernel",
           "when", "Indirect", "RevisitMode", "broadcast_to", "debug_check", "empty",
           "empty_like", "empty_ref_like", "enable_debug_checks", "enable_poison_buffers",
           "run_state", "select_ref"]


def _debug_checks_enabled() -> bool:
    """Whether kernels' ``debug_check``s are on (``pl.enable_debug_checks``)."""
    return enable_debug_checks.value


_debug_checks_enabled.__name__ = "debug_checks_enabled"

# As JAX 0.10.2: names that moved still work here, with a warning.
_deprecations = {
    "dot": ("jax.experimental.pallas.dot was moved to jax.experimental.pallas.triton. "
            "Accessing it via jax.experimental.pallas is deprecated. You can use "
            "jax.numpy.dot, jax.numpy.einsum or the @ operator instead in a TPU or MGPU "
            "kernel.", _dot),
    "debug_checks_enabled": ("jax.experimental.pallas.debug_checks_enabled is deprecated, use "
                             "pl.enable_debug_checks.value instead.", _debug_checks_enabled),
}
__getattr__ = _deprecation_getattr("jax.experimental.pallas", _deprecations)
