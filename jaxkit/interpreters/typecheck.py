"""The jaxpr type checker: every variable bound once before use, every equation's declared
output types what its primitive's abstract evaluation rule gives (nested jaxprs included)."""
from __future__ import annotations

from jaxkit.core import (Atom, DropVar, Jaxpr, JaxprTypeError, Literal, ShapedArray, Var,
                         Namer, subjaxprs, typematch)


def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Check that every variable is bound once before use and every equation is well typed."""
    namer = Namer()
    defined: set[Var] = set()

    def bind(v: Var, where: str):
        if isinstance(v, DropVar):
            return
        if v in defined:
            raise JaxprTypeError(f"variable {namer(v)} is bound twice ({where})")
        defined.add(v)

    def read(a: Atom, where: str) -> ShapedArray:
        if type(a) is Literal:
            return a.aval
        if a not in defined:
            raise JaxprTypeError(f"variable {namer(a)} is used before it is bound ({where})")
        return a.aval

    for v in jaxpr.constvars:
        bind(v, "constvars")
    for v in jaxpr.invars:
        bind(v, "invars")
    for i, eqn in enumerate(jaxpr.eqns):
        where = f"equation {i}: {eqn.primitive.name}"
        in_avals = [read(a, where) for a in eqn.invars]
        for sub in subjaxprs(eqn.params):
            check_jaxpr(sub)
        out = eqn.primitive.abstract_eval(*in_avals, **eqn.params)
        out = list(out) if eqn.primitive.multiple_results else [out]
        if len(out) != len(eqn.outvars):
            raise JaxprTypeError(f"{where} produces {len(out)} values but binds "
                                 f"{len(eqn.outvars)}")
        for v, aval in zip(eqn.outvars, out):
            if not typematch(v.aval, aval):
                raise JaxprTypeError(f"{where}: output {namer(v)} is declared "
                                     f"{v.aval.str_short()} but the rule gives "
                                     f"{aval.str_short()}")
            bind(v, where)
    for a in jaxpr.outvars:
        read(a, "outvars")
