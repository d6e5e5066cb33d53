"""``custom_vmap`` (a function with its own batching rule) and ``sequential_vmap``.

``custom_vmap_call`` carries the jaxpr of the function (``call``, run by every rule other
than batching, and lowered as it) and the user's ``rule``. Its batching rule calls
``rule(axis_size, in_batched, *args)`` with the batched arguments' batch axis at 0; the rule
returns ``(outputs, out_batched)``, outputs batched at axis 0 where ``out_batched`` says. As
in JAX, differentiating through a ``custom_vmap`` function is not supported.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from jaxkit import core
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax.loops import map as lax_map

__all__ = ["custom_vmap", "sequential_vmap"]


class custom_vmap:
    """A function whose ``vmap`` is ``rule`` (set with ``def_vmap``):
    ``rule(axis_size, in_batched, *args) -> (out, out_batched)``."""

    def __init__(self, fun: Callable):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: Callable | None = None

    def def_vmap(self, vmap_rule: Callable) -> Callable:
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args, **kwargs) -> Any:
        name = getattr(self.fun, "__name__", "custom_vmap")
        if kwargs:
            raise TypeError(f"custom_vmap function {name} takes positional arguments only")
        if self.vmap_rule is None:
            raise AttributeError(f"No batching rule defined for custom_vmap function {name} "
                                 "using def_vmap.")
        flat, in_tree = tree_util.tree_flatten(((), args))
        cell: list = []

        def flat_fun(*xs):
            out = self.fun(*tree_util.tree_unflatten(in_tree, xs)[1])
            leaves, tree = tree_util.tree_flatten(out)
            cell.append(tree)
            return leaves

        jaxpr, consts = pe.trace_to_jaxpr(flat_fun, [core.get_aval(x) for x in flat])
        if any(isinstance(c, core.Tracer) for c in consts):
            raise NotImplementedError(f"custom_vmap function {name} closes over a traced "
                                      "value; pass it as an argument instead")
        call = ClosedJaxpr(jaxpr, consts)
        outs = custom_vmap_call_p.bind(*flat, call=call, rule=self.vmap_rule,
                                       in_tree=in_tree, out_tree=cell[0])
        return tree_util.tree_unflatten(cell[0], outs)


def _custom_vmap_impl(*args, call: ClosedJaxpr, rule, in_tree, out_tree):
    return core.eval_jaxpr(call.jaxpr, call.consts, *args)


def _custom_vmap_abstract_eval(*avals, call: ClosedJaxpr, rule, in_tree, out_tree):
    return call.out_avals


def _custom_vmap_batch(axis_data, args, dims, *, call, rule, in_tree, out_tree):
    in_batched = [d is not batching.not_mapped for d in dims]
    args = [batching.moveaxis(x, d, 0) if b else x for x, d, b in zip(args, dims, in_batched)]
    _, batched_tree = tree_util.tree_unflatten(in_tree, in_batched)
    _, arg_values = tree_util.tree_unflatten(in_tree, args)
    outs, out_batched = rule(axis_data.size, list(batched_tree), *arg_values)
    out_flat, tree = tree_util.tree_flatten(outs)
    if tree != out_tree:
        raise ValueError(f"custom_vmap rule output structure {tree} does not match the "
                         f"function's output structure {out_tree}")
    flags = tree_util.tree_structure(outs).flatten_up_to(out_batched) \
        if not isinstance(out_batched, bool) else [out_batched] * len(out_flat)
    return out_flat, [0 if b else batching.not_mapped for b in flags]


def _custom_vmap_lowering(ctx, *args, call: ClosedJaxpr, rule, in_tree, out_tree):
    return mlir.closed_subcomp(ctx.module_context, call, *args)


custom_vmap_call_p = core.Primitive("custom_vmap_call")
custom_vmap_call_p.multiple_results = True
custom_vmap_call_p.def_impl(_custom_vmap_impl)
custom_vmap_call_p.def_abstract_eval(_custom_vmap_abstract_eval)
batching.defrule(custom_vmap_call_p, _custom_vmap_batch)
mlir.register_lowering(custom_vmap_call_p, _custom_vmap_lowering)


def sequential_vmap(f: Callable) -> custom_vmap:
    """``f`` whose ``vmap`` runs it on one example after another (``lax.map``) instead of
    batching its operations."""
    f = custom_vmap(f)

    def rule(axis_size, in_batched, *args):
        del axis_size

        def one(batched_args):
            it = iter(batched_args)
            leaves, tree = tree_util.tree_flatten(args)
            flags = tree_util.tree_leaves(in_batched)
            return f.fun(*tree_util.tree_unflatten(
                tree, [next(it) if b else x for x, b in zip(leaves, flags)]))

        leaves = tree_util.tree_leaves(args)
        flags = tree_util.tree_leaves(in_batched)
        outs = lax_map(one, [x for x, b in zip(leaves, flags) if b])
        return outs, tree_util.tree_map(lambda _: True, outs)

    f.def_vmap(rule)
    return f
