"""IR types, constants and attributes for lowering (the lower half of ``mlir``, which
re-exports every public name here): the dtype and abstract-value type tables, constants through
their per-type handlers, attribute builders, the IR value tree helpers JAX's rules use, module
serialization, and custom-call layouts. Only this module, ``mlir`` and ``runtime`` import
jaxlib."""
from __future__ import annotations

import importlib
import io
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any, NamedTuple, Protocol

import ml_dtypes
import numpy as np
from jaxlib import _hlo, _jax
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir.dialects import chlo, sdy
from jaxlib.mlir.dialects import stablehlo as hlo

from jaxkit import core, dtypes, effects

# jaxlib's extension is the only way to register the upstream dialects (func, arith, ...) that
# StableHLO modules use; the public stablehlo/chlo modules register only themselves.
_registry = ir.DialectRegistry()
_jax_mlir_ext.register_dialects(_registry)
upstream_dialects = _registry  # the name jax.extend.lowering gives it
_context: ir.Context | None = None

# The jaxlib modules that ``jax.extend`` re-exports unchanged (MLIR bindings and dialects, the
# portable-artifact functions, IFRT programs and proxy, the XLA client's sharding protos, the
# registry of HLO module passes).
# jaxkit.extend reaches them here because only this module and the runtime may import jaxlib.
REEXPORTED_JAXLIB_MODULES = frozenset({
    "jaxlib.mlir.ir", "jaxlib.mlir.passmanager", "jaxlib._jax.mlir",
    "jaxlib._jax.ifrt_programs", "jaxlib._ifrt_proxy", "jaxlib.xla_client", "jaxlib._xla",
    *(f"jaxlib.mlir.dialects.{d}" for d in (
        "arith", "builtin", "chlo", "func", "math", "memref", "mpmd", "scf", "sdy",
        "sparse_tensor", "stablehlo", "vector")),
})


def jaxlib_module(name: str) -> ModuleType:
    """The jaxlib module ``name``, one of ``REEXPORTED_JAXLIB_MODULES`` (imported on first
    use, so that ``import jaxkit`` does not load dialects nobody asked for)."""
    if name not in REEXPORTED_JAXLIB_MODULES:
        raise ValueError(f"{name!r} is not a jaxlib module jaxkit re-exports; choose one of "
                         f"{sorted(REEXPORTED_JAXLIB_MODULES)}")
    return importlib.import_module(name)


def make_ir_context() -> ir.Context:
    """One MLIR context for the process (creating one costs milliseconds)."""
    global _context
    if _context is None:
        ctx = ir.Context()
        ctx.append_dialect_registry(_registry)
        ctx.load_all_available_dialects()
        hlo.register_dialect(ctx)
        chlo.register_dialect(ctx)
        sdy.register_dialect(ctx)  # Shardy: the sharding annotations XLA partitions by
        _context = ctx
    return _context


Value = ir.Value


class EffectTypeSet:
    """A set of effect types (JAX's ``effects.EffectTypeSet``): an effect belongs to it when
    it is an instance of one of them."""

    def __init__(self):
        self._types: set[type] = set()

    def add_type(self, effect_type: type) -> None:
        self._types.add(effect_type)

    def contains(self, effect: Any) -> bool:
        return any(isinstance(effect, t) for t in self._types)

    def filter_in(self, effects: Iterable) -> list:
        return [e for e in effects if self.contains(e)]

    def filter_not_in(self, effects: Iterable) -> list:
        return [e for e in effects if not self.contains(e)]


# The effect types a lowering may meet (a library adds its own, as with JAX). jaxkit's
# jaxprs carry no effect objects (callbacks are ordered by ``has_side_effect``), so its
# lowering never has an effect to refuse; the set answers as JAX's does.
lowerable_effects = EffectTypeSet()
# jaxkit's own effects lower through its tokens and ref handling; a library's effect type
# lowers once the library adds it here (as in JAX).
lowerable_effects.add_type(effects.RefEffect)
lowerable_effects.add_type(effects.InternalMutableArrayEffect)

