"""How jaxprs print the parameters of some primitives, as JAX 0.10.2 prints them: sharding
parameters JAX has and jaxkit does not (always ``None`` here), dot dimension numbers as
lists, and parameters JAX does not show. One table, so the primitives' blocks stay about
their semantics."""
from __future__ import annotations

from jaxkit import core
from jaxkit.lax.convolution import conv_general_dilated_p
from jaxkit.lax.dot import dot_general_p
from jaxkit.lax.loops import scan_p
from jaxkit.lax.reductions import reduce_sum_p
from jaxkit.lax.structural import iota_p, reshape_p


def _with(**extra):
    def rule(params: dict) -> dict:
        return dict(sorted({**extra, **params}.items()))  # a given parameter is shown
    return rule


def _dot_general(params: dict) -> dict:
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    # JAX leaves out the parameters that are None (precision, preferred_element_type), and
    # out_sharding, which the result's type shows.
    out = {k: v for k, v in params.items() if v is not None and k != "out_sharding"}
    out["dimension_numbers"] = ((list(lc), list(rc)), (list(lb), list(rb)))
    return dict(sorted(out.items()))


def _scan(params: dict) -> dict:
    return dict(sorted((k, v) for k, v in params.items() if k != "linear"))


core.defpp_params(conv_general_dilated_p, _with(out_sharding=None))
core.defpp_params(reduce_sum_p, _with(out_sharding=None))
core.defpp_params(iota_p, _with(sharding=None))
core.defpp_params(reshape_p, _with(sharding=None))
core.defpp_params(dot_general_p, _dot_general)
core.defpp_params(scan_p, _scan)
