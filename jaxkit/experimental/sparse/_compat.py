"""Small list helpers that JAX's sparse modules import from ``jax._src.util`` and that users
reach through them (``jax.experimental.sparse.bcoo.split_list`` and the like); the sparse
modules re-export them under the same names."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

__all__ = ["api_boundary", "ranges_like", "remaining", "safe_map", "safe_zip", "split_list",
           "unzip2", "wraps"]

T = TypeVar("T")


def _same_lengths(name: str, seqs: list[list]) -> None:
    lengths = [len(s) for s in seqs]
    if len(set(lengths)) > 1:
        raise ValueError(f"length mismatch: {lengths} (the arguments of {name} must all have "
                         "the same length)")


def safe_zip(*args: Iterable) -> list[tuple]:
    """``zip`` of sequences of one length (a ValueError otherwise), as a list."""
    if not args:
        raise TypeError("safe_zip requires at least 1 argument.")
    seqs = [list(a) for a in args]
    _same_lengths("safe_zip", seqs)
    return list(zip(*seqs))


def safe_map(f: Callable, *args: Iterable) -> list:
    """``map`` over sequences of one length (a ValueError otherwise), as a list."""
    seqs = [list(a) for a in args]
    _same_lengths("safe_map", seqs)
    return list(map(f, *seqs))


def api_boundary(fun: Callable | None = None, **_) -> Callable:
    """Marks a library entry point (JAX filters tracebacks there; jaxkit does not rewrite
    tracebacks, so the function comes back unchanged)."""
    return (lambda f: f) if fun is None else fun


def split_list(args: Sequence[T], ns: Sequence[int]) -> list[list[T]]:
    """``args`` cut into ``len(ns) + 1`` consecutive lists: the first ``ns[0]`` elements, the
    next ``ns[1]``, ..., and whatever remains."""
    args = list(args)
    out = []
    for n in ns:
        out.append(args[:n])
        args = args[n:]
    out.append(args)
    return out


def unzip2(xys: Iterable[tuple[Any, Any]]) -> tuple[tuple, tuple]:
    """The inverse of ``zip`` for pairs, as two tuples (empty input gives two empty tuples)."""
    xs, ys = [], []
    for x, y in xys:
        xs.append(x)
        ys.append(y)
    return tuple(xs), tuple(ys)


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
