"""Which values of a kernel may differ between the devices running it, and the check that
remote operations do not sit under a condition that does.

Interpret mode makes a remote copy or signal a collective that every device of the mesh runs
(``semaphores.py``). Under a ``pl.when``/``lax.cond`` whose condition differs between
devices, some devices would wait in that collective for others that never come, and XLA
aborts the process. ``check_remote_ops_uniform`` finds such a condition in the kernel's jaxpr
first and raises a Python error naming the fix.

A value is *device-varying* when it depends on ``lax.axis_index`` of a device axis or on the
contents of a ref (each device's operands and buffers are its own); grid indices
(``program_id``, a core map's axis) and constants are the same on every device.
"""
from __future__ import annotations

import weakref

from jaxkit import core
from jaxkit.lax.cond import cond_p
from jaxkit.lax.loops import scan_p, while_p
from jaxkit.lax.parallel import all_gather_p, axis_index_p

__all__ = ["check_remote_ops_uniform"]

_MESSAGE = ("a remote copy or semaphore signal (device_id=...) in {where} may differ between "
            "devices is not implemented in jaxkit's interpret mode: every device runs it as a "
            "collective. Make it the same on every device (program ids, constants), or start "
            "the copy unconditionally")

_has_collective_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _has_collective(jaxpr: core.Jaxpr) -> bool:
    found = _has_collective_cache.get(jaxpr)
    if found is None:
        found = any(e.primitive is all_gather_p or any(_has_collective(s) for s in
                                                       core.subjaxprs(e.params))
                    for e in jaxpr.eqns)
        _has_collective_cache[jaxpr] = found
    return found


def check_remote_ops_uniform(jaxpr: core.Jaxpr, grid_names: tuple = ()) -> None:
    """Raise if a remote copy or signal of the kernel ``jaxpr`` (whose inputs are refs) is
    under a condition that may differ between devices."""
    if _has_collective(jaxpr):
        _walk(jaxpr, [True] * len(jaxpr.constvars + jaxpr.invars), frozenset(grid_names))


def _varying(a, varying: set) -> bool:
    return type(a) is core.Var and a in varying


def _walk(jaxpr: core.Jaxpr, flags: list, local: frozenset) -> list[bool]:
    """Walk ``jaxpr`` whose inputs (constvars then invars) vary as ``flags`` say; return
    which of its outputs vary."""
    varying = {v for v, f in zip(jaxpr.constvars + jaxpr.invars, flags) if f}
    for eqn in jaxpr.eqns:
        ins = [_varying(a, varying) for a in eqn.invars]
        if eqn.primitive is cond_p:
            branches = eqn.params["branches"]
            if ins[0] and any(_has_collective(b.jaxpr) for b in branches):
                raise NotImplementedError(_MESSAGE.format(where="a pl.when or lax.cond whose "
                                                          "condition"))
            outs = [ins[0]] * len(eqn.outvars)
            for b in branches:
                outs = [x or y for x, y in zip(outs, _walk_closed(b, ins[1:], local))]
        elif eqn.primitive is while_p:
            nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
            carry = _fixpoint(eqn.params["body_jaxpr"], ins[nc:nc + nb], ins[nc + nb:], local)
            cond_out = _walk_closed(eqn.params["cond_jaxpr"], ins[:nc] + carry, local)
            if cond_out[0] and _has_collective(eqn.params["body_jaxpr"].jaxpr):
                raise NotImplementedError(_MESSAGE.format(where="a loop whose number of "
                                                          "steps"))
            outs = [c or cond_out[0] for c in carry]
        elif eqn.primitive is scan_p:
            k, n = eqn.params["num_consts"], eqn.params["num_carry"]
            body = eqn.params["jaxpr"]
            carry = _fixpoint(body, ins[:k], ins[k:k + n], local, xs=ins[k + n:])
            outs = carry + _walk_closed(body, ins[:k] + carry + ins[k + n:], local)[n:]
        else:
            subs = list(core.subjaxprs(eqn.params))
            if len(subs) == 1 and len(subs[0].constvars + subs[0].invars) == len(ins):
                outs = _walk(subs[0], ins, local)  # a call: its body, operand for operand
            else:
                for s in subs:  # not followed operand by operand: all its inputs may vary
                    _walk(s, [True] * len(s.constvars + s.invars), local)
                source = eqn.primitive is axis_index_p and eqn.params["axis_name"] not in local
                outs = [any(ins) or source or bool(subs)] * len(eqn.outvars)
        varying.update(v for v, f in zip(eqn.outvars, outs) if f)
    return [_varying(v, varying) for v in jaxpr.outvars]


def _walk_closed(closed: core.ClosedJaxpr, ins: list, local: frozenset) -> list[bool]:
    # a closed jaxpr's own constants are the same everywhere
    return _walk(closed.jaxpr, [False] * len(closed.jaxpr.constvars) + list(ins), local)


def _fixpoint(body: core.ClosedJaxpr, consts: list, carry: list, local: frozenset,
              xs: list = ()) -> list[bool]:
    # a loop's carry varies if it starts varying or an iteration makes it vary
    carry = list(carry)
    while True:
        outs = _walk_closed(body, consts + carry + list(xs), local)[:len(carry)]
        new = [c or o for c, o in zip(carry, outs)]
        if new == carry:
            return carry
        carry = new
