"""jaxkit: the JAX programming model written from scratch on jaxlib/XLA.

``import jaxkit as jax`` and ``import jaxkit.numpy as jnp`` run JAX code unchanged: composable
transformations (jit, grad, vmap, ...) over a tracer and jaxpr IR of our own, executed by XLA
through jaxlib. Nothing here imports the ``jax`` package.

The layers, each importing only from those before it (checked by import-linter in CI)::

    core, dtypes, tree_util, errors, _config   traces, tracers, jaxprs, avals, pytrees
    runtime/        jaxlib's PjRt clients, devices, Array, compile, execute
    interpreters/   ad, batching, partial_eval, mlir (jaxpr -> StableHLO), eager dispatch
    lax/            every primitive, one block each with all its rules
    transforms/     jit + stages, custom_jvp/custom_vjp, checkpoint, callbacks, vmap, pmap
    numpy/ random/ nn/   the libraries, built from lax and transforms
    api             grad, vjp, jacobians, make_jaxpr, devices
    jaxkit.magics   the optional IPython layer (the top-level ``magics/`` folder)

Only ``runtime/`` and ``interpreters/mlir.py`` import jaxlib.
"""
import os as _os

# jaxlib's C++ logs PjRt start-up lines at INFO; JAX users do not see them either. Must be set
# before jaxlib's shared library loads, which the first jaxkit import below does.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# ruff: noqa: E402

from jaxkit import _checkout

_checkout.install(_os.path.dirname(__file__))
from jaxkit._config import config
from jaxkit._deprecations import deprecation_getattr as _deprecation_getattr
from jaxkit._deprecations import removed as _removed
from jaxkit.runtime import gpu  # noqa: F401  (registers the CUDA plugin backend, if installed)
from jaxkit import lax
from jaxkit.api import (grad, hessian, jacfwd, jacobian, jacrev, jvp, linearize,
                            value_and_grad, vjp)
from jaxkit.runtime.array import PublicArray as Array
from jaxkit.transforms.checkpoint import checkpoint, checkpoint_policies, remat
from jaxkit.transforms.custom_derivatives import closure_convert, custom_jvp
from jaxkit.transforms.custom_vjp import custom_vjp
from jaxkit.transforms.jit import jit
from jaxkit.transforms.pmap import pmap
from jaxkit.transforms.vmap import vmap
from jaxkit.api import (ShapeDtypeStruct, block_until_ready, default_backend, device_count,
                        device_get, device_put, devices, eval_shape, local_device_count,
                        local_devices, make_jaxpr, process_count, process_index)
from jaxkit.core import (ConcretizationTypeError, TracerArrayConversionError,
                         TracerBoolConversionError, TracerIntegerConversionError,
                         UnexpectedTracerError)
from jaxkit.interpreters.ad import stop_gradient
from jaxkit import distributed, errors, tree_util
from jaxkit import numpy  # installs array methods and operators
from jaxkit import tracer_members  # noqa: F401  (the concrete-only Array members, on tracers)
from jaxkit import nn, random
from jaxkit.transforms.callback import effects_barrier, pure_callback
from jaxkit import debug
from jaxkit.experimental import layout as _layout  # noqa: F401  (installs .format)
from jaxkit import tree
from jaxkit import image, ops, scipy  # jax.scipy works after a bare `import jax`
from jaxkit import sharding
from jaxkit.sharding import NamedSharding, P, make_mesh, reshard, set_mesh
from jaxkit.runtime.sharded_array import Shard
from jaxkit.transforms.shard_map import shard_map, smap
from jaxkit import custom_batching, custom_derivatives, monitoring, profiler, stages, typing
from jaxkit.runtime.pjrt import Device
from jaxkit.flags import (allow_f16_reductions, check_tracer_leaks, checking_leaks, debug_infs,
                          debug_key_reuse,
                          debug_nans, default_device, default_matmul_precision,
                          default_prng_impl, disable_jit, enable_checks, enable_custom_prng,
                          enable_x64, explain_cache_misses, legacy_prng_key, log_compiles,
                          no_tracing, numpy_dtype_promotion, numpy_rank_promotion,
                          softmax_custom_jvp, no_execution, thread_guard,
                          array_garbage_collection_guard, jax2tf_associative_scan_reductions,
                          threefry_partitionable, transfer_guard,
                          transfer_guard_device_to_device, transfer_guard_device_to_host,
                          transfer_guard_host_to_device)
