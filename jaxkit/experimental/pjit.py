"""``jax.experimental.pjit``: the older home of ``jit`` with shardings, deprecated (as in JAX
0.10.2, reading ``pjit`` here warns once). ``pjit(f, in_shardings, out_shardings, ...)`` is
``jax.jit`` with the same arguments, which may also be given by position. Orbax imports this
module (its test helpers call ``pjit.pjit``)."""
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

from jaxkit.transforms.jit import jit

__all__ = ["pjit"]  # noqa: F822  (served by __getattr__, which warns)

_MESSAGE = "jax.experimental.pjit.pjit has been deprecated. Please use `jax.jit` instead."


def _pjit(fun: Callable, in_shardings: Any = None, out_shardings: Any = None,
          static_argnums: Any = None, static_argnames: Any = None, donate_argnums: Any = None,
          donate_argnames: Any = None, keep_unused: bool = False, device: Any = None,
          backend: str | None = None, inline: bool = False,
          compiler_options: dict[str, Any] | None = None) -> Callable:
    """`jax.experimental.pjit.pjit` has been deprecated. Please use `jax.jit`."""
    return jit(fun, in_shardings=in_shardings, out_shardings=out_shardings,
               static_argnums=static_argnums, static_argnames=static_argnames,
               donate_argnums=donate_argnums, donate_argnames=donate_argnames,
               keep_unused=keep_unused, device=device, backend=backend, inline=inline,
               compiler_options=compiler_options)


_pjit.__name__ = _pjit.__qualname__ = "pjit"


@functools.cache  # JAX warns on the first read only
def __getattr__(name: str) -> Any:
    if name == "pjit":
        warnings.warn(_MESSAGE, DeprecationWarning, stacklevel=2)
        return _pjit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
