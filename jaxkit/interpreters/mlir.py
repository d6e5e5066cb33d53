"""Lowering of jaxprs to StableHLO modules through jaxlib's MLIR Python bindings.

Each primitive registers a lowering rule ``rule(ctx, *operands, **params)`` returning one
``ir.Value`` (or a sequence for primitives with several results). ``lower_jaxpr`` builds a module
whose public ``main`` takes the jaxpr's inputs and returns its outputs; sub-jaxprs (jit, control
flow) are lowered inline with ``jaxpr_subcomp``, except a nested ``jit``, which becomes a private
function of the module (emitted once per jaxpr: ``mlir_calls.call_jaxpr``), as JAX lowers it.
"""
from __future__ import annotations

import math
import re

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from jaxlib import xla_client as _xc
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo  # noqa: F401  (rules use mlir.chlo)
from jaxlib.mlir.dialects import func as func_dialect
from jaxlib.mlir.dialects import sdy
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxkit import core, dtypes, source_info
from jaxkit.jaxpr import declared_effect_primitives
from jaxkit.runtime import compile_config, pjrt
from jaxkit.runtime.sharding import Mesh
from jaxkit.interpreters import batching
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters import mlir_callbacks, mlir_platforms, state
from jaxkit.interpreters.mlir_donation import set_up_donation
from jaxkit.interpreters.mlir_ir import (  # noqa: F401  (re-exported: rules use mlir.X)
    AxisContext, ConstantHandler, DEVICE_TO_DEVICE_TYPE, LoweringParameters, LoweringResult,
    LoweringRule, MeshAxisName, RECV_FROM_HOST_TYPE, REEXPORTED_JAXLIB_MODULES, SEND_TO_HOST_TYPE,
    SPMDAxisContext, ShapePolyLoweringState, ShardingContext, Token, TokenSet, Value,
    aval_to_ir_type, aval_to_ir_types, dense_int_array, dense_int_elements, dtype_to_ir_type,
    flatten_ir_types, flatten_ir_values, full_like_aval, i32_attr,
    ir_attribute, ir_constant, ir_constants, ir_tree_registry, ir_type_handlers, jaxlib_module,
    layouts_attr, lowerable_effects, make_ir_context, merge_mlir_modules, module_to_bytecode,
    module_to_hlo_text, module_to_string, module_to_xla_computation, register_constant_handler,
    row_major, shape_tensor, token_type, unflatten_ir_values_like_types, upstream_dialects)

lowering_rules: dict[core.Primitive, Callable] = {}
# Rules for one platform, which take precedence over ``lowering_rules`` when lowering for it.
_PLATFORM_ALIASES = {"cpu": ("cpu",), "cuda": ("cuda",), "rocm": ("rocm",), "tpu": ("tpu",),
                     "gpu": ("cuda", "rocm")}
platform_lowering_rules: dict[str, dict[core.Primitive, Callable]] = {
    p: {} for p in ("cpu", "cuda", "rocm", "tpu")}


# The primitives whose lowering rules take and make extended-dtype values (key<fry>) as their
# physical tensors themselves; every other primitive meeting one is lowered by
# ``_physical_lowering``.
physical_lowerings: set[core.Primitive] = set()
# The primitives lowered as a call of a private function (``mlir_calls``): in a partitioned
# program their results keep the layouts the function's body gave them, with no constraint of
# their own, as JAX lowers them.
call_primitives: set[core.Primitive] = set()


def register_lowering(prim: core.Primitive, rule: Callable, platform: str | None = None,
                      inline: bool = True, cacheable: bool = True, *,
                      physical: bool = False) -> None:
    """Register ``rule(ctx, *operands, **params)`` as the lowering of ``prim`` (for every
    platform, or only for ``platform``). A rule returns the result's ``ir.Value`` (a sequence of
    them for a multiple-results primitive); a one-element sequence, the form JAX's rules
    return, is accepted too. ``inline``/``cacheable`` are accepted as in JAX: jaxkit always
    emits rules inline and caches by the whole jaxpr. ``physical`` says the rule handles
    extended-dtype operands and results (as their physical tensors) itself."""
    del inline, cacheable
    if physical:
        physical_lowerings.add(prim)
    if platform is None:
        lowering_rules[prim] = rule
        return
    if platform not in _PLATFORM_ALIASES:
        raise NotImplementedError(
            f"Registering an MLIR lowering rule for primitive {prim} for an unknown platform "
            f"{platform}. Known platforms are: {', '.join(sorted(_PLATFORM_ALIASES))}.")
    for p in _PLATFORM_ALIASES[platform]:
        platform_lowering_rules[p][prim] = rule


# --------------------------------------------------------------------------------------------
# Context and types
# --------------------------------------------------------------------------------------------

def _boundary_type(aval: core.ShapedArray) -> ir.RankedTensorType:
    """The type of ``main``'s parameter or result for ``aval``: a token crosses a program's
    boundary as the ``bool[0]`` buffer of its value (PjRt passes no token buffers); a key
    as its physical data."""
    aval = core.physical_aval(aval)
    return ir.RankedTensorType.get(list(aval.shape), dtype_to_ir_type(aval.dtype))


def _token_from_boundary(aval: core.ShapedArray, x: ir.Value) -> ir.Value:
    return hlo.AfterAllOp([]).result if type(aval) is core.AbstractToken else x


