"""``jax.custom_batching``: functions with their own ``vmap`` rule."""
from jaxkit.transforms.custom_batching import custom_vmap, sequential_vmap

__all__ = ["custom_vmap", "sequential_vmap"]
