"""``jax.extend.mlir.dialects.arith``: jaxlib's MLIR bindings of the ``arith`` dialect:
integer and floating-point arithmetic."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.arith"))
del star_exports
