"""``jax._src.tree_util`` (reached by Flax NNX's graph code for ``_registry``): jaxkit's pytree
registry, a dict from node type to its flatten/unflatten entry."""
from jaxkit.tree_util import *  # noqa: F401,F403
from jaxkit.tree_util import _registry  # noqa: F401
