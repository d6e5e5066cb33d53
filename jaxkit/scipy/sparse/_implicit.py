"""Implicit differentiation of an iterative linear solve ``x = A^{-1} b``, standing in for
``lax.custom_linear_solve`` until that primitive exists: the solver's ``while`` loops are never
differentiated; the VJP solves the transposed system ``A^T lam = x_bar`` and gives
``b_bar = lam`` and, for the operator's closed-over arrays, ``-lam^T (dA/dtheta) x``.
Reverse mode only (a ``custom_vjp``); forward mode raises, as for any ``custom_vjp``."""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from jaxkit import tree_util
from jaxkit.api import vjp
from jaxkit.transforms.custom_derivatives import closure_convert
from jaxkit.transforms.custom_vjp import custom_vjp


def linear_solve(matvec: Callable, b, x0, solve: Callable, symmetric: bool = False):
    """``solve(matvec, b, x0)`` with gradients with respect to ``b`` and the arrays ``matvec``
    closes over (``x0`` only starts the iteration: it gets no gradient)."""
    converted, consts = closure_convert(matvec, b)

    def apply(consts, v):
        return converted(v, *consts)

    @partial(custom_vjp, nondiff_argnums=())
    def solved(consts, b, x0):
        return solve(partial(apply, consts), b, x0)

    def fwd(consts, b, x0):
        x = solved(consts, b, x0)
        return x, (consts, x, x0)

    def bwd(res, x_bar):
        consts, x, x0 = res
        if symmetric:
            transposed = partial(apply, consts)
        else:
            _, pullback = vjp(partial(apply, consts), x)
            transposed = lambda v: pullback(v)[0]  # noqa: E731
        lam = solve(transposed, x_bar, x0)
        _, pullback_consts = vjp(lambda c: apply(c, x), consts)
        consts_bar, = pullback_consts(lam)
        consts_bar = tree_util.tree_map(lambda t: -t, consts_bar)
        return consts_bar, lam, tree_util.tree_map(lambda t: t * 0, x0)

    solved.defvjp(fwd, bwd)
    return solved(list(consts), b, x0)
