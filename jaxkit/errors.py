"""The exceptions jaxkit raises about traced values and indexing (``jax.errors``)."""
from jaxkit import core
from jaxkit.core import (ConcretizationTypeError, JaxprTypeError, TracerArrayConversionError,
                         TracerBoolConversionError, TracerIntegerConversionError,
                         UnexpectedTracerError)
from jaxkit.core import JaxkitTypeError as JAXTypeError
from jaxkit._tracer_errors import _ERROR_PAGE

__all__ = ["ConcretizationTypeError", "InconclusiveDimensionOperation", "JAXIndexError",
           "JaxRuntimeError",
           "JAXTypeError", "JaxprTypeError", "KeyReuseError", "NonConcreteBooleanIndexError",
           "TracerArrayConversionError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError"]

# jaxlib's error for failures while compiling or running a program (a RuntimeError). Set by
# jaxkit.runtime.pjrt when it loads jaxlib: this module is below the runtime and may not.
JaxRuntimeError: type[RuntimeError]


class JAXIndexError(IndexError):
    """Base of the indexing errors about traced values; as JAX's, each message ends with the
    page that explains the error and its fixes."""

    def __init__(self, message: str):
        super().__init__(f"{message}\nSee {_ERROR_PAGE}#jax.errors.{type(self).__name__}")


class KeyReuseError(JAXTypeError):
    """A PRNG key used twice (JAX raises it only with ``jax_debug_key_reuse``, which jaxkit
    does not implement: jaxkit never raises it)."""


class InconclusiveDimensionOperation(Exception):
    """A comparison of symbolic dimensions with no definite answer (jaxkit has no symbolic
    shapes, so it never raises it; defined for ``except`` clauses written for JAX)."""


class NonConcreteBooleanIndexError(JAXIndexError):
    """A boolean mask index was traced: the shape of the result would depend on its values."""

    def __init__(self, aval: core.ShapedArray):
        # (the page: the number of True elements decides the result's shape; jnp.where
        # keeps the shape, a size= argument fixes the number of indices)
        super().__init__(f"Array boolean indices must be concrete; got {aval.str_short()}\n")
