"""Calling Python from staged programs: ``pure_callback``, ``io_callback``, the debug
callback and debug print.

Each is a primitive carrying the parameters JAX's equation carries (and printing them as JAX
does). Eagerly the function is simply called; under ``jit`` the lowering emits jaxlib's Python
host callback (``mlir_callbacks.emit_python_callback``: a typed-FFI ``custom_call`` whose
target jaxlib registers for the CPU and the CUDA plugin, with the callables handed to
``compile_and_load``), so it runs on the host while the compiled program executes: on every
device of a ``pmap`` or of a ``shard_map`` body, once on one device of a program partitioned
over a mesh. In all cases the function receives ``jaxkit.Array``s, as in JAX.

* ``pure_callback_p``: a function of its inputs with declared result shapes. XLA may skip it
  when its results are unused. It has no derivative (wrap it in ``custom_jvp``/``custom_vjp``);
  under ``vmap`` the ``vmap_method`` decides how it is called (JAX 0.10.2's semantics).
* ``io_callback_p``: the same with a side effect, kept by dead-code elimination.
* ``debug_callback_p`` and ``debug_print_p`` (``debug.print``): no outputs, a side effect. They
  are kept by dead-code elimination (``partial_eval.effectful_primitives``) and by XLA
  (``has_side_effect``); under ``vmap`` they are called once per example, under
  differentiation with the primal values only.

Ordered effects (``ordered=True``) are refused in programs over several devices unless they
may be sharded (``io_callback``'s), as in JAX.
"""
from __future__ import annotations

import copy
import functools
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import tree_util
from jaxkit.effects import Effect
from jaxkit.jaxpr import effect_rules
from jaxkit.runtime.array import device_put_value, place_results
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir, mlir_callbacks, mlir_tokens
from jaxkit.interpreters import partial_eval as pe
from jaxkit.transforms.shard_map import shard_map


class _FlatCallback:
    """The user's callback taking flat array arguments: the ``callback`` parameter of
    ``pure_callback`` and ``io_callback`` (hashable: equal for the same function and argument
    structure, so jaxprs and compilations are reused). Prints as JAX's does."""

    __slots__ = ("callback_func", "in_tree")

    def __init__(self, callback_func: Callable, in_tree):
        self.callback_func = callback_func
        self.in_tree = in_tree

    def __call__(self, *flat_args) -> Any:
        args, kwargs = tree_util.tree_unflatten(self.in_tree, list(flat_args))
        return self.callback_func(*args, **kwargs)

    def _key(self):
        return (self.callback_func, self.in_tree)

    def __eq__(self, other):
        return type(other) is _FlatCallback and self._key() == other._key()

    def __hash__(self):
        try:
            return hash(self._key())
        except TypeError:  # an unhashable callable: identity
            return id(self)

    def __repr__(self):
        return f"_FlatCallback(callback_func={self.callback_func!r}, in_tree={self.in_tree!r})"

    __str__ = __repr__


class _Effect(Effect):
    """A side effect of a callback equation (JAX's effect objects: they print as their kind,
    ``IO``, ``OrderedDebug``...). ``shardable``: an ordered effect that may run in a program
    over several devices (each device keeps its own order)."""

    kind = ""
    shardable = False

    def __str__(self):
        return self.kind


class IOEffect(_Effect):
    kind = "IO"


class OrderedIOEffect(_Effect):
    kind = "OrderedIO"
    shardable = True


class DebugEffect(_Effect):
    """The effect of an unordered debug callback (``jax.debug.DebugEffect``)."""

    kind = "Debug"


class OrderedDebugEffect(_Effect):
    """The effect of an ordered debug callback (``ordered=True``); refused in a program over
    several devices, as in JAX."""

    kind = "OrderedDebug"


mlir.lowerable_effects.add_type(_Effect)
io_effect, ordered_io_effect = IOEffect(), OrderedIOEffect()
debug_effect, ordered_debug_effect = DebugEffect(), OrderedDebugEffect()


