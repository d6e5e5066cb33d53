"""``jax._src.lib``: the package of ``jax._src.lib.mlir`` (see there)."""
