"""jaxlib's hook for custom-call partitioners, and the XLA objects its callbacks receive.

``register`` hands XLA three Python callbacks for a custom-call target. When the SPMD
partitioner meets such a call it calls ``partition(arg_shapes, arg_shardings, result_shape,
result_sharding, backend_config)`` and inlines the per-device module it returns, after
resharding the operands as the returned shardings say. The shapes are ``xla_client.Shape``s
(a tuple shape when the call has several results) and the shardings ``HloSharding``s; the
helpers here turn them into plain Python values and back, so that
``jaxkit.experimental.custom_partitioning`` needs no jaxlib types.
"""
from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

__all__ = ["register", "value_shapes", "value_shardings", "pack_shardings", "tile_shape",
           "module_bytecode"]


def register(name: str, propagate_user_sharding: Callable, partition: Callable,
             infer_sharding_from_operands: Callable) -> None:
    """Register the partitioner of the custom-call target ``name`` with XLA (CPU and any
    client created later in this process; side-effect checks off, as JAX registers it)."""
    _jax.register_custom_call_partitioner(
        name, propagate_user_sharding, partition, infer_sharding_from_operands,
        can_side_effecting_have_replicated_sharding=True)


def value_shapes(shape: Any) -> list[tuple[tuple[int, ...], np.dtype]]:
    """The (dimensions, dtype) of each value of ``shape`` (each element of a tuple shape)."""
    parts = shape.tuple_shapes() if shape.is_tuple() else [shape]
    return [(tuple(p.dimensions()), np.dtype(p.numpy_dtype())) for p in parts]


def value_shardings(sharding: Any, shape: Any) -> list[Any]:
    """The ``HloSharding`` of each value of ``shape``."""
    return list(sharding.tuple_elements()) if shape.is_tuple() else [sharding]


def pack_shardings(shape: Any, shardings: Sequence[Any]) -> Any:
    """One ``HloSharding`` for ``shape`` from its values' (a tuple sharding for a tuple)."""
    if shape.is_tuple():
        return xc.HloSharding.tuple_sharding(shape, list(shardings))
    return shardings[0]


def tile_shape(sharding: Any, dims: Sequence[int], dtype: Any) -> tuple[int, ...]:
    """The per-device shape of a ``dims`` array laid out as the ``HloSharding``."""
    full = xc.Shape.array_shape(np.dtype(dtype), tuple(dims))
    return tuple(sharding.tile(full).dimensions())


def module_bytecode(module: Any) -> bytes:
    """The MLIR bytecode of ``module``, the form ``partition`` returns its module in."""
    buf = io.BytesIO()
    module.operation.write_bytecode(file=buf)
    return buf.getvalue()
