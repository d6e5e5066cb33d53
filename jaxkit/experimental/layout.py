"""``jax.experimental.layout``: how an array's elements lie in device memory.

``Layout(major_to_minor)`` names the dimensions from the slowest-varying to the fastest
(``(0, 1)`` is C order for a matrix, ``(1, 0)`` Fortran order); ``Format(layout, sharding)``
pairs one with a sharding. ``x.format`` reports a device array's, ``Compiled.input_formats``
and ``output_formats`` those XLA chose for an executable, and ``with_layout_constraint``
pins the layout of an intermediate value: it lowers to XLA's ``LayoutConstraint`` custom call.
Eagerly it copies the array into that layout (``layout_arrays``; over several devices
shard by shard, ``layout_sharded``), as does ``device_put(x, Format(layout, sharding))``;
``lax.with_sharding_constraint(x, Format(...))`` applies the sharding, then
``with_layout_constraint``. ``jit`` with Formats in its in/out
shardings lays its parameters and results out so (``layout_jit``).

The ``format`` property of arrays and the ``input_formats``/``output_formats`` properties of
``Compiled`` are installed on those classes here (as ``jaxkit.numpy`` installs the array
methods), since ``Format`` lives above the runtime; ``import jaxkit`` imports this module.
So is the check of a compiled program's argument layouts around ``Compiled.__call__``.
"""
from __future__ import annotations

from typing import Any, Union

from jaxkit import api_devices, core, shape_dtype_struct, tree_util
from jaxkit import sharding as jsharding
from jaxkit.experimental import layout_arrays, layout_jit, layout_sharded
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import hlo, ir
from jaxkit.lax import sharding as lax_sharding
from jaxkit.runtime import layouts, pjrt
from jaxkit.runtime.array import Array
from jaxkit.runtime.sharded_array import ShardedArray
from jaxkit.transforms import jit as jit_module
from jaxkit.transforms import stages
from jaxkit.transforms.stages import Compiled

__all__ = ["Format", "Layout", "with_layout_constraint"]

Shape = tuple[int, ...]


class AutoLayoutSingleton:
    """``Layout.AUTO``: let the compiler choose the layout."""

    def __repr__(self) -> str:
        return "AUTO"


AutoLayout = AutoLayoutSingleton()


class Layout:
    """A memory layout: ``major_to_minor`` dimension order, optional ``tiling`` (tile shapes,
    outermost first) and the bit width of sub-byte elements (0: the dtype's own)."""

    AUTO = AutoLayout

    def __init__(self, major_to_minor: tuple[int, ...],
                 tiling: tuple[tuple[int, ...], ...] | None = None,
                 sub_byte_element_size_in_bits: int = 0):
        self.major_to_minor = tuple(major_to_minor)
        self.tiling = None if tiling is None else tuple(map(tuple, tiling))
        self.sub_byte_element_size_in_bits = sub_byte_element_size_in_bits

    @staticmethod
    def _from_tuple(layout: layouts.LayoutTuple) -> Layout:
        return Layout(*layout)

    def __repr__(self) -> str:
        return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling}, "
                f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")

    def __hash__(self) -> int:
        return hash((self.major_to_minor, self.tiling, self.sub_byte_element_size_in_bits))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and (
            (self.major_to_minor, self.tiling, self.sub_byte_element_size_in_bits)
            == (other.major_to_minor, other.tiling, other.sub_byte_element_size_in_bits))

    def update(self, **kwargs) -> Layout:
        """A copy with the given fields replaced."""
        fields = {"major_to_minor": self.major_to_minor, "tiling": self.tiling,
                  "sub_byte_element_size_in_bits": self.sub_byte_element_size_in_bits}
        fields.update(kwargs)
        return Layout(**fields)

    def check_compatible_aval(self, aval_shape: Shape) -> None:
        """Raise ``ValueError`` unless the layout names as many dimensions as the shape has."""
        if len(self.major_to_minor) != len(aval_shape):
            raise ValueError(
                f"Length of major_to_minor and the rank of the value should match. Got "
                f"major_to_minor={self.major_to_minor} and shape={aval_shape}")


