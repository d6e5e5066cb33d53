"""``jax.experimental.colocated_python.obj``: colocated Python classes.

``wrap_class(cls, cls_sourceinfo)`` gives the class ``colocated_python_class`` returns. Its
instances hold the constructor's arguments and one colocated callable per method of ``cls``;
the real instance is made at the first method call, in the host's object store
(``obj_backend.SINGLETON_OBJECT_STORE``), and dropped with the wrapper. The controller's
registry (``SINGLETON_INSTANCE_REGISTRY``) records, per instance, the devices its methods
have run on.
"""
from __future__ import annotations

import inspect
import random
import threading
from collections.abc import Callable
from typing import Any

from jaxkit import tree_util
from jaxkit._util import wraps
from jaxkit.experimental.colocated_python import func, obj_backend
from jaxkit.source_info import api_boundary
from jaxkit.transforms.cache_registry import register_backend_cache as register_cache

__all__ = ["SINGLETON_INSTANCE_REGISTRY", "api_boundary", "register_cache", "wrap_class"]


class _InstanceRegistry:
    """The live colocated instances of this controller and the devices each has run on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._storage: dict[int, set[Any]] = {}
        register_cache(self, "colocated_python_instance_registry")

    def new_instance(self) -> int:
        """A fresh id for a new instance."""
        uid = random.getrandbits(63)
        with self._lock:
            assert uid not in self._storage
            self._storage[uid] = set()
        return uid

    def update_devices(self, uid: int, device_set: set[Any]) -> None:
        """Add ``device_set`` to the devices instance ``uid`` has run on."""
        with self._lock:
            self._storage[uid] |= device_set

    def pop_instance(self, uid: int) -> set[Any]:
        """Forget instance ``uid``; the devices it ran on."""
        with self._lock:
            return self._storage.pop(uid)

    def cache_clear(self) -> None:
        with self._lock:
            self._storage = {}


SINGLETON_INSTANCE_REGISTRY = _InstanceRegistry()


def _record_devices(uid: int, leaves: list) -> None:
    devices: set[Any] = set()
    for x in leaves:
        devices |= func._get_spec(x).sharding.device_set
    SINGLETON_INSTANCE_REGISTRY.update_devices(uid, devices)


def _make_method(cls: type, cls_sourceinfo: str | None, uid: int, init_args: tuple,
                 init_kwargs: dict, method_name: str,
                 original_method: Callable[..., Any]) -> Callable:

    class MethodCallerAtBackend:
        """Calls ``method_name`` on the instance, made (once per ``uid``) at the first call
        of any of the wrapper's methods."""

        def __init__(self) -> None:
            self._lock = threading.Lock()

        def __reduce__(self):
            return type(self), ()

        def __call__(self, *args, **kwargs):
            with self._lock:
                if not hasattr(self, "obj"):
                    ref = obj_backend.SINGLETON_OBJECT_STORE.get_or_create(
                        uid, lambda: obj_backend._ConsumableRef(cls(*init_args, **init_kwargs)))
                    self.obj = ref()
            return getattr(self.obj, method_name)(*args, **kwargs)

        def __del__(self):
            if not hasattr(self, "obj"):
                # Nobody took the instance: consume the store's strong reference now, so that
                # it does not outlive the wrapper.
                obj_backend.SINGLETON_OBJECT_STORE.get_or_create(
                    uid, lambda: obj_backend._ConsumableRef(None))()

    callable_ = func.make_callable(MethodCallerAtBackend(), cls_sourceinfo,
                                   inspect.signature(original_method))

    def make_method_wrapper(callable_: Callable) -> Callable:
        @api_boundary
        def method_wrapper(*args, **kwargs):
            in_leaves = tree_util.tree_leaves((args, kwargs))
            if in_leaves:
                _record_devices(uid, in_leaves)
            result = callable_(*args, **kwargs)
            if not in_leaves:  # the results then say where the instance ran
                _record_devices(uid, tree_util.tree_leaves(result))
            return result

        def specialize(*args, **kwargs) -> Callable:
            return make_method_wrapper(callable_.specialize(*args, **kwargs))

        method_wrapper = wraps(original_method)(method_wrapper)
        method_wrapper.specialize = specialize
        return method_wrapper

    return make_method_wrapper(callable_)


def wrap_class(cls: type, cls_sourceinfo: str | None) -> type:
    """A class standing for ``cls`` whose instances run ``cls``'s methods as colocated Python
    callables on one lazily made instance of ``cls`` (see the module docstring)."""

    class WrappedClass:
        @wraps(cls.__init__)
        def __init__(self, *init_args, **init_kwargs) -> None:
            uid = self._colocated_python_uid = SINGLETON_INSTANCE_REGISTRY.new_instance()
            for name in dir(cls):
                member = getattr(cls, name)
                # The wrapper owns construction and deletion, and is not picklable.
                if not inspect.isfunction(member) or name in (
                        "__init__", "__del__", "__reduce__", "__reduce_ex__"):
                    continue
                setattr(self, name, _make_method(cls, cls_sourceinfo, uid, init_args,
                                                 init_kwargs, name, member))

    WrappedClass.__name__ = cls.__name__
    WrappedClass.__doc__ = cls.__doc__
    return WrappedClass
