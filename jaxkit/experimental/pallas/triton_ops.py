"""Triton's kernel-only operations: ``debug_barrier`` (synchronise the kernel instances)
and ``elementwise_inline_asm`` (run PTX on each element). Only the Triton compiler runs
them: as in JAX, a kernel using them fails in interpret mode on a CPU (``NotImplementedError``
naming the primitive), after their types were checked."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit.experimental.pallas.device_only import device_only_primitive
from jaxkit.interpreters import partial_eval as pe

__all__ = ["debug_barrier", "debug_barrier_p", "elementwise_inline_asm",
           "elementwise_inline_asm_p"]


def debug_barrier() -> None:
    """Synchronizes all kernel executions in the grid."""
    debug_barrier_p.bind()


debug_barrier_p = device_only_primitive("debug_barrier_p", multiple_results=True)
debug_barrier_p.def_abstract_eval(lambda: [])
pe.defeffectful(debug_barrier_p)  # a barrier has no outputs, yet must stay


def elementwise_inline_asm(asm: str, *, args: Sequence[Any], constraints: str, pack: int,
                           result_shape_dtypes: Sequence[Any]) -> Sequence[Any]:
    """Inline assembly ``asm`` applied to the elements of ``args`` (``pack`` elements of each
    per instance; LLVM ``constraints``), giving arrays of ``result_shape_dtypes``."""
    return elementwise_inline_asm_p.bind(*args, asm=asm, constraints=constraints, pack=pack,
                                         result_shape_dtypes=tuple(result_shape_dtypes))


def _asm_abstract_eval(*avals, result_shape_dtypes, **_):
    if not all(x.shape == y.shape for x, y in zip(avals, avals[1:])):
        raise ValueError("All arguments of elementwise_inline_asm must have the same shape")
    return [core.ShapedArray(tuple(s.shape), np.dtype(s.dtype)) for s in result_shape_dtypes]


elementwise_inline_asm_p = device_only_primitive("elementwise_inline_asm_p",
                                                 multiple_results=True)
elementwise_inline_asm_p.def_abstract_eval(_asm_abstract_eval)
