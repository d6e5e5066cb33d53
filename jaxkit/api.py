"""The transformations and utilities users call, on pytrees of arrays.

``jit`` lives in ``_jit.py``; the differentiation and batching APIs are added by their own
modules and re-exported from ``jaxkit``. This module holds ``make_jaxpr``, ``eval_shape``,
device placement and synchronisation.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import _runtime, core, distributed, dtypes, tree_util
from jaxkit._array import Array, device_put_value
from jaxkit._jit import _infer_argnums_and_argnames, _positional_params
from jaxkit.interpreters import partial_eval as pe


def _flat_arg_names(fun: Callable, args: Sequence, kwargs: dict) -> list[str]:
    params = _positional_params(fun)
    names = []
    for i, a in enumerate(args):
        label = params[i] if i < len(params) else f"args[{i}]"
        names += [label + tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(a)[0]]
    for k, v in kwargs.items():
        names += [k + tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(v)[0]]
    return names


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               return_shape: bool = False) -> Callable[..., core.ClosedJaxpr]:
    """``make_jaxpr(f)(*args)`` is the jaxpr of ``f`` traced at the types of ``args``."""
    static_nums, _ = _infer_argnums_and_argnames(fun, static_argnums, ())

    @functools.wraps(fun)
    def make(*args, **kwargs):
        dyn = [a for i, a in enumerate(args) if i not in static_nums]
        flat, in_tree = tree_util.tree_flatten((tuple(dyn), kwargs))
        avals = [core.get_aval(x) for x in flat]
        out_tree_box = []

        def flat_fun(*flat_args):
            dyn_args, kw = tree_util.tree_unflatten(in_tree, flat_args)
            it = iter(dyn_args)
            full = [a if i in static_nums else next(it) for i, a in enumerate(args)]
            out = fun(*full, **kw)
            out_flat, out_tree = tree_util.tree_flatten(out)
            out_tree_box.append(out_tree)
            return out_flat

        debug = pe.debug_info("make_jaxpr", fun, _flat_arg_names(fun, dyn, kwargs))
        jaxpr, consts = pe.trace_to_jaxpr(flat_fun, avals, debug)
        closed = core.ClosedJaxpr(jaxpr, consts)
        if return_shape:
            shapes = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in jaxpr.out_avals]
            return closed, tree_util.tree_unflatten(out_tree_box[0], shapes)
        return closed

    return make


class ShapeDtypeStruct:
    """A shape and dtype standing for an array (``jax.ShapeDtypeStruct``)."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: Sequence[int], dtype, weak_type: bool = False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = weak_type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape)))

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


core.pytype_aval_mappings[ShapeDtypeStruct] = lambda s: core.ShapedArray(
    s.shape, dtypes.canonicalize_dtype(s.dtype), s.weak_type)


def eval_shape(fun: Callable, *args, **kwargs):
    """The output shapes and dtypes of ``fun(*args)``, without computing anything."""
    flat, in_tree = tree_util.tree_flatten((args, kwargs))
    avals = [core.get_aval(x) for x in flat]
    out_tree_box = []

    def flat_fun(*flat_args):
        a, kw = tree_util.tree_unflatten(in_tree, flat_args)
        out_flat, out_tree = tree_util.tree_flatten(fun(*a, **kw))
        out_tree_box.append(out_tree)
        return out_flat

    jaxpr, _ = pe.trace_to_jaxpr(flat_fun, avals, pe.debug_info("eval_shape", fun, []))
    shapes = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in jaxpr.out_avals]
    return tree_util.tree_unflatten(out_tree_box[0], shapes)


# --------------------------------------------------------------------------------------------
# Devices and placement
# --------------------------------------------------------------------------------------------


def devices(backend: str | None = None) -> list:
    """The devices of ``backend`` (default: the CPU), like ``jax.devices()``."""
    return _runtime.devices(backend)


def local_devices(process_index: int | None = None, backend: str | None = None) -> list:
    return _runtime.local_devices(backend)


def device_count(backend: str | None = None) -> int:
    return len(_runtime.devices(backend))


def local_device_count(backend: str | None = None) -> int:
    return len(_runtime.local_devices(backend))


def default_backend() -> str:
    return _runtime.default_backend()


def process_index() -> int:
    """This process's index among the processes of ``jaxkit.distributed.initialize``."""
    return distributed.process_index()


def process_count() -> int:
    """The number of processes (1 unless ``jaxkit.distributed.initialize`` was called)."""
    return distributed.process_count()


def device_put(x: Any, device=None):
    """Place every array of the pytree ``x`` on ``device`` (default: the first device)."""
    if device is not None and not isinstance(device, _runtime.Device):
        raise TypeError(f"device_put expects a device (from jaxkit.devices()), got {device!r}")

    def put(leaf):
        if isinstance(leaf, core.Tracer):
            return leaf
        return device_put_value(leaf, device)

    return tree_util.tree_map(put, x)


def device_get(x: Any):
    """Fetch every array of the pytree ``x`` to NumPy."""
    return tree_util.tree_map(lambda v: np.asarray(v) if isinstance(v, Array) else v, x)


def block_until_ready(x: Any):
    """Wait for every array in the pytree ``x``; return ``x``."""
    bufs = [leaf._buf for leaf in tree_util.tree_leaves(x) if isinstance(leaf, Array)]
    _runtime.block_until_ready_buffers(bufs)
    return x
