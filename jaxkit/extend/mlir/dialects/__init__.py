"""``jax.extend.mlir.dialects``: jaxlib's MLIR dialect bindings, one submodule per dialect
(``arith``, ``builtin``, ``chlo``, ``func``, ``math``, ``memref``, ``mpmd``, ``scf``, ``sdy``,
``sparse_tensor``, ``stablehlo``, ``vector``), imported on demand as in JAX."""
