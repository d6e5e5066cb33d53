"""Caches of libraries (and of jaxkit's own modules above ``transforms``) that
``jax.clear_caches()`` clears along with jit's: JAX's ``register_cache``, public as
``jax.extend.backend.register_backend_cache``. It lives here, beside jit's set of caches, so
that every layer from ``transforms`` up can register one."""
from __future__ import annotations

import weakref
from typing import Any

from jaxkit.transforms import jit as _jit

__all__ = ["register_backend_cache"]


class _RegisteredCache:
    """Clears a library's cache when jaxkit clears its own (``jax.clear_caches()``)."""

    def __init__(self, cache, for_what: str):
        self._cache = weakref.ref(cache)
        self.for_what = for_what

    def clear(self) -> None:
        cache = self._cache()
        if cache is not None:
            cache.cache_clear()


# cache -> its adapter, kept alive exactly as long as the cache; jit's set of function caches
# (what ``jax.clear_caches()`` and the config changes that invalidate jit walk) holds the
# adapters weakly.
_registered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register_backend_cache(cache: Any, for_what: str) -> None:
    """Have ``jax.clear_caches()`` clear ``cache`` (an object with ``cache_clear()``, such as
    a ``functools.lru_cache`` function); ``for_what`` says what it caches."""
    if not callable(getattr(cache, "cache_clear", None)):
        raise TypeError(f"register_backend_cache: {cache!r} has no cache_clear() method; pass "
                        "a functools.lru_cache/cache function or an object with one")
    adapter = _registered[cache] = _RegisteredCache(cache, for_what)
    _jit._all_fun_caches.add(adapter)