def _token_to_boundary(aval: core.ShapedArray, x: ir.Value) -> ir.Value:
    return ir_constant(np.zeros(0, np.bool_)) if type(aval) is core.AbstractToken else x


# --------------------------------------------------------------------------------------------
# Constants (``ir_constant`` and its handlers are in ``mlir_ir``)
# --------------------------------------------------------------------------------------------


def i64_attr(values: Sequence[int]) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def broadcast_in_dim(x: ir.Value, aval_out: core.ShapedArray, dims: Sequence[int]) -> ir.Value:
    out = hlo.BroadcastInDimOp(aval_to_ir_type(aval_out), x, i64_attr(dims)).result
    if (ct := source_info.compute_type_of(source_info.current_name_stack())) is not None:
        set_frontend_attributes(out, dict(ct.items))  # as JAX: it runs where its eqn runs
    return out


def convert(x: ir.Value, aval_out: core.ShapedArray) -> ir.Value:
    return hlo.ConvertOp(aval_to_ir_type(aval_out), x).result


# --------------------------------------------------------------------------------------------
# Lowering contexts
# --------------------------------------------------------------------------------------------


@dataclass
class ModuleContext:
    """State shared by all rules while one module is built."""

    module: ir.Module
    num_replicas: int = 1
    axis_env: tuple = ()  # ((axis_name, size), ...) of pmapped axes, outermost first
    mesh: Sequence[tuple[str, int]] | None = None  # the Shardy mesh @mesh, when partitioned
    device_assignment: tuple = ()  # the devices of the partitions, in order (when partitioned)
    manual: bool = False  # inside a shard_map body: axis_env names the mesh's axes
    channels: list = field(default_factory=lambda: [0])  # the last collective channel id
    host_callbacks: list = field(default_factory=list)
    # ``jit(f)``: the op_name prefix of every equation's ops (none in a private function)
    name_stack: str = ""
    locations: dict = field(default_factory=dict)  # (name, SourceInfo, ...) -> ir.Location
    platform: str = "cpu"  # whose ``platform_lowering_rules`` apply
    # Lowering for several platforms at once (``mlir_platforms``): their names (``platform``
    # is the first), and the stack of the current function's platform-index parameter.
    platforms: tuple = ()
    platform_index: list = field(default_factory=list)
    eqn_platforms: tuple = ()  # inside a per-platform branch: its platform
    # The private functions emitted for nested jaxprs (``mlir_calls``): key -> symbol name.
    functions: dict = field(default_factory=dict)
    # The module's one symbol table (made on first use; shared by copies of this context):
    # its renaming counter is module-wide, so functions are renamed ``f_0``, ``g_1``... as
    # JAX's are.
    symbol_tables: list = field(default_factory=list)

    def insert_symbol(self, fn) -> str:
        """Insert ``fn`` into the module, renamed if its name is taken; return its name."""
        if not self.symbol_tables:
            self.symbol_tables.append(ir.SymbolTable(self.module.operation))
        return ir.StringAttr(self.symbol_tables[0].insert(fn)).value

    def device_mesh(self) -> Mesh | None:
        """The ``Mesh`` the module is partitioned over (its axes laid over
        ``device_assignment``), or None when it is not partitioned."""
        if self.mesh is None or not self.device_assignment:
            return None
        # Filled element by element: np.array would look inside device objects.
        grid = np.empty(len(self.device_assignment), dtype=object)
        grid[:] = self.device_assignment
        return Mesh(grid.reshape([size for _, size in self.mesh]),
                    tuple(name for name, _ in self.mesh))


@dataclass
class LoweringRuleContext:
    """What a lowering rule may know besides its operands."""

    module_context: ModuleContext
    avals_in: Sequence[core.ShapedArray]
    avals_out: Sequence[core.ShapedArray]
    primitive: core.Primitive | None = None
    source_info: source_info.SourceInfo | None = None  # the equation's, for op locations
    # JAX's effect tokens: jaxkit's equations carry no ordered effects, so a rule gets none
    # (and one that sets tokens_out, as JAX's effectful rules do, may).
    tokens_in: TokenSet = field(default_factory=TokenSet)
    tokens_out: TokenSet | None = None

    def replace(self, **kw) -> LoweringRuleContext:
        return LoweringRuleContext(**{**self.__dict__, **kw})

    def set_tokens_out(self, tokens_out: TokenSet) -> None:
        self.tokens_out = tokens_out


