"""``lift_jvp``: the JVP function of a ``custom_jvp`` call rebuilt from JAX's form of its rule,
a ``jvp_jaxpr_fun`` (exported by ``jax.experimental.sparse.transform``, whose custom_jvp rule
uses it, and by checkify).

``jvp_jaxpr_fun`` is a wrapped function (``linear_util.WrappedFun``) that, given which input
tangents are symbolic zeros, returns ``(jvp_jaxpr, consts, out_zeros)``: a jaxpr taking the
primals then the nonzero tangents and giving the primal outputs then the nonzero output
tangents, and which output tangents are zero. The lifted function takes
``(*consts, *primals, *const_tangents, *tangents)`` (``num_consts`` leading constants, whose
tangents it ignores), with ``SymbolicZero`` for zero tangents, and returns
``[*primal_outs, *tangent_outs]``, a zero output tangent as a ``SymbolicZero``.
"""
from __future__ import annotations

from typing import Any

from jaxkit import core
from jaxkit._util import split_list
from jaxkit.transforms.custom_derivatives import SymbolicZero

__all__ = ["lift_jvp"]


def lift_jvp(num_consts: int, jvp_jaxpr_fun: Any) -> Any:
    """The JVP function of a rule given as ``jvp_jaxpr_fun`` (see the module docstring), as a
    wrapped function of the same kind."""
    def jvp(*xs):
        n, ragged = divmod(len(xs), 2)
        if ragged:
            raise TypeError(f"lift_jvp: the lifted JVP takes as many tangents as primals, got "
                            f"{len(xs)} arguments")
        primals, tangents = xs[num_consts:n], xs[n + num_consts:]
        zeros = [type(t) is SymbolicZero for t in tangents]
        jvp_jaxpr, jvp_consts, out_zeros = jvp_jaxpr_fun.call_wrapped(*zeros)
        nonzero = [t for t in tangents if type(t) is not SymbolicZero]
        out = core.eval_jaxpr(jvp_jaxpr, jvp_consts, *primals, *nonzero)
        out_primals, nz_out_tangents = split_list(out, [len(out_zeros)])
        if len(nz_out_tangents) != sum(not z for z in out_zeros):
            raise ValueError(f"lift_jvp: the jvp jaxpr gives {len(nz_out_tangents)} tangents "
                             f"where out_zeros says {sum(not z for z in out_zeros)} are nonzero")
        nz = iter(nz_out_tangents)
        out_tangents = [SymbolicZero(core.get_aval(p).to_tangent_aval()) if z else next(nz)
                        for p, z in zip(out_primals, out_zeros)]
        return [*out_primals, *out_tangents]
    # The same class as the rule's (jaxkit's WrappedFun lives in jaxkit.extend, a layer above
    # the transformations, so it is not imported here).
    return type(jvp_jaxpr_fun)(jvp, debug_info=jvp_jaxpr_fun.debug_info)
