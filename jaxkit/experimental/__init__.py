"""``jax.experimental``: ``io_callback`` here; submodules (checkify, compilation_cache, ...)
live in their own files."""
from jaxkit.transforms.callback import io_callback

__all__ = ["io_callback"]
