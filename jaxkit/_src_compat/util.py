"""``jax._src.util`` (reached by JAX's own tutorial "Writing custom Jaxpr interpreters", which
imports ``safe_map``): length-checked ``map`` and ``zip`` that return lists."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["safe_map", "safe_zip"]


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