def jaxpr_subcomp(ctx: ModuleContext, jaxpr: core.Jaxpr, consts: Sequence[ir.Value],
                  *args: ir.Value) -> list[ir.Value]:
    """Emit the equations of ``jaxpr`` at the current insertion point; return its outputs."""
    if state.jaxpr_has_refs(jaxpr):  # refs made and used inside: lower the pure equivalent
        if any(state.is_ref_aval(v.aval) for v in jaxpr.constvars + jaxpr.invars):
            raise NotImplementedError("lowering a jaxpr that takes refs as inputs: discharge "
                                      "it first (interpreters.state.discharge_jaxpr)")
        pure, pure_consts = state.discharge_jaxpr(jaxpr)
        return jaxpr_subcomp(ctx, pure, _constants(pure, pure_consts), *consts, *args)
    env: dict[core.Var, ir.Value] = {}

    def read(a):
        if type(a) is core.Literal:
            return ir_constant(a.val, a.aval.dtype)
        return env[a]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        if len(mlir_platforms.targets(ctx)) > 1:
            rule = mlir_platforms.rule_for(ctx, eqn.primitive,
                                           partial(_rule_on, prim=eqn.primitive))
        else:
            rule = _rule_on(ctx.platform, eqn.primitive)
        if rule is None:
            raise NotImplementedError(f"lowering rule for '{eqn.primitive.name}' is not "
                                      "implemented")
        if _needs_physical_lowering(eqn):
            rule = _physical_lowering
        rule_ctx = LoweringRuleContext(ctx, [a.aval for a in eqn.invars],
                                       [v.aval for v in eqn.outvars], eqn.primitive,
                                       eqn.source_info)
        # The equation's ops carry its user location (and the jaxprs a rule traces inherit
        # it), which XLA keeps as the HLO instructions' metadata.
        with eqn_location(ctx, eqn), source_info.user_context(eqn.source_info):
            outs = rule(rule_ctx, *map(read, eqn.invars), **eqn.params)
            names = source_info.current_name_stack()
        if not eqn.primitive.multiple_results and not isinstance(outs, (list, tuple)):
            outs = [outs]
        outs = list(outs)
        if names.stack:
            metadata = source_info.metadata_of(names)
            if metadata:  # set_xla_metadata's context form: tag the ops that make the results
                for x in outs:
                    set_frontend_attributes(x, metadata)
        assert len(outs) == len(eqn.outvars), (eqn.primitive, len(outs), len(eqn.outvars))
        typed = ctx.mesh is not None and eqn.primitive not in call_primitives
        for v, x in zip(eqn.outvars, outs):
            env[v] = _laid_out_as_typed(ctx, x, v.aval) if typed else x
    return [read(v) for v in jaxpr.outvars]


def _rule_on(platform: str, prim: core.Primitive) -> Callable | None:
    """``prim``'s lowering rule for ``platform``: its own, else the common one (any name is
    a platform, as in JAX: one jaxkit has no rules of its own for takes the common ones)."""
    return platform_lowering_rules.get(platform, {}).get(prim) or lowering_rules.get(prim)


def _carries_jaxpr(params: dict) -> bool:
    for v in params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, (core.Jaxpr, core.ClosedJaxpr)):
                return True
    return False


def _needs_physical_lowering(eqn: core.JaxprEqn) -> bool:
    """Whether ``eqn`` meets extended-dtype values its rule does not handle. A primitive that
    carries a jaxpr (jit, cond, while, scan, ...) does not need to: its body is lowered equation
    by equation and its operands travel as their physical tensors."""
    if eqn.primitive in physical_lowerings:
        return False
    if not any(dtypes.is_extended(v.aval.dtype) for v in (*eqn.invars, *eqn.outvars)):
        return False
    return not _carries_jaxpr(eqn.params)


def _physical_lowering(ctx: LoweringRuleContext, *args: ir.Value, **params: Any) -> Any:
    """Lower a primitive applied to extended-dtype values (JAX's ``key<fry>``) through their
    physical data, by the one rule that holds for every structural primitive: applying it to
    ``key<fry>[S]`` operands stored as ``u32[S,2]`` is applying it to each ``u32[S]`` word and
    stacking the results along a trailing axis, i.e. its batching rule with the trailing
    word axis as the batch axis. So slicing, broadcasting, concatenation, gather/scatter,
    select_n, ... take keys with no rule of their own; a primitive whose batching rule
    does not keep that axis (arithmetic would mix words) is refused earlier by its type rule."""
    prim = ctx.primitive
    ext = {a.dtype for a in (*ctx.avals_in, *ctx.avals_out) if dtypes.is_extended(a.dtype)}
    dt = ext.pop()
    if ext or len(dt.physical_shape) > 1:
        raise NotImplementedError(f"lowering rule for '{prim.name}' on operands of dtypes "
                                  f"{sorted(map(str, {dt, *ext}))}: one extended dtype with "
                                  "a physical shape of at most one axis is supported")
    if not dt.physical_shape:  # one element is one scalar (Flax's fp8 meta dtype): no words
        return lower_fun(prim.bind, prim.multiple_results, physical=True)(ctx, *args, **params)

    def word_aval(a):
        return a.update(dtype=dt.physical_dtype, weak_type=False) \
            if dtypes.is_extended(a.dtype) else a

    def one_word(*xs):
        out = prim.bind(*xs, **params)
        return list(out) if prim.multiple_results else [out]

    jaxpr, consts = pe.trace_to_jaxpr(one_word, [word_aval(a) for a in ctx.avals_in])
    dims = [[a.ndim if dtypes.is_extended(a.dtype) else None for a in avals]
            for avals in (ctx.avals_in, ctx.avals_out)]
    batched, _ = batching.batch_jaxpr_axes(core.ClosedJaxpr(jaxpr, consts),
                                           dt.physical_shape[0], *dims)
    outs = closed_subcomp(ctx.module_context, batched, *args)
    return outs if prim.multiple_results else outs[0]


