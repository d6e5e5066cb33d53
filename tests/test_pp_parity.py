"""Jaxprs print as JAX 0.10.2 prints them: the same text for the same program, one record per
construct whose printing has rules of its own (nested ``jit`` bodies named like their
equation, ``cond``/``scan`` bodies continuing the names, ``custom_jvp``/``custom_vjp`` calls
with the name first)."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit

jax = pytest.importorskip("jax")

X = np.linspace(-2.0, 2.0, 8, dtype=np.float32)


def _custom_vjp(J):
    @J.custom_vjp
    def f(x):
        return x * 2

    f.defvjp(lambda x: (f(x), None), lambda r, g: (g * 2,))
    return f


def _custom_jvp(J):
    @J.custom_jvp
    def g(x, y):
        return x * y

    g.defjvp(lambda p, t: (g(*p), t[0] * p[1] + t[1] * p[0]))
    return lambda x: g(x, x)


# (name, make(J) -> function of X), J being jax or jaxkit
RECORDS = [
    ("jit_swapped_operands", lambda J: lambda x: J.jit(lambda a, b: (b, a * 2))(x + 1, x)),
    ("jit_nested", lambda J: lambda x: J.jit(lambda a: J.jit(lambda b: b * a)(a + 1))(x)),
    ("jit_in_jit_twice", lambda J: lambda x: J.jit(lambda a: a * 2)(J.jit(lambda b: b + 1)(x))),
    ("cond", lambda J: lambda x: J.lax.cond(x[0] > 0, lambda a, b: a * b, lambda a, b: a + b,
                                            x + 1, x)),
    ("scan", lambda J: lambda x: J.lax.scan(lambda c, a: (c + a, c * a), x[0], x)),
    ("custom_vjp", lambda J: _custom_vjp(J)),
    ("custom_jvp", lambda J: _custom_jvp(J)),
    ("relu", lambda J: J.nn.relu),
    ("selu_outer", lambda J: lambda x: J.jit(lambda y: y * 3)(x) + 1),
]


@pytest.mark.parametrize("make", [r[1] for r in RECORDS], ids=[r[0] for r in RECORDS])
def test_jaxpr_text_matches_jax(make):
    assert str(jaxkit.make_jaxpr(make(jaxkit))(X)) == str(jax.make_jaxpr(make(jax))(X))
