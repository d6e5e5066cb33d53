"""``jax.extend.mlir.dialects.memref``: jaxlib's MLIR bindings of the ``memref`` dialect:
memory references."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.memref"))
del star_exports
