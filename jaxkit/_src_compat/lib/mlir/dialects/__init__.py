"""``jax._src.lib.mlir.dialects`` (``from jax._src.lib.mlir.dialects import hlo`` in JAX's
"How JAX primitives work" tutorial): the StableHLO dialect bindings jaxkit lowers with."""
from jaxkit.interpreters.mlir import hlo  # noqa: F401
