"""``jax.experimental.shard_map``: the older home of ``shard_map`` (``jax.shard_map`` now)."""
from jaxkit.transforms.shard_map import shard_map

__all__ = ["shard_map"]
