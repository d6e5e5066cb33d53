"""``jax.extend.mlir.dialects.math``: jaxlib's MLIR bindings of the ``math`` dialect:
elementwise math functions."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.math"))
del star_exports