def set_frontend_attributes(value: ir.Value, attributes: dict[str, Any]) -> None:
    """Add ``attributes`` (values written as strings, booleans in lower case) to the
    ``mhlo.frontend_attributes`` of the op that produces ``value``; XLA copies them into the
    HLO instruction. A function argument has no op and is left alone."""
    owner = value.owner if isinstance(value, ir.Value) else None
    if owner is None or isinstance(owner, ir.Block):
        return
    op = owner.operation
    merged = {k: ir.StringAttr.get(str(v).lower() if isinstance(v, bool) else str(v))
              for k, v in attributes.items()}
    if "mhlo.frontend_attributes" in op.attributes:  # what an inner scope set stays, as in JAX
        for a in ir.DictAttr(op.attributes["mhlo.frontend_attributes"]):
            merged[a.name] = a.attr
    op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(merged)


def _laid_out_as_typed(ctx: ModuleContext, x: Any, aval: Any) -> Any:
    """In a partitioned program, a value whose type is split over Explicit mesh axes is
    constrained to that layout, so that XLA's partitioner keeps what the types say."""
    typed = getattr(aval, "_sharding", None)
    if typed is None or typed.mesh.shape_tuple != tuple(ctx.mesh):
        return x
    aval = core.physical_aval(aval)  # (keys: their data's)
    return sharding_constraint(x, aval._sharding.sdy_attr(len(aval.shape),
                                                          modify_wrt_axis_types=True))


def eqn_location(ctx: ModuleContext, eqn: core.JaxprEqn) -> ir.Location:
    """``name_stack/primitive`` around the equation's file and line, as JAX writes them: XLA
    turns it into ``metadata={op_name=... source_file=... source_line=...}``."""
    # The equation's names are relative to the equation holding its jaxpr, whose names the
    # lowering of that equation made current (``user_context`` in ``jaxpr_subcomp``).
    outer = source_info.current_name_stack()
    info = eqn.source_info
    names = outer + info.name_stack if info is not None else outer
    return named_location(ctx, info, names, eqn.primitive.name)


def named_location(ctx: ModuleContext, info: source_info.SourceInfo | None,
                    names: source_info.NameStack, last: str) -> ir.Location:
    """``module name/names/last`` around ``info``'s file and line (cached: one per line and
    name, as a loop's body repeats them)."""
    key = (last, info, names, ctx.name_stack)
    loc = ctx.locations.get(key)
    if loc is None:
        child = (ir.Location.name(info.function,
                                  childLoc=ir.Location.file(info.file, info.line,
                                                            max(info.column, 0)))
                 if info is not None and info.file else ir.Location.unknown())
        op_name = "/".join(n for n in (ctx.name_stack, str(names), last) if n)
        loc = ctx.locations[key] = ir.Location.name(op_name, childLoc=child)
    return loc


def closed_subcomp(ctx: ModuleContext, closed: core.ClosedJaxpr, *args: ir.Value) -> list[ir.Value]:
    """Lower a ClosedJaxpr inline; its constants become StableHLO constants."""
    return jaxpr_subcomp(ctx, closed.jaxpr, _constants(closed.jaxpr, closed.consts), *args)


def private_function(ctx: ModuleContext, name: str, closed: core.ClosedJaxpr) -> str:
    """Emit ``closed`` as a private ``func.func`` of the module (renamed if ``name`` is
    taken); return its symbol name, for ops that call it (``stablehlo.composite``)."""
    in_types = [*mlir_platforms.index_types(ctx), *map(aval_to_ir_type, closed.in_avals)]
    out_types = [aval_to_ir_type(a) for a in closed.out_avals]
    with ir.InsertionPoint(ctx.module.body):
        fn = func_dialect.FuncOp(name, ir.FunctionType.get(in_types, out_types))
        fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
        set_index_attrs(ctx, fn, len(closed.in_avals))
        # Inserted (and so renamed: ``f``, ``f_0``...) before its body is lowered, so that the
        # functions its body calls come after it, in the order JAX emits them.
        symbol = ctx.insert_symbol(fn)
        entry = fn.add_entry_block()
        with ir.InsertionPoint(entry), mlir_platforms.function_body(ctx, entry.arguments) as a:
            func_dialect.ReturnOp(closed_subcomp(ctx, closed, *a))
    return symbol


def set_index_attrs(ctx: ModuleContext, fn: func_dialect.FuncOp, n_params: int) -> None:
    """Mark the platform-index parameter of a function of a module lowered for several
    platforms (the other ``n_params`` parameters get none)."""
    marked = mlir_platforms.index_arg_attrs(ctx)
    if marked:
        fn.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in marked] +
                                        [ir.DictAttr.get({})] * n_params)


def _constants(jaxpr: core.Jaxpr, consts: Sequence) -> list[ir.Value]:
    """The constvars' values as StableHLO constants of the constvars' dtypes (a NumPy int64
    constant is int32 in a program without x64); a key constant is its physical data."""
    def const(aval, c):
        if dtypes.is_extended(aval.dtype):
            return ir_constant(np.asarray(aval.dtype.to_physical(c)), aval.dtype.physical_dtype)
        return ir_constant(np.asarray(c), aval.dtype)
    return [const(v.aval, c) for v, c in zip(jaxpr.constvars, consts)]


def lowering_platform(device=None) -> str:
    """Whose lowering rules a program for ``device`` takes (default: the current default
    device's): its platform, with JAX's ``cuda`` for an NVIDIA ``gpu``."""
    name = (device if device is not None else pjrt.current_default_device()).platform
    return "cuda" if name == "gpu" else name