def _device_index(ctx: mlir.LoweringRuleContext, sharding: Any) -> int | None:
    """The partition that runs a callback given a ``sharding`` (JAX accepts a one-device
    sharding) in a partitioned program; None when not given or not partitioned."""
    mctx = ctx.module_context
    if sharding is None or mctx.mesh is None:
        return None
    if isinstance(mctx.manual, frozenset):
        raise NotImplementedError("callbacks do not support specifying sharding inside spmd "
                                  "computations")
    devices = getattr(sharding, "device_set", None)
    if devices is None or len(devices) != 1:
        raise NotImplementedError("pure_callback only supports SingleDeviceSharding, but got "
                                  f"{type(sharding)}")
    device = next(iter(devices))
    try:
        return list(mctx.device_assignment).index(device)
    except ValueError:
        raise ValueError(f"Sharding provided to pure_callback specifies a device {device} that "
                         f"is not in the device assignment ({mctx.device_assignment})") from None


def _as_arrays(args: Sequence) -> list:
    """Host values (read-only NumPy views of device buffers, valid only during the call) and
    eager arguments -> ``Array``s the callback may keep."""
    return [device_put_value(a) for a in args]  # copies: never aliases the host buffer


def _check_results(results, result_avals: Sequence[ShapedArray], what: str) -> list:
    flat = tree_util.tree_leaves(results)
    if len(flat) != len(result_avals):
        raise RuntimeError(f"{what}: the callback returned {len(flat)} arrays but "
                           f"result_shape_dtypes declares {len(result_avals)}.")
    out = []
    for i, (x, aval) in enumerate(zip(flat, result_avals)):
        x = np.asarray(x)
        x = x.astype(dtypes.canonicalize_dtype(x.dtype), copy=False)
        if x.shape != aval.shape:
            raise RuntimeError(f"{what}: incorrect output shape for return value #{i}: "
                               f"expected {aval.shape}, got {x.shape}.")
        if x.dtype != aval.dtype:
            raise RuntimeError(f"{what}: incorrect output dtype for return value #{i}: "
                               f"expected {aval.dtype}, got {x.dtype}.")
        out.append(x)
    return out


# --------------------------------------------------------------------------------------------
# pure_callback
# --------------------------------------------------------------------------------------------

_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized", None)


def _result_avals(result_shape_dtypes: Any) -> tuple[tuple[ShapedArray, ...], Any]:
    leaves, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    result_avals = []
    for leaf in leaves:
        dt = np.dtype(leaf.dtype)
        if dtypes.canonicalize_dtype(dt) != dt:
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                             "`jax_enable_x64` is disabled")
        result_avals.append(ShapedArray(leaf.shape, dt))
    return tuple(result_avals), out_tree


def pure_callback(callback: Callable, result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None, **kwargs: Any):
    """Call the pure Python function ``callback(*args, **kwargs)`` from (possibly staged) code.

    ``result_shape_dtypes`` is a pytree of objects with ``shape`` and ``dtype`` (e.g.
    ``jaxkit.ShapeDtypeStruct``) describing the result. The callback receives ``Array``s and
    may return NumPy arrays. Under ``vmap``, ``vmap_method`` chooses the behaviour:
    ``"sequential"`` (a loop, one call per example), ``"expand_dims"`` (one call; unbatched
    arguments get a leading axis of size 1), ``"broadcast_all"`` (one call; every argument is
    broadcast to the batch size), or ``None`` (an error, as in JAX 0.10.2). ``sharding`` (a
    one-device sharding) picks the device that calls it in a program partitioned over a mesh
    (by default the program's first)."""
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"vmap_method must be one of the allowed methods {list(_VMAP_METHODS)}, "
                         f"but got: {vmap_method!r}")
    flat_args, in_tree = tree_util.tree_flatten((args, kwargs))
    result_avals, out_tree = _result_avals(result_shape_dtypes)
    outs = pure_callback_p.bind(*flat_args, callback=_FlatCallback(callback, in_tree),
                                result_avals=result_avals, sharding=sharding,
                                vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, outs)


