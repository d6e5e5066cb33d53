"""``jit`` with ``Format(Layout(major_to_minor), sharding)`` in its in/out shardings.

The program is lowered as the plain ``jit`` lowers it, then its ``main`` parameters and
results that a ``Format`` lays out in another order than row-major carry XLA's
``mhlo.layout_mode = "{minor,...,major}"`` attribute, as JAX writes it; XLA compiles the
executable for those layouts. A call then hands it buffers in those layouts: an argument
committed to another layout is refused (JAX's error), any other one is laid out first
(``layout_arrays.relayout``); results in another layout come back as ``LaidOutArray``s.
Compiled executables check and convert their arguments alike (``compiled_call``).

Only one-device programs take such layouts: a ``Format`` whose sharding spans several devices
with a layout other than row-major raises ``NotImplementedError`` (see ``layout``). A
partitioned program reads the row-major global buffer of an argument whose shards are laid
out otherwise (``layout_sharded``), and gives row-major results.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import core, tree_util
from jaxkit.experimental import layout_arrays
from jaxkit.interpreters import mlir
from jaxkit.interpreters.mlir import ir
from jaxkit.runtime import layouts
from jaxkit.runtime.array import Array, device_put_value
from jaxkit.transforms.stages import Compiled, Lowered, Traced

__all__ = ["LaidOutJit", "compiled_call", "laid_out_results", "main_layouts", "result_layouts",
           "takes_other_layouts"]

Mode = Any  # a major_to_minor tuple, "auto" (XLA's choice) or None for the default


def _flat_modes(modes: Any, tree: Any, is_format: Callable[[Any], bool],
                mode_of: Callable[[Any], Mode]) -> list[Mode]:
    """The layout of every leaf of ``tree`` given ``modes`` (a tree prefix of it whose
    leaves are Formats, shardings or None)."""
    n = tree.num_leaves
    if modes is None or is_format(modes) or not isinstance(modes, (tuple, list, dict)):
        return [mode_of(modes)] * n
    dummy = tree_util.tree_unflatten(tree, [0] * n)
    prefix, prefix_tree = tree_util.tree_flatten(
        modes, is_leaf=lambda x: x is None or is_format(x))
    subtrees = prefix_tree.flatten_up_to(dummy)
    return [mode_of(m) for m, sub in zip(prefix, subtrees)
            for _ in range(len(tree_util.tree_leaves(sub)))]


def _mode_attr(mode: Mode) -> ir.Attribute:
    if mode == "auto":
        return ir.StringAttr.get("auto")
    return ir.StringAttr.get("{" + ",".join(map(str, mode[::-1])) + "}")


def _with_layout_modes(lowered: Lowered, arg_modes: Sequence[Mode],
                       out_modes: Sequence[Mode]) -> Lowered:
    """A copy of ``lowered`` whose ``main`` carries ``mhlo.layout_mode`` for the parameters
    and results laid out in another order than row-major."""
    kept = lowered.program.kept
    if kept is not None:
        arg_modes = [arg_modes[i] for i in kept]
    with mlir.make_ir_context():
        module = ir.Module.parse(mlir.module_to_string(lowered.module))
        _set_layout_modes(module, arg_modes, out_modes)
    return Lowered(lowered.traced, module, lowered.timings, lowered.program)


def _set_layout_modes(module: Any, arg_modes: Sequence[Mode], out_modes: Sequence[Mode]):
    main = next(op for op in module.body.operations
                if ir.StringAttr(op.attributes["sym_name"]).value == "main")
    n_in = len(main.regions[0].blocks[0].arguments)
    arg_modes = [None] * (n_in - len(arg_modes)) + list(arg_modes)  # leading constants
    for attr_name, modes in (("arg_attrs", arg_modes), ("res_attrs", out_modes)):
        if not any(m is not None for m in modes):
            continue
        old = (list(main.attributes[attr_name]) if attr_name in main.attributes
               else [ir.DictAttr.get({}) for _ in modes])
        new = []
        for attrs, mode in zip(old, modes):
            entries = {a.name: a.attr for a in ir.DictAttr(attrs)}
            if mode is not None:
                entries["mhlo.layout_mode"] = _mode_attr(mode)
            new.append(ir.DictAttr.get(dict(sorted(entries.items()))))
        main.attributes[attr_name] = ir.ArrayAttr.get(new)


def result_layouts(jaxpr: core.ClosedJaxpr, module: Any, constraint: core.Primitive) -> Any:
    """``module`` with the results that a ``constraint`` (``layout_constraint``) equation of
    ``jaxpr`` produces directly left to XLA's layout choice (``mhlo.layout_mode = "auto"``), as
    JAX lowers them: the constraint's layout becomes the result's."""
    made = {v for eqn in jaxpr.jaxpr.eqns if eqn.primitive is constraint for v in eqn.outvars}
    modes = ["auto" if isinstance(v, core.Var) and v in made else None
             for v in jaxpr.jaxpr.outvars]
    if "auto" in modes:
        with mlir.make_ir_context():
            _set_layout_modes(module, [], modes)
    return module


def main_layouts(compiled: Compiled) -> tuple[list[Mode], list[Mode]]:
    """The layouts (major_to_minor) of a one-device executable's argument parameters (the
    kept ones, after any leading constants) and of its results."""
    params, outs = layouts.executable_layouts(compiled.executable.xla_executable)
    n_args = len(compiled.lowered.program.jaxpr.jaxpr.invars)
    return [p[0] for p in params[len(params) - n_args:]], [o[0] for o in outs]


def _row_major(ndim: int) -> tuple[int, ...]:
    return tuple(range(ndim))


def takes_other_layouts(compiled: Compiled) -> bool:
    """Whether a one-device program takes or gives a buffer in another order than
    row-major."""
    if compiled.partitioned:
        return False
    found = getattr(compiled, "_other_layouts", None)
    if found is None:
        ins, outs = main_layouts(compiled)
        found = any(m != _row_major(len(m)) for m in (*ins, *outs))
        compiled._other_layouts = found
    return found


def compiled_call(compiled: Compiled, plain_call: Callable, args: tuple, kwargs: dict,
                  mismatch: Callable[[list], None]) -> Any:
    """Call ``compiled`` (a program that ``takes_other_layouts``, through ``plain_call``) with
    every argument in the layout its parameter takes: ``mismatch(flat)`` raises for committed
    arguments in another one; results in another order than row-major come back as
    ``LaidOutArray``s (its ``run_flat`` makes them)."""
    flat, tree = tree_util.tree_flatten((args, kwargs))
    mismatch(flat)
    ins, outs = main_layouts(compiled)
    kept = compiled.kept if compiled.kept is not None else range(len(flat))
    flat = list(flat)
    for i, want in zip(kept, ins):
        x = flat[i]
        if not isinstance(x, Array):
            x = device_put_value(x)
        x = layout_arrays.relayout(x, want)
        # the executable takes the buffer in its own layout: handed over as it lies
        flat[i] = Array(x.laid_out_buffer()) if type(x) is layout_arrays.LaidOutArray else x
    args, kwargs = tree_util.tree_unflatten(tree, flat)
    return plain_call(compiled, *args, **kwargs)  # (its run_flat lays the results out)


def laid_out_results(compiled: Compiled, out: Any) -> Any:
    """``out``, the results of ``compiled`` (a program that ``takes_other_layouts``), with
    those XLA gave another layout than row-major made ``LaidOutArray``s (the result
    handlers made plain arrays of them)."""
    results, out_tree = tree_util.tree_flatten(out)
    modes = main_layouts(compiled)[1]
    if len(results) != len(modes):
        return out
    return tree_util.tree_unflatten(out_tree, [
        layout_arrays.LaidOutArray(r._buf, r.aval, m)
        if type(r) is Array and m != _row_major(r.ndim) else r
        for r, m in zip(results, modes)])


def _key_of(x: Any) -> Any:
    """What tells calls apart: an array's type, a static argument's value."""
    try:
        return core.get_aval(x)
    except TypeError:
        return x


class LaidOutJit:
    """What ``jit`` returns for in/out shardings with layouts: the plain jitted function
    ``plain`` (shardings only), lowered with the layouts and compiled once per argument
    signature."""

    def __init__(self, plain: Callable, in_formats: Any, out_formats: Any,
                 is_format: Callable[[Any], bool], mode_of: Callable[[Any], Mode]):
        self._plain = plain
        self._in, self._out = in_formats, out_formats
        self._is_format, self._mode_of = is_format, mode_of
        self._compiled: dict = {}
        functools.update_wrapper(self, plain, updated=())

    def _modes(self, traced: Traced) -> tuple[list[Mode], list[Mode]]:
        args_tree = tree_util.treedef_children(traced.in_tree)[0]
        return (_flat_modes(self._in, args_tree, self._is_format, self._mode_of),
                _flat_modes(self._out, traced.out_tree, self._is_format, self._mode_of))

    def trace(self, *args, **kwargs) -> Traced:
        traced = self._plain.trace(*args, **kwargs)
        plain_lower = traced.lower
        traced.lower = lambda: _with_layout_modes(plain_lower(), *self._modes(traced))
        return traced

    def lower(self, *args, **kwargs) -> Lowered:
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args, **kwargs) -> Any:
        return self._plain.eval_shape(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # cache_events, _jit, ...: the plain jit's
        return getattr(self._plain, name)

    def clear_cache(self) -> None:
        self._compiled.clear()
        self._plain.clear_cache()

    def __call__(self, *args, **kwargs) -> Any:
        flat, tree = tree_util.tree_flatten((args, kwargs))
        key = (tree, tuple(map(_key_of, flat)))
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self.lower(*args, **kwargs).compile()
        self._check_committed(compiled, flat)
        return compiled(*args, **kwargs)

    def _check_committed(self, compiled: Compiled, flat: list) -> None:
        """JAX's error for an argument committed to another layout than its Format's."""
        args_tree = tree_util.treedef_children(compiled.traced.in_tree)[0]
        asked = _flat_modes(self._in, args_tree, self._is_format, lambda f: f)
        for x, fmt in zip(flat, asked):
            if not (self._is_format(fmt) and self._mode_of(fmt) not in (None, "auto")):
                continue
            if isinstance(x, Array) and x.committed and \
                    layout_arrays.layout_of(x) != fmt.layout.major_to_minor:
                raise ValueError(
                    f"Layout passed to jit does not match the layout on the respective arg. "
                    f"Got jit layout: {fmt.layout},\narg layout: {x.format.layout} for arg "
                    f"type: {x.aval}.")
