"""``jit`` of a call with high-level arguments (``jax.experimental.hijax`` types: Flax NNX's
``HijaxVariable``, ...): the arguments are lowered to their array leaves, and a jitted function
of those leaves (one per jitted function, the lowering's description static) raises them back
into high-level values, calls the function, and returns, besides its results, the final leaves
of the mutable values, which are written back into the caller's values.

A separate jitted function rather than a branch of ``JitFunction._call`` keeps the cached fast
path of array calls untouched: these calls never take it, and each lowers its arguments anew
(a mutable value's QDD is read at every call and is part of the cache key).
"""
from __future__ import annotations

import weakref
from typing import Any

from jaxkit import tree_util
from jaxkit.interpreters import hijax

__all__ = ["call_with_hi_args"]

_lowered_funs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def call_with_hi_args(jit_fun: Any, statics: tuple, flat: list, in_tree: Any) -> Any:
    """Call ``jit_fun`` (a ``JitFunction``) on flat arguments ``flat`` (structure
    ``in_tree``, static arguments ``statics``), some of them high-level values."""
    if tree_util.tree_leaves((jit_fun._in_shardings, jit_fun._out_shardings)):
        raise NotImplementedError(
            f"jit of {jit_fun._name} with in_shardings/out_shardings and high-level arguments "
            "is not supported: the shardings describe the high-level values, whose array "
            "leaves are what the program takes. Lay the arrays out before the call instead.")
    spec, lo_flat, his = hijax.lower_args(flat)
    inner = _lowered_funs.get(jit_fun)
    if inner is None:
        inner = _lowered_funs[jit_fun] = _lowered_jit(jit_fun)
    out, final = inner(((spec, in_tree, statics), *lo_flat), {})
    hijax.write_back(spec, his, final)
    return out


def _lowered_jit(jit_fun: Any) -> Any:
    """The jitted function of lowered arguments for ``jit_fun``, with its options. It holds
    ``jit_fun`` weakly: the cache entry it is the value of must not keep its key alive."""
    ref = weakref.ref(jit_fun)

    def lowered(key, *lo_flat):
        spec, in_tree, statics = key
        jit_fun = ref()
        flat, his = hijax.raise_args(spec, list(lo_flat))
        dyn_args, dyn_kwargs = tree_util.tree_unflatten(in_tree, flat)
        args, kwargs = jit_fun._merge_statics(statics, dyn_args, dyn_kwargs)
        out = jit_fun._fun(*args, **kwargs)
        return out, hijax.final_state(spec, his)

    lowered.__name__ = lowered.__qualname__ = jit_fun._name
    return type(jit_fun)(lowered, static_argnums=(0,), inline=jit_fun._inline,
                         keep_unused=jit_fun._keep_unused, device=jit_fun._device)._call