# The kinds of host transfer channel (XLA's ChannelHandle types), as JAX names them.
DEVICE_TO_DEVICE_TYPE = 1
SEND_TO_HOST_TYPE = 2
RECV_FROM_HOST_TYPE = 3


def _float8_types() -> dict:
    table = {}
    for name, ir_name in [("float8_e4m3fn", "Float8E4M3FNType"), ("float8_e5m2", "Float8E5M2Type"),
                          ("float8_e4m3fnuz", "Float8E4M3FNUZType"),
                          ("float8_e5m2fnuz", "Float8E5M2FNUZType"),
                          ("float8_e4m3b11fnuz", "Float8E4M3B11FNUZType"),
                          ("float8_e3m4", "Float8E3M4Type"), ("float8_e4m3", "Float8E4M3Type"),
                          ("float8_e8m0fnu", "Float8E8M0FNUType")]:
        if hasattr(ml_dtypes, name) and hasattr(ir, ir_name):
            table[np.dtype(getattr(ml_dtypes, name))] = getattr(ir, ir_name).get
    return table


def _element_type_table() -> dict[np.dtype, Callable[[], ir.Type]]:
    table = {
        np.dtype(np.bool_): lambda: ir.IntegerType.get_signless(1),
        np.dtype(np.float16): ir.F16Type.get,
        np.dtype(ml_dtypes.bfloat16): ir.BF16Type.get,
        np.dtype(np.float32): ir.F32Type.get,
        np.dtype(np.float64): ir.F64Type.get,
        np.dtype(np.complex64): lambda: ir.ComplexType.get(ir.F32Type.get()),
        np.dtype(np.complex128): lambda: ir.ComplexType.get(ir.F64Type.get()),
        np.dtype(dtypes.float0): lambda: ir.IntegerType.get_signless(1),
    }
    for bits in (8, 16, 32, 64):
        table[np.dtype(f"int{bits}")] = partial(ir.IntegerType.get_signless, bits)
        table[np.dtype(f"uint{bits}")] = partial(ir.IntegerType.get_unsigned, bits)
    for name, bits in (("int4", 4), ("uint4", 4)):
        if hasattr(ml_dtypes, name):
            get = ir.IntegerType.get_signless if name == "int4" else ir.IntegerType.get_unsigned
            table[np.dtype(getattr(ml_dtypes, name))] = partial(get, bits)
    table.update(_float8_types())
    return table


_element_types = _element_type_table()


def dtype_to_ir_type(dtype) -> ir.Type:
    try:
        return _element_types[np.dtype(dtype)]()
    except KeyError:
        raise TypeError(f"dtype {np.dtype(dtype)} has no StableHLO element type") from None


def _array_ir_type(aval: core.ShapedArray) -> ir.Type:
    aval = core.physical_aval(aval)  # a key<fry>[n] value is a u32[n,2] tensor
    return ir.RankedTensorType.get(list(aval.shape), dtype_to_ir_type(aval.dtype))


# Abstract value type -> ``handler(aval)`` giving its IR type (a tuple of types for a value
# lowered to several): the table ``aval_to_ir_type`` consults, by the aval's class and then
# its bases, so that a library's own abstract value lowers once registered here.
ir_type_handlers: dict[type, Callable[[Any], Any]] = {
    core.ShapedArray: _array_ir_type,
    core.AbstractToken: lambda _: hlo.TokenType.get(),
}


def _aval_ir_types(aval) -> Any:
    for t in type(aval).__mro__:
        handler = ir_type_handlers.get(t)
        if handler is not None:
            return handler(aval)
    raise TypeError(f"No ir_type_handler for aval type: {type(aval)}")


