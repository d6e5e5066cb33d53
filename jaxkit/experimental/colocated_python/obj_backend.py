"""``jax.experimental.colocated_python.obj_backend``: the live instances of colocated classes
on a host, by instance id (``SINGLETON_OBJECT_STORE``).

The store hands out each instance through a ``_ConsumableRef``: strong until the first method
caller takes it, weak afterwards, so that the instance lives exactly as long as the method
callers of its wrapper (and ``__del__`` runs when the wrapper goes).
"""
from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["SINGLETON_OBJECT_STORE"]


class _ConsumableRef:
    """A strong reference until first called, a weak one after that."""

    __slots__ = ("strong_ref", "weak_ref", "_mutex")

    def __init__(self, obj: Any) -> None:
        self.strong_ref = obj
        self.weak_ref: weakref.ref | None = None
        # Reentrant: a method caller's __del__ may consume the ref during garbage collection
        # while this thread already holds the lock.
        self._mutex = threading.RLock()

    def __call__(self) -> Any:
        with self._mutex:
            if self.strong_ref is not None:
                obj, self.strong_ref = self.strong_ref, None
                self.weak_ref = weakref.ref(obj)
                return obj
            return None if self.weak_ref is None else self.weak_ref()

    def __reduce__(self):
        with self._mutex:
            obj = self.strong_ref if self.strong_ref is not None else (
                None if self.weak_ref is None else self.weak_ref())
            return type(self), (obj,)


@dataclasses.dataclass(frozen=True, slots=True)
class _ObjectState:
    is_being_initialized: bool
    exc: Exception | None = None
    obj: Any = None


class _ObjectStore:
    """Objects by id, each made once by its initializer; a thread asking while another one
    makes it waits, and an initializer's exception is raised to every later asker."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._storage: dict[int, _ObjectState] = {}

    def get_or_create(self, uid: int, initializer: Callable[[], Any]) -> Any:
        with self._lock:
            if uid in self._storage:
                while self._storage[uid].is_being_initialized:
                    self._lock.wait()
                state = self._storage[uid]
                if state.exc is not None:
                    raise state.exc
                return state.obj
            self._storage[uid] = _ObjectState(is_being_initialized=True)
        try:
            obj = initializer()
        except Exception as exc:
            with self._lock:
                self._storage[uid] = _ObjectState(is_being_initialized=False, exc=exc)
                self._lock.notify_all()
            raise
        with self._lock:
            self._storage[uid] = _ObjectState(is_being_initialized=False, obj=obj)
            self._lock.notify_all()
        return obj


SINGLETON_OBJECT_STORE = _ObjectStore()
