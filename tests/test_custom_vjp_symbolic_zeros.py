"""``custom_vjp.defvjp(fwd, bwd, symbolic_zeros=True)`` against JAX: the forward rule gets
``CustomVJPPrimal``s saying which arguments are perturbed, the backward rule gets
``SymbolicZero``s for the cotangents known to be zero and may return ``None`` for an
argument; under ``grad``, ``jit``, ``vmap`` and with ``nondiff_argnums``. Each record runs on
both sides and records what the rules saw (types, flags, the zeros' types) and the result."""
import jax
import numpy as np
import pytest
from jax import custom_derivatives as jcd

import jaxkit
from jaxkit import custom_derivatives as kcd

SIDES = {"jax": (jax, jcd), "jaxkit": (jaxkit, kcd)}


def _make(J, cd, seen, nondiff=False):
    def describe(x):
        if type(x) is cd.SymbolicZero:
            return f"SymbolicZero({x.aval!r})"
        return "value"

    def f(x, y, k=None):
        return x * y, x + y

    def fwd(x, y, k=None):
        seen.append(("fwd", type(x).__name__, x.perturbed, y.perturbed))
        return f(x.value, y.value), (x.value, y.value)

    def bwd(*args):
        res, (g1, g2) = args[-2:]
        seen.append(("bwd", describe(g1), describe(g2)))
        gx = 0.0
        if type(g1) is not cd.SymbolicZero:
            gx = gx + g1 * res[1]
        if type(g2) is not cd.SymbolicZero:
            gx = gx + g2
        return (gx, None)

    if nondiff:
        g = J.custom_vjp(lambda k, x, y: f(x, y), nondiff_argnums=(0,))
        g.defvjp(lambda k, x, y: fwd(x, y), lambda k, res, g: bwd(res, g),
                 symbolic_zeros=True)
        return lambda x, y: g("key", x, y)
    g = J.custom_vjp(f)
    g.defvjp(fwd, bwd, symbolic_zeros=True)
    return g


CASES = {
    "grad_first_output": lambda J, f: J.grad(lambda x, y: f(x, y)[0])(2.0, 3.0),
    "grad_both_args": lambda J, f: J.grad(lambda x, y: f(x, y)[0], argnums=(0, 1))(2.0, 3.0),
    "grad_second_output": lambda J, f: J.grad(lambda x, y: f(x, y)[1])(2.0, 3.0),
    "grad_sum": lambda J, f: J.value_and_grad(lambda x: sum(f(x, 3.0)))(2.0),
    "jit_grad": lambda J, f: J.jit(J.grad(lambda x, y: f(x, y)[0]))(2.0, 3.0),
    "vmap_grad": lambda J, f: J.vmap(J.grad(lambda x, y: f(x, y)[0]))(np.ones(2, np.float32),
                                                                     np.ones(2, np.float32)),
    "no_derivative": lambda J, f: f(2.0, 3.0),
    "vjp_unperturbed_y": lambda J, f: J.vjp(lambda x: f(x, 3.0), 2.0)[1]((1.0, 0.0)),
}


def _run(name, side, nondiff=False):
    J, cd = SIDES[side]
    seen = []
    try:
        out = CASES[name](J, _make(J, cd, seen, nondiff))
        return seen, repr(jax.tree.map(np.asarray, out))
    except Exception as e:  # noqa: BLE001 - compared
        return seen, f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("nondiff", [False, True])
@pytest.mark.parametrize("name", CASES)
def test_symbolic_zeros_as_in_jax(name, nondiff):
    assert _run(name, "jaxkit", nondiff) == _run(name, "jax", nondiff)


def test_rule_attributes_as_in_jax():
    for J, _ in SIDES.values():
        f = J.custom_vjp(lambda x: x)
        assert (f.symbolic_zeros, f.optimize_remat) == (False, False)
        f.defvjp(lambda x: (x, None), lambda r, g: (g,), symbolic_zeros=True)
        assert f.symbolic_zeros is True
