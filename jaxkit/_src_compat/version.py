"""``jax.version`` (Flax and Optax compare it to pick code paths): the JAX version whose
behaviour jaxkit reproduces."""
__version__ = "0.10.2"
__version_info__ = (0, 10, 2)
_minimum_jaxlib_version = "0.10.2"
