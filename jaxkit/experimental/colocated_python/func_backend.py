"""``jax.experimental.colocated_python.func_backend``: where a host keeps the results of
colocated calls until the controller fetches them (``SINGLETON_RESULT_STORE``). jaxkit's calls
return their results directly; the store is the same small, thread-safe table, for code that
pushes and pops results by id itself."""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["SINGLETON_RESULT_STORE"]


class _ResultStore:
    """Results by call id, each pushed once and popped once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._storage: dict[int, Sequence[Any]] = {}

    def push(self, uid: int, out: Sequence[Any]) -> None:
        with self._lock:
            if uid in self._storage:
                raise ValueError(f"uid {uid} already exists")
            self._storage[uid] = out

    def pop(self, uid: int) -> Sequence[Any]:
        with self._lock:
            if uid not in self._storage:
                raise ValueError(f"uid {uid} does not exist")
            return self._storage.pop(uid)


SINGLETON_RESULT_STORE = _ResultStore()
