"""``jax.extend.mlir.dialects.builtin``: jaxlib's MLIR bindings of the ``builtin`` dialect:
the builtin dialect (``ModuleOp``, ``UnrealizedConversionCastOp``)."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.builtin"))
del star_exports