def lower_jaxpr(name: str, jaxpr: core.Jaxpr, *, donated_invars: Sequence[bool] = (),
                num_replicas: int = 1, axis_env: tuple = (), consts: Sequence = (),
                mesh: Sequence[tuple[str, int]] | None = None,
                arg_shardings: Sequence[str | None] = (),
                result_shardings: Sequence[str | None] = (),
                arg_memory_kinds: Sequence[str] = (),
                result_memory_kinds: Sequence[str | None] | None = None, type_kinds=(),
                device_assignment: tuple = (), api: str = "jit",
                result_names: Sequence[str] = (), platform: str | None = None,
                sharded_avals: tuple[Sequence, Sequence] | None = None,
                platforms: Sequence[str] = ()) -> ir.Module:
    """A StableHLO module ``@<api>_<name>`` whose ``main`` computes ``jaxpr`` (``name`` is
    the function's, e.g. ``<lambda>``; ``api`` is ``jit`` or ``pmap``); its constvars are
    ``consts``, emitted as StableHLO constants. ``result_names`` (a jitted function's output
    paths, ``result``, ``result[0]['a']``...) become the results' ``jax.result_info``.

    With ``mesh`` (``(axis name, size)`` pairs) the module is partitioned over the mesh's
    devices: it declares the Shardy mesh ``@mesh`` and its parameters and results carry the
    Shardy attributes given (None: XLA propagates one); ``device_assignment`` names the device
    of each partition, for rules that report on them (``inspect_array_sharding``).
    ``arg/result_memory_kinds`` (when a value is not in device memory) name each one's memory;
    a result with a kind is annotated so XLA moves it there; others keep ``type_kinds``'.
    Donated parameters alias results or are offered to XLA (``mlir_donation``), matched by
    the types of one partition's values: ``sharded_avals`` (inputs', outputs'; default:
    the jaxpr's).

    ``platform`` ("cpu", "cuda", ...) picks the platform's own lowering rules (LAPACK on the
    CPU, cuSOLVER on NVIDIA GPUs); by default, the current default device's. Several
    ``platforms`` make a module for all of them (``mlir_platforms``)."""
    assert len(jaxpr.constvars) == len(consts), "a value for every constvar"
    if declared_effect_primitives and lowerable_effects.filter_not_in(jaxpr.effects):
        raise ValueError(f"Cannot lower jaxpr with effects: {jaxpr.effects}")
    compile_config.dump_jaxpr(name, jaxpr)  # with jax_dump_ir_modes=jaxpr, as JAX's lowering
    compile_config.warn_captured_constants(consts)
    # Op names start from the module's own name, whatever scope the caller is in.
    # A program starts with no names, but keeps the XLA metadata of the ``set_xla_metadata``
    # blocks it is lowered in (a jit traced inside one carries them, as in JAX).
    outer_metadata = source_info.NameStack(tuple(
        e for e in source_info.current_name_stack().stack if type(e) is source_info.Metadata))
    with make_ir_context(), ir.Location.unknown(), source_info.name_stack_context(
            outer_metadata):
        module = ir.Module.create()
        module.operation.attributes["sym_name"] = ir.StringAttr.get(_sanitize(f"{api}_{name}"))
        attrs = module.operation.attributes
        num_partitions = math.prod(size for _, size in mesh) if mesh is not None else 1
        attrs["mhlo.num_partitions"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32),
                                                          num_partitions)
        attrs["mhlo.num_replicas"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32),
                                                        num_replicas)
        platforms = tuple(platforms)
        if len(platforms) > 1:
            platform = platforms[0]
        in_types = [_boundary_type(v.aval) for v in jaxpr.invars]
        out_types = [_boundary_type(v.aval) for v in jaxpr.outvars]
        ctx = ModuleContext(module, num_replicas, axis_env, mesh=mesh,
                            device_assignment=tuple(device_assignment),
                            name_stack=f"{api}({name})",
                            platform=platform or lowering_platform(),
                            platforms=platforms if len(platforms) > 1 else ())
        in_types = [*mlir_platforms.index_types(ctx), *in_types]
        with ir.InsertionPoint(module.body):
            if mesh is not None:
                axes = ", ".join(f'"{n}"={size}' for n, size in mesh)
                sdy.MeshOp("mesh", ir.Attribute.parse(f"#sdy.mesh<[{axes}]>"))
            fn = func_dialect.FuncOp("main", ir.FunctionType.get(in_types, out_types))
            fn.attributes["sym_visibility"] = ir.StringAttr.get("public")
            in_avals, out_avals = sharded_avals or ([v.aval for v in jaxpr.invars],
                                                    [v.aval for v in jaxpr.outvars])
            aliases, donors = set_up_donation(
                in_avals, out_avals, donated_invars, arg_memory_kinds, result_memory_kinds,
                list(result_shardings) if num_partitions > 1 else None)
            index_attrs = mlir_platforms.index_arg_attrs(ctx)
            arg_attrs = [{} for _ in in_types[len(index_attrs):]]
            for attrs_i, a, donor in zip(arg_attrs, aliases, donors):
                if a is not None:
                    attrs_i["tf.aliasing_output"] = ir.IntegerAttr.get(
                        ir.IntegerType.get_signless(32), a)
                if donor:
                    attrs_i["jax.buffer_donor"] = ir.BoolAttr.get(True)
            for attrs_i, shd in zip(arg_attrs, arg_shardings):
                if shd is not None:
                    attrs_i["sdy.sharding"] = ir.Attribute.parse(shd)
            for attrs_i, kind in zip(arg_attrs, arg_memory_kinds):
                attrs_i["mhlo.memory_kind"] = ir.StringAttr.get(kind)
            if any(arg_attrs) or index_attrs:
                fn.arg_attrs = ir.ArrayAttr.get([ir.DictAttr.get(a)
                                                 for a in [*index_attrs, *arg_attrs]])
            result_attrs = [{} for _ in out_types]
            for attrs_i, shd in zip(result_attrs, result_shardings):
                if shd is not None:
                    attrs_i["sdy.sharding"] = ir.Attribute.parse(shd)
            for attrs_i, res_name in zip(result_attrs, result_names):
                attrs_i["jax.result_info"] = ir.StringAttr.get(res_name)
            for attrs_i, kind, held in zip(result_attrs, result_memory_kinds or (),
                                           type_kinds or ["device"] * len(result_attrs)):
                attrs_i["mhlo.memory_kind"] = ir.StringAttr.get(kind or held)
            if any(result_attrs):
                fn.result_attrs = ir.ArrayAttr.get([ir.DictAttr.get(a) for a in result_attrs])
            entry = fn.add_entry_block(arg_locs=[ir.Location.unknown()] * len(index_attrs)
                                       + _arg_locations(jaxpr))
            with ir.InsertionPoint(entry), mlir_platforms.function_body(
                    ctx, entry.arguments) as params:
                args = [_token_from_boundary(v.aval, x) for v, x in zip(jaxpr.invars, params)]
                outs = jaxpr_subcomp(ctx, jaxpr, _constants(jaxpr, consts), *args)
                outs = [x if kind is None else place_in_memory(x, kind)
                        for x, kind in zip(outs, result_memory_kinds or [None] * len(outs))]
                func_dialect.ReturnOp([_token_to_boundary(v.aval, x)
                                       for v, x in zip(jaxpr.outvars, outs)])
        if ctx.host_callbacks:
            pjrt.module_host_callbacks[module] = ctx.host_callbacks
        return module


