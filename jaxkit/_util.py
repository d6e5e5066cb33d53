"""Small list helpers JAX's modules import from ``jax._src.util`` (or ``jax._src.lax.lax``) and
so show as module names (``jax.experimental.jet.safe_zip``, ``jax.experimental.fused.unzip2``,
``jax.experimental.sparse.bcoo.ranges_like``, ...): length-checked ``safe_map``/``safe_zip``,
``fun_name``, ``unzip2``, ``split_list``, ``subs_list``, ``ranges_like``, ``remaining``,
``wraps`` and
``weakref_lru_cache`` (an LRU cache keyed weakly on its first argument, a function)."""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["fun_name", "ranges_like", "remaining", "safe_map", "safe_zip", "split_list",
           "subs_list", "unzip2", "weakref_lru_cache", "wraps"]

T = TypeVar("T")


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
        raise TypeError("safe_zip requires at least 1 argument")
    seqs = [list(a) for a in args]
    lengths = tuple(map(len, seqs))
    for i, n in enumerate(lengths):
        if n != lengths[0]:  # JAX's message (jaxlib's safe_zip), arguments counted from 0
            raise ValueError(f"safe_zip() argument {i} has length {n} but argument 0 has "
                             f"length {lengths[0]}. All lengths: {lengths}")
    return list(zip(*seqs))


def _original_func(f: Any) -> Any:
    """The function under a property or cached property (where a mark is kept)."""
    if isinstance(f, property):
        return f.fget
    if isinstance(f, functools.cached_property):
        return f.func
    return f


def use_cpp_class(cpp_cls: type | None) -> Callable[[type], type]:
    """A class decorator (JAX's ``util.use_cpp_class``): the decorated Python class's
    attributes, except those marked with ``use_cpp_method``, are set on ``cpp_cls`` (a
    compiled class), which then stands for it; without ``cpp_cls`` the Python class stays."""
    def wrapper(cls: type) -> type:
        if cpp_cls is None:
            return cls
        for name, attr in cls.__dict__.items():
            if name not in ("__module__", "__dict__", "__doc__") and \
                    not hasattr(_original_func(attr), "_use_cpp"):
                setattr(cpp_cls, name, attr)
        cpp_cls.__doc__ = cls.__doc__
        return cpp_cls
    return wrapper


def use_cpp_method(is_enabled: bool = True) -> Callable[[Any], Any]:
    """A method decorator for ``use_cpp_class``: the compiled class keeps its own version of
    this method (when ``is_enabled``)."""
    if not isinstance(is_enabled, bool):
        raise TypeError("``is_enabled`` must be a bool")

    def decorator(f):
        if is_enabled:
            _original_func(f)._use_cpp = True
        return f
    return decorator


def foreach(f: Callable[..., Any], *args: Iterable) -> None:
    """Call ``f`` elementwise over sequences of one length, for its effects (JAX's
    ``util.foreach``: a sequence of another length than the first raises ``ValueError`` when
    the walk reaches its end, after the calls so far)."""
    first, *rest = [iter(a) for a in args]
    for x in first:
        items = [x]
        for i, it in enumerate(rest, start=2):
            y = next(it, _END)
            if y is _END:
                raise ValueError(f"foreach() argument {i} is shorter than argument 1")
            items.append(y)
        f(*items)
    for i, it in enumerate(rest, start=2):
        if next(it, _END) is not _END:
            raise ValueError(f"foreach() argument {i} is longer than argument 1")


_END = object()  # what an exhausted iterator gives next()


def safe_map(f: Callable[..., Any], *args: Iterable) -> list:
    """``map`` over sequences that must all have the same length, as a list."""
    if not args:
        raise TypeError("safe_map requires at least 2 arguments")
    seqs = [list(a) for a in args]
    lengths = [len(s) for s in seqs]
    # JAX's message (jaxlib's safe_map walks the sequences in step, counting f as argument 0):
    # where the first sequence ends, the first one that goes on is "longer"; where another
    # ends first, it is "shorter".
    end = min(lengths)
    for i, n in enumerate(lengths[1:], 2):
        if lengths[0] == end and n > end:
            raise ValueError(f"safe_map() argument {i} is longer than argument 1")
        if lengths[0] > end and n == end:
            raise ValueError(f"safe_map() argument {i} is shorter than argument 1")
    return list(map(f, *seqs))


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


def ranges_like(*xs: Sequence) -> Iterator[range]:
    """Consecutive ranges, one per sequence in ``xs`` and as long as it."""
    start = 0
    for x in xs:
        n = len(x)
        yield range(start, start + n)
        start += n


def remaining(original: Iterable[T], *removed_lists: Iterable[T]) -> list[T]:
    """The elements of ``original`` (in order) that are in none of ``removed_lists``."""
    removed = {r for rs in removed_lists for r in rs}
    return [x for x in original if x not in removed]


def wraps(wrapped: Callable, namestr: str | None = None, docstr: str | None = None,
          **kwargs) -> Callable[[Callable], Callable]:
    """A decorator giving a function ``wrapped``'s name, docstring, module and annotations;
    ``namestr``/``docstr`` are format strings over ``fun`` (the name), ``doc`` and
    ``kwargs``."""

    def decorate(fun: Callable) -> Callable:
        name = getattr(wrapped, "__name__", repr(wrapped))
        doc = getattr(wrapped, "__doc__", "") or ""
        fun.__dict__.update(getattr(wrapped, "__dict__", {}))
        fun.__annotations__ = dict(getattr(wrapped, "__annotations__", {}))
        fun.__name__ = name if namestr is None else namestr.format(fun=name)
        fun.__module__ = getattr(wrapped, "__module__", "<unknown module>")
        fun.__doc__ = doc if docstr is None else docstr.format(fun=name, doc=doc, **kwargs)
        fun.__qualname__ = getattr(wrapped, "__qualname__", fun.__name__)
        fun.__wrapped__ = wrapped
        return fun

    return decorate


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
