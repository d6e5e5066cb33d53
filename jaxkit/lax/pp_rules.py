"""How jaxprs print the parameters of some primitives, as JAX 0.10.2 prints them: dot
dimension numbers as lists, and parameters JAX does not show (an unset ``out_dtype``, a
conversion's ``sharding``). One table, so the primitives' blocks stay about
their semantics."""
from __future__ import annotations

from jaxkit import core
from jaxkit.lax.convert import convert_element_type_p
from jaxkit.lax.dot import dot_general_p
from jaxkit.lax.elementwise import mul_p


def _dot_general(params: dict) -> dict:
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    # JAX leaves out the parameters that are None (precision, preferred_element_type), and
    # out_sharding, which the result's type shows.
    out = {k: v for k, v in params.items() if v is not None and k != "out_sharding"}
    out["dimension_numbers"] = ((list(lc), list(rc)), (list(lb), list(rb)))
    return dict(sorted(out.items()))


def _without_none(*names):
    def rule(params: dict) -> dict:  # JAX shows these only when set
        return dict(sorted((k, v) for k, v in params.items() if k not in names or v is not None))
    return rule


core.defpp_params(mul_p, _without_none("out_dtype"))
core.defpp_params(convert_element_type_p,  # the binder's type shows it
                  lambda params: {k: v for k, v in sorted(params.items()) if k != "sharding"})
core.defpp_params(dot_general_p, _dot_general)
