"""``jax.experimental.custom_partitioning``: a function with its own SPMD partitioning.

``f = custom_partitioning(fun)`` with ``f.def_partition(partition, sharding_rule=...)`` runs
``fun`` unpartitioned where nothing is partitioned (eagerly, in a single-device program, inside
a ``shard_map`` that is manual over every mesh axis). In a program partitioned over a mesh it
lowers to a custom call that XLA partitions with Python callbacks (JAX's
``CustomSPMDPartitioning``; jaxkit's target is ``JaxkitCustomSPMDPartitioning``, see
``_CALL_TARGET``). Shardy propagates shardings through it with ``sharding_rule`` (an
einsum-like string, an ``SdyShardingRule`` or a callable making one), and XLA's SPMD
partitioner then calls ``partition(*static_args, mesh, arg_shapes, result_shape)`` back (the
shapes are ``ShapeDtypeStruct``s carrying the ``NamedSharding`` XLA proposes). ``partition``
returns the mesh, a per-device ``lower_fn`` and the shardings it wants; the operands are
resharded to those, and ``lower_fn``, traced at the per-device shapes with the mesh axes bound
for collectives, is inlined for every device.

The callbacks reach XLA through ``runtime.custom_partitioner``; the call's ``backend_config``
is the key of the information they need, kept alive as long as the lowered module.
"""
from __future__ import annotations

import inspect
import itertools
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import api, core, tree_util
from jaxkit.experimental.custom_partitioning_sharding_rule import (
    BATCHING, ArrayMapping, CompoundFactor, SdyShardingRule, sdy_sharding_rule_to_mlir,
    str_to_sdy_sharding_rule)
from jaxkit.interpreters import mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import parallel
from jaxkit.runtime import custom_partitioner
from jaxkit.runtime.sharding import (GSPMDSharding, Mesh, NamedSharding, PartitionSpec,
                                     named_from_hlo)

__all__ = ["BATCHING", "ArrayMapping", "CompoundFactor", "SdyShardingRule",
           "custom_partitioning", "custom_partitioning_p"]

# XLA keeps one partitioner per custom-call target name, process-wide. JAX registers its own
# for "CustomSPMDPartitioning" when it is imported, so jaxkit's calls use a name of their own
# (both libraries' calls then partition in the same process).
_CALL_TARGET = "JaxkitCustomSPMDPartitioning"


class _ShardedShape(api.ShapeDtypeStruct):
    """A ``ShapeDtypeStruct`` with the ``sharding`` XLA proposes (what ``partition`` gets)."""

    __slots__ = ("sharding",)

    def __init__(self, shape: Sequence[int], dtype: Any, sharding: Any):
        super().__init__(shape, dtype)
        self.sharding = sharding

    def __repr__(self) -> str:
        return (f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}, "
                f"sharding={self.sharding})")


_ShardedShape.__name__ = _ShardedShape.__qualname__ = "ShapeDtypeStruct"


class _CallInfo:
    """What the partitioner callbacks need to know about one lowered call."""

    def __init__(self, partition: Callable, in_tree: Any, out_tree: Any, mesh: Mesh,
                 static_args: tuple, decode_shardings: bool):
        self.partition = partition
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.mesh = mesh
        self.static_args = static_args
        self.decode_shardings = decode_shardings

    def sharding(self, hlo_sharding: Any, ndim: int) -> Any:
        """A ``NamedSharding`` on the mesh for XLA's ``HloSharding`` where one says the same
        (else, or without ``decode_shardings``, the HloSharding on the mesh's devices)."""
        named = named_from_hlo(self.mesh, hlo_sharding, ndim) if self.decode_shardings else None
        if named is not None:  # JAX spells out every dimension: P('x', None)
            spec = tuple(named.spec)
            return NamedSharding(self.mesh, PartitionSpec(*spec, *[None] * (ndim - len(spec))))
        # (undecoded: XLA's HloSharding on the mesh's devices)
        return GSPMDSharding.on(self.mesh._flat, hlo_sharding)

    def shapes(self, tree: Any, values: list, shardings: list) -> Any:
        return tree_util.tree_unflatten(tree, [
            _ShardedShape(dims, dtype, self.sharding(s, len(dims)))
            for (dims, dtype), s in zip(values, shardings)])


