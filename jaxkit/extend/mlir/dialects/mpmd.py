"""``jax.extend.mlir.dialects.mpmd``: jaxlib's MLIR bindings of the ``mpmd`` dialect:
Shardy's multi-program multi-data partitioning ops."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.mpmd"))
del star_exports
