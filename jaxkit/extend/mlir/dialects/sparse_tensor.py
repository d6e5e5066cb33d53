"""``jax.extend.mlir.dialects.sparse_tensor``: jaxlib's MLIR bindings of the
``sparse_tensor`` dialect: sparse tensor types and ops."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.sparse_tensor"))
del star_exports
