"""jaxkit: the JAX programming model written from scratch on jaxlib/XLA.

``import jaxkit as jax`` and ``import jaxkit.numpy as jnp`` run JAX code unchanged: composable
transformations (jit, grad, vmap, ...) over a tracer and jaxpr IR of our own, executed by XLA
through jaxlib. Nothing here imports the ``jax`` package.
"""
from jaxkit._config import config
from jaxkit import lax  # noqa: F401  (registers the primitives)
from jaxkit._array import Array
from jaxkit._jit import jit
from jaxkit.api import (ShapeDtypeStruct, block_until_ready, default_backend, device_count,
                        device_get, device_put, devices, eval_shape, local_device_count,
                        local_devices, make_jaxpr, process_count, process_index)
from jaxkit.core import (ConcretizationTypeError, TracerArrayConversionError,
                         TracerBoolConversionError, TracerIntegerConversionError,
                         UnexpectedTracerError)
from jaxkit import tree_util  # noqa: F401
from jaxkit import numpy  # noqa: F401  (installs array methods and operators)

__version__ = "0.1.0"

__all__ = [
    "Array", "ConcretizationTypeError", "ShapeDtypeStruct", "TracerArrayConversionError",
    "TracerBoolConversionError", "TracerIntegerConversionError", "UnexpectedTracerError",
    "block_until_ready", "config", "default_backend", "device_count", "device_get", "device_put",
    "devices", "eval_shape", "jit", "lax", "local_device_count", "local_devices", "make_jaxpr",
    "numpy", "process_count", "process_index", "tree_util",
]
