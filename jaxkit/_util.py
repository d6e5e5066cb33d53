"""Small list helpers JAX's modules import from ``jax._src.util`` and so show as module names
(``jax.experimental.jet.safe_zip``, ``jax.experimental.fused.unzip2``, ...): length-checked
``safe_map``/``safe_zip``, ``fun_name``, ``unzip2``, ``split_list``, ``subs_list`` and
``weakref_lru_cache`` (an LRU cache keyed weakly on its first argument, a function)."""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["fun_name", "safe_map", "safe_zip", "split_list", "subs_list", "unzip2",
           "weakref_lru_cache"]


def fun_name(fun: Callable, default_name: str = "<unnamed function>") -> str:
    """A function's name as JAX gives it (jit's equation and program names): its
    ``__name__``, through ``functools.partial``, else ``default_name``."""
    name = getattr(fun, "__name__", None)
    if name is not None:
        return name
    if isinstance(fun, functools.partial):
        return fun_name(fun.func)
    return default_name


def safe_zip(*args: Iterable) -> list[tuple]:
    """``zip`` of sequences that must all have the same length, as a list."""
    if not args:
        raise TypeError("safe_zip requires at least 1 argument.")
    seqs = [list(a) for a in args]
    _check_lengths("safe_zip", seqs)
    return list(zip(*seqs))


def safe_map(f: Callable[..., Any], *args: Iterable) -> list:
    """``map`` over sequences that must all have the same length, as a list."""
    seqs = [list(a) for a in args]
    _check_lengths("safe_map", seqs)
    return list(map(f, *seqs))


def _check_lengths(name: str, seqs: list[list]) -> None:
    n = len(seqs[0]) if seqs else 0
    for s in seqs[1:]:
        if len(s) != n:
            raise ValueError(f"length mismatch: {list(map(len, seqs))} (the arguments of "
                             f"{name} must all have the same length)")


def unzip2(pairs: Iterable[tuple[Any, Any]]) -> tuple[tuple, tuple]:
    """``[(a, b), ...]`` -> ``((a, ...), (b, ...))``."""
    firsts, seconds = [], []
    for a, b in pairs:
        firsts.append(a)
        seconds.append(b)
    return tuple(firsts), tuple(seconds)


def split_list(args: Sequence, ns: Sequence[int]) -> list[list]:
    """``args`` cut into consecutive pieces of lengths ``ns`` plus the rest."""
    args = list(args)
    out = []
    for n in ns:
        out.append(args[:n])
        args = args[n:]
    return [*out, args]


def subs_list(subs: Sequence[int | None], src: Sequence, base: Sequence) -> list:
    """``base`` with the entries whose ``subs`` index is not None taken from ``src``."""
    base_it = iter(base)
    out = [src[i] if i is not None else next(base_it) for i in subs]
    if next(base_it, None) is not None:
        raise ValueError("subs_list: base has more entries than subs has None slots")
    return out


def weakref_lru_cache(fun: Callable, maxsize: int = 2048) -> Callable:
    """``fun(f, *args)`` cached per ``f`` (held weakly: entries go when ``f`` is collected)
    and hashable ``args`` (an LRU of ``maxsize`` entries per ``f``)."""
    caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @functools.wraps(fun)
    def cached(f, *args, **kwargs):
        per_f = caches.get(f)
        if per_f is None:
            f_ref = weakref.ref(f)  # the cached closure must not keep f alive
            per_f = caches[f] = functools.lru_cache(maxsize)(
                lambda *a, **k: fun(f_ref(), *a, **k))
        return per_f(*args, **kwargs)

    cached.cache_clear = caches.clear  # type: ignore[attr-defined]
    return cached
