"""``jax.ffi``: call compiled foreign functions (XLA FFI custom-call targets) from jaxkit code.

A C/C++ handler written against XLA's FFI headers (``include_dir()``) is registered by name
with ``register_ffi_target`` (from a ``pycapsule`` of its ctypes pointer) and called with
``ffi_call(name, result_shape_dtypes)(*arrays, **attributes)``: the ``ffi_call`` primitive
lowers to ``stablehlo.custom_call @name`` with the keyword arguments as the handler's
attributes. Under ``vmap`` it follows ``vmap_method`` as ``pure_callback`` does; it has no
derivative (wrap it in ``custom_jvp``/``custom_vjp``), as in JAX.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


import numpy as np

from jaxkit import core
from jaxkit.core import ShapedArray
from jaxkit.interpreters import ad, batching, dispatch, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import sharding_rules as shr
from jaxkit.runtime import ffi_registry
from jaxkit.transforms.callback import batch_by_vmap_method

__all__ = ["build_ffi_lowering_function", "ffi_call", "ffi_lowering", "include_dir",
           "pycapsule", "register_ffi_target", "register_ffi_target_as_batch_partitionable",
           "register_ffi_type", "register_ffi_type_id"]

FfiLayoutOptions = Sequence[int] | None

_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized", None)


def register_ffi_target(name: str, fn: Any, platform: str = "cpu", api_version: int = 1,
                        **kwargs: Any) -> None:
    """Register the foreign function ``fn`` (a PyCapsule, or a dict of FFI stage name ->
    PyCapsule) as target ``name``; ``api_version`` 1 is the typed FFI, 0 the legacy API."""
    ffi_registry.register_target(name, fn, platform, api_version, **kwargs)


def register_ffi_type_id(name: str, obj: Any, platform: str = "cpu") -> None:
    """Removed from JAX (jaxlib > 0.3.81 registers types with ``register_ffi_type``)."""
    raise ValueError("register_ffi_type_id is not supported after jaxlib version 381.")


def register_ffi_type(name: str, type_registration: Mapping[str, Any],
                      platform: str = "cpu") -> None:
    """Register a custom FFI type: ``{"type_id": capsule, "type_info": capsule}``."""
    ffi_registry.register_type(name, type_registration, platform)


def register_ffi_target_as_batch_partitionable(name: str) -> None:
    """Declare that XLA may partition target ``name`` along its leading (batch) axis."""
    ffi_registry.register_batch_partitionable(name)


def pycapsule(funcptr: Any) -> Any:
    """Wrap a ctypes function pointer (``ctypes.cdll.LoadLibrary(path).name``) in a
    PyCapsule, as ``register_ffi_target`` takes it."""
    return ffi_registry.pycapsule(funcptr)


def include_dir() -> str:
    """The directory of the XLA FFI headers bundled with jaxlib (``-I`` for compiling)."""
    return ffi_registry.include_dir()


# --------------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------------

def _default_layout(aval) -> tuple[int, ...]:
    return mlir.row_major(len(getattr(aval, "shape", ())))


def _layout_for_lowering(aval, layout) -> tuple[int, ...]:
    """Minor-to-major, as the custom-call API wants it (``None``: row major; an object with
    ``major_to_minor``, as ``Layout``, is reversed)."""
    if layout is None:
        return _default_layout(aval)
    if hasattr(layout, "major_to_minor"):
        if getattr(layout, "tiling", None):
            raise ValueError("The FFI does not support layouts with tiling")
        return tuple(layout.major_to_minor)[::-1]
    return tuple(layout)


def _dense_attribute(value: np.ndarray) -> ir.Attribute:
    return ir.DenseElementsAttr.get(np.ascontiguousarray(value),
                                    type=mlir.dtype_to_ir_type(value.dtype), shape=value.shape)


def ir_attribute(value: Any) -> ir.Attribute:
    """An FFI attribute from a Python value, as JAX encodes it: Python ``int``/``float``/
    ``bool``/``complex`` as 64-bit scalars, NumPy scalars and arrays at their dtype, ``str``,
    dicts, and sequences."""
    if isinstance(value, ir.Attribute):
        return value
    if isinstance(value, (str, bytes)):
        return ir.StringAttr.get(value)
    if isinstance(value, bool):
        return _python_scalar(np.array(value, np.bool_))
    if isinstance(value, int):
        return _python_scalar(np.array(value, np.int64))
    if isinstance(value, float):
        return _python_scalar(np.array(value, np.float64))
    if isinstance(value, (np.ndarray, np.generic)):
        if isinstance(value, np.ndarray) and 0 in value.strides and value.size > 0:
            raise ValueError("NumPy arrays with zero strides are not supported as MLIR "
                             "attributes")
        value = np.asarray(value)
        return _python_scalar(value) if value.ndim == 0 else _dense_attribute(value)
    if isinstance(value, np.dtype):
        return ir.TypeAttr.get(mlir.dtype_to_ir_type(value))
    if isinstance(value, Mapping):
        return ir.DictAttr.get({k: ir_attribute(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return ir.ArrayAttr.get([ir_attribute(v) for v in value])
    raise TypeError(f"No attribute handler defined for type: {type(value)}")


def _python_scalar(value: np.ndarray) -> ir.Attribute:
    """A rank-0 value as a scalar attribute of its dtype."""
    element = mlir.dtype_to_ir_type(value.dtype)
    if isinstance(element, ir.IntegerType):
        return ir.IntegerAttr.get(element, int(value))
    if np.issubdtype(value.dtype, np.floating):
        return ir.FloatAttr.get(element, float(value))
    raise TypeError(f"Unsupported scalar attribute type: {value.dtype}")


def build_ffi_lowering_function(call_target_name: str, *,
                                operand_layouts: Sequence[FfiLayoutOptions] | None = None,
                                result_layouts: Sequence[FfiLayoutOptions] | None = None,
                                backend_config: Mapping[str, Any] | str | None = None,
                                skip_ffi_layout_processing: bool = False,
                                **lowering_args: Any) -> Callable[..., Any]:
    """A function ``(ctx, *operands, **attributes) -> custom_call op`` calling the target;
    the layouts given are minor-to-major (XLA's order); keyword arguments become attributes
    (``api_version`` >= 4, the default) or must be absent (older APIs)."""

    def lowering_op(ctx: mlir.LoweringRuleContext, *operands: ir.Value, **params: Any):
        api_version = lowering_args.get("api_version", 4)
        config: Any
        if api_version >= 4:
            if backend_config is not None and not isinstance(backend_config, Mapping):
                raise ValueError("When api_version > 4, backend_config must be a dictionary.")
            config = {k: ir_attribute(v) for k, v in dict(backend_config or {}).items()}
            config.update({k: ir_attribute(v) for k, v in params.items()})
        else:
            if params:
                raise ValueError(
                    "The use of ffi_call attributes requires a custom call API version of at "
                    f"least 4; got api_version={api_version}.")
            config = backend_config
        result_types = lowering_args.get(
            "result_types", [mlir.aval_to_ir_type(a) for a in ctx.avals_out])
        i32 = ir.IntegerType.get_signless(32)
        attributes = {
            "call_target_name": ir.StringAttr.get(call_target_name),
            "has_side_effect": ir.BoolAttr.get(bool(lowering_args.get("has_side_effect"))),
            # a dict config rides in ``mhlo.backend_config`` with API version 1, which XLA
            # reads as the typed FFI's attributes (the op's own field holds strings only)
            "backend_config": ir.StringAttr.get(config if isinstance(config, (str, bytes))
                                                else ""),
            "api_version": ir.IntegerAttr.get(i32, 1 if isinstance(config, dict)
                                              else api_version),
            "called_computations": ir.ArrayAttr.get([]),
        }
        aliases = lowering_args.get("operand_output_aliases")
        if aliases:
            attributes["output_operand_aliases"] = ir.ArrayAttr.get([
                hlo.OutputOperandAlias.get([o] if len(result_types) > 1 else [], i, [])
                for i, o in dict(aliases).items()])
        if not skip_ffi_layout_processing:
            in_layouts = [_layout_for_lowering(a, lay) for a, lay in zip(
                ctx.avals_in, operand_layouts or [None] * len(ctx.avals_in))]
            out_layouts = [_layout_for_lowering(a, lay) for a, lay in zip(
                ctx.avals_out, result_layouts or [None] * len(ctx.avals_out))]
            attributes["operand_layouts"] = mlir.layouts_attr(in_layouts)
            attributes["result_layouts"] = mlir.layouts_attr(out_layouts)
        op = hlo.CustomCallOp.build_generic(results=result_types, operands=list(operands),
                                            attributes=attributes)
        if isinstance(config, dict):
            op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get(config)
        return op

    return lowering_op


def ffi_lowering(call_target_name: str, *,
                 operand_layouts: Sequence[FfiLayoutOptions] | None = None,
                 result_layouts: Sequence[FfiLayoutOptions] | None = None,
                 backend_config: Mapping[str, Any] | str | None = None,
                 skip_ffi_layout_processing: bool = False,
                 **lowering_args: Any) -> Callable[..., list]:
    """A lowering rule ``(ctx, *operands, **attributes) -> results`` calling the target (see
    ``build_ffi_lowering_function``), for ``mlir.register_lowering``."""
    build = build_ffi_lowering_function(
        call_target_name, operand_layouts=operand_layouts, result_layouts=result_layouts,
        backend_config=backend_config, skip_ffi_layout_processing=skip_ffi_layout_processing,
        **lowering_args)

    def rule(ctx: mlir.LoweringRuleContext, *operands: ir.Value, **params: Any) -> list:
        return list(build(ctx, *operands, **params).results)

    return rule


# --------------------------------------------------------------------------------------------
# ffi_call
# --------------------------------------------------------------------------------------------

class _HashableArray:
    """A NumPy array attribute, hashed and compared by value (primitive parameters are
    hashable; the array becomes a dense attribute in the module)."""

    def __init__(self, value: np.ndarray):
        self.value = np.array(value, copy=True)
        self.value.flags.writeable = False

    def __hash__(self) -> int:
        return hash((self.value.shape, self.value.dtype, self.value.tobytes()))

    def __eq__(self, other) -> bool:
        return (isinstance(other, _HashableArray) and self.value.dtype == other.value.dtype
                and np.array_equal(self.value, other.value))

    def __repr__(self) -> str:
        return repr(self.value)


class _FrozenDict(tuple):
    """A dict attribute as a hashable tuple of items."""


def _hashable_attributes(kwargs: dict[str, Any]) -> tuple:
    out = []
    for k, v in sorted(kwargs.items()):
        if isinstance(v, np.ndarray):
            v = _HashableArray(v)
        elif isinstance(v, dict):
            v = _FrozenDict(sorted(v.items()))
        else:
            try:
                hash(v)
            except TypeError as e:
                raise TypeError(f"Non-hashable keyword argument to ffi_call {k}: {v}") from e
        out.append((k, v))
    return tuple(out)


def _plain_attributes(attributes: tuple) -> dict[str, Any]:
    plain = {}
    for k, v in attributes:
        if isinstance(v, _HashableArray):
            v = v.value
        elif isinstance(v, _FrozenDict):
            v = dict(v)
        plain[k] = v
    return plain


def _result_avals(results: Sequence[Any]) -> tuple[ShapedArray, ...]:
    avals = []
    for i, r in enumerate(results):
        if not hasattr(r, "shape") or not hasattr(r, "dtype"):
            raise ValueError("All elements of result_shape_dtypes must have 'shape' and 'dtype' "
                             f"attributes. Got {r} at position {i}.")
        dtype = np.dtype(r.dtype) if not isinstance(r.dtype, type) else np.dtype(r.dtype)
        avals.append(ShapedArray(tuple(r.shape), dtype))
    return tuple(avals)


def _layouts_major_to_minor(avals, layouts, what: str, layout_what: str) -> tuple:
    """User layouts are major-to-minor (as ``Layout``); stored minor-to-major."""
    if layouts is None:
        return tuple(_default_layout(a) for a in avals)
    if len(layouts) != len(avals):
        raise ValueError(f"The number of {what} ({len(avals)}) must equal the number of "
                         f"{layout_what} ({len(layouts)}).")
    return tuple(_layout_for_lowering(a, lay if lay is None or hasattr(lay, "major_to_minor")
                                      else tuple(lay)[::-1]) for a, lay in zip(avals, layouts))


def ffi_call(target_name: str, result_shape_dtypes: Any, *, has_side_effect: bool = False,
             vmap_method: str | None = None,
             input_layouts: Sequence[FfiLayoutOptions] | None = None,
             output_layouts: FfiLayoutOptions | Sequence[FfiLayoutOptions] | None = None,
             input_output_aliases: dict[int, int] | None = None,
             custom_call_api_version: int = 4,
             legacy_backend_config: str | None = None) -> Callable[..., Any]:
    """A function calling the FFI target ``target_name`` on its positional array arguments,
    its keyword arguments passed as the handler's attributes; it returns arrays shaped as
    ``result_shape_dtypes`` (one object with ``shape``/``dtype``, or a sequence of them)."""
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {list(_VMAP_METHODS)}, "
                         f"but got: {vmap_method}")
    multiple_results = isinstance(result_shape_dtypes, Sequence)
    results = result_shape_dtypes if multiple_results else [result_shape_dtypes]
    result_avals = _result_avals(results)
    out_layouts = output_layouts if multiple_results else (
        None if output_layouts is None else (output_layouts,))
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise ValueError("The use of the legacy_backend_config parameter requires "
                         f"custom_call_api_version < 4; got {custom_call_api_version}.")

    def wrapped(*args: Any, **kwargs: Any):
        in_avals = [core.get_aval(x) for x in args]
        static_in = _layouts_major_to_minor(in_avals, input_layouts, "input arguments",
                                            "input layouts")
        static_out = _layouts_major_to_minor(result_avals, out_layouts, "outputs",
                                             "output layouts")
        aliases = []
        for i, o in sorted((input_output_aliases or {}).items()):
            i, o = int(i), int(o)
            if i >= len(args):
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' with "
                                 f"input index {i} outside the range [0, {len(args)}).")
            if o >= len(result_avals):
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' with "
                                 f"output index {o} outside the range [0, "
                                 f"{len(result_avals)}).")
            a, b = in_avals[i], result_avals[o]
            if a.shape != b.shape or a.dtype != b.dtype:
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' "
                                 f"referring to an input with abstract value {a} and an "
                                 f"output with a different abstract value {b}.")
            if static_in[i] != static_out[o]:
                raise ValueError(f"input_output_aliases contains the mapping '{i}:{o}' "
                                 f"referring to an input with layout {static_in[i]} and an "
                                 f"output with a different layout {static_out[o]}.")
            aliases.append((i, o))
        outs = ffi_call_p.bind(
            *args, result_avals=result_avals, vmap_method=vmap_method,
            target_name=target_name, has_side_effect=has_side_effect,
            input_layouts=static_in, output_layouts=static_out,
            input_output_aliases=tuple(aliases),
            custom_call_api_version=custom_call_api_version,
            legacy_backend_config=legacy_backend_config,
            attributes=_hashable_attributes(kwargs))
        if not multiple_results:
            return outs[0]
        return tuple(outs) if isinstance(result_shape_dtypes, tuple) else list(outs)

    return wrapped


def _ffi_call_abstract_eval(*avals, result_avals, **_):
    return list(result_avals)


def _ffi_call_not_differentiable(*args, target_name, **_):
    raise ValueError(f"The FFI call to `{target_name}` cannot be differentiated. You can use "
                     "`jax.custom_jvp` or `jax.custom_jvp` to add support.")


def _ffi_call_lowering(ctx: mlir.LoweringRuleContext, *operands, target_name, has_side_effect,
                       input_layouts, output_layouts, input_output_aliases,
                       custom_call_api_version, legacy_backend_config, attributes, **_):
    rule = ffi_lowering(target_name, has_side_effect=has_side_effect,
                        operand_layouts=input_layouts, result_layouts=output_layouts,
                        operand_output_aliases=dict(input_output_aliases),
                        api_version=custom_call_api_version,
                        backend_config=legacy_backend_config)
    return rule(ctx, *operands, **_plain_attributes(attributes))


def _batched_layouts(layouts: tuple) -> tuple:
    # a new leading (major) axis: minor-to-major gains the last position
    return tuple(tuple(n + 1 for n in lay) + (0,) for lay in layouts)


def _ffi_call_batch(axis_data, args, dims, *, vmap_method, result_avals, **params):
    def bind_vectorized(args, batched, avals):
        # the batch axis is each batched operand's and every result's new major axis
        layouts = dict(
            params, output_layouts=_batched_layouts(params["output_layouts"]),
            input_layouts=tuple(_batched_layouts((lay,))[0] if b else lay
                                for lay, b in zip(params["input_layouts"], batched)))
        return ffi_call_p.bind(*args, vmap_method=vmap_method, result_avals=avals, **layouts)

    def bind_one(args):
        return ffi_call_p.bind(*args, vmap_method=vmap_method, result_avals=result_avals,
                               **params)

    return batch_by_vmap_method("ffi_call", args, dims, result_avals, vmap_method,
                                bind_vectorized, bind_one)


def _ffi_call_dce(used_outputs: Sequence[bool], eqn: core.JaxprEqn):
    # DCE asks this rule about every ffi_call (the primitive is declared effectful): a call
    # with side effects runs even when its results are unused, a pure one is dropped then
    if eqn.params["has_side_effect"] or any(used_outputs):
        return [True] * len(eqn.invars), eqn
    return [False] * len(eqn.invars), None


ffi_call_p = core.Primitive("ffi_call")
ffi_call_p.multiple_results = True
ffi_call_p.def_impl(lambda *args, **params: dispatch.apply_primitive(ffi_call_p, *args,
                                                                     **params))
ffi_call_p.def_abstract_eval(_ffi_call_abstract_eval)
ad.defjvp_rule(ffi_call_p, lambda primals, tangents, **params:
               _ffi_call_not_differentiable(**params))
ad.deftranspose(ffi_call_p, lambda cts, *args, **params:
                _ffi_call_not_differentiable(**params))
batching.defrule(ffi_call_p, _ffi_call_batch)
mlir.register_lowering(ffi_call_p, _ffi_call_lowering)
# As JAX: a foreign call's results are replicated over the mesh of its (Explicit) operands;
# the call sees whole arrays, whatever their layout.
shr.defsharding(ffi_call_p, lambda *avals, result_avals, **_: [
    (None,) * len(r.shape) if type(r) is ShapedArray else None for r in result_avals])
pe.defeffectful(ffi_call_p)
pe.dce_rules[ffi_call_p] = _ffi_call_dce
