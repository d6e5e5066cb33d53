"""``jax_debug_nans``: raise ``FloatingPointError`` where a NaN is first produced.

Read only when the option is on (callers test ``config.jax_debug_nans``, one attribute read):

* eagerly, ``check_primitive`` looks at the floating outputs of the primitive just run;
* after a compiled program (``jit``), ``check_jaxpr_call`` looks at its outputs and, if one is
  NaN, re-runs the program's jaxpr equation by equation, eagerly and with the option off, to
  name the first primitive whose output contains a NaN (descending into the jaxprs of ``jit``
  equations), as JAX does: ``invalid value (nan) encountered in div``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit._config import config


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


def check_jaxpr_call(name: str, closed: core.ClosedJaxpr, args: Sequence, outs: Sequence
                     ) -> None:
    """Raise if an output of the compiled ``closed`` (called as ``name`` on ``args``) contains
    a NaN, naming the primitive that produced it first."""
    if not any(_has_nan(x) for x in outs):
        return
    with config.override(jax_debug_nans=False):
        culprit = _first_nan_eqn(closed.jaxpr, closed.consts, list(args))
    if culprit is None:
        raise FloatingPointError(
            f"invalid value (nan) encountered in the output of jitted function {name}; no "
            "operation in it produced the NaN when re-run op by op, so it comes from an input "
            "(or only appears in the compiled program, e.g. through a fused reassociation).")
    prim, where = culprit
    raise FloatingPointError(
        f"invalid value (nan) encountered in {prim.name}\n(found by re-running jitted function "
        f"{name} op by op after it returned a NaN; the equation is {where}.)\n"
        "Set jaxkit.config.update('jax_debug_nans', False) to turn this check off.")


def _first_nan_eqn(jaxpr: core.Jaxpr, consts: Sequence, args: Sequence):
    """Evaluate ``jaxpr`` eagerly; return (primitive, equation text) of the first equation
    with a NaN output that none of its inputs had, or None."""
    env: dict = {}

    def read(v):
        return v.val if type(v) is core.Literal else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        outs = eqn.primitive.bind(*invals, **eqn.params)
        outs = list(outs) if eqn.primitive.multiple_results else [outs]
        if any(_has_nan(x) for x in outs) and not any(_has_nan(x) for x in invals):
            inner = _call_body(eqn)
            if inner is not None:
                found = _first_nan_eqn(inner.jaxpr, inner.consts, invals)
                if found is not None:
                    return found
            return eqn.primitive, str(eqn)
        env.update(zip(eqn.outvars, outs))
    return None


def _call_body(eqn: core.JaxprEqn) -> core.ClosedJaxpr | None:
    """The jaxpr of a call-like equation (``jit``): one that applies a ``jaxpr`` parameter to
    exactly the equation's inputs."""
    body = eqn.params.get("jaxpr")
    if isinstance(body, core.ClosedJaxpr) and len(body.in_avals) == len(eqn.invars) and len(
            body.out_avals) == len(eqn.outvars):
        return body
    return None
