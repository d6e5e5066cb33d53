"""``jax.ad_checkpoint``: rematerialization (``checkpoint``), naming values for policies
(``checkpoint_name``) and the policies."""
from jaxkit.transforms.checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat"]
