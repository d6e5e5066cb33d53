"""The stages of ``jit`` (``jax.stages``): ``Traced`` -> ``Lowered`` -> ``Compiled``.

Defined in ``jaxkit.transforms.stages``; this is their public module name, as in JAX.
"""
from jaxkit.transforms.stages import Compiled, Lowered, Timings, Traced

__all__ = ["Compiled", "Lowered", "Timings", "Traced"]
