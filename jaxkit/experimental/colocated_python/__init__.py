"""``jax.experimental.colocated_python``: Python functions and objects run on the CPU devices
of the hosts holding their array arguments.

JAX ships the function (serialized) to the hosts of the arguments' devices through IFRT. A
jaxkit process only drives its own host's devices, so the function runs here, in this process,
on the arguments as they are: the contract a user sees is kept (arrays in, arrays out on the
same devices; ``specialize`` fixing input specs, output specs and devices; a class whose real
instance is made at its first method call and dropped with its wrapper). What differs is
timing only: calls run synchronously, where JAX may return before a specialized call ends
(JAX's own first, unspecialized call is synchronous too).

The submodules are JAX's: ``api`` (the entry points), ``func`` (colocated functions and their
specializations), ``obj`` (colocated classes), ``func_backend``/``obj_backend`` (the stores a
host keeps results and live objects in) and ``serialization``.
"""
from jaxkit.experimental.colocated_python.api import (colocated_cpu_devices,
                                                      colocated_python, colocated_python_class)

__all__ = ["colocated_cpu_devices", "colocated_python", "colocated_python_class"]
