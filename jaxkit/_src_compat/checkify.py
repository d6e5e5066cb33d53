"""``jax._src.checkify`` (reached by Flax NNX's ``nnx.checkify``): jaxkit's checkify, plus the
``Out`` type variable Flax annotates with."""
from typing import TypeVar

from jaxkit.experimental.checkify import *  # noqa: F401,F403
from jaxkit.experimental.checkify import Error, JaxException, checkify, user_checks  # noqa: F401

Out = TypeVar("Out")
