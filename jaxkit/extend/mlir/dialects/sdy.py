"""``jax.extend.mlir.dialects.sdy``: jaxlib's MLIR bindings of the ``sdy`` dialect:
Shardy sharding annotations (meshes, tensor shardings, manual computations)."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.sdy"))
del star_exports
