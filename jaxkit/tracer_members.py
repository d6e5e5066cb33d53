"""The members of ``jax.Array`` that only a concrete array has, on tracers, as JAX's tracers
have them: a program being traced has no device memory, shards or creation traceback, so
each says so (``ConcretizationTypeError``, naming the member) instead of Python's bare
"object has no attribute". ``sharding``, ``device``, ``block_until_ready`` and
``copy_to_host_async`` raise ``AttributeError`` as in JAX, so that ``hasattr`` and
``getattr(x, name, default)`` tell tracers from arrays. Installed on ``core.Tracer`` at
import (``jaxkit/__init__``); the NumPy-style members are ``jaxkit.numpy``'s.
"""
from __future__ import annotations

import operator

from jaxkit import core

def _concrete_method(name: str, what: str):
    def method(self, *args, **kwargs):
        # (JAX's member texts name the tracer and its origin, which the error then repeats)
        origin = self._origin_msg() if "{tracer}" in what else ""
        raise core.concretization_error(self, what.format(
            name=name, tracer=self._error_repr()) + origin)
    method.__name__ = name
    return method


def _concrete_property(name: str, what: str):
    def getter(self):
        raise core.concretization_error(self, what.format(
            name=name, tracer=self._error_repr()) + self._origin_msg())
    return property(getter)


def _absent(name: str, kind: str, origin: bool = True, hint: str = ""):
    """A member that raises AttributeError on a tracer (JAX's words)."""
    def getter(self):
        where = self._origin_msg() if origin else ""
        raise AttributeError(f"The {name!r} {kind} is not available on {self._error_repr()}."
                             f"{where}{hint}")
    return property(getter)


def _no_device(self):
    raise AttributeError(f"{type(self).__name__} has no attribute device")


# JAX's words for each member (its tracers name the member, then say where the value came from)
_CALLED = "The {name}() method was called on {tracer}."
_PROPERTY = "The {name} property was called on {tracer}."
_ATTRIBUTE = "The '{name}' attribute is not available on {tracer}."
_METHODS = {name: _CALLED for name in (
    "__dlpack__", "tobytes", "addressable_data", "delete", "devices", "is_deleted",
    "on_device_size_in_bytes", "unsafe_buffer_pointer")}
_METHODS["__reduce__"] = ("The error occurred in the __reduce__ method, which may indicate an "
                          "attempt to serialize/pickle a traced value.")
_PROPERTIES = {"addressable_shards": _ATTRIBUTE, "committed": _ATTRIBUTE,
               **{name: _PROPERTY for name in ("global_shards", "is_fully_addressable",
                                               "is_fully_replicated", "traceback")}}


def _reversed(self):
    return iter(self[::-1])


def _copy(self):
    return self.copy()


def _deepcopy(self, memo):
    del memo
    return self.copy()


def _hex(self):
    return hex(operator.index(self))


def _oct(self):
    return oct(operator.index(self))


def install(cls: type = core.Tracer) -> None:
    for name, what in _METHODS.items():
        setattr(cls, name, _concrete_method(name, what))
    for name, what in _PROPERTIES.items():
        setattr(cls, name, _concrete_property(name, what))
    cls.sharding = _absent("sharding", "attribute", origin=False,
                           hint=" To query sharding information on tracers, use "
                                "`jax.typeof(x)`.")
    cls.device = property(_no_device)
    cls.block_until_ready = _absent("block_until_ready", "method")
    cls.copy_to_host_async = _absent("copy_to_host_async", "method")
    cls.__reversed__ = _reversed
    cls.__copy__ = _copy
    cls.__deepcopy__ = _deepcopy
    cls.__hex__, cls.__oct__ = _hex, _oct


install()
