"""``jax.experimental.scheduling_groups``: mark a function's computation with XLA frontend
attributes, e.g. a scheduling group.

``xla_metadata_call(f, **meta)`` traces ``f`` into one ``xla_metadata_call[jaxpr=... **meta]``
equation, lowered as a ``func.call`` of a private function carrying
``mhlo.frontend_attributes = {meta}``; XLA's scheduler reads ``scheduling_group`` from there.
The attributes stay on the call through grad, vmap and jit (see ``_jaxpr_call``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxkit import core
from jaxkit._flat_tree import FlatTree  # noqa: F401  (a name JAX's module has)
from jaxkit._util import (safe_map, safe_zip, split_list, subs_list,  # noqa: F401
                          unzip2, weakref_lru_cache)
from jaxkit.experimental._jaxpr_call import bind_traced, call_body, make_jaxpr_call
from jaxkit.interpreters import mlir, partial_eval as pe
from jaxkit.interpreters.partial_eval import debug_info  # noqa: F401  (a name JAX's module has)
from jaxkit.tree_util import tree_flatten, tree_unflatten  # noqa: F401

__all__ = ["scheduling_group", "xla_metadata_call", "xla_metadata_call_p"]

ir = mlir.ir
func_dialect = mlir.func_dialect
map, zip = safe_map, safe_zip  # noqa: A001  (JAX's module rebinds them to the checked forms)


def scheduling_group(name: str) -> Callable[[Callable], Callable]:
    """Decorator: the function's computation forms XLA scheduling group ``name``."""
    return xla_metadata_call(scheduling_group=name)


def xla_metadata_call(f: Callable | None = None, **meta: Any) -> Callable:
    """``f`` (or, without ``f``, a decorator) whose computation carries the XLA frontend
    attributes ``meta`` (string values)."""
    if f is None:
        return lambda g: _xla_metadata_call(g, **meta)
    return _xla_metadata_call(f, **meta)


def _xla_metadata_call(fun: Callable, **meta: Any) -> Callable:
    def wrapped(*args, **kwargs):
        return bind_traced(xla_metadata_call_p, fun, args, kwargs, **meta)
    return wrapped


def attr_get(x: Any) -> Any:
    """The MLIR attribute of a frontend-attribute value (strings only, as in JAX)."""
    if isinstance(x, str):
        return ir.StringAttr.get(x)
    raise NotImplementedError(f"mlir attr handler for {type(x)=}")


def _lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: core.ClosedJaxpr, **meta):
    call = call_body(ctx, "xla_metadata_call", jaxpr, args)
    call.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {k: attr_get(v) for k, v in meta.items()})
    return list(call.results)


xla_metadata_call_p = make_jaxpr_call("xla_metadata_call", _lowering)
dce_jaxpr_xla_metadata_rule = pe.dce_rules[xla_metadata_call_p]
