"""jaxlib's registries of foreign-function (XLA FFI) targets and types: the jaxlib side of
``jaxkit.ffi``.

A target registered here by name is what a ``stablehlo.custom_call @name`` in a compiled
module runs. Registration goes through ``jaxlib.xla_client``, which forwards it to each
platform's handler (the CPU client's at once; a plugin's when the plugin loads).
"""
from __future__ import annotations

import ctypes
import os
from typing import Any

import jaxlib
from jaxlib import xla_client as xc


def register_target(name: str, fn: Any, platform: str = "cpu", api_version: int = 1,
                    **kwargs: Any) -> None:
    """Register ``fn`` (a PyCapsule, or a dict of FFI stage name -> PyCapsule) as the custom
    call target ``name``; ``api_version`` 1 is the typed FFI, 0 the legacy custom call."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_ffi_target: the target name must be a non-empty str; got "
                        f"{name!r}")
    xc.register_custom_call_target(name, fn, platform, api_version, **kwargs)


def register_type(name: str, type_registration: Any, platform: str = "cpu") -> None:
    """Register a custom FFI type (``{"type_id": capsule, "type_info": capsule}``)."""
    xc.register_custom_type(name, type_registration, platform=platform)


def register_batch_partitionable(name: str) -> None:
    """Tell XLA's partitioner that target ``name`` may be split along its leading axis."""
    xc.register_custom_call_as_batch_partitionable(name)


def pycapsule(funcptr: Any) -> Any:
    """A PyCapsule holding the address of the ctypes function ``funcptr`` (what XLA's target
    registry takes)."""
    address = ctypes.cast(funcptr, ctypes.c_void_p).value
    if address is None:
        raise ValueError(f"pycapsule: {funcptr!r} is a null function pointer")
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return new_capsule(address, None, None)


def include_dir() -> str:
    """The folder of the C++ headers jaxlib ships (``xla/ffi/api/ffi.h``, ...)."""
    base = jaxlib.__file__
    folder = os.path.dirname(os.path.abspath(base)) if base else list(jaxlib.__path__)[0]
    return os.path.join(folder, "include")
