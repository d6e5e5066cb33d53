"""Folding a jaxpr's picture by name scope: one node per ``jax.named_scope`` (a Flax layer).

In JAX a named scope leaves no nested jaxpr: it only names equations
(``eqn.source_info.name_stack``, e.g. ``MLP/Dense_0`` or ``jvp(MLP)/Dense_0``). For the
picture, ``fold_scopes`` rewrites a jaxpr so that each run of consecutive equations sharing a
scope becomes one equation of the ``scope`` pseudo-primitive holding those equations as a
jaxpr (recursively, for scopes inside scopes). The graph and the folded view then treat it
like any equation holding a jaxpr (a ``jit``): one node, unfoldable, drawn in its section.

The rewrite keeps the original variables, so the picture still names them as the jaxpr text
does. It is only ever drawn, never run: ``scope`` has no rules.
"""
from __future__ import annotations

from jaxkit import core
from jaxkit.extend.source_info_util import Transform

__all__ = ["fold_scopes", "scope_components", "scope_p", "scope_size"]

# The pseudo-primitive of a folded scope: params ``name`` (the scope as printed) and
# ``jaxpr`` (its equations).
scope_p = core.Primitive("scope")
scope_p.multiple_results = True


def scope_components(eqn: core.JaxprEqn) -> list[str]:
    """The scopes of the equation's name stack as printed, outermost first:
    ``jvp(MLP)/Dense_0`` -> ``["jvp(MLP)", "Dense_0"]``. A transformation with no scope
    inside (``jvp()``, which every equation under ``grad`` has) names nothing the user
    chose, so it is left out: ``transpose(jvp())`` -> ``[]``."""
    info = eqn.source_info
    stack = getattr(getattr(info, "name_stack", None), "stack", ())
    parts: list[tuple[str, bool]] = []  # (printed part, holds a scope)
    for elem in stack[::-1]:  # innermost first: a transformation wraps the part inside it
        if isinstance(elem, Transform):
            if parts:
                inner, named = parts[-1]
                parts[-1] = (f"{elem.name}({inner})", named)
            else:
                parts.append((f"{elem.name}()", False))
        else:
            parts.append((elem.name, True))
    return [text for text, named in parts[::-1] if named]


def scope_size(eqn: core.JaxprEqn) -> int:
    """How many of the jaxpr's own equations a folded ``scope`` equation stands for."""
    return sum(scope_size(e) if e.primitive is scope_p else 1
               for e in eqn.params["jaxpr"].eqns)


def fold_scopes(jaxpr: core.Jaxpr | core.ClosedJaxpr) -> core.Jaxpr:
    """``jaxpr`` with each run of (two or more) consecutive equations in one scope folded
    into a ``scope`` equation; ``jaxpr`` itself when no scope folds. The jaxprs held by
    equations (a ``jit``'s) are folded too."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    return _Folder().fold(jaxpr)


class _Folder:
    """One fold: a jaxpr held by several equations is folded once (the folded view draws a
    jaxpr object once and links its other uses there)."""

    def __init__(self):
        self.done: dict[int, tuple[core.Jaxpr, core.Jaxpr]] = {}

    def fold(self, jaxpr: core.Jaxpr) -> core.Jaxpr:
        hit = self.done.get(id(jaxpr))
        if hit is not None:
            return hit[1]
        eqns = [self._fold_params(e) for e in jaxpr.eqns]
        parts = [scope_components(e) for e in jaxpr.eqns]
        folded = self._group(eqns, parts, 0, set(jaxpr.outvars))
        if folded == jaxpr.eqns:
            out = jaxpr
        else:
            out = core.Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, folded,
                             debug_info=jaxpr.debug_info)
        self.done[id(jaxpr)] = (jaxpr, out)  # the key object is kept alive with its id
        return out

    def _fold_params(self, eqn: core.JaxprEqn) -> core.JaxprEqn:
        """``eqn`` with the jaxprs among its parameters folded (itself if none changes)."""
        params, changed = {}, False
        for key, value in eqn.params.items():
            items = value if isinstance(value, (tuple, list)) else (value,)
            new = [self._fold_one(item) for item in items]
            if any(n is not o for n, o in zip(new, items)):
                changed = True
                value = type(value)(new) if isinstance(value, (tuple, list)) else new[0]
            params[key] = value
        return eqn.replace(params=params) if changed else eqn

    def _fold_one(self, item):
        if isinstance(item, core.ClosedJaxpr):
            inner = self.fold(item.jaxpr)
            return item if inner is item.jaxpr else core.ClosedJaxpr(inner, item.consts)
        if isinstance(item, core.Jaxpr):
            return self.fold(item)
        return item

    def _group(self, eqns: list, parts: list[list[str]], depth: int, live_out: set) -> list:
        """Fold the runs of ``eqns`` that share their scope part at ``depth``. A level where
        every equation is in one scope (a whole Flax model) is skipped: one node would
        show nothing. ``live_out``: variables read after these equations."""
        while eqns and all(len(p) > depth and p[depth] == parts[0][depth] for p in parts):
            depth += 1
        # Which later equation (or the outputs) reads each variable, to find a run's outputs.
        last_use: dict = {}
        for k, e in enumerate(eqns):
            for a in e.invars:
                if type(a) is core.Var:
                    last_use[a] = k
        out, k = [], 0
        while k < len(eqns):
            name = parts[k][depth] if len(parts[k]) > depth else None
            end = k + 1
            while name is not None and end < len(eqns) and len(parts[end]) > depth \
                    and parts[end][depth] == name:
                end += 1
            if name is None or end - k < 2:
                out.append(eqns[k])
                k += 1
                continue
            out.append(self._scope_eqn(name, eqns[k:end], parts[k:end], depth, end,
                                       last_use, live_out))
            k = end
        return out

    def _scope_eqn(self, name: str, run: list, parts: list, depth: int, end: int,
                   last_use: dict, live_out: set) -> core.JaxprEqn:
        defined = {v for e in run for v in e.outvars}
        invars: list = []
        seen: set = set()
        for e in run:
            for a in e.invars:
                if type(a) is core.Var and a not in defined and a not in seen:
                    seen.add(a)
                    invars.append(a)
        outvars = [v for e in run for v in e.outvars
                   if type(v) is core.Var and (last_use.get(v, -1) >= end or v in live_out)]
        inner_live = live_out | set(outvars)
        inner = core.Jaxpr([], invars, outvars,
                           self._group(run, parts, depth + 1, inner_live))
        return core.JaxprEqn(list(invars), list(outvars), scope_p,
                             {"name": name, "jaxpr": inner})
