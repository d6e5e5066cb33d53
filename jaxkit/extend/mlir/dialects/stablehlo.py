"""``jax.extend.mlir.dialects.stablehlo``: jaxlib's MLIR bindings of the ``stablehlo`` dialect:
StableHLO ops, attributes and types: the ops jaxkit lowers its primitives to."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.stablehlo"))
del star_exports
