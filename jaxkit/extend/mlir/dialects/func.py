"""``jax.extend.mlir.dialects.func``: jaxlib's MLIR bindings of the ``func`` dialect:
functions, calls and returns (``FuncOp``, ``CallOp``, ``ReturnOp``)."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.func"))
del star_exports
