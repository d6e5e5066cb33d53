"""``jax._src.lax.lax`` (imported as ``lax`` by JAX's "How JAX primitives work" tutorial):
jaxkit's lax operations."""
from jaxkit.lax import *  # noqa: F401,F403
