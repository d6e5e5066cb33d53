"""``jax.tree_util.Partial``: a ``functools.partial`` that is a pytree (``jaxkit.tree_util``
registers it: the function is static aux data, the bound arguments are children)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Self

__all__ = ["Partial"]


class _HashableCallableShim:
    """Wraps a ``functools.partial`` given to ``Partial`` so the two do not merge; delegates
    calls, hashing and equality to it."""

    def __init__(self, fun: Callable):
        self.fun = fun

    def __call__(self, *args, **kw):
        return self.fun(*args, **kw)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _HashableCallableShim):
            return self.fun == other.fun
        return self.fun == other

    def __repr__(self) -> str:
        return f"_HashableCallableShim({self.fun!r})"


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: the function is static aux data and the bound
    arguments are children, so it can be passed through jit and other transformations."""

    def __new__(cls, func: Callable, *args: Any, **kw: Any) -> Self:
        # functools.partial flattens a partial given as func, which would move its arguments
        # into this node's children; wrapping it keeps them part of the (static) function.
        if isinstance(func, functools.partial):
            original = func
            func = _HashableCallableShim(original)
            out = super().__new__(cls, func, *args, **kw)
            func.func, func.args, func.keywords = (  # type: ignore[attr-defined]
                original.func, original.args, original.keywords)
            return out
        return super().__new__(cls, func, *args, **kw)
