"""``jax.experimental.array_serialization``: arrays to and from TensorStore (needs the
``tensorstore`` package, in the ``test`` extra)."""
