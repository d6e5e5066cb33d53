"""jaxkit: the JAX programming model written from scratch on jaxlib/XLA.

``import jaxkit as jax`` and ``import jaxkit.numpy as jnp`` run JAX code unchanged: composable
transformations (jit, grad, vmap, ...) over a tracer and jaxpr IR of our own, executed by XLA
through jaxlib. Nothing here imports the ``jax`` package.
"""
import os as _os

# jaxlib's C++ logs PjRt start-up lines at INFO; JAX users do not see them either. Must be set
# before jaxlib's shared library loads, which the first jaxkit import below does.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from jaxkit._config import config  # noqa: E402
from jaxkit import lax  # noqa: F401  (registers the primitives)
from jaxkit._array import Array
from jaxkit._jit import jit
from jaxkit.api import (ShapeDtypeStruct, block_until_ready, default_backend, device_count,
                        device_get, device_put, devices, eval_shape, local_device_count,
                        local_devices, make_jaxpr, process_count, process_index)
from jaxkit.core import (ConcretizationTypeError, TracerArrayConversionError,
                         TracerBoolConversionError, TracerIntegerConversionError,
                         UnexpectedTracerError)
from jaxkit import errors, tree_util  # noqa: F401
from jaxkit import numpy  # noqa: F401  (installs array methods and operators)

__version__ = "0.1.0"

__all__ = [
    "Array", "ConcretizationTypeError", "ShapeDtypeStruct", "TracerArrayConversionError",
    "TracerBoolConversionError", "TracerIntegerConversionError", "UnexpectedTracerError",
    "block_until_ready", "config", "default_backend", "device_count", "device_get", "device_put",
    "devices", "eval_shape", "jit", "lax", "local_device_count", "local_devices", "make_jaxpr",
    "numpy", "process_count", "process_index", "tree_util",
]


def load_ipython_extension(ipython) -> None:
    """``%load_ext jaxkit`` registers the magics (IPython is imported only then)."""
    import jaxkit.magics  # noqa: PLC0415  (lazy: keeps `import jaxkit` free of IPython)

    jaxkit.magics.load_ipython_extension(ipython)
