"""Python host callbacks in lowered modules: ``pure_callback``, ``io_callback`` and
``debug.print`` become a custom call of jaxlib's typed-FFI Python callback handler of the
module's platform, which runs the i-th callable handed to the compiler.

Which devices call it depends on the program (as in JAX):

* one device, or ``pmap``'s replicas: every device runs its own call on its own values (the
  module's ``host_callbacks`` are handed to every replica);
* a program partitioned over a mesh with automatic layouts: the call gets a *maximal* Shardy
  sharding, so XLA gathers the operands on one device (device 0 of the program, or the one
  ``sharding`` names) and calls once with the whole values;
* a ``shard_map`` body manual over all the mesh's axes: every device calls with its block
  (over only some axes: refused here; the debug callbacks make the rest manual first).

An *ordered* effect (``debug.print(ordered=True)``) is refused in a program over several
devices, as JAX refuses it, unless its kind may be sharded (``io_callback(ordered=True)``);
inside a ``shard_map`` body it runs per device (as JAX's eager ``shard_map`` does; JAX's
``jit`` of one refuses it, which jaxkit cannot tell apart at lowering). Ordered calls
take and return a token, one chain per effect kind and block, so that XLA keeps their program
order (without one, its CPU scheduler ran independent calls even in reverse). The chain
crosses into nested blocks (loop bodies, branches, private functions): their lowerings carry
the tokens in and out (``mlir_tokens``), as JAX's do.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jaxkit import core
# The IR half of mlir (mlir.py imports this module: JAX's mlir.emit_python_callback uses it).
from jaxkit.interpreters import mlir_ir as mlir
from jaxkit.interpreters import mlir_tokens

if TYPE_CHECKING:
    from jaxkit.interpreters.mlir import LoweringRuleContext, ModuleContext

# jaxlib's typed-FFI Python callback handlers of each platform, as JAX names them. The
# ``partitioned`` one is split by XLA's partitioner: each device calls with its own shard.
_CALLBACK_DEVICES = {"cpu": "cpu", "cuda": "gpu"}


def _target(platform: str, partitioned: bool) -> str:
    return f"xla_ffi{'_partitioned' if partitioned else ''}_python_" \
        f"{_CALLBACK_DEVICES[platform]}_callback"


def _num_devices(mctx: ModuleContext) -> int:
    parts = math.prod(size for _, size in mctx.mesh) if mctx.mesh is not None else 1
    return mctx.num_replicas * parts


def _manual_axes(mctx: ModuleContext) -> frozenset:
    return mctx.manual if isinstance(mctx.manual, frozenset) else frozenset()


def check_ordered_effect(mctx: ModuleContext, effect: Any) -> None:
    """Raise JAX's error for an ordered ``effect`` that may not run over several devices (its
    ``shardable`` is false) in a program over several devices. A ``shard_map`` body manual
    over all its axes runs per device and keeps it (as JAX's eager shard_map does)."""
    if effect is None or getattr(effect, "shardable", False):
        return
    if _num_devices(mctx) > 1 and not _manual_axes(mctx):
        raise ValueError("The following ordered effects are not supported for more than 1 "
                         f"device: [{effect!r}]")


def _sdy_sharding(mctx: ModuleContext, result_avals: Sequence[core.ShapedArray],
                  device_index: int | None, with_token: bool) -> str | None:
    """The ``sdy.sharding`` of the callback op (None outside a partitioned program): one
    per result, the token (``with_token``) first; one for the op when it has no result."""
    if mctx.mesh is None:
        return None
    manual = _manual_axes(mctx)
    if manual:
        if manual != frozenset(name for name, _ in mctx.mesh):
            raise NotImplementedError(
                "callbacks are only supported in spmd computations when all mesh axes are "
                "partitioned manually (no partial automatic sharding).")
        # Per device: each result on the empty mesh, its dimensions closed.
        mesh = "mesh<[]>"
        values = [f"<{mesh}, [{', '.join(['{}'] * a.ndim)}]>" for a in result_avals]
    else:
        # Once, on one device, with the whole values: a maximal sharding.
        mesh = f"mesh<[], device_ids=[{0 if device_index is None else device_index}]>"
        values = [f"<{mesh}, []>"] * len(result_avals)
    if with_token or not values:
        values.insert(0, f"<{mesh}, []>")
    return f"#sdy.sharding_per_value<[{', '.join(values)}]>"


def _passing_token(callback: Callable) -> Callable:
    """``callback`` called with the token first, which it hands back before its results."""

    def with_token(token, *args):
        return (token, *callback(*args))

    return with_token


def emit_python_callback(ctx: LoweringRuleContext, callback: Callable, operands: Sequence,
                         result_avals: Sequence[core.ShapedArray], *,
                         has_side_effect: bool, ordered_effect: Any = None,
                         device_index: int | None = None,
                         partitioned: bool = False) -> list[mlir.ir.Value]:
    """Emit a call of the Python function ``callback`` on the host.

    ``callback`` receives the operands as read-only NumPy arrays and returns a sequence of NumPy
    arrays matching ``result_avals``. It becomes jaxlib's typed-FFI target
    ``xla_ffi_python_cpu_callback`` (``..._gpu_callback`` on a GPU); the attribute ``index``
    selects it among the module's ``host_callbacks`` (handed to the compiler by the runtime's
    ``compile_with_host_callbacks``). A call with ``has_side_effect`` is never removed or
    duplicated by XLA. ``ordered_effect``: the effect of an ordered call (checked against the
    program's devices); ``device_index``: in a program partitioned over a mesh (outside a
    ``shard_map`` body), the partition that calls (default 0); ``partitioned``: there, each
    device calls with its shard of the operands instead (no results allowed), as JAX's
    ``debug.print(partitioned=True)``."""
    mctx = ctx.module_context
    if partitioned and result_avals:
        raise ValueError("Partitioned callback not supported with return values.")
    check_ordered_effect(mctx, ordered_effect)
    sharding = _sdy_sharding(mctx, result_avals, device_index,
                             with_token=ordered_effect is not None)
    operands = list(operands)
    result_types = [mlir.aval_to_ir_type(a) for a in result_avals]
    ranks_in = [mlir.ir.RankedTensorType(x.type).rank for x in operands]
    ranks_out = [a.ndim for a in result_avals]
    kinds = [type(ordered_effect)] if ordered_effect is not None else []
    if kinds:
        # An ordered call takes the current token of its effect kind and returns the next
        # one: XLA keeps their order (as JAX's tokens do).
        operands = [*mlir_tokens.current_tokens(mctx, kinds), *operands]
        result_types = [mlir.hlo.TokenType.get(), *result_types]
        ranks_in, ranks_out = [0, *ranks_in], [0, *ranks_out]
        callback = _passing_token(callback)
    index = len(mctx.host_callbacks)
    mctx.host_callbacks.append(callback)
    op = mlir.hlo.CustomCallOp(
        result_types, operands,
        call_target_name=mlir.ir.StringAttr.get(_target(mctx.platform, partitioned)),
        has_side_effect=mlir.ir.BoolAttr.get(has_side_effect),
        backend_config=mlir.ir.StringAttr.get(""),
        api_version=mlir.ir.IntegerAttr.get(mlir.ir.IntegerType.get_signless(32), 1),
        operand_layouts=mlir.layouts_attr([mlir.row_major(r) for r in ranks_in]),
        result_layouts=mlir.layouts_attr([mlir.row_major(r) for r in ranks_out]))
    op.operation.attributes["mhlo.backend_config"] = mlir.ir.DictAttr.get(
        {"index": mlir.ir.IntegerAttr.get(mlir.ir.IntegerType.get_unsigned(64), index)})
    if sharding is not None:
        op.operation.attributes["sdy.sharding"] = mlir.ir.Attribute.parse(sharding)
    results = list(op.results)
    mlir_tokens.set_tokens(mctx, kinds, results[:len(kinds)])
    return results[len(kinds):]
