"""``jax.custom_derivatives``: the public names of user-defined derivatives, ``linear_call``
(a linear function with a user-given transpose) and ``zero_from_primal``."""
from __future__ import annotations

from typing import Any

from jaxkit import core
from jaxkit import tree_util
from jaxkit.api_extra import custom_gradient
from jaxkit.interpreters import ad
from jaxkit.transforms.custom_derivatives import (SymbolicZero, closure_convert,
                                                  custom_jvp, custom_jvp_call_p)
from jaxkit.transforms.custom_vjp import CustomVJPPrimal, custom_vjp, custom_vjp_call_p
from jaxkit.transforms.linear_call import linear_call
from jaxkit.transforms.remat_opt import remat_opt_p

__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp",
           "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p",
           "custom_vjp_primal_tree_values", "linear_call", "remat_opt_p",
           "zero_from_primal"]


def zero_from_primal(val: Any, symbolic_zeros: bool = False) -> Any:
    """The zero tangent of each leaf of ``val``: an array of zeros of the leaf's tangent type
    (``float0`` for integers and booleans) or, with ``symbolic_zeros``, a ``SymbolicZero``
    (what a ``custom_jvp`` rule with ``symbolic_zeros=True`` may return for an output)."""
    def zero(x):
        aval = core.get_aval(x).to_tangent_aval()
        return SymbolicZero(aval) if symbolic_zeros else ad.zeros_like_aval(aval)
    return tree_util.tree_map(zero, val)


def custom_vjp_primal_tree_values(tree: Any) -> Any:
    """``tree`` with each ``CustomVJPPrimal`` leaf replaced by its ``value`` (what a
    ``symbolic_zeros`` forward rule does to get its plain arguments back)."""
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return tree_util.tree_map(value, tree)
