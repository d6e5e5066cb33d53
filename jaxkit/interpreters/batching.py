"""Automatic batching (vmap): the batch trace and the per-primitive batching rules.

Rule table (filled by each primitive's block in ``jaxkit.lax``):
``primitive_batchers[p](batched_args, batch_dims, **params) -> (out, out_dim)``; ``batch_dims``
holds an int (the batched axis of that argument) or ``not_mapped`` (None). For
multiple-result primitives ``out`` and ``out_dim`` are lists.
"""
from __future__ import annotations

from collections.abc import Callable

from jaxkit import core

primitive_batchers: dict[core.Primitive, Callable] = {}
not_mapped = None


def defvectorized(prim: core.Primitive) -> None:
    """A unary elementwise primitive: batching changes nothing."""

    def rule(batched_args, batch_dims, **params):
        (x,), (d,) = batched_args, batch_dims
        return prim.bind(x, **params), d

    primitive_batchers[prim] = rule


# The two array operations batching rules need everywhere. They are primitives of
# ``jaxkit.lax`` (which registers them here), so this module stays below lax.
_axis_ops: dict[str, Callable] = {}


def register_axis_ops(*, moveaxis: Callable, broadcast: Callable,
                      broadcast_in_dim: Callable) -> None:
    """``moveaxis(x, src, dst)``; ``broadcast(x, size, axis)`` inserts a new axis;
    ``broadcast_in_dim(x, shape, dims)`` is the lax primitive."""
    _axis_ops["moveaxis"] = moveaxis
    _axis_ops["broadcast"] = broadcast
    _axis_ops["broadcast_in_dim"] = broadcast_in_dim


def moveaxis(x, src: int, dst: int):
    if src == dst:
        return x
    return _axis_ops["moveaxis"](x, src, dst)


def broadcast(x, size: int, axis: int):
    return _axis_ops["broadcast"](x, size, axis)


def bdim_at_front(x, bdim, size: int):
    """``x`` with its batch axis first, creating one of ``size`` if it has none."""
    if bdim is not_mapped:
        return broadcast(x, size, 0)
    return moveaxis(x, bdim, 0)


def matchaxis(src, dst, x, size: int):
    """Move (or create) ``x``'s batch axis from ``src`` to ``dst``."""
    if src == dst:
        return x
    if src is not_mapped:
        return broadcast(x, size, dst)
    if dst is not_mapped:
        raise ValueError("cannot un-batch a batched value")
    return moveaxis(x, src, dst)


def batch_size(args, dims) -> int:
    return next(x.shape[d] for x, d in zip(args, dims) if d is not not_mapped)


def defbroadcasting(prim: core.Primitive) -> None:
    """An n-ary elementwise primitive (rank-0 operands broadcast): line the batch axes up,
    then apply it once."""

    def rule(batched_args, batch_dims, **params):
        if all(d is not not_mapped for d in batch_dims) and len(set(batch_dims)) == 1 and len(
                {x.shape for x in batched_args}) == 1:
            return prim.bind(*batched_args, **params), batch_dims[0]
        size = batch_size(batched_args, batch_dims)
        example_shape = max((x.shape[:d] + x.shape[d + 1:] if d is not not_mapped else x.shape
                             for x, d in zip(batched_args, batch_dims)), key=len)
        args = []
        for x, d in zip(batched_args, batch_dims):
            if d is not_mapped and not x.shape:
                args.append(x)  # an unbatched scalar broadcasts by itself
                continue
            x = bdim_at_front(x, d, size)
            if x.ndim == 1 and example_shape:
                x = _axis_ops["broadcast_in_dim"](x, (size,) + example_shape, (0,))
            args.append(x)
        return prim.bind(*args, **params), 0

    primitive_batchers[prim] = rule
