"""``jax.extend.backend``: the PjRt clients jaxkit runs on, as JAX names them, and the knobs
libraries use around compilation (compile options, the in-memory executable cache, caches of
their own that ``jax.clear_caches()`` should clear)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jaxkit.interpreters.mlir import jaxlib_module
from jaxkit.runtime import compile_cache, pjrt
from jaxkit.runtime.pjrt import get_backend, register_backend_factory
from jaxkit.transforms.cache_registry import register_backend_cache

__all__ = ["backend_xla_version", "backends", "clear_backends",
           "clear_in_memory_compilation_cache", "get_backend", "get_compile_options",
           "get_default_device", "ifrt_proxy", "register_backend_cache",
           "register_backend_factory"]

# jaxlib's IFRT proxy client (a backend served by another process), as JAX re-exports it.
ifrt_proxy = jaxlib_module("jaxlib._ifrt_proxy")
_xc = jaxlib_module("jaxlib.xla_client")


def backends() -> dict:
    """The initialised backends by platform name (the default one at least)."""
    get_backend()
    return dict(pjrt._backends)


def backend_factory_names() -> list[str]:
    """The platform names plugins registered factories for (besides ``"cpu"``)."""
    return list(pjrt._backend_factories)


def get_default_device():
    """Where computations without committed arguments run now: the ``default_device`` block's
    device, else the ``jax_default_device`` option's, else the default backend's first."""
    return pjrt.current_default_device()


def clear_backends() -> None:
    raise NotImplementedError("jax.extend.backend.clear_backends: jaxkit keeps its PjRt "
                              "clients for the life of the process")


def backend_xla_version(platform: str | None = None) -> int | None:
    """The XLA version a PjRt plugin declares in its attributes; None for a backend that
    declares none (the CPU client built into jaxlib)."""
    return getattr(get_backend(platform).client, "xla_version", None)


def clear_in_memory_compilation_cache() -> None:
    """Forget the executables compiled in this process (the persistent cache stays)."""
    compile_cache.clear_memory_cache()


# Options JAX sets on the build options rather than passing through to XLA's environment.
_BUILD_OPTION_OVERRIDES = ("exec_time_optimization_effort", "memory_fitting_effort",
                           "optimization_level", "memory_fitting_level")


def get_compile_options(num_replicas: int, num_partitions: int, device_assignment=None,
                        env_options_overrides: Mapping[str, Any] | None = None,
                        fdo_profile: bytes | None = None, detailed_logging: bool = True,
                        backend=None):
    """``xla_client.CompileOptions`` for a program of ``num_replicas`` x ``num_partitions``
    (SPMD partitioned by Shardy, as jaxkit compiles): ``device_assignment`` is an array of
    devices (or ids) of shape ``(num_replicas, num_partitions)`` (1-D when there is one
    partition), ``env_options_overrides`` XLA options by name."""
    del backend  # JAX reads the AutoFDO profile version from it; jaxkit uses no profiles
    options = _xc.CompileOptions()
    options.num_replicas = num_replicas
    options.num_partitions = num_partitions
    build = options.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    if fdo_profile is not None:
        build.fdo_profile = fdo_profile
    if device_assignment is not None:
        assignment = np.array(device_assignment)
        if assignment.ndim == 1 and num_partitions == 1:
            assignment = assignment[:, None]
        if num_replicas != assignment.shape[0]:
            raise ValueError(f"device_assignment does not match num_replicas: {assignment} vs "
                             f"{num_replicas}.")
        if num_partitions != assignment.shape[1]:
            raise ValueError(f"device_assignment does not match num_partitions: {assignment} "
                             f"vs {num_partitions}.")
        if assignment.dtype == object:
            assignment = np.vectorize(lambda d: d.id, otypes=[int])(assignment)
        options.device_assignment = _xc.DeviceAssignment.create(assignment)
    if env_options_overrides is not None:
        overrides = dict(env_options_overrides)
        for name in _BUILD_OPTION_OVERRIDES:
            if name in overrides:
                setattr(build, name, overrides.pop(name))
        options.env_option_overrides = list(overrides.items())
    build.debug_options.xla_detailed_logging = detailed_logging
    return options
