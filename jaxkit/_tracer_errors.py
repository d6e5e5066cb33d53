"""The errors jaxkit raises about traced values (``jax.errors`` names them publicly).

They live apart from ``jaxkit.core`` so that modules below the core can raise them too;
``jaxkit.core`` re-exports every one."""


_ERROR_PAGE = "https://docs.jax.dev/en/latest/errors.html"


class JaxkitTypeError(TypeError):
    """Base of the type errors jaxkit raises about traced values. As JAX's, each message
    ends with the page that explains the error and its fixes."""

    def __init__(self, message: str):
        super().__init__(f"{message}\nSee {_ERROR_PAGE}#jax.errors.{type(self).__name__}")


class ConcretizationTypeError(JaxkitTypeError):
    """A concrete Python value was needed from an abstract (traced) value."""


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool()`` (an ``if``/``while``) was applied to a traced value."""


class TracerIntegerConversionError(JaxkitTypeError):
    """``int()``/``__index__`` was applied to a traced value."""


class TracerArrayConversionError(JaxkitTypeError):
    """A traced value was converted to a NumPy array."""


class UnexpectedTracerError(JaxkitTypeError):
    """A tracer escaped the transformation that created it (it "leaked"); a TypeError, as
    JAX's."""


# Tracebacks name them where users import them from (JAX's print ``jax.errors.X``).
for _cls in (JaxkitTypeError, ConcretizationTypeError, TracerBoolConversionError,
             TracerIntegerConversionError, TracerArrayConversionError, UnexpectedTracerError):
    _cls.__module__ = "jaxkit.errors"
del _cls
