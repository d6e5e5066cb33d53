"""The timing rule every bench script shares.

The machine is shared, so each contender is timed in short windows interleaved with the others,
and the best window counts: it is the least disturbed one. The first call of each (compiling)
is left out.
"""
from __future__ import annotations

import time
from collections.abc import Callable


def best_per_call(fns: dict[str, Callable[[], object]], number: int,
                  windows: int) -> dict[str, float]:
    """Interleave timing windows of every function; best seconds per call for each."""
    best = {name: float("inf") for name in fns}
    for fn in fns.values():  # warm up (compiles)
        fn()
    for _ in range(windows):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / number)
    return best
