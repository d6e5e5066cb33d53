"""JAX's top-level configuration flags: ``jax.enable_x64``, ``jax.debug_nans``, ... as State
objects (``.value``; calling one gives a context manager, also a decorator, setting it for a
block: a boolean option's defaults to True, the others need a value, as in JAX), and the
context managers ``disable_jit``, ``default_device``, ``transfer_guard`` and
``checking_leaks``. Options whose other values jaxkit does not implement raise
``NotImplementedError`` when set to them (see ``jaxkit._config``)."""
from __future__ import annotations

import contextlib
import functools
from typing import Any

from jaxkit._config import State, config, validate_default_device
from jaxkit.runtime import pjrt

__all__ = [
    "allow_f16_reductions", "array_garbage_collection_guard", "auto_pcast", "check_tracer_leaks",
    "checking_leaks", "debug_infs", "debug_key_reuse", "debug_nans", "default_device",
    "default_matmul_precision", "default_prng_impl", "disable_jit", "enable_checks",
    "enable_custom_prng", "enable_x64", "explain_cache_misses",
    "jax2tf_associative_scan_reductions", "legacy_prng_key", "log_compiles", "no_execution",
    "no_tracing", "numpy_dtype_promotion", "numpy_rank_promotion",
    "remove_size_one_mesh_axis_from_type", "softmax_custom_jvp", "thread_guard",
    "threefry_partitionable", "transfer_guard",
    "transfer_guard_device_to_device", "transfer_guard_device_to_host",
    "transfer_guard_host_to_device",
]

enable_x64 = State("jax_enable_x64")
debug_nans = State("jax_debug_nans")
debug_infs = State("jax_debug_infs")
explain_cache_misses = State("jax_explain_cache_misses")
threefry_partitionable = State("jax_threefry_partitionable")
log_compiles = State("jax_log_compiles")
check_tracer_leaks = State("jax_check_tracer_leaks")
no_tracing = State("jax_no_tracing")
allow_f16_reductions = State("jax_allow_f16_reductions")
checking_leaks = functools.partial(check_tracer_leaks, True)
enable_checks = State("jax_enable_checks")
default_matmul_precision = State("jax_default_matmul_precision")
numpy_rank_promotion = State("jax_numpy_rank_promotion")
numpy_dtype_promotion = State("jax_numpy_dtype_promotion")
default_prng_impl = State("jax_default_prng_impl")
softmax_custom_jvp = State("jax_softmax_custom_jvp")
enable_custom_prng = State("jax_enable_custom_prng")
legacy_prng_key = State("jax_legacy_prng_key")
debug_key_reuse = State("jax_debug_key_reuse")
transfer_guard_host_to_device = State("jax_transfer_guard_host_to_device")
transfer_guard_device_to_host = State("jax_transfer_guard_device_to_host")
transfer_guard_device_to_device = State("jax_transfer_guard_device_to_device")
no_execution = State("jax_no_execution")
thread_guard = State("jax_thread_guard")
jax2tf_associative_scan_reductions = State("jax2tf_associative_scan_reductions")
array_garbage_collection_guard = State("jax_array_garbage_collection_guard")
remove_size_one_mesh_axis_from_type = State("jax_remove_size_one_mesh_axis_from_type")
auto_pcast = State("jax_auto_pcast")


def disable_jit(disable: bool = True) -> contextlib.AbstractContextManager:
    """Run jitted functions (and lax control flow bodies under jit) as plain Python inside
    the block, for debugging."""
    return config.thread_override(jax_disable_jit=disable)


def transfer_guard(new_val: str) -> contextlib.AbstractContextManager:
    """Set all three transfer guards for a block (jaxkit implements only ``"allow"``)."""
    return config.thread_override(jax_transfer_guard=new_val)


def default_device(new_val: Any = None) -> contextlib.AbstractContextManager:
    """Run computations without committed arguments, and place new arrays, on ``new_val``
    (a device, or a platform name such as ``"cpu"``: its first device) inside the block, in
    this thread only; None means the default backend's first device, whatever the
    ``jax_default_device`` option says (as in JAX)."""
    return pjrt.default_device_block(validate_default_device("jax_default_device", new_val))
