"""``jax._src.compiler`` (reached by chex's ``restrict_backends``, which wraps
``backend_compile_and_load`` to refuse compiling on forbidden platforms): jaxkit's one compile
entry point, under that name."""
from jaxkit.runtime.pjrt import compile_module

__all__ = ["backend_compile_and_load", "compile_module"]

backend_compile_and_load = compile_module
