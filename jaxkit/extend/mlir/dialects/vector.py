"""``jax.extend.mlir.dialects.vector``: jaxlib's MLIR bindings of the ``vector`` dialect:
vector ops."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.vector"))
del star_exports