def place_in_memory(x: ir.Value, memory_kind: str) -> ir.Value:
    """``x`` annotated to live in the memory space ``memory_kind`` (XLA's
    ``annotate_device_placement``, which makes it copy the value there)."""
    op = hlo.CustomCallOp(
        [x.type], [x], call_target_name=ir.StringAttr.get("annotate_device_placement"),
        has_side_effect=ir.BoolAttr.get(True), backend_config=ir.StringAttr.get(""),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
        called_computations=ir.ArrayAttr.get([]), operand_layouts=None, result_layouts=None)
    op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {"_xla_buffer_placement": ir.StringAttr.get(memory_kind)})
    return op.result


def inspect_sharding(value: ir.Value, callback: Callable[[Any], None]) -> None:
    """Emit XLA's ``InspectSharding`` custom call on ``value``: when the SPMD partitioner has
    chosen the value's layout it calls ``callback`` with that ``HloSharding`` (at compile
    time; the caller keeps ``callback`` alive until then)."""
    hlo.CustomCallOp([value.type], [value], call_target_name=ir.StringAttr.get("InspectSharding"),
                     has_side_effect=ir.BoolAttr.get(True),
                     api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
                     called_computations=ir.ArrayAttr.get([]),
                     backend_config=ir.StringAttr.get(
                         _xc.encode_inspect_sharding_callback(callback)),
                     operand_layouts=None, result_layouts=None)


def _arg_locations(jaxpr: core.Jaxpr) -> list[ir.Location]:
    """The parameters' locations, named after the arguments as JAX's are (``x``,
    ``d['k']``; XLA names the HLO parameters after them); leading parameters without a name
    (large constants) and programs without argument names get unknown locations."""
    names = list(getattr(jaxpr.debug_info, "arg_names", None) or ())
    if len(names) > len(jaxpr.invars):
        names = []
    names = [None] * (len(jaxpr.invars) - len(names)) + names
    return [ir.Location.name(n) if n else ir.Location.unknown() for n in names]


def _sanitize(name: str) -> str:
    """A module name XLA keeps as it is, as JAX makes it: ``jit_<lambda>`` -> ``jit__lambda``
    (characters other than word characters, ``.`` and ``-`` become ``_``; trailing ``_``
    dropped)."""
    return re.sub(r"[^\w.-]", "_", name).rstrip("_")


def sharding_constraint(x: ir.Value, sdy_sharding: str) -> ir.Value:
    """``x`` constrained to the Shardy layout ``sdy_sharding`` (on the module's ``@mesh``)."""
    return sdy.ShardingConstraintOp(x, ir.Attribute.parse(sdy_sharding)).result


# --------------------------------------------------------------------------------------------
# Rule helpers used by lax
# --------------------------------------------------------------------------------------------


def broadcast_operands_to_output(ctx: LoweringRuleContext, args: Sequence[ir.Value]) -> list:
    """Rank-0 and size-1 operands broadcast_in_dim to the result's shape, laid out as its
    type says (JAX's constraint): StableHLO's elementwise ops take equal shapes."""
    o, mc = ctx.avals_out[0], ctx.module_context
    bs = [x if a.shape == o.shape else broadcast_in_dim(
        x, a.update(shape=o.shape), tuple(range(a.ndim))) for x, a in zip(args, ctx.avals_in)]
    return [_laid_out_as_typed(mc, w, o) if w is not x and mc.mesh else w for w, x in zip(bs, args)]