def _pure_callback_impl(*args, callback: _FlatCallback, result_avals, sharding, vmap_method):
    outs = _check_results(callback(*_as_arrays(args)), result_avals, "pure_callback")
    return place_results(outs, args, "pure_callback")


def _pure_callback_abstract_eval(*avals, callback, result_avals, sharding, vmap_method):
    return list(result_avals)


def _pure_callback_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` (here "
                     "`jaxkit.custom_jvp`) to use callbacks while taking gradients.")


def _pure_callback_transpose(cts, *args, **params):
    raise ValueError("Pure callbacks do not support transpose. Please use `jax.custom_vjp` "
                     "(here `jaxkit.custom_vjp`) to use callbacks while taking gradients.")


def batch_by_vmap_method(name: str, args: Sequence, dims: Sequence, result_avals: Sequence,
                        vmap_method: str | None, bind_vectorized: Callable,
                        bind_one: Callable) -> tuple[list, list]:
    """The batching rule of a primitive that calls foreign code (``pure_callback``,
    ``ffi_call``), as its ``vmap_method`` says (JAX 0.10.2's semantics).

    ``expand_dims``/``broadcast_all``/``legacy_vectorized`` make one call on the whole batch:
    ``bind_vectorized(args, batched_inputs, batched_avals)`` gets the arguments with the batch
    axis leading (unbatched ones given a leading axis of 1, or of the batch size, except under
    ``legacy_vectorized``), which of them have that axis, and the result avals with it.
    ``sequential``/``sequential_unrolled`` call ``bind_one(args)`` once per example in a
    ``lax.map``. ``name`` is the primitive's, for the error naming the allowed methods."""
    size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    args = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    batched = [d is not None for d in dims]
    if vmap_method in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        if vmap_method != "legacy_vectorized":
            n = size if vmap_method == "broadcast_all" else 1
            args = [x if b else lax.broadcast(x, (n,)) for x, b in zip(args, batched)]
            batched = [True] * len(args)
        batched_avals = tuple(a.update(shape=(size, *a.shape)) for a in result_avals)
        outs = bind_vectorized(args, batched, batched_avals)
    elif vmap_method in ("sequential", "sequential_unrolled"):
        fixed = [x for x, b in zip(args, batched) if not b]

        def one(xs):
            it_b, it_f = iter(xs), iter(fixed)
            return bind_one([next(it_b) if b else next(it_f) for b in batched])

        outs = lax.map(one, [x for x, b in zip(args, batched) if b])
    else:
        raise NotImplementedError(
            f"vmap is only supported for the {name} primitive when vmap_method is one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}.")
    return list(outs), [0] * len(outs)


def _pure_callback_batch(axis_data, args, dims, *, callback, result_avals, sharding,
                         vmap_method):
    def bind(args, avals):
        return pure_callback_p.bind(*args, callback=callback, result_avals=avals,
                                    sharding=sharding, vmap_method=vmap_method)

    return batch_by_vmap_method(
        "pure_callback", args, dims, result_avals, vmap_method,
        lambda args, batched, avals: bind(args, avals), lambda args: bind(args, result_avals))


def _pure_callback_lowering(ctx: mlir.LoweringRuleContext, *args, callback, result_avals,
                            sharding, vmap_method):
    def host(*flat_args):
        return tuple(_check_results(callback(*_as_arrays(flat_args)), result_avals,
                                    "pure_callback"))

    return mlir_callbacks.emit_python_callback(ctx, host, args, result_avals,
                                               has_side_effect=False,
                                               device_index=_device_index(ctx, sharding))


pure_callback_p = core.Primitive("pure_callback")
pure_callback_p.multiple_results = True
pure_callback_p.def_impl(_pure_callback_impl)
pure_callback_p.def_abstract_eval(_pure_callback_abstract_eval)
ad.defjvp_rule(pure_callback_p, _pure_callback_jvp)
ad.deftranspose(pure_callback_p, _pure_callback_transpose)
batching.defrule(pure_callback_p, _pure_callback_batch)
mlir.register_lowering(pure_callback_p, _pure_callback_lowering)


# --------------------------------------------------------------------------------------------
# io_callback (jax.experimental.io_callback)
# --------------------------------------------------------------------------------------------


def io_callback(callback: Callable, result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any):
    """Call ``callback(*args, **kwargs)``, which may have side effects, from (possibly staged)
    code; it returns arrays described by ``result_shape_dtypes``. The call is never removed
    as dead code. Not differentiable; under ``vmap`` an unordered callback runs once per
    example and an ordered one is an error (as in JAX). An ordered callback may run in a
    program over several devices (``pmap``, a mesh), each device keeping its own order.
    Ordered calls keep program order eagerly, from one program to the next, and inside one
    block of a program (a token passes from each to the next, as in JAX); across nested
    blocks (a loop body, a branch, a nested ``jit``) the token is not threaded yet, so
    there XLA's schedule decides."""
    flat_args, in_tree = tree_util.tree_flatten((args, kwargs))
    result_avals, out_tree = _result_avals(result_shape_dtypes)
    outs = io_callback_p.bind(*flat_args, callback=_FlatCallback(callback, in_tree),
                              ordered=bool(ordered), result_avals=result_avals,
                              sharding=sharding)
    return tree_util.tree_unflatten(out_tree, outs)


def _io_callback_impl(*args, callback: _FlatCallback, ordered, result_avals, sharding):
    outs = _check_results(callback(*_as_arrays(args)), result_avals, "io_callback")
    return place_results(outs, args, "io_callback")


def _io_callback_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP.")


def _io_callback_batch(axis_data, args, dims, *, callback, ordered, result_avals, sharding):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    args = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    batched = [d is not None for d in dims]
    fixed = [x for x, b in zip(args, batched) if not b]

    def one(xs):
        it_b, it_f = iter(xs), iter(fixed)
        merged = [next(it_b) if b else next(it_f) for b in batched]
        return io_callback_p.bind(*merged, callback=callback, ordered=ordered,
                                  result_avals=result_avals, sharding=sharding)

    outs = lax.map(one, [x for x, b in zip(args, batched) if b])
    return list(outs), [0] * len(outs)


def _io_callback_lowering(ctx: mlir.LoweringRuleContext, *args, callback, ordered,
                          result_avals, sharding):
    def host(*flat_args):
        return tuple(_check_results(callback(*_as_arrays(flat_args)), result_avals,
                                    "io_callback"))

    return mlir_callbacks.emit_python_callback(
        ctx, host, args, result_avals, has_side_effect=True,
        ordered_effect=ordered_io_effect if ordered else None,
        device_index=_device_index(ctx, sharding))


io_callback_p = core.Primitive("io_callback")
io_callback_p.multiple_results = True
io_callback_p.def_impl(_io_callback_impl)
io_callback_p.def_abstract_eval(lambda *avals, result_avals, **_: list(result_avals))
ad.defjvp_rule(io_callback_p, _io_callback_jvp)
batching.defrule(io_callback_p, _io_callback_batch)
mlir.register_lowering(io_callback_p, _io_callback_lowering)
pe.defeffectful(io_callback_p)
pe.defeffect_kind(io_callback_p, "io")
mlir_tokens.def_ordered_effect(io_callback_p,
                               lambda ordered, **_: ordered_io_effect if ordered else None)
effect_rules[io_callback_p] = lambda eqn: {
    ordered_io_effect if eqn.params["ordered"] else io_effect}


# --------------------------------------------------------------------------------------------
# The debug callback (jaxkit.debug.callback) and debug print (jaxkit.debug.print)
# --------------------------------------------------------------------------------------------


def split_static_args(args: tuple, kwargs: dict) -> tuple[Any, list, tuple]:
    """``(in_tree, array leaves, static leaves)`` of ``(args, kwargs)``: the array leaves
    (arrays, tracers, Python numbers) become operands; the others (strings, None, ...) travel
    in the equation as ``((flat position, value), ...)``, as JAX's ``static_args``."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    dyn, static = [], []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, core.Tracer) or core.is_array_like(leaf):
            dyn.append(leaf)
        else:
            static.append((i, leaf))
    return in_tree, dyn, tuple(static)


def merge_static_args(in_tree, dyn: Sequence, static_args: tuple) -> tuple[tuple, dict]:
    """The ``(args, kwargs)`` that ``split_static_args`` split."""
    leaves = list(dyn)
    for i, value in static_args:
        leaves.insert(i, value)
    return tree_util.tree_unflatten(in_tree, leaves)


def debug_callback(callback: Callable[..., Any] | None = None, *args: Any,
                   ordered: bool = False, partitioned: bool = False, **kwargs: Any):
    """Call ``callback(*args, **kwargs)`` for its side effect, eagerly or from staged code.

    Array arguments arrive as ``Array``s holding their runtime values; other arguments (strings,
    ``None``, ...) are passed through unchanged. As in JAX, also callable in two steps:
    ``debug_callback(ordered=True)(callback, *args)``. An ordered callback is refused in a
    program over several devices (as JAX refuses it)."""

    def _debug_callback(callback: Callable[..., Any], *c_args: Any, **c_kwargs: Any) -> None:
        if not callable(callback):
            raise TypeError("first argument to jax.debug.callback must be callable, but got an "
                            f"object of type {type(callback)}")
        in_tree, dyn, static = split_static_args(c_args, c_kwargs)

        # A function of the operands alone, as JAX's equation holds (and prints) it.
        def _flat_callback(*dyn_flat):
            f_args, f_kwargs = merge_static_args(in_tree, dyn_flat, static)
            callback(*f_args, **f_kwargs)
            return ()

        debug_callback_p.bind(*dyn, callback=_flat_callback,
                              effect=ordered_debug_effect if ordered else debug_effect,
                              partitioned=bool(partitioned))

    if callback is not None:
        _debug_callback(callback, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_callback received unexpected arguments in the two-call form: "
                        f"args={args} kwargs={kwargs}")
    return _debug_callback


def format_print(fmt: str, np_printoptions: tuple, has_placeholders: bool,
                 logging_record: logging.LogRecord | None, *args, **kwargs) -> None:
    """Write one ``debug.print`` message: ``fmt`` formatted with NumPy's print options of the
    call site, to standard output, or to the logger of ``logging_record`` (``debug.log``)."""
    if has_placeholders:
        with np.printoptions(**dict(np_printoptions)):
            msg = fmt.format(*args, **kwargs)
    else:
        msg = " ".join((fmt, *(str(a) for a in args)))
    if logging_record is not None:
        record = copy.copy(logging_record)
        record.msg = msg
        logging.getLogger(record.name).handle(record)
        return
    sys.stdout.write(msg + "\n")


def _call_debug_callback(args, callback, effect, partitioned) -> None:
    callback(*_as_arrays(args))


def _call_debug_print(args, fmt, has_placeholders, in_tree, logging_record, np_printoptions,
                      ordered, partitioned, static_args) -> None:
    p_args, p_kwargs = merge_static_args(in_tree, _as_arrays(args), static_args)
    format_print(fmt, np_printoptions, has_placeholders, logging_record, *p_args, **p_kwargs)


class _ShownAs:
    """A parameter printed as the given text (a function prints as its repr, as in JAX)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self):
        return self.text


def _automatic_axes(mctx: mlir.ModuleContext) -> tuple:
    """The mesh axes left automatic in a ``shard_map`` body manual over only some of them
    (empty outside such a body)."""
    if mctx.mesh is None or not isinstance(mctx.manual, frozenset) or not mctx.manual:
        return ()
    return tuple(name for name, _ in mctx.mesh if name not in mctx.manual)


def _on_first_of_automatic_axes(prim: core.Primitive, auto: tuple, mesh, params: dict, *args):
    """A debug callback in a body manual over only some mesh axes, as JAX lowers it: made
    manual over the others too, and called on the devices of index 0 along them (once per
    block of the manual axes, with the values gathered over the automatic ones)."""

    def body():
        lax.cond(lax.axis_index(auto) == 0, lambda: prim.bind(*args, **params), lambda: [])
        return []

    shard_map(body, mesh=mesh, in_specs=(), out_specs=[], axis_names=set(auto))()
    return []


def _side_effect_primitive(name: str, call: Callable, effect_of: Callable) -> core.Primitive:
    """A primitive without outputs that calls back into Python for a side effect:
    ``call(operands, **params)`` does it; ``effect_of(params)`` is its effect. Dead-code
    elimination keeps it; ``vmap`` calls it once per example and differentiation with the
    primal values, as JAX does."""
    prim = core.Primitive(name)
    prim.multiple_results = True

    @prim.def_impl
    def _impl(*args, **params):
        call(args, **params)
        return []

    prim.def_abstract_eval(lambda *avals, **params: [])

    def _jvp(primals, tangents, **params):
        return prim.bind(*primals, **params), []

    def _batch(axis_data, args, dims, **params):
        size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
        for i in range(size):
            prim.bind(*[x if d is None else lax.index_in_dim(x, i, d, keepdims=False)
                        for x, d in zip(args, dims)], **params)
        return [], []

    def _lowering(ctx: mlir.LoweringRuleContext, *args, **params):
        mctx = ctx.module_context
        auto = _automatic_axes(mctx)
        if auto:
            return mlir.lower_fun(functools.partial(_on_first_of_automatic_axes, prim, auto,
                                                    mctx.device_mesh(), params),
                                  multiple_results=True)(ctx, *args)
        effect = effect_of(params)

        def host(*flat_args):
            call(flat_args, **params)
            return ()

        return mlir_callbacks.emit_python_callback(
            ctx, host, args, [], has_side_effect=True,
            ordered_effect=effect if effect is ordered_debug_effect else None,
            partitioned=params["partitioned"])

    ad.defjvp_rule(prim, _jvp)
    ad.deftranspose(prim, lambda cts, *args, **params: [None] * len(args))
    batching.defrule(prim, _batch)
    mlir.register_lowering(prim, _lowering)
    pe.defeffectful(prim)
    mlir_tokens.def_ordered_effect(prim, lambda **params: effect_of(params)
                                   if effect_of(params) is ordered_debug_effect else None)
    effect_rules[prim] = lambda eqn: {effect_of(eqn.params)}
    return prim


debug_callback_p = _side_effect_primitive("debug_callback", _call_debug_callback,
                                          lambda params: params["effect"])
core.defpp_params(debug_callback_p, lambda params: {
    "callback": _ShownAs(repr(params["callback"])), "effect": params["effect"],
    "partitioned": params["partitioned"]})
# Bound by jaxkit.debug.print.
debug_print_p = _side_effect_primitive(
    "debug_print", _call_debug_print,
    lambda params: ordered_debug_effect if params["ordered"] else debug_effect)


def effects_barrier() -> None:
    """Wait until the side effects of earlier calls have happened (``jax.effects_barrier``).

    Programs containing host callbacks already wait for them before returning (see
    ``pjrt._CallbackExecutable``), so there is never anything left to wait for."""
