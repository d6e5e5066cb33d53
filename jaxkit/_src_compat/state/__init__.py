"""``jax._src.state``: see ``types``."""
