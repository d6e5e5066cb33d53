"""``jax._src.lib.mlir``: the package of its ``dialects`` (see there)."""
