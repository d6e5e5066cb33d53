"""``jax.extend.linear_util``: a function wrapped together with the transformations to apply
to it and a store for what those transformations report back (an output tree, auxiliary data).

JAX's tracing entry points take such wrapped functions; jaxkit's take plain callables, so
``WrappedFun.call_wrapped`` is the single place where a stack of transformations is applied.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["Store", "StoreException", "WrappedFun", "cache", "merge_linear_aux",
           "transformation", "transformation2", "transformation_with_aux",
           "transformation_with_aux2", "wrap_init"]


class StoreException(Exception):
    """A ``Store`` was read before, or written twice after, the wrapped function ran."""


_EMPTY = object()


class Store:
    """A write-once cell filled when a wrapped function runs."""

    __slots__ = ("_val",)

    def __init__(self):
        self._val = _EMPTY

    def store(self, val) -> None:
        if self._val is not _EMPTY:
            raise StoreException("Store occupied")
        self._val = val

    def reset(self) -> None:
        self._val = _EMPTY

    @property
    def val(self):
        if self._val is _EMPTY:
            raise StoreException("Store empty: the wrapped function has not run yet")
        return self._val

    def __bool__(self):
        return self._val is not _EMPTY


class WrappedFun:
    """``f`` plus transformations (outermost last) and their stores."""

    def __init__(self, f: Callable, transforms: tuple = (), params: tuple = (),
                 debug_info: Any = None):
        self.f = f
        self.transforms = transforms
        self.params = params
        self.debug_info = debug_info

    @property
    def __name__(self):
        return getattr(self.f, "__name__", "<unnamed wrapped function>")

    def wrap(self, gen: Callable, gen_static_args: tuple, out_store: Store | None) -> WrappedFun:
        return WrappedFun(self.f, self.transforms + ((gen, gen_static_args, out_store),),
                          self.params, self.debug_info)

    def call_wrapped(self, *args, **kwargs):
        fun = functools.partial(self.f, **dict(self.params)) if self.params else self.f
        for gen, static_args, store in self.transforms:
            fun = _apply(gen, static_args, store, fun)
        return fun(*args, **kwargs)

    def __repr__(self):
        return f"Wrapped function: {self.__name__} with {len(self.transforms)} transformations"


def _apply(gen, static_args, store, inner):
    def call(*args, **kwargs):
        if store is None:
            return gen(inner, *static_args, *args, **kwargs)
        out, aux = gen(inner, *static_args, *args, **kwargs)
        store.reset()
        store.store(aux)
        return out
    return call


def wrap_init(f: Callable, params=None, *, debug_info: Any = None) -> WrappedFun:
    """Wrap ``f``; ``params`` are keyword arguments bound at call time."""
    return WrappedFun(f, (), tuple(sorted((params or {}).items())), debug_info)


def transformation2(gen: Callable, fun: WrappedFun, *gen_static_args) -> WrappedFun:
    """Add ``gen(f, *static_args, *args)`` around ``fun``; ``gen`` calls ``f`` itself."""
    return fun.wrap(gen, gen_static_args, None)


def transformation_with_aux2(gen: Callable, fun: WrappedFun, *gen_static_args,
                             use_eq_store: bool = False) -> tuple[WrappedFun, Callable]:
    """As ``transformation2``, ``gen`` returning ``(out, aux)``; returns the wrapped function
    and a thunk giving ``aux`` once it has run."""
    store = Store()
    return fun.wrap(gen, gen_static_args, store), lambda: store.val


transformation = transformation2
transformation_with_aux = transformation_with_aux2


def merge_linear_aux(aux1: Callable, aux2: Callable):
    """The auxiliary output of whichever of two alternative transformations ran."""
    try:
        out1 = aux1()
    except StoreException:
        return False, aux2()
    return True, out1


def cache(call: Callable, **_):
    """A memoised ``call(fun: WrappedFun, *args)``, keyed by the function and its arguments."""
    memo: dict = {}

    @functools.wraps(call)
    def cached(fun: WrappedFun, *args):
        key = (fun.f, fun.transforms, fun.params, args)
        try:
            return memo[key]
        except KeyError:
            memo[key] = out = call(fun, *args)
            return out
        except TypeError:  # unhashable argument: no caching
            return call(fun, *args)
    return cached