def aval_to_ir_type(*ctx_and_aval) -> ir.Type:
    """The one IR type of ``aval`` (``ir_type_handlers``); called ``(aval)`` or, as in JAX
    0.10.2, ``(ctx, aval)`` (the module context is not needed)."""
    out = _aval_ir_types(ctx_and_aval[-1])
    if isinstance(out, ir.Type):
        return out
    raise TypeError(f"Expected a single IR type, got {out}")


def aval_to_ir_types(*ctx_and_aval) -> tuple[ir.Type, ...]:
    """The IR types of ``aval``, as a tuple; called ``(ctx, aval)`` as in JAX 0.10.2 (the
    module context is not needed) or ``(aval)``."""
    out = _aval_ir_types(ctx_and_aval[-1])
    return (out,) if isinstance(out, ir.Type) else tuple(out)


# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------


class ConstantHandler(Protocol):
    """``handler(val, aval)`` gives the IR value(s) of the constant ``val`` (``aval``, its
    abstract value when known, or None)."""

    def __call__(self, val: Any, aval: Any) -> Any: ...


# Python type -> its ``ConstantHandler``: the table ``ir_constant`` consults, by the value's
# class and then its bases; NumPy values and Python scalars have handlers from the start.
_constant_handlers: dict[type, ConstantHandler] = {}


def register_constant_handler(type_: type, handler_fun: ConstantHandler) -> None:
    """Lower constants of ``type_`` (and its subclasses) with ``handler_fun(val, aval)``."""
    _constant_handlers[type_] = handler_fun


def _handled_constant(value: Any, aval: Any, const_lowering: dict | None) -> Any:
    if const_lowering is not None and np.shape(value):
        known = const_lowering.get((id(value), aval))
        if known is not None:
            return known
    for t in type(value).__mro__:
        handler = _constant_handlers.get(t)
        if handler is not None:
            return handler(value, aval)
    if hasattr(value, "__jax_array__"):
        return _handled_constant(value.__jax_array__(), aval, const_lowering)
    return _numpy_constant(value, None if aval is None else aval.dtype)


def ir_constant(value: Any, dtype=None, *, const_lowering: dict | None = None,
                aval: Any = None) -> ir.Value:
    """A ``stablehlo.constant`` holding ``value`` (a NumPy value or Python scalar, or a value
    of a type given a handler by ``register_constant_handler``); ``dtype`` or ``aval`` say
    the type where the value alone does not."""
    if dtype is not None:
        return _numpy_constant(value, dtype)
    out = _handled_constant(value, aval, const_lowering)
    if isinstance(out, (tuple, list)):
        raise ValueError(f"Expected a constant to produce a single ir.Value, got {out}")
    return out


def ir_constants(value: Any, *, const_lowering: dict | None = None,
                 aval: Any = None) -> tuple[ir.Value, ...]:
    """``ir_constant`` for a value lowered to any number of IR values: a tuple of them."""
    out = _handled_constant(value, aval, const_lowering)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _numpy_constant(value: Any, dtype=None) -> ir.Value:
    x = np.asarray(value, dtype=dtype)
    if x.dtype == dtypes.float0:
        x = np.zeros(x.shape, np.bool_)
    elem = dtype_to_ir_type(x.dtype)
    tensor_type = ir.RankedTensorType.get(list(x.shape), elem)
    if x.size and np.all(x == x.flat[0]) and not np.issubdtype(x.dtype, np.complexfloating):
        attr = ir.DenseElementsAttr.get_splat(tensor_type, _scalar_attr(x.flat[0], elem))
    elif x.dtype == np.bool_:
        # One byte per element: MLIR reads a one-byte buffer as a splat, so bit-packing made
        # a non-uniform bool array of up to 8 elements all True (or all False).
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(x), type=elem, shape=list(x.shape))
    elif x.dtype in _view_as_uint:
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(x).view(_view_as_uint[x.dtype]),
                                        type=elem, shape=list(x.shape))
    else:
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(x), type=elem, shape=list(x.shape))
    return hlo.ConstantOp(attr).result


