"""Timing that a notebook can trust: warm-up, autoranged loops, best of several repeats.

Every timed call blocks until its outputs are ready (jaxkit dispatches asynchronously), so the
numbers measure computation, not just dispatch.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import jaxkit

from . import render


@dataclass
class Timing:
    """Seconds per call over ``len(all_runs)`` repeats of ``loops`` calls each. ``best`` (the
    least disturbed repeat) is what speedups compare; ``str`` reads like ``%timeit``."""

    best: float
    all_runs: list[float]
    loops: int

    @property
    def mean(self) -> float:
        return sum(self.all_runs) / len(self.all_runs)

    @property
    def std(self) -> float:
        m = self.mean
        return (sum((r - m) ** 2 for r in self.all_runs) / len(self.all_runs)) ** 0.5

    @property
    def worst(self) -> float:
        return max(self.all_runs)

    def summary(self) -> str:
        """``1.23 ms ± 4.5 µs per loop (mean ± std. dev. of 5 runs, 100 loops each)``."""
        runs = len(self.all_runs)
        return (f"{format_seconds(self.mean)} ± {format_seconds(self.std)} per loop (mean ± "
                f"std. dev. of {runs} run{'s' if runs != 1 else ''}, {self.loops} loop"
                f"{'s' if self.loops != 1 else ''} each)")

    def variance_warning(self) -> str | None:
        """As ``%timeit`` warns: the slowest repeat much slower than the fastest suggests
        something else (a cache, another process) disturbed the measurement."""
        if self.best > 0 and self.worst > 4 * self.best:
            return (f"The slowest run took {self.worst / self.best:.2f} times longer than the "
                    "fastest. This could mean that an intermediate result is being cached.")
        return None

    def sparkline(self) -> str:
        """The spread of the repeats as a small inline SVG (see ``render.sparkline``)."""
        return render.sparkline(self.all_runs, self.mean, self.std, fmt=format_seconds)

    def __str__(self) -> str:
        return format_seconds(self.best)


def format_seconds(seconds: float) -> str:
    """``3.2 ms``, ``41.5 µs``: three significant digits, the unit %timeit uses."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds:.3g} s"


def _call_and_block(fn: Callable[[], object]) -> None:
    jaxkit.block_until_ready(fn())


def time_call(fn: Callable[[], object], repeat: int = 5, min_window: float = 0.05,
              max_loops: int = 10_000,
              progress: Callable[[int, int], None] | None = None) -> Timing:
    """Time ``fn()`` (blocking on its result): one warm-up call, then ``repeat`` windows of
    ``loops`` calls each, ``loops`` doubled until a window lasts ``min_window`` seconds."""
    _call_and_block(fn)
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            _call_and_block(fn)
        elapsed = time.perf_counter() - start
        if elapsed >= min_window or loops >= max_loops:
            break
        loops *= 2
    runs = [elapsed / loops]
    for i in range(1, repeat):
        if progress is not None:
            progress(i, repeat)
        start = time.perf_counter()
        for _ in range(loops):
            _call_and_block(fn)
        runs.append((time.perf_counter() - start) / loops)
    if progress is not None:
        progress(repeat, repeat)
    return Timing(min(runs), runs, loops)