LayoutOptions = Union[Layout, None, AutoLayoutSingleton]


class Format:
    """A ``Layout`` (or ``Layout.AUTO``/None) together with a sharding."""

    __slots__ = ["layout", "sharding"]

    def __init__(self, layout: LayoutOptions = None, sharding: Any = None):
        if isinstance(layout, Layout) and sharding is None:
            raise ValueError(
                f"Sharding has to be concrete when layout is of type {type(layout)}. Please "
                f"pass a `jax.sharding.NamedSharding` or `jax.sharding.SingleDeviceSharding` "
                f"to the sharding argument. Got sharding {sharding}")
        if not isinstance(layout, (Layout, type(None), AutoLayoutSingleton)):
            raise TypeError(
                f"Invalid value received for the layout argument. Expected values are `None`, "
                f"`Layout.AUTO` or an instance of `Layout`. Got {layout} of type "
                f"{type(layout)}")
        if not (sharding is None or isinstance(sharding, jsharding.Sharding)):
            raise TypeError(
                f"Invalid value received for the sharding argument. Expected values are "
                f"`None` or an instance of `jax.Sharding`. Got {sharding} of type "
                f"{type(sharding)}")
        self.layout = layout
        self.sharding = sharding

    def __repr__(self) -> str:
        return f"Format(layout={self.layout}, sharding={self.sharding})"

    def __hash__(self) -> int:
        return hash((self.layout, self.sharding))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Format) and (self.layout, self.sharding) == (
            other.layout, other.sharding)


# ---- .format of arrays and of compiled executables --------------------------------------------
def _array_format(self: Array) -> Format:
    """The array's layout in device memory and its sharding."""
    if self.is_deleted():
        return Format(None, self.sharding)
    found = (layout_sharded.buffer_layout(self) if isinstance(self, ShardedArray)
             else layout_arrays.buffer_layout(self))
    return Format(None if found is None else Layout._from_tuple(found), self.sharding)


def _compiled_formats(compiled: Compiled) -> tuple[list[Format], list[Format]]:
    exe = compiled.executable
    params, outs = layouts.executable_layouts(exe.xla_executable)
    if compiled.partitioned:
        in_shardings = list(compiled.program.in_shardings)
        out_shardings = list(compiled.program.out_shardings)
    else:
        single = pjrt.backend_of(exe.device).shardings[exe.device]  # the device's one instance
        in_shardings, out_shardings = [single] * len(params), [single] * len(outs)
    # Large closed-over constants are leading parameters of the executable: not arguments.
    params = params[len(params) - len(in_shardings):]
    return ([Format(Layout._from_tuple(p), s) for p, s in zip(params, in_shardings)],
            [Format(Layout._from_tuple(o), s) for o, s in zip(outs, out_shardings)])


def _input_formats(self: Compiled) -> Any:
    """The formats of the arguments, as ``(args, kwargs)``."""
    ins, _ = _compiled_formats(self)
    return tree_util.tree_unflatten(self.lowered.traced.in_tree, ins)


def _output_formats(self: Compiled) -> Any:
    """The formats of the results, in the results' tree structure."""
    _, outs = _compiled_formats(self)
    return tree_util.tree_unflatten(self.out_tree, outs)


def _compiled_out_info(self: Compiled) -> Any:
    """The results' shapes and dtypes with the shardings and layouts the executable gives
    them (a compiled program knows both)."""
    structs = tree_util.tree_leaves(self.lowered.out_info)
    _, outs = _compiled_formats(self)
    if len(outs) != len(structs):  # (results the executable makes apart: as lowered)
        return self.lowered.out_info
    return tree_util.tree_unflatten(self.out_tree, [
        s.update(sharding=f) for s, f in zip(structs, outs)])


# ---- Format in jit's in_shardings/out_shardings -----------------------------------------------
def _is_default_layout(layout: Layout) -> bool:
    """Row-major, untiled, with the dtype's own element size: how jaxkit lays out every array
    and every executable's parameters and results."""
    return (layout.major_to_minor == tuple(range(len(layout.major_to_minor)))
            and not layout.tiling and layout.sub_byte_element_size_in_bits == 0)


