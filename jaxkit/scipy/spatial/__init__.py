"""``jaxkit.scipy.spatial``: ``transform`` (rotations in 3-D), as ``jax.scipy.spatial``."""
from jaxkit.scipy.spatial import transform  # noqa: F401
