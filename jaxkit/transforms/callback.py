"""Calling Python from staged programs: ``pure_callback`` and the debug callback.

Both are primitives whose ``callback`` parameter is a ``FlatCallback`` (the user's function and
the pytree structure of its arguments). Eagerly the function is simply called; under ``jit``
the lowering emits jaxlib's Python host callback (``mlir_callbacks.emit_python_callback``: a
typed-FFI ``custom_call`` whose target jaxlib registers for the CPU and the CUDA plugin, with
the callables handed to ``compile_and_load``), so it runs on the host while the compiled
program executes. In both
cases the function receives ``jaxkit.Array``s, as in JAX.

* ``pure_callback_p``: a function of its inputs with declared result shapes. XLA may skip it
  when its results are unused. It has no derivative (wrap it in ``custom_jvp``/``custom_vjp``);
  under ``vmap`` the ``vmap_method`` decides how it is called (JAX 0.10.2's semantics).
* ``debug_callback_p`` (and ``debug_print_p``, the same rules under the name JAX gives
  ``debug.print``): no outputs, a side effect. It is kept by dead-code elimination
  (``partial_eval.effectful_primitives``) and by XLA (``has_side_effect``); under ``vmap`` it is
  called once per example, under differentiation with the primal values only.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import tree_util
from jaxkit.runtime.array import device_put_value, place_results
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, mlir, mlir_callbacks
from jaxkit.interpreters import partial_eval as pe


class FlatCallback:
    """The user's callback taking flat array arguments (a hashable primitive parameter: equal
    for the same function and argument structure, so jaxprs and compilations are reused)."""

    __slots__ = ("callback_func", "in_tree", "static_args")

    def __init__(self, callback_func: Callable, in_tree, static_args: tuple = ()):
        self.callback_func = callback_func
        self.in_tree = in_tree
        self.static_args = static_args  # ((flat position, non-array value), ...)

    def __call__(self, *flat_args) -> Any:
        leaves = list(flat_args)
        for i, value in self.static_args:
            leaves.insert(i, value)
        args, kwargs = tree_util.tree_unflatten(self.in_tree, leaves)
        return self.callback_func(*args, **kwargs)

    def _key(self):
        return (self.callback_func, self.in_tree, self.static_args)

    def __eq__(self, other):
        return type(other) is FlatCallback and self._key() == other._key()

    def __hash__(self):
        try:
            return hash(self._key())
        except TypeError:  # unhashable static values: fall back to identity
            return id(self)

    def __str__(self):
        return getattr(self.callback_func, "__name__", type(self.callback_func).__name__)

    __repr__ = __str__


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


def pure_callback(callback: Callable, result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None, **kwargs: Any):
    """Call the pure Python function ``callback(*args, **kwargs)`` from (possibly staged) code.

    ``result_shape_dtypes`` is a pytree of objects with ``shape`` and ``dtype`` (e.g.
    ``jaxkit.ShapeDtypeStruct``) describing the result. The callback receives ``Array``s and
    may return NumPy arrays. Under ``vmap``, ``vmap_method`` chooses the behaviour:
    ``"sequential"`` (a loop, one call per example), ``"expand_dims"`` (one call; unbatched
    arguments get a leading axis of size 1), ``"broadcast_all"`` (one call; every argument is
    broadcast to the batch size), or ``None`` (an error, as in JAX 0.10.2)."""
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"vmap_method must be one of the allowed methods {list(_VMAP_METHODS)}, "
                         f"but got: {vmap_method!r}")
    del sharding  # one device: the callback always runs on the host of the default device
    flat_args, in_tree = tree_util.tree_flatten((args, kwargs))
    leaves, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    result_avals = []
    for leaf in leaves:
        dt = np.dtype(leaf.dtype)
        if dtypes.canonicalize_dtype(dt) != dt:
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                             "`jax_enable_x64` is disabled")
        result_avals.append(ShapedArray(leaf.shape, dt))
    outs = pure_callback_p.bind(*flat_args, callback=FlatCallback(callback, in_tree),
                                result_avals=tuple(result_avals), vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, outs)


def _pure_callback_impl(*args, callback: FlatCallback, result_avals, vmap_method):
    outs = _check_results(callback(*_as_arrays(args)), result_avals, "pure_callback")
    return place_results(outs, args, "pure_callback")


def _pure_callback_abstract_eval(*avals, callback, result_avals, vmap_method):
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


def _pure_callback_batch(axis_data, args, dims, *, callback, result_avals, vmap_method):
    def bind(args, avals):
        return pure_callback_p.bind(*args, callback=callback, result_avals=avals,
                                    vmap_method=vmap_method)

    return batch_by_vmap_method(
        "pure_callback", args, dims, result_avals, vmap_method,
        lambda args, batched, avals: bind(args, avals), lambda args: bind(args, result_avals))


def _pure_callback_lowering(ctx: mlir.LoweringRuleContext, *args, callback, result_avals,
                            vmap_method):
    def host(*flat_args):
        return tuple(_check_results(callback(*_as_arrays(flat_args)), result_avals,
                                    "pure_callback"))

    return mlir_callbacks.emit_python_callback(ctx, host, args, result_avals, has_side_effect=False)


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
    example and an ordered one is an error (as in JAX). jaxkit threads no ordering token
    through compiled programs: ordered calls keep program order eagerly and from one call to
    the next, and inside one program they run in XLA's schedule order."""
    del sharding
    flat_args, in_tree = tree_util.tree_flatten((args, kwargs))
    leaves, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    result_avals = tuple(ShapedArray(leaf.shape, np.dtype(leaf.dtype)) for leaf in leaves)
    for aval in result_avals:
        if dtypes.canonicalize_dtype(aval.dtype) != aval.dtype:
            raise ValueError("result_shape_dtypes cannot specify 64-bit types when "
                             "`jax_enable_x64` is disabled")
    outs = io_callback_p.bind(*flat_args, callback=FlatCallback(callback, in_tree),
                              result_avals=result_avals, ordered=bool(ordered))
    return tree_util.tree_unflatten(out_tree, outs)