def _format_as_jit_sharding(fmt: Format) -> Any:
    """The sharding ``jit`` uses for ``Format(layout, sharding)`` in its in/out shardings
    (the layout itself is ``layout_jit``'s: see ``_layout_mode``).

    ``Layout.AUTO`` lets XLA choose; on CPU it chooses the default (row-major) layout, which is
    the one jaxkit compiles for unless told otherwise."""
    layout, sharding = fmt.layout, fmt.sharding
    if isinstance(layout, Layout) and (layout.tiling or layout.sub_byte_element_size_in_bits):
        raise NotImplementedError(
            f"jit with in_shardings/out_shardings {fmt}: jaxkit lays parameters and results "
            f"out by major_to_minor only; pass a Layout without tiling or element size.")
    if isinstance(sharding, pjrt.Sharding):
        if sharding.device_set != {pjrt.default_device()}:
            raise NotImplementedError(
                f"jit with in_shardings/out_shardings {fmt}: a single-device sharding on a "
                f"device other than the default one; use a NamedSharding over a mesh, or "
                f"jax.device_put the arguments onto that device.")
        return None  # a program on the default device: where jaxkit runs it unpartitioned
    if isinstance(layout, Layout) and _layout_mode(fmt) is not None:
        raise NotImplementedError(
            f"jit with in_shardings/out_shardings {fmt}: jaxkit lays out parameters and "
            f"results in another order than row-major in one-device programs only; use a "
            f"SingleDeviceSharding, or the row-major layout over several devices.")
    return sharding


def _layout_mode(fmt: Any) -> Any:
    """The major_to_minor order a Format lays a parameter or result out in, ``"auto"`` for
    the compiler's choice (``Layout.AUTO``); None for the default (row-major)."""
    if isinstance(fmt, Format) and isinstance(fmt.layout, AutoLayoutSingleton):
        return "auto"
    if isinstance(fmt, Format) and isinstance(fmt.layout, Layout) and \
            not _is_default_layout(fmt.layout):
        return fmt.layout.major_to_minor
    return None


def _has_layouts(shardings: Any) -> bool:
    leaves = tree_util.tree_leaves(shardings, is_leaf=lambda x: isinstance(x, Format))
    return any(_layout_mode(f) is not None for f in leaves)


jit_module.has_layouts = _has_layouts
jit_module.laid_out_jit = lambda plain, ins, outs: layout_jit.LaidOutJit(
    plain, ins, outs, lambda x: isinstance(x, Format), _layout_mode)
jit_module.sharding_forms[Format] = _format_as_jit_sharding
shape_dtype_struct.format_class = Format


def _struct_layouts_refused(flat) -> str | None:
    for x in flat:
        if isinstance(x, shape_dtype_struct.ShapeDtypeStruct) and \
                _layout_mode(x.format) is not None:
            return (f"lowering with {x}: jaxkit does not take argument layouts from a "
                    "ShapeDtypeStruct's Format; pass in_shardings=Format(layout, sharding) to "
                    "jit for that argument instead.")
    return None


jit_module.struct_layouts_refused = _struct_layouts_refused


def _format_as_constraint(fmt: Format) -> tuple:
    """``with_sharding_constraint(x, Format(layout, sharding))``: the sharding's constraint,
    then ``with_layout_constraint`` for a ``Layout`` (eagerly the value keeps row-major, see
    ``_layout_constraint_impl``; in a program XLA's LayoutConstraint lays it out)."""
    # A one-device sharding constrains nothing in a one-device program: only the layout.
    sharding = None if isinstance(fmt.sharding, pjrt.Sharding) else fmt.sharding
    if not isinstance(fmt.layout, Layout):  # AUTO or None: the compiler's choice
        return sharding, None
    return sharding, lambda x: with_layout_constraint(x, fmt.layout)


lax_sharding.constraint_forms[Format] = _format_as_constraint


