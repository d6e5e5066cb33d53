"""``jax.experimental.serialize_executable``: save a compiled function and load it back
without tracing or compiling again.

``serialize(compiled)`` gives ``(payload, in_tree, out_tree)``: the trees are returned
separately, as in JAX, because pytree definitions do not pickle. ``payload`` holds the XLA
executable's bytes (``jaxkit.runtime.executable_io``: compiled again for the purpose), the
argument and result types, and the large constants jaxkit passes a program as leading
arguments.
``deserialize_and_load(payload, in_tree, out_tree)`` gives a ``Compiled`` that runs it.

As in JAX, loading runs code from the payload: never load one from an untrusted source.
jaxkit saves one-device programs with default layouts; a program partitioned over a mesh or
with other layouts is not supported yet.
"""
from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core, tree_util
from jaxkit.api import ShapeDtypeStruct, devices as _devices
from jaxkit.experimental import layout_jit
from jaxkit.interpreters.dispatch import Program
from jaxkit.runtime.array import to_buffer
from jaxkit.runtime.executable_io import deserialize_executable, serialize_module
from jaxkit.transforms.stages import ArgInfo, Compiled, _output_builder

__all__ = ["deserialize_and_load", "serialize"]

_FORMAT = "jaxkit-executable-1"


def _aval_spec(a: core.ShapedArray) -> tuple:
    return tuple(a.shape), np.dtype(a.dtype).str, bool(a.weak_type)


def _aval(spec: tuple) -> core.ShapedArray:
    shape, dtype, weak = spec
    return core.ShapedArray(shape, np.dtype(dtype), weak)


def serialize(compiled: Compiled) -> tuple[bytes, Any, Any]:
    """``(payload, in_tree, out_tree)`` of ``compiled`` (``jit(f).lower(...).compile()``)."""
    if not isinstance(compiled, Compiled):
        raise TypeError(f"serialize takes a Compiled (jit(f).lower(...).compile()), got "
                        f"{type(compiled).__name__}")
    if compiled.partitioned:
        raise NotImplementedError("serialize of a program partitioned over a mesh: jaxkit "
                                  "saves one-device programs only")
    if layout_jit.takes_other_layouts(compiled):
        raise NotImplementedError("serialize of a program whose arguments or results have "
                                  "non-default layouts (jax.experimental.layout)")
    program = compiled.program
    in_avals = tree_util.tree_leaves(compiled.in_avals)
    donated = [info.donated for info in tree_util.tree_leaves(compiled.args_info)]
    state = {
        "format": _FORMAT,
        "name": compiled.fun_name,
        "executable": serialize_module(compiled.lowered.module, program.executable.device),
        "device_id": program.executable.device.id,
        "in_avals": [_aval_spec(a) for a in in_avals],
        "donated": donated,
        "out_avals": [_aval_spec(a) for a in program.executable.out_avals],
        "kept": compiled.kept,
        "consts": [np.asarray(b) for b in program.const_bufs],
    }
    return pickle.dumps(state), compiled.in_tree, compiled.out_tree


class _LoadedCompiled(Compiled):
    """A ``Compiled`` loaded from a payload: it has no jaxpr or module behind it, only the
    executable and the types of its arguments and results."""

    def __init__(self, name: str, program: Program, in_tree, out_tree,
                 in_avals: Sequence[core.ShapedArray], donated: Sequence[bool],
                 kept: Sequence[int] | None):
        self.fun_name = name
        self.program = program
        self.executable = program.executable
        self.in_tree, self.out_tree = in_tree, out_tree
        self.kept = kept
        self._in_avals = list(in_avals)
        self._donated = list(donated)
        self.partitioned = False
        self.single_leaf = (tree_util.treedef_is_leaf(out_tree) and out_tree.num_leaves == 1)
        self.outputs = _output_builder(out_tree)
        self._programs = {program.executable.device: program}
        self._other_layouts = False  # serialize refuses programs with other layouts

    @property
    def in_avals(self):
        return tree_util.tree_unflatten(self.in_tree, self._in_avals)

    @property
    def args_info(self):
        return tree_util.tree_unflatten(self.in_tree, [
            ArgInfo(a, d) for a, d in zip(self._in_avals, self._donated)])

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        return tuple(i for i, d in enumerate(self._donated) if d)

    @property
    def out_info(self):
        return tree_util.tree_unflatten(self.out_tree, [
            ShapeDtypeStruct(a.shape, a.dtype) for a in self.executable.out_avals])

    def program_on(self, device):
        if device != self.executable.device:
            raise ValueError(f"this executable was loaded for {self.executable.device}; it "
                             f"cannot run on {device} (deserialize it for that device)")
        return self.program

    def __call__(self, *args, **kwargs):
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        avals = [core.get_aval(x) for x in flat]
        expected = self._in_avals
        self._check_arguments(in_tree, avals, self.in_tree, expected)
        return self.run_flat(flat, expected)

    def __repr__(self) -> str:
        return f"<Compiled {self.fun_name} (loaded)>"


def deserialize_and_load(serialized: bytes, in_tree: Any, out_tree: Any,
                         backend: Any = None,
                         execution_devices: Sequence[Any] | None = None) -> Compiled:
    """The ``Compiled`` saved in ``serialized`` (from ``serialize``), loaded on the first of
    ``execution_devices`` (default: the first device of ``backend``, a platform name or a
    device's client, else of the default backend). Never load an untrusted payload: loading
    runs code from it."""
    state = pickle.loads(serialized)
    if not isinstance(state, dict) or state.get("format") != _FORMAT:
        raise ValueError("deserialize_and_load: not a payload of jaxkit's serialize")
    if execution_devices:
        device = execution_devices[0]
        if backend is not None and not isinstance(backend, str) and \
                device.client is not backend:
            raise ValueError("Execution devices belong to a client other than `backend`. "
                             f"Got backend client: {(backend.platform, backend.platform_version)}"
                             " and execution devices client: "
                             f"{(device.client.platform, device.client.platform_version)}")
    elif backend is None or isinstance(backend, str):
        device = _devices(backend)[0]
    else:
        device = backend.devices()[0]
    out_avals = [_aval(s) for s in state["out_avals"]]
    exe = deserialize_executable(state["executable"], out_avals, device)
    consts = [to_buffer(c, core.get_aval(c), device) for c in state["consts"]]
    return _LoadedCompiled(state["name"], Program(exe, consts), in_tree, out_tree,
                           [_aval(s) for s in state["in_avals"]], state["donated"],
                           state["kept"])
