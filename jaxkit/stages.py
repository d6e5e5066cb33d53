"""The stages of ``jit`` (``jax.stages``): ``Traced`` -> ``Lowered`` -> ``Compiled``.

Defined in ``jaxkit.transforms.stages``; this is their public module name, as in JAX.
"""
import dataclasses
from typing import Any, Protocol, Union

from jaxkit.transforms.stages import Compiled, Lowered, Timings, Traced

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Timings", "Traced", "Wrapped"]

# XLA compiler options, as ``Lowered.compile(compiler_options=...)`` takes them in JAX
CompilerOptions = dict[str, Union[str, bool]]  # noqa: UP007  (printed as JAX prints it)


@dataclasses.dataclass(frozen=True, slots=True)
class ArgInfo:
    """What a stage knows of one argument: its abstract value and whether it is donated."""

    _aval: Any
    donated: bool

    @property
    def shape(self):
        if not hasattr(self._aval, "shape"):
            raise TypeError(f"No shape attribute with aval of type {type(self._aval)}")
        return self._aval.shape

    @property
    def dtype(self):
        if not hasattr(self._aval, "dtype"):
            raise TypeError(f"No dtype attribute with aval of type {type(self._aval)}")
        return self._aval.dtype


class Wrapped(Protocol):
    """The type of a function transformed by ``jit``: callable, and staged by ``trace`` /
    ``lower``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def trace(self, *args: Any, **kwargs: Any) -> Traced: ...

    def lower(self, *args: Any, **kwargs: Any) -> Lowered: ...