def _device_put_format(x: Any, fmt: Format) -> Any:
    """``device_put(x, Format(layout, sharding))``: put on the sharding (the default device
    when None), then lay the value out as ``layout`` (a concrete one: ``Layout.AUTO`` has
    no meaning outside a compiled program)."""
    layout = fmt.layout
    if isinstance(layout, AutoLayoutSingleton):
        raise ValueError(f"sharding and layout in `Layout` instance should be concrete. Got "
                         f"layout: {fmt} for input {core.get_aval(x)}")
    placed = api_devices.device_put(x, fmt.sharding)
    if layout is None:
        return placed
    try:
        layout.check_compatible_aval(placed.shape)
    except ValueError as e:
        raise ValueError(f"One of jit outputs with pytree key path result is incompatible "
                         f"with its layout annotation {layout}: {e}") from None
    return _laid_out(placed, layout)


api_devices.device_put_forms[Format] = _device_put_format

def _check_arg_layouts(compiled: Compiled, flat: list) -> None:
    """JAX's error for an argument committed to a layout other than the one the compiled
    program takes (an uncommitted one is laid out as the program takes it)."""
    ins, _ = _compiled_formats(compiled)
    names = getattr(compiled.lowered.traced.jaxpr.jaxpr.debug_info, "arg_names", None)
    if names is None or len(names) != len(flat):
        names = [f"args[{i}]" for i in range(len(flat))]
    errors = []
    for x, fmt, name in zip(flat, ins, names):
        if isinstance(x, Array) and x.committed:
            have = _array_format(x).layout
            if have is not None and have != fmt.layout:
                errors.append(f"Argument {name} with shape {x.aval}:\n"
                              f"  Passed layout: {have}\n  Required layout: {fmt.layout}")
    if errors:
        count = (f"the {len(errors)} mismatches" if len(errors) < 5 else
                 f"5 mismatches out of {len(errors)}")
        raise ValueError("Computation was compiled for input layouts that disagree with the "
                         f"layouts of arguments passed to it. Here are {count}:\n"
                         + "\n".join(errors[:5]))


_plain_compiled_call = Compiled.__call__


def _compiled_call(self: Compiled, *args, **kwargs):
    if layout_arrays.LaidOutArray.made and not self.partitioned:  # (else nothing to check)
        flat = tree_util.tree_leaves((args, kwargs))
        if any(type(x) is layout_arrays.LaidOutArray for x in flat):
            _check_arg_layouts(self, flat)
    if not layout_jit.takes_other_layouts(self):
        return _plain_compiled_call(self, *args, **kwargs)
    return layout_jit.compiled_call(self, _plain_compiled_call, args, kwargs,
                                    lambda flat: _check_arg_layouts(self, flat))


Compiled.__call__ = _compiled_call
_plain_run_flat = Compiled.run_flat


def _run_flat(self: Compiled, *args, **kwargs):
    out = _plain_run_flat(self, *args, **kwargs)
    return layout_jit.laid_out_results(self, out) if layout_jit.takes_other_layouts(
        self) else out


Compiled.run_flat = _run_flat
jit_module.takes_other_layouts = layout_jit.takes_other_layouts
stages.result_layouts = lambda jaxpr, module: layout_jit.result_layouts(
    jaxpr, module, layout_constraint_p)
Array.format = property(_array_format)
ShardedArray.format = property(_array_format)
Compiled.input_formats = property(_input_formats)
Compiled.output_formats = property(_output_formats)
Compiled.out_info = property(_compiled_out_info)