# backend_config -> its call's information; modules keep their calls' entries alive. Keys are
# unique to this process, so that the compilation cache never serves a module compiled with
# another process's partition rules (the rules are Python code the module does not contain).
_calls: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_module_calls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_call_ids = itertools.count()
_process_key = uuid.uuid4().hex


def _hlo_shardings(what: str, tree: Any, shardings: Any, values: list) -> list:
    try:
        flat = tree.flatten_up_to(shardings)
    except (ValueError, TypeError) as e:
        raise ValueError(f"custom_partitioning: partition's {what} must have the structure "
                         f"of the {what.split()[0]}s, {tree}: {e}") from None
    out = []
    for s, (dims, _) in zip(flat, values):
        if not hasattr(s, "_to_xla_hlo_sharding"):
            raise ValueError("Custom Partitioning rules must return Sharding.")
        out.append(s._to_xla_hlo_sharding(len(dims)))
    return out


def _partition_callback(arg_shapes, arg_shardings, result_shape, result_sharding,
                        backend_config):
    info = _calls[bytes(backend_config).decode()]
    args = [custom_partitioner.value_shapes(s)[0] for s in arg_shapes]
    results = custom_partitioner.value_shapes(result_shape)
    mesh, lower_fn, out_shardings, in_shardings = info.partition(
        *info.static_args, info.mesh, info.shapes(info.in_tree, args, list(arg_shardings)),
        info.shapes(info.out_tree, results,
                    custom_partitioner.value_shardings(result_sharding, result_shape)))
    out_hlo = _hlo_shardings("result sharding", info.out_tree, out_shardings, results)
    in_hlo = _hlo_shardings("argument shardings", info.in_tree, in_shardings, args)
    tiled_in = [core.ShapedArray(custom_partitioner.tile_shape(s, dims, dtype), dtype)
                for s, (dims, dtype) in zip(in_hlo, args)]
    tiled_out = [(custom_partitioner.tile_shape(s, dims, dtype), np.dtype(dtype))
                 for s, (dims, dtype) in zip(out_hlo, results)]
    closed = _trace_per_device(lower_fn, info.in_tree, tiled_in, mesh)
    got = [(a.shape, a.dtype) for a in closed.out_avals]
    if got != tiled_out:
        raise ValueError(f"Mismatch in result shapes. {closed.out_avals!r} vs "
                         f"{[core.ShapedArray(s, d) for s, d in tiled_out]!r}")
    module = _per_device_module(closed, mesh)
    return (custom_partitioner.module_bytecode(module), in_hlo,
            custom_partitioner.pack_shardings(result_shape, out_hlo))


def _trace_per_device(lower_fn: Callable, in_tree: Any, avals: list,
                      mesh: Mesh) -> core.ClosedJaxpr:
    """``lower_fn`` traced at the per-device types, every mesh axis bound for collectives."""
    with parallel.extend_axis_env_nd(mesh.shape_tuple):
        jaxpr, consts, _ = pe.trace_tree_to_jaxpr(
            lambda args: lower_fn(*args), in_tree, avals,
            pe.debug_info("custom_partitioning lower_fn", lower_fn, []))
    return core.ClosedJaxpr(jaxpr, consts)


def _per_device_module(closed: core.ClosedJaxpr, mesh: Mesh) -> ir.Module:
    """The module XLA inlines on every device: ``main`` computes ``closed`` on one device's
    blocks, its collectives over the mesh's axes as in a ``shard_map`` body."""
    with mlir.make_ir_context(), ir.Location.unknown():
        module = ir.Module.create()
        module.operation.attributes["sym_name"] = ir.StringAttr.get("tmp_xla_computation")
        ctx = mlir.ModuleContext(module, axis_env=mesh.shape_tuple, mesh=mesh.shape_tuple,
                                 device_assignment=tuple(mesh._flat),
                                 manual=frozenset(mesh.axis_names))
        in_types = [mlir.aval_to_ir_type(a) for a in closed.in_avals]
        out_types = [mlir.aval_to_ir_type(a) for a in closed.out_avals]
        with ir.InsertionPoint(module.body):
            fn = mlir.func_dialect.FuncOp("main", ir.FunctionType.get(in_types, out_types))
            fn.attributes["sym_visibility"] = ir.StringAttr.get("public")
            entry = fn.add_entry_block()
            with ir.InsertionPoint(entry):
                mlir.func_dialect.ReturnOp(mlir.closed_subcomp(ctx, closed, *entry.arguments))
        return module


