"""``jax._src.state.types`` (reached by Flax NNX to recognise mutable array references): the
type of a ``Ref`` is jaxkit's ``AbstractRef``."""
from jaxkit.interpreters.state import AbstractRef

__all__ = ["AbstractRef"]