def nary_lowering(op: Callable) -> Callable:
    """Rule for an elementwise StableHLO op whose result type equals the first operand's (or,
    with an ``out_dtype`` parameter, whose operands are converted to the result's type)."""

    def rule(ctx: LoweringRuleContext, *args, out_dtype=None, **params):
        args = broadcast_operands_to_output(ctx, args)
        if out_dtype is not None:
            o = ctx.avals_out[0]
            args = [x if a.dtype == o.dtype else convert(x, o.update(shape=o.shape))
                    for x, a in zip(args, ctx.avals_in)]
        return op(*args).result

    return rule


def _compare_type(dtype: np.dtype, total_order: bool) -> str:
    if np.issubdtype(dtype, np.bool_) or np.issubdtype(dtype, np.unsignedinteger):
        return "UNSIGNED"
    if np.issubdtype(dtype, np.integer):
        return "SIGNED"
    return "TOTALORDER" if total_order else "FLOAT"


def compare_lowering(direction: str, total_order: bool = False) -> Callable:
    """``stablehlo.compare``; with ``total_order`` floats compare in IEEE total order.
    Register it ``physical=True``: it also compares values of an extended dtype (keys)."""
    def rule(ctx: LoweringRuleContext, x, y):
        if dtypes.is_extended(ctx.avals_in[0].dtype):
            return _compare_extended(ctx, direction, x, y)
        x, y = broadcast_operands_to_output(ctx, (x, y))
        kind = _compare_type(ctx.avals_in[0].dtype, total_order)
        return hlo.CompareOp(x, y, hlo.ComparisonDirectionAttr.get(direction),
                             compare_type=hlo.ComparisonTypeAttr.get(kind)).result

    return rule


def _compare_extended(ctx: LoweringRuleContext, direction: str, x: ir.Value,
                      y: ir.Value) -> ir.Value:
    """``EQ``/``NE`` of values of an extended dtype (JAX's opaque comparison): two keys are
    equal when all their physical data is, so the data is compared elementwise and the
    trailing physical axes are reduced with AND (``EQ``) or OR (``NE``). Extended values have
    no order, and their type rules refuse the other directions."""
    if direction not in ("EQ", "NE"):
        raise NotImplementedError(f"lowering rule for comparison {direction} of extended "
                                  f"dtype {ctx.avals_in[0].dtype}")
    out = ctx.avals_out[0]
    dt = ctx.avals_in[0].dtype
    data = core.ShapedArray((*out.shape, *dt.physical_shape), dt.physical_dtype)
    tail = tuple(range(out.ndim, data.ndim))
    # operands are rank 0 or of the result's rank (elementwise broadcasting), then the tail
    x, y = [v if core.physical_aval(a).shape == data.shape else
            broadcast_in_dim(v, data, (*range(a.ndim), *tail))
            for v, a in zip((x, y), ctx.avals_in)]
    words = hlo.CompareOp(x, y, hlo.ComparisonDirectionAttr.get(direction),
                          compare_type=hlo.ComparisonTypeAttr.get(
                              _compare_type(dt.physical_dtype, False))).result
    combine, init = (hlo.AndOp, True) if direction == "EQ" else (hlo.OrOp, False)
    scalar = aval_to_ir_type(core.ShapedArray((), np.dtype(np.bool_)))
    red = hlo.ReduceOp([aval_to_ir_type(out)], [words], [ir_constant(np.bool_(init))],
                       i64_attr(tail))
    block = red.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.ReturnOp([combine(*block.arguments).result])
    return red.result


def lower_fun(fun: Callable, multiple_results: bool = False, *,
              physical: bool = False) -> Callable:
    """Build a lowering rule from a Python function written in jaxkit operations.

    The function is traced to a jaxpr at the rule's input avals and lowered inline, so a
    primitive can be defined by composition without writing StableHLO by hand. With
    ``physical``, it is traced at the operands' physical types (a ``key<fry>[n]`` operand is
    its ``u32[n,2]`` data) and must return physical values: the rule of a primitive that
    takes or makes extended-dtype values itself (``register_lowering(..., physical=True)``).
    A function returning a list or tuple has its results lowered as a list, whatever
    ``multiple_results`` says: the form of JAX's ``lower_fun``, whose default is True."""

    def rule(ctx: LoweringRuleContext, *args, **params):
        listed = []

        def flat_fun(*xs):
            out = fun(*xs, **params)
            listed.append(multiple_results or isinstance(out, (list, tuple)))
            return list(out) if listed[0] else [out]

        # (physical: the data's explicit layout is what the key primitive's rule typed; the
        # computation on it is traced unsplit, its results constrained as the types say)
        avals = ([core.ShapedArray(p.shape, p.dtype, p.weak_type) for p in
                  map(core.physical_aval, ctx.avals_in)] if physical else ctx.avals_in)
        jaxpr, consts = pe.trace_to_jaxpr(flat_fun, avals)
        outs = closed_subcomp(ctx.module_context, core.ClosedJaxpr(jaxpr, consts), *args)
        return outs if listed[0] else outs[0]

    return rule



# --------------------------------------------------------------------------------------------
# JAX's lowering API (``jax.interpreters.mlir``) over the lowering above
# --------------------------------------------------------------------------------------------

