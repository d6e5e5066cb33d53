"""The stages of ``jit`` (``jax.stages``): ``Traced`` -> ``Lowered`` -> ``Compiled``.

Defined in ``jaxkit.transforms.stages``; this is their public module name, as in JAX.
"""
from typing import Any, Protocol, Union

from jaxkit.transforms.stages import ArgInfo, Compiled, Lowered, Timings, Traced

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Timings", "Traced", "Wrapped"]

# XLA compiler options, as ``Lowered.compile(compiler_options=...)`` takes them in JAX
CompilerOptions = dict[str, Union[str, bool]]  # noqa: UP007  (printed as JAX prints it)


class Wrapped(Protocol):
    """The type of a function transformed by ``jit``: callable, and staged by ``trace`` /
    ``lower``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def trace(self, *args: Any, **kwargs: Any) -> Traced: ...

    def lower(self, *args: Any, **kwargs: Any) -> Lowered: ...