_view_as_uint = {np.dtype(ml_dtypes.bfloat16): np.uint16}
_view_as_uint.update({dt: np.uint8 for dt in _float8_types()})


def _scalar_attr(v, elem: ir.Type) -> ir.Attribute:
    if isinstance(elem, ir.IntegerType):
        width = elem.width
        iv = int(v)
        if width == 1:
            return ir.IntegerAttr.get(elem, 1 if iv else 0)
        if elem.is_unsigned and iv >= 2 ** (width - 1):
            iv -= 2 ** width  # MLIR stores the bit pattern as a signed 64-bit value
        return ir.IntegerAttr.get(elem, iv)
    return ir.FloatAttr.get(elem, float(v))


def full_like_aval(value, aval: core.ShapedArray) -> ir.Value:
    """A constant of ``aval``'s shape and dtype filled with ``value``."""
    return ir_constant(np.full(aval.shape, value, dtype=aval.dtype))


def module_to_string(module: ir.Module, enable_debug_info: bool = False) -> str:
    return module.operation.get_asm(enable_debug_info=enable_debug_info)


def module_to_xla_computation(module: ir.Module) -> Any:
    """The module as XLA's ``XlaComputation`` (HLO): what ``Lowered.compiler_ir("hlo")``
    returns, with ``as_hlo_text()``, ``as_hlo_module()`` and the serialized proto."""
    buf = io.BytesIO()
    module.operation.write_bytecode(file=buf)
    return _jax.mlir.mlir_module_to_xla_computation(buf.getvalue(), use_tuple_args=False)


def module_to_hlo_text(module: ir.Module, debug_info: bool = False) -> str:
    """The module as HLO text, printed with XLA's short parsable options as JAX prints it."""
    options = _hlo.HloPrintOptions.short_parsable()
    options.print_metadata = debug_info
    return module_to_xla_computation(module).as_hlo_module().to_string(options)


# --------------------------------------------------------------------------------------------
# Custom-call layouts
# --------------------------------------------------------------------------------------------


def row_major(ndim: int) -> tuple[int, ...]:
    """Minor-to-major layout of a C-order array of rank ``ndim``."""
    return tuple(range(ndim - 1, -1, -1))


def layouts_attr(layouts: Sequence[Sequence[int]]) -> ir.ArrayAttr:
    """A custom call's ``operand_layouts``/``result_layouts`` attribute (minor-to-major)."""
    return ir.ArrayAttr.get([ir.DenseIntElementsAttr.get(np.asarray(layout, np.int64),
                                                         type=ir.IndexType.get())
                             for layout in layouts])


# Numpy values and Python scalars: the handlers ``ir_constant`` starts with.
for _t in (np.ndarray, np.generic, bool, int, float, complex):
    register_constant_handler(_t, lambda val, aval: _numpy_constant(
        val, None if aval is None else aval.dtype))


def _masked_array_constant(val: Any, aval: Any) -> ir.Value:
    raise ValueError("numpy masked arrays are not supported as direct inputs to JAX functions. "
                     "Use arr.filled() to convert the value to a standard numpy array.")


register_constant_handler(np.ma.MaskedArray, _masked_array_constant)


# --------------------------------------------------------------------------------------------
# Attributes and small builders
# --------------------------------------------------------------------------------------------


def dense_int_elements(xs) -> ir.DenseElementsAttr:
    return ir.DenseIntElementsAttr.get(np.asarray(xs, np.int64))


def dense_int_array(xs: Sequence[int]) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(x) for x in xs])


def i32_attr(i: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), i)


def token_type() -> ir.Type:
    return hlo.TokenType.get()


