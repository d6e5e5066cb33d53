"""StableHLO modules as bytes, and modules inlined into others: the jaxlib side of ``export``.

``serialize`` writes a module as a StableHLO *portable artifact* (versioned VHLO bytecode, the
form JAX's ``Exported.mlir_module_serialized`` holds), which later jaxlib versions promise to
read. ``deserialize`` reads it back into an MLIR context. ``inline_module`` copies the
functions of one module into another under fresh private names, so that a lowering can call an
exported program's ``main`` with ``func.call``. ``custom_call_targets`` lists the custom-call
targets a module calls, which ``export`` checks against the targets with stability guarantees.
"""
from __future__ import annotations

import itertools

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect
from jaxlib.mlir.dialects import stablehlo

_fresh = itertools.count()


def serialize(module: ir.Module) -> bytes:
    """``module`` as a portable artifact at the current StableHLO version."""
    text = module.operation.get_asm(binary=False, enable_debug_info=True)
    return stablehlo.serialize_portable_artifact_str(text, stablehlo.get_current_version())


def deserialize(context: ir.Context, data: bytes) -> ir.Module:
    """The module a portable artifact holds, parsed in ``context``."""
    return stablehlo.deserialize_portable_artifact(context, data)


def module_text(module: ir.Module, debug_info: bool = False) -> str:
    return module.operation.get_asm(enable_debug_info=debug_info)


def custom_call_targets(module: ir.Module) -> list[str]:
    """The ``call_target_name`` of every ``stablehlo.custom_call`` in ``module``, in order."""
    targets: list[str] = []

    def visit(op):
        if op.operation.name == "stablehlo.custom_call":
            targets.append(ir.StringAttr(op.operation.attributes["call_target_name"]).value)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return targets


def inline_module(target: ir.Module, module: ir.Module, prefix: str) -> str:
    """Move the functions of ``module`` (consumed) into ``target`` as private functions with
    fresh names (``<prefix>_<n>_<name>``); return the new name of its ``main``."""
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in prefix)
    suffix = f"{cleaned}_{next(_fresh)}"
    source_ops = [op.operation for op in module.body.operations]
    for op in source_ops:
        if op.name != "func.func":
            raise NotImplementedError(
                f"cannot call an exported module holding a top-level '{op.name}' op (only "
                "func.func is supported: sharded exports are not)")
    names = [ir.StringAttr(op.attributes["sym_name"]).value for op in source_ops]
    new_names = {n: f"{suffix}_{n}" for n in names}
    for name, new in new_names.items():
        ir.SymbolTable.replace_all_symbol_uses(name, new, module.operation)
    for op in source_ops:
        old = ir.StringAttr(op.attributes["sym_name"]).value
        op.attributes["sym_name"] = ir.StringAttr.get(new_names[old])
        op.attributes["sym_visibility"] = ir.StringAttr.get("private")
        target.body.append(op.detach_from_parent())
    return new_names["main"]


def call(callee: str, operands: list, result_types: list) -> list:
    """``func.call @callee(operands)`` at the current insertion point; its results."""
    op = func_dialect.CallOp(result_types, ir.FlatSymbolRefAttr.get(callee), operands)
    return list(op.results)
