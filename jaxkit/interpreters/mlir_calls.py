"""Nested programs lowered as calls, as JAX lowers a ``jit`` inside a ``jit``: the body becomes
a private ``func.func @<name>`` of the module, emitted once per (jaxpr, lowering context) and
called with ``func.call`` wherever an equation runs it (its name made unique by the module's
symbol table: ``@f``, ``@f_0``...). XLA inlines the calls when it compiles, so the compiled
program is the one an inlined body gives. A body with ordered effects takes the current tokens
of their kinds as leading parameters and returns its last ones first (``mlir_tokens``), as
JAX's functions do."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from jaxkit import core, source_info
from jaxkit.interpreters import mlir, mlir_platforms, mlir_tokens


def _function_key(ctx: mlir.ModuleContext, name: str, closed: core.ClosedJaxpr,
                  metadata: source_info.NameStack) -> tuple:
    # What the body's lowering depends on besides the jaxpr (kept alive by the key, so its
    # identity stays its own): the axes in scope (pmap, shard_map), the platform, the mesh
    # and the XLA metadata of enclosing ``set_xla_metadata`` blocks.
    return (closed, name, tuple(ctx.axis_env), ctx.manual, ctx.platform, ctx.platforms,
            ctx.eqn_platforms, None if ctx.mesh is None else tuple(ctx.mesh), metadata)


def call_jaxpr(ctx: mlir.LoweringRuleContext, name: str, closed: core.ClosedJaxpr,
               *args: mlir.ir.Value, in_layouts: Sequence[str | None] = (),
               out_layouts: Sequence[str | None] = ()) -> list[mlir.ir.Value]:
    """Lower a call of ``closed`` as a ``func.call`` of the private function ``@name``,
    emitting it the first time this jaxpr is called in this context. The function's op names
    start from the function itself (it may have several callers, as in JAX); the call is
    named ``caller's names/jit(name)``, which XLA puts before the body's op names when it
    inlines the call. ``in_layouts``/``out_layouts`` (Shardy layouts, or None, per parameter
    and result) constrain the function's parameters and results, as JAX lowers a nested
    ``jit``'s ``in_shardings``/``out_shardings``: the values' types stay as they are."""
    mctx = ctx.module_context
    metadata = source_info.NameStack(tuple(
        e for e in source_info.current_name_stack().stack if type(e) is source_info.Metadata))
    in_layouts, out_layouts = tuple(in_layouts), tuple(out_layouts)
    key = (*_function_key(mctx, name, closed, metadata), in_layouts, out_layouts)
    kinds = mlir_tokens.ordered_effects(closed)
    symbol = mctx.functions.get(key)
    if symbol is None:
        with mlir.ir.Location.unknown(), source_info.name_stack_context(metadata):
            symbol = _private_function(dataclasses.replace(mctx, name_stack=""), name,
                                       closed, kinds, in_layouts, out_layouts)
        mctx.functions[key] = symbol
    loc = mlir.named_location(mctx, ctx.source_info, source_info.current_name_stack(),
                              f"jit({name})")
    with loc:
        return _call(mctx, symbol, closed, kinds, args)


def call_function(ctx: mlir.LoweringRuleContext, name: str, closed: core.ClosedJaxpr,
                  *args: mlir.ir.Value) -> list[mlir.ir.Value]:
    """Emit ``closed`` as a new private function ``@name`` (renamed if taken) and call it,
    passing the tokens of its ordered effects through (call primitives of ``jax.extend``)."""
    kinds = mlir_tokens.ordered_effects(closed)
    mctx = ctx.module_context
    return _call(mctx, _private_function(mctx, name, closed, kinds), closed, kinds, args)


def _call(mctx: mlir.ModuleContext, symbol: str, closed: core.ClosedJaxpr, kinds: list[type],
          args) -> list[mlir.ir.Value]:
    """A ``func.call`` of ``@symbol`` taking the current tokens of ``kinds`` first; the
    tokens it returns become the current ones."""
    call = mlir.func_dialect.CallOp(
        [*mlir_tokens.token_types(kinds), *map(mlir.aval_to_ir_type, closed.out_avals)],
        mlir.ir.FlatSymbolRefAttr.get(symbol),
        [*mlir_platforms.index_args(mctx), *mlir_tokens.current_tokens(mctx, kinds), *args])
    results = list(call.results)
    mlir_tokens.set_tokens(mctx, kinds, results[:len(kinds)])
    return results[len(kinds):]


def _private_function(mctx: mlir.ModuleContext, name: str, closed: core.ClosedJaxpr,
                      kinds: list[type], in_layouts: Sequence[str | None] = (),
                      out_layouts: Sequence[str | None] = ()) -> str:
    """``mlir.private_function`` with the tokens of ``kinds`` passed through the body and
    the parameters and results constrained to the given layouts."""
    if not (kinds or any(in_layouts) or any(out_layouts)):
        return mlir.private_function(mctx, name, closed)
    tokens = mlir_tokens.token_types(kinds)
    index = mlir_platforms.index_types(mctx)
    in_types = [*index, *tokens, *map(mlir.aval_to_ir_type, closed.in_avals)]
    out_types = [*tokens, *map(mlir.aval_to_ir_type, closed.out_avals)]
    with mlir.ir.InsertionPoint(mctx.module.body):
        fn = mlir.func_dialect.FuncOp(name, mlir.ir.FunctionType.get(in_types, out_types))
        fn.attributes["sym_visibility"] = mlir.ir.StringAttr.get("private")
        mlir.set_index_attrs(mctx, fn, len(tokens) + len(closed.in_avals))
        if kinds:  # JAX marks the token parameters and results ``{jax.token = true}``.
            marked = mlir.ir.DictAttr.get({"jax.token": mlir.ir.BoolAttr.get(True)})
            fn.arg_attrs = mlir.ir.ArrayAttr.get(
                [mlir.ir.DictAttr.get(a) for a in mlir_platforms.index_arg_attrs(mctx)] +
                [marked] * len(kinds) + [mlir.ir.DictAttr.get({})] * len(closed.in_avals))
            fn.result_attrs = mlir.ir.ArrayAttr.get(
                [marked] * len(kinds) + [mlir.ir.DictAttr.get({})] * len(closed.out_avals))
        symbol = mctx.insert_symbol(fn)  # before its body, as in ``mlir.private_function``
        entry = fn.add_entry_block()
        with mlir.ir.InsertionPoint(entry), mlir_platforms.function_body(
                mctx, entry.arguments) as args:
            mlir_tokens.set_tokens(mctx, kinds, args[:len(kinds)])
            outs = mlir.closed_subcomp(mctx, closed, *_constrained(args[len(kinds):],
                                                                   in_layouts))
            mlir.func_dialect.ReturnOp([*mlir_tokens.current_tokens(mctx, kinds),
                                        *_constrained(outs, out_layouts)])
    return symbol


def _constrained(values: Sequence[mlir.ir.Value], layouts: Sequence[str | None]) -> list:
    """``values``, each constrained to its layout in ``layouts`` (None or missing: as is)."""
    layouts = list(layouts) + [None] * (len(values) - len(layouts))
    return [v if s is None else mlir.sharding_constraint(v, s) for v, s in zip(values, layouts)]


def out_of_line(rule: Callable, name: str) -> Callable:
    """The lowering rule ``rule`` emitted out of line, as JAX's ``register_lowering(...,
    inline=False)``: its ops form a private ``func.func @name``, emitted once per (operand and
    result types, parameters) in a module and called with ``func.call`` at each equation (JAX
    lowers ``threefry2x32`` this way)."""

    def lowering(ctx: mlir.LoweringRuleContext, *args, **params):
        mctx = ctx.module_context
        key = ("out_of_line", rule, name, tuple(ctx.avals_in), tuple(ctx.avals_out),
               tuple(sorted(params.items())), tuple(mctx.axis_env), mctx.manual, mctx.platform,
               mctx.platforms, mctx.eqn_platforms,
               None if mctx.mesh is None else tuple(mctx.mesh))
        out_types = [mlir.aval_to_ir_type(a) for a in ctx.avals_out]
        symbol = mctx.functions.get(key)
        if symbol is None:
            symbol = _emit_function(ctx, rule, name, out_types, params)
            mctx.functions[key] = symbol
        call = mlir.func_dialect.CallOp(out_types, mlir.ir.FlatSymbolRefAttr.get(symbol),
                                        [*mlir_platforms.index_args(mctx), *args])
        results = list(call.results)
        return results if ctx.primitive is None or ctx.primitive.multiple_results \
            else results[0]

    return lowering


def _emit_function(ctx: mlir.LoweringRuleContext, rule: Callable, name: str, out_types: list,
                   params: dict) -> str:
    mctx = ctx.module_context
    in_types = [*mlir_platforms.index_types(mctx), *map(mlir.aval_to_ir_type, ctx.avals_in)]
    with mlir.ir.Location.unknown():
        with mlir.ir.InsertionPoint(mctx.module.body):
            fn = mlir.func_dialect.FuncOp(name, mlir.ir.FunctionType.get(in_types, out_types))
            fn.attributes["sym_visibility"] = mlir.ir.StringAttr.get("private")
            mlir.set_index_attrs(mctx, fn, len(ctx.avals_in))
            # Inserted before its body is lowered, so that the functions the body calls come
            # after it, in the order JAX emits them.
            symbol = mctx.insert_symbol(fn)
            entry = fn.add_entry_block()
        with mlir.ir.InsertionPoint(entry), mlir_platforms.function_body(
                mctx, entry.arguments) as params_in:
            inner = ctx.replace(module_context=dataclasses.replace(mctx, name_stack=""))
            outs = rule(inner, *params_in, **params)
            if not isinstance(outs, (list, tuple)):
                outs = [outs]
            mlir.func_dialect.ReturnOp(list(outs))
    return symbol
