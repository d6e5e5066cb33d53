"""``jax.experimental.shard_alike``: make two values take the same layout.

``shard_alike(x, y)`` returns ``x`` and ``y`` unchanged in value; inside a program partitioned
over a mesh each pair of leaves is put in one Shardy sharding group, so XLA's propagation
gives both the same layout (whichever one it settles on first). In a program on one device
there is no layout to share and the pair lowers to the values themselves.
"""
from __future__ import annotations

import itertools
from typing import Any

from jaxkit import core
from jaxkit import tree_util
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters.mlir import sdy
from jaxkit.transforms.jit import jit

__all__ = ["shard_alike"]

# Group ids only need to differ between pairs of one module; a global counter does that.
_group_ids = itertools.count()


def shard_alike(x: Any, y: Any) -> tuple[Any, Any]:
    """``(x, y)`` with each pair of leaves laid out alike (the pytrees must match, and so must
    the shapes of paired leaves)."""
    x_flat, x_tree = tree_util.tree_flatten(x)
    y_flat, y_tree = tree_util.tree_flatten(y)
    if x_tree != y_tree:
        raise ValueError(f"Trees should be equal. Got x_tree: {x_tree}, y_tree: {y_tree}")
    for a, b in zip(x_flat, y_flat):
        sa, sb = core.get_aval(a).shape, core.get_aval(b).shape
        if sa != sb:
            raise ValueError(
                "The leaves shapes of `x` and `y` should match. Got `x` leaf shape: "
                f"{sa} and `y` leaf shape: {sb}. File an issue at "
                "https://github.com/jax-ml/jax/issues if you want this feature.")
    outs = [shard_alike_p.bind(a, b) for a, b in zip(x_flat, y_flat)]
    return (tree_util.tree_unflatten(x_tree, [o[0] for o in outs]),
            tree_util.tree_unflatten(y_tree, [o[1] for o in outs]))


shard_alike_p = core.Primitive("shard_alike")
shard_alike_p.multiple_results = True


@jit
def _run_jitted(x, y):
    return shard_alike_p.bind(x, y)


shard_alike_p.def_impl(lambda x, y: _run_jitted(x, y))
shard_alike_p.def_abstract_eval(lambda x, y: [x, y])


def _transpose(cts):
    x_ct, y_ct = cts
    if ad.is_zero(x_ct) or ad.is_zero(y_ct):
        return [x_ct, y_ct]
    return list(shard_alike_p.bind(x_ct, y_ct))


def _batch(axis_data, args, dims):
    """Both operands get the batch axis at the same place (a broadcast one where only one
    was batched), so the group still pairs equal shapes."""
    x, y = args
    xd, yd = dims
    if xd is None:
        x = batching.broadcast(x, axis_data.size, yd)
        xd = yd
    elif yd is None:
        y = batching.broadcast(y, axis_data.size, xd)
    elif xd != yd:
        y = batching.moveaxis(y, yd, xd)
    return list(shard_alike_p.bind(x, y)), [xd, xd]


def _lowering(ctx: mlir.LoweringRuleContext, x, y):
    if ctx.module_context.mesh is None or ctx.module_context.manual:
        return [x, y]  # one device, or a shard_map body: there is no layout to share
    group = next(_group_ids)
    sdy.sharding_group(x, group)
    sdy.sharding_group(y, group)
    return [x, y]


ad.deflinear(shard_alike_p, _transpose)
batching.defrule(shard_alike_p, _batch)
mlir.register_lowering(shard_alike_p, _lowering)
