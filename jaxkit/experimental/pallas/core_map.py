"""Per-core kernels: ``pl.core_map`` runs a function once per core of a mesh (a
``pltpu.create_tensorcore_mesh``), on refs it closes over; ``pl.kernel`` runs a body on refs
to its array operands, to its outputs and to scratch buffers made for it, on every core.

In interpret mode a core map is a ``pallas_call`` whose grid is the mesh, with axes named as
the mesh's: each core is one kernel instance, run one after the other, and
``lax.axis_index(name)`` inside reads the instance's index on that axis. A core map's
closed-over refs are the call's operands, aliased to its outputs, whole (memory space ANY),
and get their final values back; ``pl.kernel``'s operands and outputs are the call's own.
Communication between the cores of one device (a ``device_id`` naming a core axis,
``pltpu.core_barrier`` over several cores) needs cores running side by side, which this
sequential interpretation is not; it raises.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from jaxkit import core, lax, tree_util
from jaxkit.experimental.pallas.core import ANY, BlockSpec
from jaxkit.experimental.pallas.pallas_call import pallas_call
from jaxkit.experimental.pallas.semaphores import (core_axes, run_scoped, semaphore_signal,
                                                   semaphore_wait)
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.state import is_ref_aval
from jaxkit.lax import parallel
from jaxkit.runtime import pjrt

__all__ = ["TensorCore", "TensorCoreMesh", "core_barrier", "core_map",
           "create_tensorcore_mesh", "kernel", "run_on_first_core"]


@dataclasses.dataclass(frozen=True)
class TensorCore:
    """One TensorCore of a device."""

    id: int


@dataclasses.dataclass(frozen=True, eq=False)
class TensorCoreMesh:
    """The TensorCores of a device as a mesh with named axes."""

    devices: np.ndarray
    axis_names: Sequence[str]

    def __post_init__(self):
        object.__setattr__(self, "axis_names", tuple(self.axis_names))

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.devices.shape))

    def __eq__(self, other):
        return (type(other) is TensorCoreMesh and other.axis_names == self.axis_names
                and other.devices.shape == self.devices.shape)

    def __hash__(self):
        return hash((self.axis_names, self.devices.shape))


def create_tensorcore_mesh(axis_name: str, devices: Sequence[Any] | None = None,
                           num_cores: int | None = None) -> TensorCoreMesh:
    """A one-axis mesh over the TensorCores of a device (``num_cores`` of them, or as many
    as ``devices[0]`` — by default the default device — has)."""
    if devices is not None and num_cores is not None:
        raise ValueError("cannot specify both devices and num_cores")
    if num_cores is None:
        if devices is None:
            devices = [pjrt.default_device()]
        num_cores = devices[0].num_cores  # a CPU device has no TensorCores: AttributeError
    cores = np.empty(num_cores, dtype=object)
    cores[:] = [TensorCore(i) for i in range(num_cores)]
    return TensorCoreMesh(cores, [axis_name])


def core_map(mesh: TensorCoreMesh, *, compiler_params: Any = None, interpret: Any = False,
             debug: bool = False, cost_estimate: Any = None, name: str | None = None,
             metadata: dict[str, str] | None = None, scratch_shapes: Any = ()) -> Callable:
    """Decorator: run the function (of no arguments, or of the ``scratch_shapes`` buffers)
    once per core of ``mesh``, at once; it works on the refs it closes over and returns
    None."""
    axes = list(mesh.shape.items())

    def wrapped(f):
        returned = []

        def body():
            if isinstance(scratch_shapes, Mapping):
                returned.append(run_scoped(f, **scratch_shapes))
            else:
                returned.append(run_scoped(f, *scratch_shapes))
            return []

        with core_axes(axes):
            jaxpr, consts = pe.trace_to_jaxpr(body, [], pe.debug_info("pallas_core_map", f,
                                                                          ()))
        if returned[0] is not None:
            raise ValueError(f"The kernel function in core_map {getattr(f, '__name__', f)} "
                             "should return None. It returns a PyTree: "
                             f"{tree_util.tree_structure(returned[0])}.")
        is_ref = [is_ref_aval(core.get_aval(c)) for c in consts]
        values = [c[...] if r else c for c, r in zip(consts, is_ref)]
        ref_pos = [i for i, r in enumerate(is_ref) if r]

        def kernel_body(*refs):
            ins, outs = refs[:len(consts)], iter(refs[len(consts):])
            args = [next(outs) if r else x[...] for x, r in zip(ins, is_ref)]
            with core_axes(axes):
                core.eval_jaxpr(jaxpr, args)
            return None

        out_shape = tuple(core.ShapedArray(np.shape(values[i]), values[i].dtype) for i in ref_pos)
        finals = pallas_call(
            kernel_body, out_shape=out_shape, grid=tuple(axes),
            in_specs=[BlockSpec(memory_space=ANY)] * len(consts),
            out_specs=[BlockSpec(memory_space=ANY)] * len(ref_pos),
            input_output_aliases={i: k for k, i in enumerate(ref_pos)}, debug=debug,
            interpret=interpret, name=name, compiler_params=compiler_params,
            cost_estimate=cost_estimate, metadata=metadata)(*values)
        for i, v in zip(ref_pos, finals):
            consts[i][...] = v

    return wrapped


def kernel(body: Any = None, out_type: Any = (), *, mesh: TensorCoreMesh,
           scratch_types: Any = (), compiler_params: Any = None, interpret: Any = False,
           cost_estimate: Any = None, debug: bool = False, name: str | None = None,
           metadata: dict[str, str] | None = None) -> Callable:
    """A function of arrays running ``body(*input_refs, output_ref(s), *scratch_refs)`` on
    every core of ``mesh`` and returning the outputs (of type ``out_type``); without
    ``body``, a decorator."""
    if body is None:
        return lambda fun: kernel(fun, out_type, mesh=mesh, scratch_types=scratch_types,
                                  compiler_params=compiler_params, interpret=interpret,
                                  cost_estimate=cost_estimate, debug=debug, name=name,
                                  metadata=metadata)

    axes = list(mesh.shape.items())
    out_flat, out_tree = tree_util.tree_flatten(out_type)

    def run(*operands):
        flat, in_tree = tree_util.tree_flatten(operands)
        n_in = len(flat)

        def kernel_body(*refs):
            ins = tree_util.tree_unflatten(in_tree, refs[:n_in])
            outs = tree_util.tree_unflatten(out_tree, refs[n_in:])
            args = [*ins, *outs] if isinstance(out_type, (list, tuple)) else [*ins, outs]
            with core_axes(axes):
                if isinstance(scratch_types, Mapping):
                    run_scoped(functools.partial(body, *args), **scratch_types)
                else:
                    run_scoped(functools.partial(body, *args), *scratch_types)
            return None

        results = pallas_call(
            kernel_body, out_shape=tuple(out_flat), grid=tuple(axes),
            in_specs=[BlockSpec(memory_space=ANY)] * n_in,
            out_specs=[BlockSpec(memory_space=ANY)] * len(out_flat), debug=debug,
            interpret=interpret, name=name, compiler_params=compiler_params,
            cost_estimate=cost_estimate, metadata=metadata)(*flat)
        return tree_util.tree_unflatten(out_tree, results)

    return run


def run_on_first_core(core_axis_name: str) -> Callable:
    """Decorator: call the function on the first core of the axis only."""
    if parallel.axis_size(core_axis_name) == 1:
        return lambda f: f()

    def wrapped(f):
        lax.cond(parallel.axis_index(core_axis_name) == 0, f, lambda: None)
    return wrapped


def core_barrier(sem: Any, *, core_axis_name: str) -> None:
    """Wait until every core of the axis reaches this point (each signals the others'
    ``sem``). With one core there is nothing to wait for."""
    num_cores = parallel.axis_size(core_axis_name)
    if num_cores > 1:
        for i in range(num_cores):
            lax.cond(parallel.axis_index(core_axis_name) != i,
                     lambda i=i: semaphore_signal(sem, 1, core_index=i), lambda: None)
        semaphore_wait(sem, num_cores - 1)
