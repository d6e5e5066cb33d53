"""Nested programs lowered as calls, as JAX lowers a ``jit`` inside a ``jit``: the body becomes
a private ``func.func @<name>`` of the module, emitted once per (jaxpr, lowering context) and
called with ``func.call`` wherever an equation runs it (its name made unique by the module's
symbol table: ``@f``, ``@f_0``...). XLA inlines the calls when it compiles, so the compiled
program is the one an inlined body gives."""
from __future__ import annotations

import dataclasses

from jaxkit import core, source_info
from jaxkit.interpreters import mlir


def _function_key(ctx: mlir.ModuleContext, name: str, closed: core.ClosedJaxpr,
                  metadata: source_info.NameStack) -> tuple:
    # What the body's lowering depends on besides the jaxpr (kept alive by the key, so its
    # identity stays its own): the axes in scope (pmap, shard_map), the platform, the mesh
    # and the XLA metadata of enclosing ``set_xla_metadata`` blocks.
    return (closed, name, tuple(ctx.axis_env), ctx.manual, ctx.platform,
            None if ctx.mesh is None else tuple(ctx.mesh), metadata)


def call_jaxpr(ctx: mlir.LoweringRuleContext, name: str, closed: core.ClosedJaxpr,
               *args: mlir.ir.Value) -> list[mlir.ir.Value]:
    """Lower a call of ``closed`` as a ``func.call`` of the private function ``@name``,
    emitting it the first time this jaxpr is called in this context. The function's op names
    start from the function itself (it may have several callers, as in JAX); the call is
    named ``caller's names/jit(name)``, which XLA puts before the body's op names when it
    inlines the call."""
    mctx = ctx.module_context
    metadata = source_info.NameStack(tuple(
        e for e in source_info.current_name_stack().stack if type(e) is source_info.Metadata))
    key = _function_key(mctx, name, closed, metadata)
    symbol = mctx.functions.get(key)
    if symbol is None:
        with mlir.ir.Location.unknown(), source_info.name_stack_context(metadata):
            symbol = mlir.private_function(dataclasses.replace(mctx, name_stack=""), name,
                                           closed)
        mctx.functions[key] = symbol
    loc = mlir.named_location(mctx, ctx.source_info, source_info.current_name_stack(),
                              f"jit({name})")
    with loc:
        call = mlir.func_dialect.CallOp([mlir.aval_to_ir_type(a) for a in closed.out_avals],
                                        mlir.ir.FlatSymbolRefAttr.get(symbol), list(args))
    return list(call.results)
