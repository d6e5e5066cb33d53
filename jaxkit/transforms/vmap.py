"""``vmap``: vectorize a function over a batch axis of its arguments (JAX semantics).

The user's function runs once, on ``BatchTracer``s standing for one example each; every
primitive it applies is batched by its rule (``jaxkit.interpreters.batching``). This module
handles the user-facing part: ``in_axes``/``out_axes`` as pytree prefixes of the positional
arguments and of the outputs (keyword arguments are always batched along axis 0, as in JAX),
negative axes, the batch size, and errors that name the offending argument.
"""
from __future__ import annotations

import collections
import functools
import inspect
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit._tree_prefix import prefix_mismatch_error
from jaxkit import core, lax, source_info
from jaxkit._traceback_filter import api_boundary
from jaxkit import tree_util
from jaxkit.interpreters import batching
from jaxkit.interpreters.batching import AxisData, BatchTrace, BatchTracer

__all__ = ["vmap"]


def _is_none(x) -> bool:
    return x is None


def _valid_axis_leaves(spec) -> bool:
    return all(leaf is None or type(leaf) is int or type(leaf) in batching.spec_types
               for leaf in tree_util.tree_leaves(spec, is_leaf=_is_none))


def _is_spec(s) -> bool:
    """An axis spec leaf: None, an int, or a spec type of a registered vmappable type."""
    return s is None or type(s) is int or type(s) in batching.spec_types


def _vmappable_leaf() -> Callable | None:
    """``is_leaf`` for flattening vmap's arguments and outputs: values of registered
    vmappable types are leaves (None, the faster flatten, while no type is registered)."""
    return batching.is_vmappable if batching.vmappables else None


def _maps_itself_or_vmappable() -> Callable:
    if not batching.vmappables:
        return _maps_itself
    return lambda n: _maps_itself(n) or batching.is_vmappable(n)


