"""``jax_debug_nans``: raise ``FloatingPointError`` where a NaN is first produced.

Read only when the option is on (callers test ``config.jax_debug_nans``, one attribute read):

* eagerly, ``check_primitive`` looks at the floating outputs of the primitive just run;
* after a compiled program (``jit``), ``check_jaxpr_call`` looks at its outputs and, if one is
  NaN, says so on stdout and runs the "de-optimized version" as JAX does: the Python function
  again without ``jit`` (or, for a ``jit`` equation met eagerly, its jaxpr equation by
  equation), so the primitive that makes the NaN raises eagerly:
  ``invalid value (nan) encountered in div``. Every ``jit`` met on the way (``jnp`` functions
  are jitted) reports and re-runs in turn, as in JAX.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core


def _has_nan(x: Any) -> bool:
    try:
        aval = core.get_aval(x)
    except TypeError:
        return False
    if not np.issubdtype(aval.dtype, np.inexact) or isinstance(x, core.Tracer):
        return False
    return bool(np.isnan(np.asarray(x)).any())


def check_primitive(prim: core.Primitive, outs: Sequence) -> None:
    """Raise if an output of ``prim`` (just run eagerly) contains a NaN."""
    if any(_has_nan(x) for x in outs):
        raise FloatingPointError(f"invalid value (nan) encountered in {prim.name}")


_DEOPTIMIZED = ("Invalid nan value encountered in the output of a jax.jit function. Calling "
                "the de-optimized version.")


def check_jaxpr_call(name: str, closed: core.ClosedJaxpr, args: Sequence, outs: Sequence,
                     deoptimized: Callable[[], Any] | None = None) -> None:
    """Raise if an output of the compiled ``closed`` (called as ``name`` on ``args``) contains
    a NaN: run ``deoptimized`` (the function without ``jit``), or else ``closed`` eagerly, so
    that the primitive producing it raises."""
    if not any(_has_nan(x) for x in outs):
        return
    print(_DEOPTIMIZED)  # JAX prints this line (to stdout) before re-running
    if deoptimized is not None:
        deoptimized()
    else:
        core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
    raise FloatingPointError(
        f"invalid value (nan) encountered in the output of jitted function {name}. Because "
        "jax_debug_nans is set, the de-optimized function (the function as if the `jit` "
        "decorator were removed) was called to find the operation that produced it, but it "
        "produced no invalid value: the NaN came from an input (or a literal), or only "
        "appears in the compiled program (e.g. through a fused reassociation). Removing the "
        "`jit` may avoid it, at the cost of its optimizations.")
