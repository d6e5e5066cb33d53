"""The exceptions jaxkit raises about traced values (``jax.errors``)."""
from jaxkit.core import (ConcretizationTypeError, JaxprTypeError, TracerArrayConversionError,
                         TracerBoolConversionError, TracerIntegerConversionError,
                         UnexpectedTracerError)
from jaxkit.numpy._indexing import NonConcreteBooleanIndexError

__all__ = ["ConcretizationTypeError", "JaxprTypeError", "NonConcreteBooleanIndexError",
           "TracerArrayConversionError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError"]