def _io_callback_impl(*args, callback: FlatCallback, result_avals, ordered):
    outs = _check_results(callback(*_as_arrays(args)), result_avals, "io_callback")
    return place_results(outs, args, "io_callback")


def _io_callback_jvp(primals, tangents, **params):
    raise ValueError("IO callbacks do not support JVP.")


def _io_callback_batch(axis_data, args, dims, *, callback, result_avals, ordered):
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    args = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    batched = [d is not None for d in dims]
    fixed = [x for x, b in zip(args, batched) if not b]

    def one(xs):
        it_b, it_f = iter(xs), iter(fixed)
        merged = [next(it_b) if b else next(it_f) for b in batched]
        return io_callback_p.bind(*merged, callback=callback, result_avals=result_avals,
                                  ordered=ordered)

    outs = lax.map(one, [x for x, b in zip(args, batched) if b])
    return list(outs), [0] * len(outs)


def _io_callback_lowering(ctx: mlir.LoweringRuleContext, *args, callback, result_avals,
                          ordered):
    def host(*flat_args):
        return tuple(_check_results(callback(*_as_arrays(flat_args)), result_avals,
                                    "io_callback"))

    return mlir_callbacks.emit_python_callback(ctx, host, args, result_avals, has_side_effect=True)


io_callback_p = core.Primitive("io_callback")
io_callback_p.multiple_results = True
io_callback_p.def_impl(_io_callback_impl)
io_callback_p.def_abstract_eval(lambda *avals, result_avals, **_: list(result_avals))
ad.defjvp_rule(io_callback_p, _io_callback_jvp)
batching.defrule(io_callback_p, _io_callback_batch)
mlir.register_lowering(io_callback_p, _io_callback_lowering)
pe.defeffectful(io_callback_p)
pe.defeffect_kind(io_callback_p, "io")


# --------------------------------------------------------------------------------------------
# The debug callback (jaxkit.debug.callback / jaxkit.debug.print)
# --------------------------------------------------------------------------------------------


def debug_callback(callback: Callable[..., Any], *args: Any, ordered: bool = False,
                   partitioned: bool = False, **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` for its side effect, eagerly or from staged code.

    Array arguments arrive as ``Array``s holding their runtime values; other arguments (strings,
    ``None``, ...) are passed through unchanged. ``ordered`` is accepted for compatibility:
    calls inside one compiled program are not ordered with respect to each other."""
    del partitioned
    bind_side_effect(debug_callback_p, callback, args, kwargs, ordered)


def bind_side_effect(prim: core.Primitive, callback: Callable[..., Any], args: tuple,
                     kwargs: dict, ordered: bool) -> None:
    """Bind ``prim`` (one of the side-effect primitives below) on the array leaves of
    ``(args, kwargs)``; the other leaves travel inside its ``callback`` parameter."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    dyn, static = [], []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, core.Tracer) or core.is_array_like(leaf):
            dyn.append(leaf)
        else:
            static.append((i, leaf))
    prim.bind(*dyn, callback=FlatCallback(callback, in_tree, tuple(static)),
              ordered=bool(ordered))


def _side_effect_primitive(name: str) -> core.Primitive:
    """A primitive that calls ``callback`` on its operands for a side effect and has no
    outputs: ``debug_callback`` and ``debug_print`` (the same rules under two names, as JAX
    shows them in jaxprs). Dead-code elimination keeps it."""
    prim = core.Primitive(name)
    prim.multiple_results = True

    @prim.def_impl
    def _impl(*args, callback: FlatCallback, ordered: bool):
        callback(*_as_arrays(args))
        return []

    @prim.def_abstract_eval
    def _abstract_eval(*avals, callback, ordered):
        return []

    def _jvp(primals, tangents, *, callback, ordered):
        # Differentiation sees the primal values (called once); there is no output tangent.
        return prim.bind(*primals, callback=callback, ordered=ordered), []

    def _transpose(cts, *args, callback, ordered):
        return [None] * len(args)

    def _batch(axis_data, args, dims, *, callback, ordered):
        # One call per example of the batch, as JAX does.
        size = next(core.get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
        for i in range(size):
            prim.bind(*[x if d is None else lax.index_in_dim(x, i, d, keepdims=False)
                        for x, d in zip(args, dims)], callback=callback, ordered=ordered)
        return [], []

    def _lowering(ctx: mlir.LoweringRuleContext, *args, callback, ordered):
        def host(*flat_args):
            callback(*_as_arrays(flat_args))
            return ()

        return mlir_callbacks.emit_python_callback(ctx, host, args, [], has_side_effect=True)

    ad.defjvp_rule(prim, _jvp)
    ad.deftranspose(prim, _transpose)
    batching.defrule(prim, _batch)
    mlir.register_lowering(prim, _lowering)
    pe.defeffectful(prim)
    return prim


debug_callback_p = _side_effect_primitive("debug_callback")
debug_print_p = _side_effect_primitive("debug_print")  # bound by jaxkit.debug.print
# Printed as JAX prints it: the format string, not the callback object.
core.defpp_params(debug_print_p, lambda params: {
    "fmt": params["callback"].callback_func.fmt, "ordered": params["ordered"]})


def effects_barrier() -> None:
    """Wait until the side effects of earlier calls have happened (``jax.effects_barrier``).

    Programs containing host callbacks already wait for them before returning (see
    ``pjrt._CallbackExecutable``), so there is never anything left to wait for."""
