"""``jax._src.state.types`` (reached by Flax NNX to recognise mutable array references):
jaxkit has no mutable array references, so no value is an ``AbstractRef``."""


class AbstractRef:
    """The abstract value of a mutable array reference; jaxkit creates none."""
