"""Pallas's helpers for kernels and the code around them: uninitialized arrays and refs
(``empty``, ``empty_like``, ``empty_ref_like``), an equal-rank ``broadcast_to``, running a
function on refs (``run_state``), picking one of several refs by a traced index
(``select_ref``), runtime checks (``debug_check``) and their switches, and the block-dimension
and revisiting kinds ``Indirect``/``RevisitMode``.
"""
from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

from jaxkit import core, lax, tree_util
from jaxkit import numpy as jnp
from jaxkit import ref as ref_lib
from jaxkit.experimental import checkify
from jaxkit.experimental.pallas.core import MemoryRef
from jaxkit.experimental.pallas.core import MemorySpace as _PlMemorySpace
from jaxkit.flags import State as _State
from jaxkit.interpreters import dispatch, mlir

__all__ = ["Indirect", "RevisitMode", "broadcast_to", "debug_check", "empty", "empty_like",
           "empty_ref_like", "enable_debug_checks", "enable_poison_buffers", "run_state",
           "select_ref"]

empty = lax.empty


def empty_like(x: object) -> Any:
    """A pytree like ``x`` (leaves with a shape and dtype) of uninitialized arrays."""
    return tree_util.tree_map(lambda leaf: empty(leaf.shape, leaf.dtype), x)


def empty_ref_like(x: object) -> Any:
    """A new uninitialized ref of ``x``'s shape and dtype: ``x`` a buffer type
    (``pltpu.VMEM(shape, dtype)``: its memory space) or a ``ShapeDtypeStruct`` (``pl.ANY``)."""
    if isinstance(x, MemoryRef):
        space = x.memory_space
    elif type(x).__name__ == "ShapeDtypeStruct":
        space = _PlMemorySpace.ANY
    else:
        raise ValueError(f"empty_ref_like does not support {type(x)}")
    return ref_lib.new_ref(empty_like(x), memory_space=space)


# ---- broadcast_to --------------------------------------------------------------------------
def broadcast_to(a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` broadcast to ``shape`` (as ``jnp.broadcast_to``; one primitive, which Triton
    lowers to its own equal-rank broadcast)."""
    a = jnp.asarray(a)
    if a.shape == shape:
        return a
    return broadcast_to_p.bind(a, shape=shape)


def _broadcast_to_value(a, *, shape):
    return jnp.broadcast_to(a, shape)


broadcast_to_p = core.Primitive("broadcast_to")
broadcast_to_p.def_abstract_eval(lambda a, *, shape: core.ShapedArray(tuple(shape), a.dtype))
broadcast_to_p.def_impl(lambda a, *, shape: dispatch.apply_primitive(broadcast_to_p, a,
                                                                     shape=shape))
mlir.register_lowering(broadcast_to_p, mlir.lower_fun(_broadcast_to_value))


# ---- run_state -----------------------------------------------------------------------------
def run_state(f: Callable[..., None]) -> Callable[[Any], Any]:
    """``g(init)``: call ``f`` on refs holding the pytree ``init`` and return what they hold
    after it (``f`` returns nothing)."""
    def wrapped(args):
        refs = tree_util.tree_map(ref_lib.new_ref, args)
        f(refs)
        return tree_util.tree_map(ref_lib.freeze, refs)
    return wrapped


# ---- select_ref ----------------------------------------------------------------------------
class SelectedRef:
    """``pl.select_ref(idx, *refs)``: reads and writes go to ``refs[idx]`` (every ref is
    visited, the chosen one by a select), so copies (``pltpu.sync_copy``, DMAs) take it."""

    def __init__(self, idx: Any, refs: tuple):
        types = [(tuple(r.shape), r.dtype) for r in refs]
        if any(t != types[0] for t in types[1:]):
            raise TypeError(f"Cannot select from Refs of different types: {tuple(types)}")
        self.idx, self.refs = idx, refs

    shape = property(lambda self: tuple(self.refs[0].shape))
    dtype = property(lambda self: self.refs[0].dtype)
    ndim = property(lambda self: len(self.shape))

    @property
    def at(self) -> Any:
        sel = self

        class _At:
            def __getitem__(self, idx):
                return SelectedRef(sel.idx, tuple(r.at[idx] for r in sel.refs))
        return _At()

    def __getitem__(self, idx: Any) -> Any:
        values = [r[idx] for r in self.refs]
        out = values[0]
        for k, v in enumerate(values[1:], 1):
            out = jnp.where(self.idx == k, v, out)
        return out

    def __setitem__(self, idx: Any, value: Any) -> None:
        for k, r in enumerate(self.refs):
            r[idx] = jnp.where(self.idx == k, value, r[idx])


def select_ref(idx: Any, *refs: Any) -> SelectedRef:
    """The ref ``refs[idx]``, ``idx`` a traced scalar (JAX's TPU lowering takes it in DMAs)."""
    if len(refs) <= 1:
        raise ValueError("At least two refs are required for pl.select_ref.")
    return SelectedRef(idx, refs)


# ---- checks and kinds ----------------------------------------------------------------------
enable_debug_checks = _State("jax_pallas_enable_debug_checks")
enable_poison_buffers = _State("jax_pallas_poison_buffers")


def debug_check(condition: Any, message: str) -> None:
    """Check ``condition`` when the kernel runs under ``checkify`` (JAX's TPU/GPU compilers
    also check it with ``pl.enable_debug_checks``); otherwise nothing."""
    return checkify.debug_check(condition, message)


@dataclasses.dataclass(frozen=True)
class Indirect:
    """A block dimension indexed by an array of indices (a gather for inputs, a scatter for
    outputs)."""

    block_size: int

    def __repr__(self) -> str:
        return f"Indirect({self.block_size})"


@enum.unique
class RevisitMode(enum.Enum):
    """Whether an output block may be revisited at any later step (``ANY``) or only at the
    next one (``IMMEDIATE``, the default)."""

    IMMEDIATE = "immediate"
    ANY = "any"
