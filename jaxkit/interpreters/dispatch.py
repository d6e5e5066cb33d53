"""Eager execution: a primitive applied to concrete values is a one-equation jit.

Each (primitive, input avals, params, device) compiles once; afterwards a call costs a dict
lookup, the argument buffers and one ``execute_sharded``. No pytree work, no re-tracing.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

from jaxkit import core
from jaxkit.interpreters import debug_nans
from jaxkit.runtime import pjrt
from jaxkit.runtime.array import Array, to_buffer
from jaxkit._config import config
from jaxkit.core import Jaxpr, JaxprEqn, ShapedArray, Var
from jaxkit.interpreters import mlir

_Executable = pjrt.Executable


class _EagerEntry:
    __slots__ = ("executable", "multiple_results")

    def __init__(self, executable: _Executable, multiple_results: bool):
        self.executable = executable
        self.multiple_results = multiple_results


_eager_cache: dict = {}
compile_stats = {"eager_compiles": 0, "eager_compile_seconds": 0.0}


def _clear_cache(name, value):
    if name == "jax_enable_x64":
        _eager_cache.clear()


config.on_change(_clear_cache)


def apply_primitive(prim: core.Primitive, *args, **params):
    """Run ``prim`` on concrete arguments (the impl rule of most primitives)."""
    avals = tuple([x.aval if type(x) is Array else core.get_aval(x) for x in args])
    try:
        key = (prim, avals, tuple(params.items()))
        entry = _eager_cache.get(key)
    except TypeError:  # unhashable params: compile without caching
        key, entry = None, None
    if entry is None:
        entry = _compile_primitive(prim, avals, params)
        if key is not None:
            _eager_cache[key] = entry
    bufs = [x._buf if type(x) is Array else to_buffer(x, a) for x, a in zip(args, avals)]
    outs = entry.executable(bufs)
    if config.jax_debug_nans:
        debug_nans.check_primitive(prim, [Array(b) for b in outs])
    if entry.multiple_results:
        return [Array(b) for b in outs]
    return Array(outs[0])


def primitive_jaxpr(prim: core.Primitive, avals: Sequence[ShapedArray], params: dict) -> Jaxpr:
    """A jaxpr with a single equation applying ``prim``."""
    invars = [Var(a) for a in avals]
    out = prim.abstract_eval(*avals, **params)
    out_avals = list(out) if prim.multiple_results else [out]
    outvars = [Var(a) for a in out_avals]
    return Jaxpr([], invars, outvars, [JaxprEqn(prim, invars, outvars, dict(params))])


def _compile_primitive(prim, avals, params) -> _EagerEntry:
    start = time.perf_counter()
    jaxpr = primitive_jaxpr(prim, avals, params)
    module = mlir.lower_jaxpr(prim.name, jaxpr)
    exe = pjrt.compile_module(module, jaxpr.out_avals)
    compile_stats["eager_compiles"] += 1
    compile_stats["eager_compile_seconds"] += time.perf_counter() - start
    return _EagerEntry(exe, prim.multiple_results)