def _no_gspmd_propagation(*_args) -> Any:
    raise NotImplementedError(
        "custom_partitioning: XLA asked for GSPMD sharding propagation "
        "(propagate_user_sharding / infer_sharding_from_operands), but jaxkit partitions with "
        "Shardy, which uses the sharding_rule")


custom_partitioner.register(_CALL_TARGET, _no_gspmd_propagation, _partition_callback,
                            _no_gspmd_propagation)


# ---- the primitive --------------------------------------------------------------------------
custom_partitioning_p = core.Primitive("custom_partitioning")
custom_partitioning_p.multiple_results = True


def _impl(*args, call: core.ClosedJaxpr, **_):
    return core.jaxpr_as_fun(call)(*args)


custom_partitioning_p.def_impl(_impl)
custom_partitioning_p.def_abstract_eval(lambda *avals, call, **_: call.out_avals)


def _mesh_of(mctx: mlir.ModuleContext) -> Mesh | None:
    """The mesh the program is partitioned over, unless it has one device or every axis is
    manual here (then there is nothing to partition)."""
    mesh = mctx.device_mesh()
    if mesh is None or mesh.size == 1:
        return None
    if isinstance(mctx.manual, frozenset) and set(mesh.axis_names) <= mctx.manual:
        return None
    return mesh


def _lowering(ctx: mlir.LoweringRuleContext, *values, call: core.ClosedJaxpr, in_tree,
              out_tree, propagate_user_sharding, partition, infer_sharding_from_operands,
              decode_shardings, sharding_rule, static_args):
    del propagate_user_sharding, infer_sharding_from_operands
    mctx = ctx.module_context
    mesh = _mesh_of(mctx)
    if mesh is None:  # the unpartitioned fallback: the function itself
        return mlir.closed_subcomp(mctx, call, *values)
    if partition is None:
        raise ValueError("custom_partitioning: the function is called in a partitioned "
                         "program, but def_partition was not called to give its partition "
                         "rule")
    info = _CallInfo(partition, in_tree, out_tree, mesh, static_args, decode_shardings)
    key = f"{_process_key}:{next(_call_ids)}"
    _calls[key] = info
    _module_calls.setdefault(mctx.module, []).append(info)
    result_types = [mlir.aval_to_ir_type(a) for a in call.out_avals]
    op = hlo.CustomCallOp(
        result_types, list(values), call_target_name=ir.StringAttr.get(_CALL_TARGET),
        has_side_effect=ir.BoolAttr.get(False),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 2),
        called_computations=ir.ArrayAttr.get([]), backend_config=ir.StringAttr.get(key),
        operand_layouts=None, result_layouts=None)
    if sharding_rule is not None:
        operand_types = [mlir.aval_to_ir_type(a) for a in call.in_avals]
        op.attributes["sdy.sharding_rule"] = sdy_sharding_rule_to_mlir(
            _resolve_rule(sharding_rule, static_args, mesh, operand_types, result_types),
            operand_types, result_types)
    return list(op.results)


def _resolve_rule(rule: Any, static_args: tuple, mesh: Mesh, operand_types: list,
                  result_types: list) -> SdyShardingRule:
    """The ``SdyShardingRule`` a rule stands for; a callable is asked with the static
    arguments, the mesh and the operand and result ``ir.Type``s."""
    if isinstance(rule, SdyShardingRule):
        return rule
    rule = rule(*static_args, mesh, operand_types, result_types)
    options: dict = {}
    if isinstance(rule, (list, tuple)) and len(rule) == 2:
        rule, options = rule
    if isinstance(rule, str):
        return str_to_sdy_sharding_rule(rule, **options)
    if not isinstance(rule, SdyShardingRule):
        raise ValueError("sharding_rule callable must produce either an SdyShardingRule "
                         "object or an Einsum-like notation string.")
    return rule


mlir.register_lowering(custom_partitioning_p, _lowering)


