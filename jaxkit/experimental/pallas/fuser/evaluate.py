"""``evaluate``: run a function one primitive at a time, as a Pallas kernel body would,
refusing what a kernel cannot run this way (loops, conditionals, and optionally
transposes)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxkit import core, lax, source_info, tree_util
from jaxkit.interpreters import partial_eval as pe

__all__ = ["evaluate"]

_disallowed = {lax.scan_p, lax.while_p, lax.cond_p}


def evaluate(f: Callable, *, allow_transpose: bool = True) -> Callable:
    """``f`` traced and then evaluated equation by equation; ``scan``, ``while`` and
    ``cond`` raise ``NotImplementedError``, ``transpose`` a ``ValueError`` unless
    ``allow_transpose``."""
    def wrapped(*args, **kwargs):
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(
            lambda a: f(*a[0], **a[1]), in_tree, [core.get_aval(x) for x in flat],
            pe.debug_info("evaluate", f, ()))
        out = _evaluate_jaxpr(jaxpr, consts, flat, allow_transpose)
        return tree_util.tree_unflatten(out_tree, out)

    return wrapped


def _evaluate_jaxpr(jaxpr: core.Jaxpr, consts, args, allow_transpose: bool) -> list:
    env: dict = dict(zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args]))

    def read(a: Any) -> Any:
        return a.val if type(a) is core.Literal else env[a]

    for eqn in jaxpr.eqns:
        if eqn.primitive in _disallowed:
            raise NotImplementedError(f"Primitive {eqn.primitive} not supported.")
        if not allow_transpose and eqn.primitive is lax.transpose_p:
            raise ValueError("Transpose not allowed.")
        with source_info.user_context(eqn.source_info):
            out = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        env.update(zip(eqn.outvars, out if eqn.primitive.multiple_results else [out]))
    return [read(v) for v in jaxpr.outvars]
