"""``jax.extend.mlir.ir``: jaxlib's MLIR core bindings (``Context``, ``Module``, types,
attributes, ``InsertionPoint``, ...), the very classes jaxkit's lowering builds modules with."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.ir"))
del star_exports
