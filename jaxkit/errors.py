"""The exceptions jaxkit raises about traced values and indexing (``jax.errors``)."""
from jaxkit import core
from jaxkit.core import (ConcretizationTypeError, JaxprTypeError, TracerArrayConversionError,
                         TracerBoolConversionError, TracerIntegerConversionError,
                         UnexpectedTracerError)

__all__ = ["ConcretizationTypeError", "JaxprTypeError", "NonConcreteBooleanIndexError",
           "TracerArrayConversionError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError"]


class NonConcreteBooleanIndexError(IndexError):
    """A boolean mask index was traced: the shape of the result would depend on its values."""

    def __init__(self, aval: core.ShapedArray):
        super().__init__(
            f"Array boolean indices must be concrete; got {aval.str_short()}\n\n"
            "The number of True elements decides the shape of the result, which must be "
            "known when tracing. Use `jnp.where(mask, x, fill)` to keep the shape, or "
            "`jnp.nonzero(mask, size=...)` / `jnp.where(mask, size=...)` to get a fixed "
            "number of indices.")
