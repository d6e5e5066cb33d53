"""``jax.extend.mlir.passmanager``: jaxlib's MLIR ``PassManager`` (parse and run pass
pipelines on a module)."""
from jaxkit.extend._reexport import star_exports

globals().update(star_exports("jaxlib.mlir.passmanager"))
del star_exports
