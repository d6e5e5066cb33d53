"""``composite``: a function whose lowering may be chosen by the backend.

* ``composite(decomposition, name, version)`` wraps a function as one named
  ``stablehlo.composite`` op: backends that know ``name`` may replace it with their own
  kernel, the others inline ``decomposition`` (emitted as a private function). The primitive
  carries the decomposition's closed jaxpr. JAX defines no JVP or batching rule for it;
  jaxkit differentiates the decomposition (the primal stays one composite op) and batches it
  into a composite of the batched decomposition.

(``platform_dependent``, a ``cond`` on the lowering platform, is in ``cond.py``.)
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from jaxkit import core
from jaxkit import tree_util
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax.bodies import avals_of, run_jaxpr, trace_function

__all__ = ["composite", "composite_p"]

_OP_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*([.][a-zA-Z0-9_$]+)+")


# ---- composite -----------------------------------------------------------------------------
def composite(decomposition: Callable, name: str, version: int = 0) -> Callable:
    """Wrap ``decomposition`` so that each call is one ``stablehlo.composite`` op named
    ``name``. Positional arguments are the op's operands (pytrees of arrays); keyword
    arguments are its attributes (Python or NumPy scalars, strings, arrays), passed to
    ``decomposition`` as constants. ``name`` is namespaced, as StableHLO requires
    (``"my_namespace.my_op"``)."""
    if not _OP_NAME.fullmatch(name):
        raise ValueError(f"composite name {name!r} is not a namespaced op name: StableHLO "
                         'requires one like "my_namespace.my_op" (dot-separated identifiers)')

    @wraps(decomposition)
    def call(*args, **kwargs):
        flat, in_tree = tree_util.tree_flatten(args)
        fun = lambda *a: decomposition(*a, **kwargs)  # noqa: E731
        closed, consts, out_tree = trace_function(fun, in_tree, avals_of(flat),
                                                  f"composite {name}")
        attributes = tuple((k, tuple(leaves), treedef) for k, (leaves, treedef) in
                           ((k, tree_util.tree_flatten(v)) for k, v in kwargs.items()))
        # values the decomposition closes over are leading operands (they may be traced)
        outs = composite_p.bind(*consts, *flat, name=name, attributes=attributes,
                                version=int(version), jaxpr=closed)
        return tree_util.tree_unflatten(out_tree, outs)

    return call


def _composite_jvp(primals, tangents, *, name, attributes, version, jaxpr):
    outs = composite_p.bind(*primals, name=name, attributes=attributes, version=version,
                            jaxpr=jaxpr)
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    _, out_tangents, _ = ad.jvp_flat(lambda *a: run_jaxpr(jaxpr, *a), primals, tangents)
    return outs, out_tangents


def _composite_batch(axis_data, args, dims, *, name, attributes, version, jaxpr):
    batched, out_dims = batching.batch_jaxpr_axes(jaxpr, axis_data, dims)
    return composite_p.bind(*args, name=name, attributes=attributes, version=version,
                            jaxpr=batched), out_dims


def _attribute(value: Any) -> ir.Attribute:
    """A composite attribute for a Python/NumPy value, typed as JAX types it."""
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get(ir.F64Type.get(), value)
    return ir.DenseElementsAttr.get(value) if hasattr(value, "shape") and value.shape else \
        _attribute(value.item())


def _composite_lowering(ctx, *args, name, attributes, version, jaxpr):
    symbol = mlir.private_function(ctx.module_context, name, jaxpr)
    attrs = {}
    for key, leaves, treedef in attributes:
        value = tree_util.tree_unflatten(treedef, leaves)
        if value is not None:
            attrs[key] = _attribute(value)
    op = hlo.CompositeOp([mlir.aval_to_ir_type(a) for a in ctx.avals_out], list(args),
                         name=ir.StringAttr.get(name),
                         decomposition=ir.FlatSymbolRefAttr.get(symbol),
                         num_composite_regions=0,
                         composite_attributes=ir.DictAttr.get(attrs),
                         version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), version))
    return list(op.results)


composite_p = core.Primitive("composite")
composite_p.multiple_results = True
composite_p.def_impl(lambda *args, jaxpr, **_: run_jaxpr(jaxpr, *args))
composite_p.def_abstract_eval(lambda *avals, jaxpr, **_: list(jaxpr.out_avals))
ad.jvp_rules[composite_p] = _composite_jvp
batching.defrule(composite_p, _composite_batch)
mlir.register_lowering(composite_p, _composite_lowering)
