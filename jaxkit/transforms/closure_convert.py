"""``closure_convert``: hoist the values a function closes over into explicit arguments (for
``custom_vjp``/``custom_jvp``, which may not be differentiated with respect to closed-over
values)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.interpreters import partial_eval as pe

__all__ = ["closure_convert"]


def closure_convert(fun: Callable, *example_args) -> tuple[Callable, list]:
    """Hoist the values ``fun`` closes over into explicit arguments.

    Returns ``(converted, consts)`` where ``converted(*args, *consts)`` equals ``fun(*args)``.
    Useful with ``custom_vjp``/``custom_jvp``, which may not be differentiated with respect to
    closed-over values: pass ``consts`` as arguments instead. Only inexact (differentiable)
    constants are hoisted; the others stay closed over."""
    flat, in_tree = tree_util.tree_flatten(example_args)
    jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(lambda a: fun(*a), in_tree,
                                                     [core.get_aval(x) for x in flat])
    hoist = [isinstance(c, core.Tracer) or
             dtypes.issubdtype(core.get_aval(c).dtype, np.inexact) for c in consts]
    kept = [c for c, h in zip(consts, hoist) if not h]
    hoisted = [c for c, h in zip(consts, hoist) if h]
    n_args = len(flat)

    def converted(*args_and_consts):
        split = len(args_and_consts) - len(hoisted)
        args, hoisted_vals = args_and_consts[:split], args_and_consts[split:]
        flat_args, tree = tree_util.tree_flatten(tuple(args))
        if tree != in_tree or len(flat_args) != n_args:
            raise TypeError(f"closure-converted function called with arguments of structure "
                            f"{tree}, expected {in_tree}")
        kept_it, hoisted_it = iter(kept), iter(hoisted_vals)
        all_consts = [next(hoisted_it) if h else next(kept_it) for h in hoist]
        outs = core.eval_jaxpr(jaxpr, all_consts, *flat_args)
        return tree_util.tree_unflatten(out_tree, outs)

    return converted, hoisted