# ---- the decorator --------------------------------------------------------------------------
class custom_partitioning:  # noqa: N801  (JAX's name)
    """Wrap ``fun`` so that, in a partitioned program, XLA partitions it with the rule given
    to ``def_partition``; arguments in ``static_argnums`` are passed to the rules too."""

    def __init__(self, fun: Callable, static_argnums: Sequence[int] = ()):
        self.fun = fun
        self.static_argnums = tuple(static_argnums)
        self.partition = None
        self.propagate_user_sharding = None
        self.infer_sharding_from_operands = None
        self.decode_shardings = True
        self.sharding_rule = None

    def __getattr__(self, name: str) -> Any:
        # As JAX's custom decorators: ``def*`` reaches a wrapped custom function's rules
        # (``custom_partitioning(custom_jvp_fn).defjvp``); nothing else is forwarded.
        if name.startswith("def"):
            return getattr(self.__dict__["fun"], name)
        raise AttributeError(name)

    def def_partition(self, partition: Callable,
                      infer_sharding_from_operands: Callable | None = None,
                      propagate_user_sharding: Callable | None = None,
                      decode_shardings: bool = True, sharding_rule: Any = None, *,
                      reduction_factors: tuple[str, ...] = (),
                      need_replication_factors: tuple[str, ...] = (),
                      permutation_factors: tuple[str, ...] = (), **factor_sizes: int) -> Callable:
        """Set the partition rule (and the Shardy ``sharding_rule``, with its special factors
        and factor sizes when it is a string). Returns ``partition``."""
        self.partition = partition
        self.propagate_user_sharding = propagate_user_sharding
        self.infer_sharding_from_operands = infer_sharding_from_operands
        self.decode_shardings = decode_shardings
        if sharding_rule is None or callable(sharding_rule) or isinstance(
                sharding_rule, SdyShardingRule):
            extra = dict(factor_sizes)
            for name, factors in (("reduction_factors", reduction_factors),
                                  ("need_replication_factors", need_replication_factors),
                                  ("permutation_factors", permutation_factors)):
                if factors:
                    extra[name] = factors
            if extra:
                raise ValueError(f"Unknown keyword arguments: {extra}")
            self.sharding_rule = sharding_rule
        else:
            self.sharding_rule = str_to_sdy_sharding_rule(
                sharding_rule, reduction_factors=reduction_factors,
                need_replication_factors=need_replication_factors,
                permutation_factors=permutation_factors, **factor_sizes)
        return partition

    def __call__(self, *args, **kwargs):
        bound = inspect.signature(self.fun).bind(*args, **kwargs)
        bound.apply_defaults()
        if bound.kwargs:
            raise TypeError("keyword arguments could not be resolved to positions")
        args = bound.args
        static = set(self.static_argnums)
        static_args = tuple(args[i] for i in self.static_argnums)
        if any(isinstance(leaf, core.Tracer) for leaf in tree_util.tree_leaves(static_args)):
            raise core.UnexpectedTracerError(
                "Found a JAX Tracer object passed as an argument to a custom_partitioning "
                "function in a position indicated as static by static_argnums.")
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static)
        flat, in_tree = tree_util.tree_flatten(dyn_args)

        def fun(dyn):
            it = iter(dyn)
            return self.fun(*[args[i] if i in static else next(it) for i in range(len(args))])

        jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(
            fun, in_tree, [core.get_aval(x) for x in flat],
            pe.debug_info("custom_partitioning", self.fun, []))
        if any(isinstance(c, core.Tracer) for c in consts):
            raise core.UnexpectedTracerError(
                "custom_partitioning: the function closes over a traced value; pass it as an "
                "argument instead")
        if self.sharding_rule is None and (self.propagate_user_sharding is not None or
                                           self.infer_sharding_from_operands is not None):
            raise NotImplementedError(
                "Shardy is used, but sharding propagation callbacks instead of sharding_rule "
                "are provided. Need to provide sharding_rule to migrate to Shardy.")
        outs = custom_partitioning_p.bind(
            *flat, call=core.ClosedJaxpr(jaxpr, consts), partition=self.partition,
            propagate_user_sharding=self.propagate_user_sharding,
            infer_sharding_from_operands=self.infer_sharding_from_operands,
            decode_shardings=self.decode_shardings, sharding_rule=self.sharding_rule,
            in_tree=in_tree, out_tree=out_tree, static_args=static_args)
        return tree_util.tree_unflatten(out_tree, outs)
