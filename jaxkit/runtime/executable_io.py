"""Compiled programs as bytes and back (``jax.experimental.serialize_executable``): jaxlib
serializes a loaded executable (XLA's ``Executable`` with its machine code) and its client
loads one for given devices, no compile needed.

The bytes come from a compile made for the purpose, not from the executable a ``Compiled``
runs: that one may have been loaded from the persistent compilation cache, and jaxlib's CPU
client serializes a loaded executable without its machine code (loading those bytes fails
with "Function ... not found"). A program that calls back into Python (``pure_callback``,
``io_callback``, ``debug.print``) cannot be saved: the callables belong to this process.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from jaxlib import _jax

from jaxkit.runtime import compile_config, pjrt

__all__ = ["deserialize_executable", "serialize_module"]


def serialize_module(module: Any, device: Any) -> bytes:
    """The executable of the StableHLO ``module`` for ``device``, compiled as
    ``pjrt.compile_module`` compiles it (outside the caches) and serialized."""
    if not isinstance(module, (str, bytes)) and pjrt.module_host_callbacks.get(module):
        raise ValueError("Compilation does not support serialization: the program calls back "
                         "into Python (pure_callback, io_callback, debug.print ...), and those "
                         "functions cannot be saved with it")
    backend = pjrt.backend_of(device)
    xla_exe = backend.client.compile_and_load(module, backend.device_lists[device],
                                              _options(device))
    return xla_exe.serialize()


def _options(device: Any) -> Any:
    options = _jax.CompileOptions()
    options.device_assignment = _jax.DeviceAssignment.create(
        np.array([[device.id]], dtype=np.int32))
    compile_config.apply_config_to_compile_options(options)
    return options


def deserialize_executable(payload: bytes, out_avals: Any, device: Any) -> pjrt.Executable:
    """The executable ``payload`` (from ``serialize_module``) loaded on ``device``; its
    results have ``out_avals``."""
    backend = pjrt.backend_of(device)
    xla_exe = backend.client.deserialize_executable(payload, backend.device_lists[device],
                                                    _options(device))
    return pjrt.Executable(xla_exe, out_avals, device)
