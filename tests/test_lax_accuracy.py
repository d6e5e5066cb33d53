"""The ``accuracy=`` of lax's transcendental functions, against JAX 0.10.2: the equation's
``accuracy`` parameter (printed only when set), derivatives and batching through it, and the
``result_accuracy`` attribute of the lowered op."""
from __future__ import annotations

import re

import numpy as np
import pytest

import jaxkit

jax = pytest.importorskip("jax")

NAMES = ["exp", "exp2", "log", "expm1", "log1p", "tanh", "logistic", "sin", "cos", "tan",
         "sqrt", "rsqrt", "cbrt"]
ACCURACIES = ["none", "highest", "tolerance"]


def _accuracy(j, which):
    return {"none": None, "highest": j.lax.AccuracyMode.HIGHEST,
            "tolerance": j.lax.Tolerance(atol=1e-5, rtol=0.0, ulps=2)}[which]


def _report(j, name, which):
    f, acc = getattr(j.lax, name), _accuracy(j, which)

    def g(x):
        return f(x, accuracy=acc)

    def text(closed):  # the Tolerance's class path is each library's own
        return str(closed).replace("jax._src.lax.lax.", "").replace(
            "jaxkit.lax.dot_algorithms.", "")

    hlo = j.jit(g).lower(0.5).as_text()
    return (text(j.make_jaxpr(g)(0.5)), text(j.make_jaxpr(j.grad(g))(0.5)),
            float(g(0.5)), float(j.grad(g)(0.5)),
            np.asarray(j.vmap(g)(j.numpy.array([0.5, 0.25]))).tolist(),
            # the attribute, without the SSA names (JAX's lowering also leaves a dead op)
            [re.sub(r"%\w+", "%", line.strip()) for line in hlo.splitlines()
             if "result_accuracy" in line],
            sorted(j.make_jaxpr(f)(0.5).eqns[0].params))


@pytest.mark.parametrize("which", ACCURACIES)
@pytest.mark.parametrize("name", NAMES)
def test_accuracy_as_jax(name, which):
    assert _report(jaxkit, name, which) == _report(jax, name, which)


def test_unsupported_accuracy_is_refused():
    with pytest.raises(NotImplementedError, match="Accuracy 3 not supported"):
        jaxkit.lax.exp(1.0, accuracy=3)
