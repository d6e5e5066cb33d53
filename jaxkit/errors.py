"""The exceptions jaxkit raises about traced values (``jax.errors``)."""
from jaxkit.core import (ConcretizationTypeError, JaxprTypeError, TracerArrayConversionError,
                         TracerBoolConversionError, TracerIntegerConversionError,
                         UnexpectedTracerError)

__all__ = ["ConcretizationTypeError", "JaxprTypeError", "TracerArrayConversionError",
           "TracerBoolConversionError", "TracerIntegerConversionError", "UnexpectedTracerError"]
