"""Primitives that steer staging and compilation rather than compute a new value:
``optimization_barrier``, ``dce_sink``, ``stage``, ``empty``/``empty2``, ``device_put``
(inside a trace) and total-order comparisons ``eq_to``/``le_to``/``lt_to`` (used by shape
arithmetic).

Each is the identity on values, or close to it, and keeps its rules consistent with that: the
JVP of a barrier is a barrier over the tangents, ``device_put``'s transpose puts the cotangent
back, and batching passes the batch axes through unchanged.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import avals as avals_mod
from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.ad import stop_gradient_p
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax.elementwise import _compare_primitive
from jaxkit.lax.elementwise_bits import copy
from jaxkit.lax.standard import _any, _ordered, as_tuple_of_ints
from jaxkit.runtime import pjrt
from jaxkit.runtime.array import device_put_value
from jaxkit.typing import Array, ArrayLike, DTypeLike

__all__ = ["create_token", "create_token_p", "after_all", "after_all_p", "optimization_barrier",
           "optimization_barrier_p", "dce_sink", "dce_sink_p", "stage", "stage_p", "empty",
           "empty_p", "empty2", "empty2_p", "device_put_p", "ArrayCopySemantics", "stop_gradient_p",
           "eq_to_p", "le_to_p", "lt_to_p"]

ArrayCopySemantics = pjrt.ArrayCopySemantics


# ---- tokens --------------------------------------------------------------------------------
def create_token(_=None) -> core.Token:
    """A fresh token, with nothing to wait for (the argument is ignored, as in JAX). Lowers to
    ``stablehlo.after_all`` of no tokens."""
    return create_token_p.bind()


def after_all(*operands: core.Token) -> core.Token:
    """A token that is ready when all of ``operands`` (tokens) are. Lowers to
    ``stablehlo.after_all``."""
    return after_all_p.bind(*operands)


def _after_all_abstract_eval(*avals):
    if any(type(a) is not core.AbstractToken for a in avals):
        raise TypeError("Arguments to after_all must be tokens, got "
                        f"{', '.join(a.str_short() for a in avals)}")
    return core.abstract_token


create_token_p = core.Primitive("create_token")
create_token_p.def_impl(lambda: dispatch.apply_primitive(create_token_p))
create_token_p.def_abstract_eval(lambda: core.abstract_token)
ad.defjvp_zero(create_token_p)
mlir.register_lowering(create_token_p, lambda ctx: hlo.AfterAllOp([]).result)

after_all_p = core.Primitive("after_all")
after_all_p.def_impl(lambda *tokens: dispatch.apply_primitive(after_all_p, *tokens))
after_all_p.def_abstract_eval(_after_all_abstract_eval)
ad.defjvp_zero(after_all_p)
mlir.register_lowering(after_all_p, lambda ctx, *tokens: hlo.AfterAllOp(list(tokens)).result)


# ---- optimization_barrier ------------------------------------------------------------------
def optimization_barrier(operand: Any, /) -> Any:
    """Return ``operand`` (a pytree) unchanged, keeping XLA from moving computation across
    this point: everything feeding the barrier is computed before anything that uses its
    results. Lowers to ``stablehlo.optimization_barrier``."""
    leaves, treedef = tree_util.tree_flatten(operand)
    return tree_util.tree_unflatten(treedef, optimization_barrier_p.bind(*leaves))


def _barrier_jvp(primals, tangents):
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    return optimization_barrier_p.bind(*primals), optimization_barrier_p.bind(*tangents)


def _barrier_transpose(cts, *args):
    return optimization_barrier_p.bind(*[ad.instantiate_zeros(ct) for ct in cts])


optimization_barrier_p = core.Primitive("optimization_barrier")
optimization_barrier_p.multiple_results = True
optimization_barrier_p.def_impl(
    lambda *xs: dispatch.apply_primitive(optimization_barrier_p, *xs))
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))
ad.jvp_rules[optimization_barrier_p] = _barrier_jvp
ad.transpose_rules[optimization_barrier_p] = _barrier_transpose
batching.defrule(optimization_barrier_p,
                 lambda axis_data, args, dims: (optimization_barrier_p.bind(*args), list(dims)))
mlir.register_lowering(optimization_barrier_p,
                       lambda ctx, *xs: list(hlo.OptimizationBarrierOp(list(xs)).results))


# ---- dce_sink ------------------------------------------------------------------------------
def dce_sink(val: Any, *, prevent_mlir_dce: bool = False) -> None:
    """Mark every array of the pytree ``val`` as used, so dead-code elimination keeps the
    computation producing it. Returns None."""
    for leaf in tree_util.tree_leaves(val):
        dce_sink_p.bind(leaf, prevent_mlir_dce=bool(prevent_mlir_dce))


def _dce_sink_lowering(ctx, x, *, prevent_mlir_dce):
    if prevent_mlir_dce:
        # A side-effecting call of jaxlib's no-op typed-FFI target ``dce_sink``, which XLA
        # may not drop (the dict-valued ``mhlo.backend_config`` selects the typed FFI).
        rank = ctx.avals_in[0].ndim
        op = hlo.CustomCallOp(
            [], [x], call_target_name=ir.StringAttr.get("dce_sink"),
            has_side_effect=ir.BoolAttr.get(True), backend_config=ir.StringAttr.get(""),
            api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
            operand_layouts=mlir.layouts_attr([mlir.row_major(rank)]),
            result_layouts=mlir.layouts_attr([]))
        op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get({})
    return []


dce_sink_p = core.Primitive("dce_sink")
dce_sink_p.multiple_results = True
dce_sink_p.def_impl(lambda x, **_: [])
dce_sink_p.def_abstract_eval(lambda x, **_: [])
pe.defeffectful(dce_sink_p)
ad.deflinear2(dce_sink_p, lambda cts, x, **_: [ad.Zero(x.aval)])
batching.defrule(dce_sink_p, lambda axis_data, args, dims, **p: (dce_sink_p.bind(*args, **p), []))
mlir.register_lowering(dce_sink_p, _dce_sink_lowering)


# ---- stage ---------------------------------------------------------------------------------
def stage(x: ArrayLike, /) -> Array:
    """Lift ``x`` into the current trace: a traced value is returned as it is, anything else
    becomes an ``Array`` (or, while tracing, a value of the traced program)."""
    if isinstance(x, (core.Tracer, Array)):
        return x
    return stage_p.bind(x)


stage_p = core.Primitive("stage")
stage_p.def_impl(lambda x: device_put_value(x))
stage_p.def_abstract_eval(lambda x: x)
ad.deflinear2(stage_p, lambda ct, x: [ct])
batching.defvectorized(stage_p)
mlir.register_lowering(stage_p, lambda ctx, x: x)


# ---- empty ---------------------------------------------------------------------------------
def empty(shape: int | Sequence[int], dtype: DTypeLike, *, out_sharding=None) -> Array:
    """An array whose values are unspecified (zeros on CPU): a buffer to be overwritten.
    Lowers to a broadcast zero."""
    shape = as_tuple_of_ints((shape,) if np.ndim(shape) == 0 else shape, "empty shape")
    if any(d < 0 for d in shape):
        raise ValueError(f"empty: negative dimensions are not allowed, got shape {shape}")
    return empty_p.bind(shape=shape, dtype=dtypes.canonicalize_dtype(dtype),
                        out_sharding=out_sharding)


def _empty_lowering(ctx, *, shape, dtype, out_sharding):
    zero = mlir.ir_constant(np.zeros((), dtype))
    return mlir.broadcast_in_dim(zero, ctx.avals_out[0], [])


empty_p = core.Primitive("empty")
empty_p.def_impl(lambda **params: dispatch.apply_primitive(empty_p, **params))
empty_p.def_abstract_eval(lambda *, shape, dtype, out_sharding: core.ShapedArray(shape, dtype))
ad.defjvp_zero(empty_p)
mlir.register_lowering(empty_p, _empty_lowering)


def empty2(dtype: DTypeLike, *, memory_space: Any) -> Array:
    """JAX's scalar form of ``empty``, which its scan broadcasts into output buffers: an
    unspecified (zero) scalar of ``dtype``. Lowers to a zero constant."""
    return empty2_p.bind(dtype=dtype, memory_space=memory_space)


def _empty2_abstract_eval(*, dtype, memory_space):
    return core.ShapedArray((), dtypes.canonicalize_dtype(dtype), memory_space=memory_space)


empty2_p = core.Primitive("empty2")
empty2_p.def_impl(lambda **params: dispatch.apply_primitive(empty2_p, **params))
empty2_p.def_abstract_eval(_empty2_abstract_eval)
ad.defjvp_zero(empty2_p)
mlir.register_lowering(
    empty2_p, lambda ctx, **_: [mlir.ir_constant(np.zeros((), ctx.avals_out[0].dtype))])


# ---- device_put inside a trace -------------------------------------------------------------
def _target_kind(device: Any, x: Any) -> tuple[Any, str | None]:
    """``(device, memory kind)`` a placement names: a memory space names a memory of the
    device ``x`` is on already."""
    if isinstance(device, core.MemorySpace):
        return getattr(x, "device", None), core.mem_space_to_kind(device)
    if isinstance(device, pjrt.Sharding):
        return device._device, device.memory_kind
    mesh = getattr(device, "mesh", None)
    if mesh is not None:  # a NamedSharding: jaxkit stages one only over a one-device mesh
        if mesh.size != 1:
            raise NotImplementedError(
                f"device_put rule for a NamedSharding over {mesh.size} devices is not "
                "implemented outside a trace; use jax.device_put, which lays the value out")
        return mesh._flat[0], device.memory_kind
    return device, None


def _device_put_impl(*xs, devices, srcs, copy_semantics):
    outs = []
    for x, device, semantics in zip(xs, devices, copy_semantics):
        device, kind = _target_kind(device, x)
        moved = device_put_value(x, device, memory_kind=kind)
        if moved is x and semantics == ArrayCopySemantics.ALWAYS_COPY:
            moved = copy(x)  # a fresh buffer: what ALWAYS_COPY promises
        outs.append(moved)
    return outs


def _moved_aval(aval: Any, device: Any) -> Any:
    """The type of ``aval`` put on ``device``: in the memory space it names (a sharding's
    memory kind or a ``MemorySpace``), as JAX types the result of a ``device_put``."""
    if type(aval) is not core.ShapedArray:
        return aval
    if isinstance(device, core.MemorySpace):
        return aval.update(memory_space=device)
    kind = getattr(device, "memory_kind", None)
    if kind is None:
        return aval
    return aval.update(memory_space=core.mem_kind_to_space(kind))


def _device_put_abstract_eval(*avals, devices, srcs, copy_semantics):
    return [_moved_aval(a, d) for a, d in zip(avals, devices)]


def _device_put_transpose(cts, *args, devices, srcs, copy_semantics):
    # The cotangent goes back where the value came from (``srcs``; a value that was in host
    # memory goes back there, as JAX's rule), always as a fresh copy.
    if any(c == ArrayCopySemantics.DONATE_INPUT for c in copy_semantics):
        raise ValueError("donate=True is not allowed during tranposition of device_put. "
                         "Please file an issue if you want this to be supported.")
    results = [None] * len(args)
    live = [i for i, ct in enumerate(cts) if type(ct) is not ad.Zero]
    if live:
        back = [core.MemorySpace.Host if srcs[i] is None and ad.is_undefined_primal(args[i])
                and args[i].aval.memory_space is core.MemorySpace.Host else srcs[i]
                for i in live]
        moved = device_put_p.bind(
            *[cts[i] for i in live], devices=tuple(back),
            srcs=tuple(devices[i] for i in live),
            copy_semantics=(ArrayCopySemantics.ALWAYS_COPY,) * len(live))
        for i, m in zip(live, moved):
            results[i] = m
    return [r if r is not None or not ad.is_undefined_primal(a) else ad.Zero(a.aval)
            for r, a in zip(results, args)]


device_put_p = core.Primitive("device_put")
device_put_p.multiple_results = True
device_put_p.def_impl(_device_put_impl)
device_put_p.def_abstract_eval(_device_put_abstract_eval)
avals_mod.memory_space_typed.add(device_put_p)
ad.deflinear2(device_put_p, _device_put_transpose)
batching.defrule(device_put_p,
                 lambda axis_data, args, dims, **p: (device_put_p.bind(*args, **p), list(dims)))
# On the CPU, as JAX's common rule, a move between memory spaces is no instruction: the
# values' types carry it to the program's argument and result memory kinds.
mlir.register_lowering(device_put_p, lambda ctx, *xs, **_: list(xs))


# ---- total-order comparisons ---------------------------------------------------------------
# Comparisons in IEEE total order (-NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN), so that
# NaN equals itself and -0.0 differs from 0.0: JAX's primitives for shape arithmetic.
eq_to_p = _compare_primitive("eq_to", _any, "EQ", total_order=True)
le_to_p = _compare_primitive("le_to", _ordered, "LE", total_order=True)
lt_to_p = _compare_primitive("lt_to", _ordered, "LT", total_order=True)
