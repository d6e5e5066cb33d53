"""``jax.api_util`` as Flax's ``nn.scan`` reaches it (``jax._src.api_util``): the same
functions as ``jaxkit.api_util``."""
from __future__ import annotations

from jaxkit.api_util import debug_info, flatten_fun, flatten_fun_nokwargs

__all__ = ["debug_info", "flatten_fun", "flatten_fun_nokwargs"]
