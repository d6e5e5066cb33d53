"""``jax.extend.mlir.dialects.chlo``: jaxlib's MLIR bindings of the ``chlo`` dialect:
client HLO ops (broadcasting binary ops, special functions) that legalize to StableHLO."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.chlo"))
del star_exports
