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
from jaxkit._tracer_errors import ConcretizationTypeError

_FIX = "call it on the concrete array the transformed function returns, outside of it"


def _traced(tracer: core.Tracer) -> str:
    return f"traced array with shape {tracer.aval.str_short(short_dtypes=False)}"


def _concrete_method(name: str):
    def method(self, *args, **kwargs):
        raise ConcretizationTypeError(core.concretization_message(
            self, f"The {name}() method was called on a traced array", _FIX))
    method.__name__ = name
    return method


def _concrete_property(name: str):
    def getter(self):
        raise ConcretizationTypeError(core.concretization_message(
            self, f"The {name!r} attribute is not available on a traced array", _FIX))
    return property(getter)


def _absent(name: str, kind: str, hint: str = ""):
    def getter(self):
        raise AttributeError(f"The {name!r} {kind} is not available on {_traced(self)}."
                             f"{hint}")
    return property(getter)


_METHODS = ("__dlpack__", "__reduce__", "tobytes", "addressable_data", "delete", "devices",
            "is_deleted", "on_device_size_in_bytes", "unsafe_buffer_pointer")
_PROPERTIES = ("addressable_shards", "committed", "global_shards", "is_fully_addressable",
               "is_fully_replicated", "traceback")


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
    for name in _METHODS:
        setattr(cls, name, _concrete_method(name))
    for name in _PROPERTIES:
        setattr(cls, name, _concrete_property(name))
    cls.sharding = _absent("sharding", "attribute",
                           " To query sharding information on tracers, use "
                           "`jaxkit.typeof(x)`.")
    cls.device = _absent("device", "attribute")
    cls.block_until_ready = _absent("block_until_ready", "method")
    cls.copy_to_host_async = _absent("copy_to_host_async", "method")
    cls.__reversed__ = _reversed
    cls.__copy__ = _copy
    cls.__deepcopy__ = _deepcopy
    cls.__hex__, cls.__oct__ = _hex, _oct


install()
