"""Python host callbacks in lowered modules: ``pure_callback``, ``io_callback`` and
``debug.print`` become a custom call of jaxlib's typed-FFI Python callback handler of the
module's platform, which runs the i-th callable handed to the compiler."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxkit import core
from jaxkit.interpreters import mlir

# jaxlib's typed-FFI Python callback handler of each platform, as JAX names them.
_CALLBACK_TARGETS = {"cpu": "xla_ffi_python_cpu_callback", "cuda": "xla_ffi_python_gpu_callback"}


def emit_python_callback(ctx: mlir.LoweringRuleContext, callback: Callable, operands: Sequence,
                         result_avals: Sequence[core.ShapedArray], *,
                         has_side_effect: bool) -> list[mlir.ir.Value]:
    """Emit a call of the Python function ``callback`` on the host.

    ``callback`` receives the operands as read-only NumPy arrays and returns a sequence of NumPy
    arrays matching ``result_avals``. It becomes jaxlib's typed-FFI target
    ``xla_ffi_python_cpu_callback`` (``..._gpu_callback`` on a GPU); the attribute ``index``
    selects it among the module's ``host_callbacks`` (handed to the compiler by
    ``pjrt.compile_module``). A call with ``has_side_effect`` is never removed or duplicated
    by XLA."""
    if ctx.module_context.num_replicas != 1 or ctx.module_context.axis_env:
        raise NotImplementedError("Python callbacks (pure_callback, debug.print) inside pmap "
                                  "are not supported yet: call them outside the pmapped "
                                  "function (under jit or vmap they work)")
    index = len(ctx.module_context.host_callbacks)
    ctx.module_context.host_callbacks.append(callback)
    operand_ranks = [mlir.ir.RankedTensorType(x.type).rank for x in operands]
    op = mlir.hlo.CustomCallOp(
        [mlir.aval_to_ir_type(a) for a in result_avals], list(operands),
        call_target_name=mlir.ir.StringAttr.get(_CALLBACK_TARGETS[ctx.module_context.platform]),
        has_side_effect=mlir.ir.BoolAttr.get(has_side_effect),
        backend_config=mlir.ir.StringAttr.get(""),
        api_version=mlir.ir.IntegerAttr.get(mlir.ir.IntegerType.get_signless(32), 1),
        operand_layouts=mlir.layouts_attr([mlir.row_major(r) for r in operand_ranks]),
        result_layouts=mlir.layouts_attr([mlir.row_major(a.ndim) for a in result_avals]))
    op.operation.attributes["mhlo.backend_config"] = mlir.ir.DictAttr.get(
        {"index": mlir.ir.IntegerAttr.get(mlir.ir.IntegerType.get_unsigned(64), index)})
    return list(op.results)
