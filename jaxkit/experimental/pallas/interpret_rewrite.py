"""What JAX's TPU interpreter (``interpret=pltpu.InterpretParams()``) does differently from
plain interpret mode: some TPU-only primitives get an interpretation there
(``tpu_interpreter_rules``: the PRNG's seed does nothing, its bits are zeros). The kernel's
jaxpr is rewritten once before interpreting it, replacing those primitives in its body and
in the bodies of its control flow (``cond``, ``while``, ``scan``), the places that interpreter
enters; calls (``jit``) are left as they are, as there."""
from __future__ import annotations

import weakref
from collections.abc import Callable

from jaxkit import core
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax.cond import cond_p
from jaxkit.lax.loops import scan_p, while_p

__all__ = ["for_tpu_interpreter", "tpu_interpreter_rules"]

# primitive -> rule(*args, **params) -> outputs (a list for a multiple-results primitive)
tpu_interpreter_rules: dict[core.Primitive, Callable] = {}

_entered = (cond_p, while_p, scan_p)
_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _uses_rules(jaxpr: core.Jaxpr) -> bool:
    return any(e.primitive in tpu_interpreter_rules
               or (e.primitive in _entered and any(map(_uses_rules, core.subjaxprs(e.params))))
               for e in jaxpr.eqns)


def _eval(jaxpr: core.Jaxpr, consts, *args) -> list:
    env = dict(zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args]))

    def read(a):
        return a.val if type(a) is core.Literal else env[a]

    for eqn in jaxpr.eqns:
        vals = [read(a) for a in eqn.invars]
        rule = tpu_interpreter_rules.get(eqn.primitive)
        if rule is not None:
            outs = rule(*vals, **eqn.params)
        else:
            params = eqn.params
            if eqn.primitive in _entered:
                params = {k: _rewrite_param(v) for k, v in params.items()}
            outs = eqn.primitive.bind(*vals, **params)
        env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]))
    return [read(v) for v in jaxpr.outvars]


def _rewrite_closed(closed: core.ClosedJaxpr) -> core.ClosedJaxpr:
    if not _uses_rules(closed.jaxpr):
        return closed
    jaxpr, consts = pe.trace_to_jaxpr(lambda *a: _eval(closed.jaxpr, closed.consts, *a),
                                      closed.in_avals)
    return core.ClosedJaxpr(jaxpr, consts)


def _rewrite_param(value):
    if isinstance(value, core.ClosedJaxpr):
        return _rewrite_closed(value)
    if isinstance(value, tuple) and value and all(isinstance(v, core.ClosedJaxpr)
                                                  for v in value):
        return tuple(map(_rewrite_closed, value))
    return value


def for_tpu_interpreter(jaxpr: core.Jaxpr) -> core.Jaxpr:
    """``jaxpr`` (a kernel, no constvars) as JAX's TPU interpreter runs it."""
    found = _cache.get(jaxpr)
    if found is None:
        found = jaxpr
        if _uses_rules(jaxpr):
            found, consts = pe.trace_to_jaxpr(lambda *a: _eval(jaxpr, [], *a),
                                              [v.aval for v in jaxpr.invars], jaxpr.debug_info)
            assert not consts, consts
        _cache[jaxpr] = found
    return found
