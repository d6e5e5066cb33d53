"""``jax.extend.mlir.dialects.scf``: jaxlib's MLIR bindings of the ``scf`` dialect:
structured control flow (``for``, ``if``, ``while``)."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.dialects.scf"))
del star_exports