def _iota(size):
    handler = batching.make_iota_handlers.get(type(size))
    return handler(size) if handler is not None else lax.iota(np.int32, int(size))


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None,
         axis_size: int | None = None, spmd_axis_name: Any = None,
         sum_match: bool = False) -> Callable:
    """Vectorizing map: ``vmap(f)(xs)`` is ``stack([f(x) for x in xs])``, computed at once.

    ``in_axes`` is an int, None, or a tuple (a list is taken as a tuple) with one entry per
    positional argument, each a pytree prefix of that argument whose leaves give the mapped
    axis (None: not mapped; negative axes count from the end). Keyword arguments are mapped
    along axis 0. ``out_axes`` is a prefix of the output pytree: where each output's batch
    axis goes (None: the output must not depend on the batch, and is returned unbatched).
    ``axis_name`` names the axis for collectives (``lax.psum(x, axis_name)``); ``axis_size``
    gives the batch size when no argument is mapped. ``spmd_axis_name`` is accepted for
    compatibility (jaxkit runs a vmap on one device). With ``sum_match`` an output that
    depends on the batch where ``out_axes`` says None is summed over it instead of refused."""
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    if isinstance(in_axes, list):
        # Users pass lists and tuples interchangeably for the per-argument entries (JAX #2367).
        in_axes = tuple(in_axes)
    if not (in_axes is None or type(in_axes) in (int, tuple, *batching.spec_types)):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                        "to the positional arguments passed to the function, but got "
                        f"{in_axes}.")
    if not _valid_axis_leaves(in_axes):
        raise TypeError("vmap in_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {in_axes}.")
    if not _valid_axis_leaves(out_axes):
        raise TypeError("vmap out_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {out_axes}.")
    if axis_size is not None:
        axis_size = int(core.concrete_or_error(axis_size, "the axis_size argument of vmap"))
    if spmd_axis_name is not None and not isinstance(spmd_axis_name, tuple):
        spmd_axis_name = (spmd_axis_name,)
    fun_name = getattr(fun, "__name__", type(fun).__name__)

    @api_boundary
    @functools.wraps(fun)
    def vmap_f(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries "
                             "corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        arg_dims = [d for d, _ in _flatten_axes("vmap in_axes", in_axes, args)]
        vmappable = _vmappable_leaf()
        flat_args, args_tree = tree_util.tree_flatten(args, is_leaf=vmappable)
        flat_kwargs, kwargs_tree = tree_util.tree_flatten(kwargs)
        vals = flat_args + flat_kwargs
        dims = arg_dims + [0] * len(flat_kwargs)
        dims = _canonicalize_in_dims(vals, dims)
        size = _mapped_axis_size(fun, args, kwargs, vals, dims, axis_size)
        trace = BatchTrace(AxisData(axis_name, size, spmd_axis_name,
                                    *_explicit_mesh_axis(vals, dims)), debug=fun_name)
        with core.new_trace(trace):
            def get_idx(t=trace):  # the example's index, for vmappable types asking for it
                return BatchTracer(t, _iota(size), 0)
            src = source_info.current()  # the vmap call's line, for errors about them
            in_vals = [batching.to_elt(trace, get_idx, v, d) if batching.is_vmappable(v) else
                       v if d is None else BatchTracer(trace, v, d, src)
                       for v, d in zip(vals, dims)]
            with source_info.name_stack_context(source_info.current_name_stack().transform(
                    "vmap")):  # scopes opened inside are named ``vmap(...)``, as in JAX
                out = fun(*tree_util.tree_unflatten(args_tree, in_vals[:len(flat_args)]),
                          **tree_util.tree_unflatten(kwargs_tree, in_vals[len(flat_args):]))
        out_flat, out_tree = tree_util.tree_flatten(out, is_leaf=vmappable)
        out_specs = _flatten_axes("vmap out_axes", out_axes, out)
        out_paths = [p for p, _ in tree_util.tree_flatten_with_path(out, is_leaf=vmappable)[0]]
        results = [_from_batch(trace, o, dst, spec_path, path, size, axis_name, sum_match)
                   for o, (dst, spec_path), path in zip(out_flat, out_specs, out_paths)]
        trace_ref = weakref.ref(trace)
        del trace, get_idx, in_vals, out, out_flat
        core.check_no_leaks(trace_ref)
        return tree_util.tree_unflatten(out_tree, results)

    vmap_f.__doc__ = (f"Vectorized version of {fun_name}. Takes similar arguments as "
                      f"{fun_name} but with additional array axes over which {fun_name} is "
                      "mapped." + (f"\n\nOriginal documentation:\n\n{fun.__doc__}"
                                   if getattr(fun, "__doc__", None) else ""))
    return vmap_f


# --------------------------------------------------------------------------------------------
# Axis specifications
# --------------------------------------------------------------------------------------------


def _explicit_mesh_axis(vals: list, dims: list) -> tuple:
    """The mesh axis the mapped dimension of the arguments is split over in their types
    (None if unsplit), and its mesh. As in JAX, every mapped argument must agree, an
    argument whose type says nothing of its layout (host data, a sparse array) counting as
    unsplit: ``vmap(f)(a, b)`` with ``a`` split over ``x`` and ``b`` not is an error."""
    found, mesh, seen = None, None, False
    for v, d in zip(vals, dims):
        if d is None:
            continue
        sharding = None if batching.is_vmappable(v) else getattr(core.get_aval(v), "_sharding",
                                                                 None)
        entry = None if sharding is None else tuple(sharding.spec)[d]
        if seen and entry != found:
            raise ValueError("Mapped away dimension of inputs passed to vmap should be sharded "
                             f"the same. Got inconsistent axis specs: {found} vs {entry}")
        if entry is not None:
            mesh = sharding.mesh
        found, seen = entry, True
    return (found, mesh) if found is not None else (None, None)


def _maps_itself(x) -> bool:
    # Looked up on the type: objects answering any attribute (Flax's nnx.Rngs makes a stream
    # of any name) are not batched sparse arrays.
    return not isinstance(x, type) and hasattr(type(x), "_vmap_leaf_axes")


def _not_a_prefix(what: str, spec, tree, path, s, x, s_def, x_def) -> ValueError:
    """JAX's error for an axis specification that is no prefix of the value: every place
    where they disagree; jaxkit's words, naming the place, where JAX's walk finds nothing
    (a leaf that is no axis)."""
    error = prefix_mismatch_error(what, spec, tree_util.tree_structure(tree))
    if error is not None:
        return error
    return ValueError(
        f"{what} specification must be a tree prefix of the corresponding value; at key path "
        f"{what}{tree_util.keystr(path)} the specification has a subtree of type "
        f"{type(s).__name__} with structure {s_def} but the value has a subtree of type "
        f"{type(x).__name__} with structure {x_def}. (The full specification is {spec!r}.)")


def _flatten_axes(what: str, spec, tree) -> list[tuple[int | None, tuple]]:
    """For each leaf of ``tree``: the axis ``spec`` (a pytree prefix of ``tree`` with int or
    None leaves) gives it, and the key path of that entry of ``spec``."""
    out: list[tuple[int | None, tuple]] = []

    def walk(s, x, path):
        if _is_spec(s):
            # A node that knows how it is mapped (a batched sparse array: all its buffers
            # along one batch axis, checked by the node) gives its leaves' axes itself; a
            # registered vmappable value is one leaf.
            for node in tree_util.tree_leaves(x, is_leaf=_maps_itself_or_vmappable()):
                if batching.is_vmappable(node):
                    out.append((s, path))
                elif s is not None and _maps_itself(node):
                    out.extend((a, path) for a in node._vmap_leaf_axes(s, what))
                else:
                    out.extend([(s, path)] * len(tree_util.tree_leaves(node)))
            return
        s_kids, s_def = tree_util.tree_flatten_with_path(s, is_leaf=lambda y: y is not s)
        x_kids, x_def = tree_util.tree_flatten_with_path(x, is_leaf=lambda y: y is not x)
        # ``s`` a leaf other than None or an int is no prefix; a childless node (Flax's
        # PytreeState, an empty tuple) matching the value's is, with nothing below it.
        if s_def != x_def or (s_def.num_leaves == 1 and s_def.num_nodes == 1):
            raise _not_a_prefix(what, spec, tree, path, s, x, s_def, x_def)
        for (k, sc), (_, xc) in zip(s_kids, x_kids):
            walk(sc, xc, path + k)

    walk(spec, tree, ())
    return out


def _canonicalize_in_dims(vals: list, dims: list) -> list:
    out = []
    for x, d in zip(vals, dims):
        if d is None or batching.is_vmappable(x):
            out.append(d)
            continue
        aval = core.get_aval(x)  # (JAX's error for what is no array)
        if not -aval.ndim <= d < aval.ndim:
            min_rank = d + 1 if d >= 0 else -d
            raise ValueError(f"vmap was requested to map its argument along axis {d}, which "
                             f"implies that its rank should be at least {min_rank}, but is "
                             f"only {aval.ndim} (its shape is {aval.shape})")
        out.append(d % aval.ndim)
    return out


def _leaf_descriptions(fun: Callable, args: tuple, kwargs: dict) -> list[str]:
    """``argument x['a'] of type float32[3]`` for each flat leaf (JAX's wording)."""
    try:
        params: list[str] | None = list(inspect.signature(fun).bind(*args, **kwargs)
                                        .signature.parameters)
    except (TypeError, ValueError):
        params = None

    def describe(x) -> str:
        try:
            aval = core.get_aval(x)
        except TypeError:
            return "unknown"
        return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"

    names = []
    for i, a in enumerate(args):
        for path, leaf in tree_util.tree_flatten_with_path(a)[0]:
            if params is None or i >= len(params):
                name = f"args[{i}]{tree_util.keystr(path)}"
            else:
                name = f"argument {params[i]}{tree_util.keystr(path)}"
            names.append(f"{name} of type {describe(leaf)}")
    for path, leaf in tree_util.tree_flatten_with_path(kwargs)[0]:
        names.append(f"kwargs{tree_util.keystr(path)} of type {describe(leaf)}")
    return names


def _mapped_axis_size(fun, args, kwargs, vals, dims, axis_size: int | None) -> int:
    if not vals:
        if axis_size is not None:
            return axis_size
        raise ValueError("vmap wrapped function must be passed at least one argument "
                         "containing an array or axis_size must be specified, got empty "
                         f"*args={args} and **kwargs={kwargs}")
    sizes = [None if d is None else _vmappable_size(x, d) if batching.is_vmappable(x) else
             core.get_aval(x).shape[d] for x, d in zip(vals, dims)]
    distinct = {s for s in sizes if s is not None}
    if axis_size is not None:
        distinct.add(axis_size)
    if len(distinct) == 1:
        return distinct.pop()
    if not distinct:
        raise ValueError("vmap must have at least one non-None value in in_axes or axis_size "
                         "must be specified")
    names = _leaf_descriptions(fun, args, kwargs)
    counts = collections.Counter(s for s in sizes if s is not None).most_common()
    msg = ["vmap got inconsistent sizes for array axes to be mapped:\n"]
    if axis_size is not None:
        msg.append(f"  * the `axis_size` argument was {axis_size};\n")
    for k, (sz, ct) in enumerate(counts):
        i = sizes.index(sz)
        if ct == 1:
            msg.append(f"  * one axis had size {sz}: axis {dims[i]} of {names[i]};\n")
        else:
            which = "most axes" if k == 0 else "some axes"
            msg.append(f"  * {which} ({ct} of them) had size {sz}, e.g. axis {dims[i]} of "
                       f"{names[i]};\n")
    raise ValueError("".join(msg)[:-2])


def _vmappable_size(x, spec):
    """The size a vmappable value's shape gives along ``spec`` (None where it has none: the
    type's own rules then check it)."""
    try:
        return x.shape[spec]
    except (AttributeError, IndexError, TypeError):
        return None


def _from_batch(trace: BatchTrace, out, dst, spec_path: tuple, path: tuple, size: int,
                axis_name, sum_match: bool = False):
    """An output of the vmapped function, its batch axis moved to ``dst`` (or, with
    ``sum_match`` and ``dst`` None, summed over)."""
    if batching.is_vmappable(out):
        return batching.from_elt(trace, size, out, dst, sum_match)
    val, src = trace.to_batch_info(out)
    if not (isinstance(val, core.Tracer) or core.is_array_like(val)):
        raise TypeError(f"Output from batched function {val!r} with type {type(val)} is not a "
                        "valid JAX type")
    if dst is None:
        if src is None:
            return val
        if sum_match:
            return val.sum(src)  # the array method, as JAX's (small integers widen)
        if axis_name is not None:
            raise ValueError(f"vmap has mapped output (axis_name={axis_name}) but out_axes is "
                             "None")
        # JAX names the leaf by its full path in the output (out_axes broadcast to it).
        raise ValueError(f"at vmap out_axes{tree_util.keystr(path)}, got axis spec None "
                         f"but output was batched on axis {src}")
    ndim = core.get_aval(val).ndim + (1 if src is None else 0)
    if not -ndim <= dst < ndim:
        raise ValueError(f"vmap out_axes{tree_util.keystr(spec_path)}: axis {dst} is out of "
                         f"bounds for array of dimension {ndim} (output"
                         f"{tree_util.keystr(path)} with the batch axis added)")
    return batching.matchaxis(src, dst % ndim, val, size)
