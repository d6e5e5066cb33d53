"""``jax.experimental.colocated_python.api``: the entry points. ``colocated_cpu_devices``
(the CPU devices beside given devices), ``colocated_python`` (a function) and
``colocated_python_class`` (a class), built on ``func.make_callable`` and
``obj.wrap_class``."""
from __future__ import annotations

import collections
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit.api import devices
from jaxkit.experimental.colocated_python.func import make_callable
from jaxkit.experimental.colocated_python.obj import wrap_class
from jaxkit.sharding import Mesh

__all__ = ["colocated_cpu_devices", "colocated_python", "colocated_python_class",
           "make_callable", "wrap_class"]


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
    per_process = collections.defaultdict(list)
    for d in reversed(devices("cpu")):  # popped from the end: in device order
        per_process[d.process_index].append(d)
    out = []
    for d in given:
        if not per_process[d.process_index]:
            raise ValueError(f"Process {d.process_index} does not have enough local CPU "
                             "devices")
        out.append(per_process[d.process_index].pop())
    return out


def _sourceinfo(obj: Any) -> str | None:
    """``name at file:line`` for error messages, as JAX records it."""
    try:
        _, line = inspect.getsourcelines(obj)
        return f"{obj.__name__} at {inspect.getsourcefile(obj)}:{line}"
    except (OSError, TypeError):
        return None


def _signature(fun: Callable) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (ValueError, TypeError):
        return None


def colocated_python(fun: Callable[..., Any]) -> Callable:
    """``fun`` made to run on the devices of its array arguments (see the package); the
    result has a ``specialize(in_specs=, out_specs_fn=, devices=)`` method."""
    return make_callable(fun, _sourceinfo(fun), _signature(fun))


def colocated_python_class(cls: type) -> type:
    """A class whose instances stand for an instance of ``cls`` made, with the constructor's
    arguments, at the first method call, and dropped with the wrapper."""
    return wrap_class(cls, _sourceinfo(cls))