from jaxkit.flags import auto_pcast, remove_size_one_mesh_axis_from_type
from jaxkit.api_extra import (clear_caches, copy_to_host_async, custom_gradient, fwd_and_bwd,
                              ensure_compile_time_eval, float0, host_count, host_id, host_ids,
                              linear_transpose, live_arrays, make_array_from_callback,
                              make_array_from_process_local_data, make_user_context,
                              make_array_from_single_device_arrays, named_call, named_scope,
                              print_environment_info, process_indices, typeof)
from jaxkit import dlpack, export, ffi
from jaxkit import api_util, ref
from jaxkit.ref import Ref, empty_ref, free_ref, freeze, new_ref
from jaxkit import _ref_views  # noqa: F401  (installs ref.at[...] views on traced refs)
from jaxkit.install import install_as_jax
from jaxkit.api_namespaces import ad, memory
from jaxkit.indexing import ds

__version__ = "0.1.0"

__all__ = [
    "Array", "ConcretizationTypeError", "ShapeDtypeStruct", "TracerArrayConversionError",
    "TracerBoolConversionError", "TracerIntegerConversionError", "UnexpectedTracerError",
    "block_until_ready", "checkpoint", "checkpoint_policies", "closure_convert", "config",
    "custom_jvp", "custom_vjp", "debug", "default_backend", "device_count", "device_get",
    "device_put", "devices", "distributed", "effects_barrier", "errors", "eval_shape", "grad",
    "hessian", "install_as_jax", "jacfwd", "jacobian", "jacrev", "jit", "jvp", "lax", "linearize",
    "local_device_count", "local_devices", "make_jaxpr", "make_mesh", "shard_map", "sharding",
    "smap", "NamedSharding", "P", "Shard", "reshard", "set_mesh",
    "nn",
    "numpy", "image", "ops", "scipy", "pmap", "process_count",
    "process_index", "pure_callback", "random", "remat", "stop_gradient", "tree_util",
    "value_and_grad", "vjp", "vmap",
    "Device", "check_tracer_leaks", "checking_leaks", "clear_caches", "copy_to_host_async",
    "custom_gradient", "debug_infs", "debug_key_reuse", "debug_nans", "default_device",
    "default_matmul_precision", "default_prng_impl", "disable_jit", "enable_checks",
    "enable_custom_prng", "enable_x64", "ensure_compile_time_eval", "explain_cache_misses",
    "float0", "host_count", "host_id", "host_ids", "legacy_prng_key", "linear_transpose",
    "live_arrays", "log_compiles", "make_array_from_callback",
    "make_array_from_process_local_data", "make_array_from_single_device_arrays",
    "named_call", "named_scope", "numpy_dtype_promotion", "numpy_rank_promotion",
    "print_environment_info", "process_indices", "softmax_custom_jvp",
    "threefry_partitionable", "transfer_guard", "transfer_guard_device_to_device",
    "transfer_guard_device_to_host", "transfer_guard_host_to_device", "tree", "typeof",
    "custom_batching", "custom_derivatives", "dtypes", "monitoring", "profiler", "stages",
    "typing", "dlpack", "export", "ffi",
    "allow_f16_reductions", "api_util", "auto_pcast", "fwd_and_bwd",
    "remove_size_one_mesh_axis_from_type", "make_user_context", "no_tracing", "ref",
    "Ref", "empty_ref",
    "free_ref", "freeze", "new_ref",
    "ad", "array_garbage_collection_guard", "ds", "jax2tf_associative_scan_reductions",
    "memory", "no_execution", "thread_guard",
]


# Names JAX 0.10.2 removed, which its module still answers with how to replace them.
_deprecations = {name: _removed(
    f"jax.{name} is deprecated; use jax.device_put instead. See "
    "https://docs.jax.dev/en/latest/migrate_pmap.html#drop-in-replacements for a drop-in "
    "replacement.") for name in ("device_put_replicated", "device_put_sharded")}
__getattr__ = _deprecation_getattr(__name__, _deprecations)


def load_ipython_extension(ipython) -> None:
    """``%load_ext jaxkit`` registers the magics (IPython is imported only then)."""
    import jaxkit.magics  # noqa: PLC0415  (lazy: keeps `import jaxkit` free of IPython)

    jaxkit.magics.load_ipython_extension(ipython)