# ---- with_layout_constraint -----------------------------------------------------------------
def with_layout_constraint(x: Any, layouts: Any) -> Any:
    """``x`` (a pytree of arrays) with every leaf laid out as its ``Layout`` in ``layouts``
    (a tree prefix of ``x``); lowers to XLA's ``LayoutConstraint`` custom call."""
    leaves, tree = tree_util.tree_flatten(x)
    avals = [core.get_aval(leaf) for leaf in leaves]
    flat = _broadcast_prefix(tree, layouts)
    if any(not isinstance(layout, Layout) for layout in flat):
        raise ValueError(f"layouts passed to `with_layout_constraint` must be of type "
                         f"`Layout`. Got {[type(layout) for layout in flat]}")
    for aval, layout in zip(avals, flat):
        try:
            layout.check_compatible_aval(aval.shape)
        except ValueError as e:
            raise ValueError(f"One of with_layout_constraint arguments is incompatible with "
                             f"its layout annotation {layout}: {e}") from None
    outs = [layout_constraint_p.bind(leaf, layout=layout) for leaf, layout in zip(leaves, flat)]
    return tree_util.tree_unflatten(tree, outs)


def _broadcast_prefix(tree: Any, layouts: Any) -> list:
    """The layout of every leaf of ``tree``, given ``layouts`` (a tree prefix of it)."""
    dummy = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    prefix, prefix_tree = tree_util.tree_flatten(layouts, is_leaf=lambda x: x is None)
    try:
        subtrees = prefix_tree.flatten_up_to(dummy)
    except ValueError as e:
        raise ValueError(f"with_layout_constraint layouts specification must be a tree prefix "
                         f"of the corresponding value, got specification {layouts!r}: {e}"
                         ) from None
    return [layout for layout, sub in zip(prefix, subtrees)
            for _ in range(len(tree_util.tree_leaves(sub)))]


def _layout_constraint_impl(x: Any, *, layout: Layout) -> Any:
    if not isinstance(x, (Array, ShardedArray)):
        raise ValueError(f"with_layout_constraint in eager mode can only be applied to "
                         f"jax.Arrays. Got {type(x)}")
    # (committed, as JAX's: it runs a jit whose out_shardings name the array's device)
    return _laid_out(x, layout, commit=True)


def _laid_out(x: Any, layout: Layout, commit: bool = False) -> Any:
    """``x`` copied into ``layout`` (``x`` itself when it already lies so)."""
    if layout.tiling or layout.sub_byte_element_size_in_bits:
        raise NotImplementedError(f"{layout}: jaxkit lays arrays out by major_to_minor "
                                  f"only; pass a Layout without tiling or element size")
    if isinstance(x, ShardedArray):
        return layout_sharded.relayout_sharded(x, layout.major_to_minor)
    return layout_arrays.relayout(x, layout.major_to_minor, commit)


def _layout_constraint_lowering(ctx: Any, x: Any, *, layout: Layout) -> Any:
    aval, = ctx.avals_in
    result_type = mlir.aval_to_ir_type(ctx.avals_out[0])
    op = hlo.CustomCallOp(
        [result_type], [x], call_target_name=ir.StringAttr.get("LayoutConstraint"),
        has_side_effect=ir.BoolAttr.get(False), backend_config=ir.StringAttr.get(""),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
        # The operand's layout is ignored by XLA; JAX writes the identity permutation.
        operand_layouts=mlir.layouts_attr([list(range(aval.ndim))]),
        result_layouts=mlir.layouts_attr([layout.major_to_minor[::-1]]))
    return op.result


def _layout_constraint_batcher(axis_data: Any, args: Any, dims: Any, *, layout: Layout):
    x, = args
    d, = dims
    if d is None:
        return layout_constraint_p.bind(x, layout=layout), None
    # JAX's rule, kept for the same layouts: every dimension number shifts up by one and
    # dimension 0 takes position ``d`` of ``major_to_minor``.
    shifted = tuple(m + 1 for m in layout.major_to_minor)
    batched = layout.update(major_to_minor=(*shifted[:d], 0, *shifted[d:]))
    return layout_constraint_p.bind(x, layout=batched), d


layout_constraint_p = core.Primitive("layout_constraint")
layout_constraint_p.def_impl(_layout_constraint_impl)
layout_constraint_p.def_abstract_eval(lambda x, **_: x)
ad.deflinear2(layout_constraint_p,
              lambda ct, x, **params: [layout_constraint_p.bind(ct, **params)])
batching.defrule(layout_constraint_p, _layout_constraint_batcher)
mlir.register_lowering(layout_constraint_p, _layout_constraint_lowering)