_attribute_handlers: dict[type, Callable[[Any], ir.Attribute]] = {
    bool: ir.BoolAttr.get,
    int: lambda v: ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v),
    float: lambda v: ir.FloatAttr.get(ir.F64Type.get(), v),
    str: ir.StringAttr.get,
    bytes: ir.StringAttr.get,
    np.ndarray: lambda v: ir.DenseElementsAttr.get(np.ascontiguousarray(v)),
    np.integer: lambda v: ir.IntegerAttr.get(dtype_to_ir_type(np.asarray(v).dtype), int(v)),
    np.floating: lambda v: ir.FloatAttr.get(dtype_to_ir_type(np.asarray(v).dtype), float(v)),
    dict: lambda v: ir.DictAttr.get({k: ir_attribute(x) for k, x in v.items()}),
    list: lambda v: ir.ArrayAttr.get([ir_attribute(x) for x in v]),
    tuple: lambda v: ir.ArrayAttr.get([ir_attribute(x) for x in v]),
    ir.Attribute: lambda v: v,
    ir.Type: ir.TypeAttr.get,
}


def ir_attribute(val: Any) -> ir.Attribute:
    """A Python value (bool, int, float, str, NumPy value, dict, list, tuple) as an MLIR
    attribute."""
    for t in type(val).__mro__:
        handler = _attribute_handlers.get(t)
        if handler is not None:
            return handler(val)
    if hasattr(val, "__jax_array__"):
        return ir_attribute(val.__jax_array__())
    raise TypeError(f"No attribute handler defined for type: {type(val)}")


# --------------------------------------------------------------------------------------------
# IR value trees: a rule's results are values, or tuples/lists of them
# --------------------------------------------------------------------------------------------

ir_tree_registry = _jax.pytree.PyTreeRegistry(enable_none=False, enable_tuple=True,
                                              enable_namedtuple=False, enable_list=True,
                                              enable_dict=False)
ir_tree_registry.register_node(ir.OpResultList, lambda r: (r, None), lambda _, r: list(r))


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(f"jax.interpreters.mlir.{name} is deprecated. Use {instead} instead.",
                  DeprecationWarning, stacklevel=3)


def flatten_ir_values(xs: Iterable) -> list[ir.Value]:
    _deprecated("flatten_ir_values", "mlir.ir_tree_registry.flatten")
    return ir_tree_registry.flatten(xs)[0]


def flatten_ir_types(xs: Iterable) -> list[ir.Type]:
    _deprecated("flatten_ir_types", "mlir.ir_tree_registry.flatten")
    return ir_tree_registry.flatten(xs)[0]


def unflatten_ir_values_like_types(xs: Iterable[ir.Value], ys: Sequence) -> list:
    _deprecated("unflatten_ir_values_like_types", "treedef.unflatten")
    return ir_tree_registry.flatten(ys)[1].unflatten(xs)


def module_to_bytecode(module: ir.Module) -> bytes:
    buf = io.BytesIO()
    module.operation.write_bytecode(file=buf)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# JAX's lowering API: its data types, and helpers that need no lowering context
# --------------------------------------------------------------------------------------------


Token = ir.Value  # a token is an IR value of ``token_type()``


class TokenSet:
    """The tokens threaded through a lowering, one per ordered effect (an immutable map).
    jaxkit orders effectful host calls by ``has_side_effect`` instead, so its own lowerings
    thread an empty set; rules that receive one pass it on."""

    def __init__(self, *args, **kwargs):
        self._tokens = dict(*args, **kwargs)

    def __len__(self) -> int:
        return len(self._tokens)

    def get(self, effect) -> Token:
        return self._tokens[effect]

    def effects(self) -> set:
        return set(self._tokens)

    def items(self):
        return tuple(self._tokens.items())

    def subset(self, effects) -> TokenSet:
        return TokenSet((e, self._tokens[e]) for e in effects)

    def update_tokens(self, tokens: TokenSet) -> TokenSet:
        return TokenSet({**self._tokens, **dict(tokens.items())})


