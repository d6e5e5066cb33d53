"""``jax.experimental.fused``: ``fused(out_spaces=...)(f)`` asks XLA to compile ``f`` as one
fusion whose outputs live in the given memory spaces.

``f`` becomes one ``fused_call[jaxpr=... out_spaces=...]`` equation that differentiates, vmaps
and stages like any call (see ``_jaxpr_call``). JAX lowers it only on CUDA GPUs, to an XLA:GPU
``custom_call @fused`` marked ``MUST_FUSE``; on CPU JAX raises ``NotImplementedError`` when it
lowers, and so does jaxkit (whose GPU plugin has no such lowering either). Tracing
(``make_jaxpr``, ``jvp``/``vmap`` of the jaxpr) works everywhere. jaxkit's avals have no
memory space, so the body prints without JAX's ``<any>`` annotation.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import core
from jaxkit._util import safe_map, safe_zip, unzip2, weakref_lru_cache  # noqa: F401
from jaxkit.api_namespaces import MemorySpace
from jaxkit.api_extra import typeof  # noqa: F401
from jaxkit.experimental._jaxpr_call import bind_traced, make_jaxpr_call
from jaxkit.interpreters import mlir
from jaxkit.interpreters.partial_eval import debug_info  # noqa: F401
from jaxkit.tree_util import tree_flatten, tree_unflatten  # noqa: F401

__all__ = ["fused", "fused_p"]

ir = mlir.ir
map, zip = safe_map, safe_zip  # noqa: A001  (JAX's module rebinds them to the checked forms)


def fused(*, out_spaces: Sequence[MemorySpace]) -> Callable[[Callable], Callable]:
    """Decorator: the function's computation is one XLA fusion whose outputs go to
    ``out_spaces`` (one ``jax.memory.Space`` per output). Lowers on CUDA GPUs only."""
    out_spaces = tuple(out_spaces)
    for s in out_spaces:
        if not isinstance(s, MemorySpace):
            raise TypeError(f"fused: out_spaces must hold jax.memory.Space values, got {s!r}")

    def wrap(f: Callable) -> Callable:
        def wrapped(*args):
            return bind_traced(fused_p, f, args, {}, out_spaces=out_spaces)
        return wrapped
    return wrap


def _lowering(ctx: mlir.LoweringRuleContext, *args: Any, jaxpr: core.ClosedJaxpr,
              out_spaces: tuple):
    _no_cpu_lowering()


def _impl(*args: Any, jaxpr: core.ClosedJaxpr, out_spaces: tuple):
    _no_cpu_lowering()  # JAX compiles the equation eagerly, which fails the same way


def _out_params(params: dict, sources: Sequence[int | None]) -> dict:
    # A tangent or batched output lives where its primal does; residuals and input
    # cotangents on the device (JAX gives a cotangent its input's space: device for arrays).
    spaces = params["out_spaces"]
    return dict(params, out_spaces=tuple(MemorySpace.Device if i is None else spaces[i]
                                         for i in sources))


def _no_cpu_lowering():
    raise NotImplementedError(
        "MLIR translation rule for primitive 'fused_call' not found for platform cpu: "
        "jax.experimental.fused lowers only on CUDA GPUs, to XLA:GPU's must-fuse custom call, "
        "which jaxkit does not implement. Call the function without @fused to run it here.")


fused_p = make_jaxpr_call("fused_call", _lowering, impl=_impl, out_params=_out_params)
