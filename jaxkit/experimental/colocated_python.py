"""``jax.experimental.colocated_python``: Python functions and objects run on the CPU devices
of the hosts holding their array arguments.

JAX ships the function (serialized) to the hosts of the arguments' devices through IFRT. A
jaxkit process only drives its own host's devices, so the function runs here, in this process,
on the arguments as they are: the contract a user sees is kept (arrays in, arrays out on the
same devices; ``specialize`` fixing input specs, output specs and devices; a class whose real
instance is made at its first method call and dropped with its wrapper). What differs is
timing only: calls run synchronously, where JAX may return before a specialized call ends
(JAX's own first, unspecialized call is synchronous too).
"""
from __future__ import annotations

import collections
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import tree_util
from jaxkit.api import ShapeDtypeStruct, device_put, devices
from jaxkit.runtime.array import Array
from jaxkit.sharding import Mesh

__all__ = ["colocated_cpu_devices", "colocated_python", "colocated_python_class"]


def colocated_cpu_devices(devices_or_mesh: Sequence[Any] | Mesh) -> Sequence[Any] | Mesh:
    """The CPU devices on the hosts of ``devices_or_mesh`` (one per device, in order; a CPU
    device is its own), or a mesh of them shaped as the given mesh."""
    if isinstance(devices_or_mesh, Mesh):
        mesh = devices_or_mesh
        cpus = colocated_cpu_devices(tuple(mesh.devices.flat))
        return Mesh(np.array(cpus, dtype=object).reshape(mesh.devices.shape), mesh.axis_names,
                    axis_types=mesh.axis_types)
    given = tuple(devices_or_mesh)
    if not given:
        return []
    # One process drives one client: its CPU devices are the ones colocated with any device.
    cpu_backend = devices("cpu")
    per_process = collections.defaultdict(list)
    for d in reversed(cpu_backend):  # popped from the end: in device order
        per_process[d.process_index].append(d)
    out = []
    for d in given:
        if not per_process[d.process_index]:
            raise ValueError(f"Process {d.process_index} does not have enough local CPU "
                             "devices")
        out.append(per_process[d.process_index].pop())
    return out


def _spec(x: Any) -> ShapeDtypeStruct:
    if not isinstance(x, Array):
        raise ValueError("colocated_python only supports jax.Array as input and output, but "
                         f"got {type(x)}.")
    return ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)


def _check_one_device_list(leaves: Sequence[Any]) -> None:
    found = {frozenset(x.devices()) for x in leaves}
    if len(found) > 1:
        raise ValueError("All arguments must use the same device list, but got multiple "
                         f"device lists: {found}.")


def _make_callable(fun: Callable, in_specs: Any, out_specs_fn: Callable | None,
                   devices_: Sequence[Any] | None) -> Callable:
    def specialize(in_specs: Any = None, out_specs_fn: Callable | None = None,
                   devices: Sequence[Any] | None = None) -> Callable:
        """A callable with more fixed: the input specs (a pytree of ``ShapeDtypeStruct`` for
        ``(args, kwargs)``), the function from input to output specs, the devices."""
        for name, old, new in [("in_specs", in_specs_, in_specs),
                               ("out_specs_fn", out_specs_fn_, out_specs_fn),
                               ("devices", devices_0, devices)]:
            if old is not None and new is not None:
                raise ValueError(f"{name} already specified")
        return _make_callable(fun, in_specs if in_specs is not None else in_specs_,
                              out_specs_fn if out_specs_fn is not None else out_specs_fn_,
                              devices if devices is not None else devices_0)

    in_specs_, out_specs_fn_, devices_0 = in_specs, out_specs_fn, devices_

    @functools.wraps(fun)
    def call(*args, **kwargs):
        leaves = tree_util.tree_leaves((args, kwargs))
        if not leaves and devices_0 is None:
            raise ValueError("No devices found. colocated_python function without input "
                             "arguments must be first specialized with devices.")
        specs = [_spec(x) for x in leaves]
        _check_one_device_list(leaves)
        result = fun(*args, **kwargs)
        out_leaves, out_tree = tree_util.tree_flatten(result)
        got = [_spec(x) for x in out_leaves]
        if out_specs_fn_ is not None:
            given = in_specs_ if in_specs_ is not None else tree_util.tree_unflatten(
                tree_util.tree_structure((args, kwargs)), specs)
            want_args, want_kwargs = given
            want = tree_util.tree_leaves(out_specs_fn_(*want_args, **want_kwargs))
            if [(w.shape, w.dtype) for w in want] != [(g.shape, g.dtype) for g in got]:
                raise ValueError(f"colocated_python: the function returned {got}, but "
                                 f"out_specs_fn gave {want}")
            out_leaves = [x if w.sharding is None or w.sharding == x.sharding
                          else device_put(x, w.sharding) for x, w in zip(out_leaves, want)]
        return tree_util.tree_unflatten(out_tree, out_leaves)

    call.specialize = specialize
    return call


def colocated_python(fun: Callable) -> Callable:
    """``fun`` made to run on the devices of its array arguments (see the module); the result
    has a ``specialize(in_specs=, out_specs_fn=, devices=)`` method."""
    return _make_callable(fun, None, None, None)


def colocated_python_class(cls: type) -> type:
    """A class whose instances stand for an instance of ``cls`` made, with the constructor's
    arguments, at the first method call, and dropped with the wrapper."""

    class WrappedClass:
        @functools.wraps(cls.__init__)
        def __init__(self, *init_args, **init_kwargs) -> None:
            state: dict[str, Any] = {}

            def instance() -> Any:
                if "obj" not in state:
                    state["obj"] = cls(*init_args, **init_kwargs)
                return state["obj"]

            self._colocated_state = state
            for name in dir(cls):
                member = getattr(cls, name)
                if not inspect.isfunction(member) or name in (
                        "__init__", "__del__", "__reduce__", "__reduce_ex__"):
                    continue
                method = functools.wraps(member)(
                    lambda *a, _name=name, **k: getattr(instance(), _name)(*a, **k))
                setattr(self, name, colocated_python(method))

    WrappedClass.__name__ = cls.__name__
    WrappedClass.__doc__ = cls.__doc__
    return WrappedClass