def _asks_for_more(option: str, value: Any) -> bool:
    """Whether a ``lower_jaxpr_to_module`` option asks for what jaxkit's lowering does not do
    (a default, or a sequence of defaults, asks for nothing; names only label the
    arguments, replication concerns several replicas)."""
    if option in ("arg_names", "replicated_args") or value is None or value is True:
        return False
    if option == "num_partitions":
        return value != 1
    if isinstance(value, (list, tuple)):
        return any(x is not None for x in value)
    return True


def lower_jaxpr_to_module(module_name: str, jaxpr: core.ClosedJaxpr, *, num_const_args: int = 0,
                          in_avals: Sequence = (), ordered_effects: Sequence = (),
                          platforms: Sequence[str] = ("cpu",), backend: Any = None,
                          axis_context: Any = None, donated_args: Sequence[bool] = (),
                          result_names: Sequence[str] | None = None,
                          lowering_parameters: LoweringParameters | None = None,
                          **unsupported: Any) -> LoweringResult:
    """Lower a closed jaxpr to a module ``@module_name`` whose public ``main`` computes it
    (its consts as constants), for ``platforms[0]``; jaxlib compiles the result's module."""
    del in_avals, backend, num_const_args
    given = sorted(k for k, v in unsupported.items() if _asks_for_more(k, v))
    if (len(platforms) != 1 or ordered_effects or given or (lowering_parameters or
            LoweringParameters()).override_lowering_rules is not None or
            getattr(axis_context, "num_devices", 1) != 1):
        raise NotImplementedError(
            "lower_jaxpr_to_module: jaxkit lowers for one platform and one device, without "
            "ordered effects, per-argument shardings/layouts or overridden rules "
            f"(got platforms={tuple(platforms)}, ordered_effects={list(ordered_effects)}, "
            f"options {given}); use jit(...).lower(...) for those")
    mesh = (None if not isinstance(axis_context, SPMDAxisContext) else
            [(n, axis_context.mesh.shape[n]) for n in axis_context.mesh.axis_names])
    module = lower_jaxpr(module_name, jaxpr.jaxpr, consts=jaxpr.consts, mesh=mesh,
                         donated_invars=tuple(donated_args), result_names=result_names or (),
                         platform=platforms[0])
    with make_ir_context():
        module.operation.attributes["sym_name"] = ir.StringAttr.get(module_name)
    return LoweringResult(module, [], list(pjrt.module_host_callbacks.get(module, ())),
                          ShapePolyLoweringState())


def lower_jaxpr_to_fun(ctx: ModuleContext, name: str, jaxpr: core.ClosedJaxpr,
                       effects: Sequence = (), *, main_function: bool = False,
                       **_: Any) -> func_dialect.FuncOp:
    """Emit ``jaxpr`` as a function ``name`` of ``ctx``'s module (public when it is the main
    function) and return it."""
    del effects
    symbol = private_function(ctx, name, jaxpr)
    fn = ir.SymbolTable(ctx.module.operation)[symbol]
    if main_function:
        fn.attributes["sym_visibility"] = ir.StringAttr.get("public")
    return fn


def core_call_lowering(ctx: LoweringRuleContext, *args, name: str, backend: Any = None,
                       call_jaxpr: core.Jaxpr | core.ClosedJaxpr) -> list:
    """The lowering of a call primitive: its body a private function, called in place."""
    del backend
    closed = (call_jaxpr if isinstance(call_jaxpr, core.ClosedJaxpr)
              else core.ClosedJaxpr(call_jaxpr, []))
    symbol = private_function(ctx.module_context, name, closed)
    return list(func_dialect.CallOp([aval_to_ir_type(a) for a in closed.out_avals],
                                    ir.FlatSymbolRefAttr.get(symbol), list(args)).results)


def emit_python_callback(ctx: LoweringRuleContext, callback: Callable, token: Any,
                         operands: Sequence, operand_avals: Sequence, result_avals: Sequence,
                         *, has_side_effect: bool, returns_token: bool = True,
                         partitioned: bool = False, sharding: Any = None) -> tuple:
    """JAX's form of a host callback: ``callback`` gets the operands as NumPy arrays and
    must return arrays of ``result_avals`` (checked); returns ``(results, token,
    keepalive)``, the token passed through (the call's ``has_side_effect`` orders it)."""
    del operand_avals, returns_token, sharding

    def checked(*args):
        outs = callback(*args)
        if len(outs) != len(result_avals):
            raise RuntimeError("Mismatched number of outputs from callback. Expected: "
                               f"{len(result_avals)}, Actual: {len(outs)}")
        outs = tuple(np.asarray(o) for o in outs)
        for i, (o, a) in enumerate(zip(outs, result_avals)):
            if o.shape != a.shape:
                raise RuntimeError(f"Incorrect output shape for return value #{i}: "
                                   f"Expected: {a.shape}, Actual: {o.shape}")
            if o.dtype != a.dtype:
                raise RuntimeError(f"Incorrect output dtype for return value #{i}: "
                                   f"Expected: {a.dtype}, Actual: {o.dtype}")
        return outs

    results = mlir_callbacks.emit_python_callback(ctx, checked, operands, result_avals,
                                                  has_side_effect=has_side_effect,
                                                  partitioned=partitioned)
    return results, token, None