@dataclass(frozen=True)
class LoweringParameters:
    """Options of a lowering, as JAX's; jaxkit lowers its own rules only, so
    ``override_lowering_rules`` must be None."""

    override_lowering_rules: tuple | None = None
    global_constant_computation: bool = False
    for_export: bool = False
    export_ignore_forward_compatibility: bool = False
    hoist_constants_as_args: bool = False


class ShapePolyLoweringState:
    """The dimension variables of a shape-polymorphic lowering: jaxkit lowers static shapes,
    so it has none."""

    def __init__(self, dim_vars: Sequence[str] = (), lowering_platforms=None):
        if dim_vars:
            raise NotImplementedError("shape-polymorphic lowering (dimension variables "
                                      f"{tuple(dim_vars)}) is not supported by jaxkit")
        self.dim_vars: tuple = ()
        self.uses_dim_vars = False
        self.lowering_platforms = lowering_platforms
        self.has_platform_index_argument = False


class LoweringResult(NamedTuple):
    module: ir.Module
    keepalive: Any
    host_callbacks: list
    shape_poly_state: ShapePolyLoweringState


@dataclass(frozen=True)
class ShardingContext:
    """Lowering for ``num_devices`` devices whose partitioning XLA propagates."""

    num_devices: int
    device_assignment: Any = None
    abstract_mesh: Any = None


@dataclass(frozen=True)
class SPMDAxisContext:
    """Lowering over ``mesh`` (its ``manual_axes`` inside a ``shard_map``)."""

    mesh: Any
    manual_axes: frozenset = frozenset()

    @property
    def axis_env(self) -> tuple:
        return tuple((n, self.mesh.shape[n]) for n in self.mesh.axis_names
                     if n in self.manual_axes)


# JAX's type aliases, for annotations in user rules.
AxisContext = ShardingContext | SPMDAxisContext
LoweringRule = Callable[..., Any]
MeshAxisName = Any


def shape_tensor(ctx: Any, sizes: Sequence[int | ir.Value]) -> ir.Value:
    """The 1-D int32 tensor of ``sizes`` (ints, or scalar IR values)."""
    i32 = aval_to_ir_type(core.ShapedArray((), np.dtype(np.int32)))
    i32_1 = aval_to_ir_type(core.ShapedArray((1,), np.dtype(np.int32)))
    parts = [ir_constant(np.array([d], np.int32)) if isinstance(d, (int, np.integer)) else
             hlo.reshape(i32_1, d if d.type == i32 else hlo.convert(i32, d)) for d in sizes]
    if not parts:
        return ir_constant(np.array([], np.int32))
    return parts[0] if len(parts) == 1 else hlo.concatenate(parts, dimension=0)


def merge_mlir_modules(dst_module: ir.Module, sym_name: str, src_module: ir.Module,
                       dst_symtab: ir.SymbolTable | None = None) -> str:
    """Move every function of ``src_module`` into ``dst_module``, its ``main`` renamed
    ``sym_name`` and made private, the others renamed where their names are taken; returns
    the name ``main`` got."""
    if dst_module.context != src_module.context:
        raise AssertionError("merge_mlir_modules: the modules belong to different MLIR "
                             "contexts; lower both in one (mlir.make_ir_context())")
    dst_symtab = dst_symtab or ir.SymbolTable(dst_module.operation)
    renamed = sym_name
    for op in list(src_module.body.operations):
        old = ir.StringAttr(op.attributes["sym_name"]).value
        new = sym_name if old == "main" else old
        base, i = new, 0
        while new in dst_symtab:
            new, i = f"{base}_{i}", i + 1
        if new != old:
            ir.SymbolTable.replace_all_symbol_uses(old, new, src_module.operation)
            ir.SymbolTable.set_symbol_name(op, new)
        if old == "main":
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            renamed = new
        op.operation.detach_from_parent()  # moved, not copied, into ``dst_module``
        dst_module.body.append(op)
        dst_symtab.insert(op)
    return renamed
