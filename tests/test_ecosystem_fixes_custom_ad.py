"""Regression tests for the causes of Flax test-suite failures in ``custom_jvp`` and
``custom_vjp`` on jaxkit (``bench/ecosystem_tests.py``), each checked against the JAX oracle:
default values of non-differentiated arguments, a backward rule run on all-zero cotangents,
the cotangent forms nnx's ``custom_vjp`` returns, and the trace the forward rule runs at.
The other causes are in ``test_ecosystem_fixes.py``.
"""
import functools

import numpy as np
import pytest

import jaxkit


def _oracle():
    return pytest.importorskip("jax")


# --------------------------------------------------------------------------------------------
# Flax linen_test: custom_jvp nondiff_argnums naming a parameter left to its default
# (fp8_ops.dot_general_with_precision), and custom_vjp's bwd run even when its cotangents
# are all zero (Fp8DirectDotGeneralOp passes its amax history out of bwd: test_fp8_train_state)
# --------------------------------------------------------------------------------------------

def _custom_jvp_default_nondiff(m):
    @functools.partial(m.custom_jvp, nondiff_argnums=(1, 2))
    def f(x, p=None, q=3.0, r=2.0):
        return x * q * r

    @f.defjvp
    def f_jvp(p, q, primals, tangents):
        (x, r), (t, tr) = primals, tangents
        return f(x, p, q, r), t * q * 10 + tr
    return [float(m.grad(f)(1.0)), float(m.grad(lambda x: f(x, None, 4.0))(1.0)),
            float(m.grad(lambda x: f(x, q=5.0))(1.0))]


def test_custom_jvp_nondiff_argnums_take_defaults():
    jax = _oracle()
    assert _custom_jvp_default_nondiff(jaxkit) == _custom_jvp_default_nondiff(jax) \
        == [30.0, 40.0, 50.0]


def _custom_vjp_zero_cotangents(m):
    @m.custom_vjp
    def f(x, h):
        return x * 2

    f.defvjp(lambda x, h: (x * 2, h + 10.0), lambda res, g: (None, res))

    @m.custom_vjp
    def cut(y):
        return y

    cut.defvjp(lambda y: (y, None), lambda res, ct: (None,))  # no cotangent flows back
    loss = lambda x, h: cut(f(x, h))  # noqa: E731
    return [float(v) for g in (m.grad(loss, (0, 1)), m.jit(m.grad(loss, (0, 1))))
            for v in g(1.0, 5.0)]


def test_custom_vjp_bwd_runs_on_zero_cotangents():
    jax = _oracle()
    assert _custom_vjp_zero_cotangents(jaxkit) == _custom_vjp_zero_cotangents(jax) \
        == [0.0, 15.0, 0.0, 15.0]


# --------------------------------------------------------------------------------------------
# nnx.custom_vjp (transforms_test TestCustomVJP): bwd's cotangents take JAX's forms (None for
# a subtree or for an empty node such as NodeStates' absent graphdef, one leaf for a whole
# subtree, a list for the tuple), with JAX's errors; the zero cotangent of an unused output
# is an array under jit (nnx assigns into it: m_g['x'][...] = ...); fwd runs at the trace of
# the nested calls it makes (nnx: "Cannot return captured Variable ... from nnx.custom_vjp")
# --------------------------------------------------------------------------------------------

CUSTOM_VJP_BWD_FORMS = [
    lambda g: ({"a": g[0] * 2, "b": None}, (g[1].reshape(()) + 5.0, None)),
    lambda g: [{"a": g[0] * 2, "b": 1.0}, None],
    lambda g: ({"a": g[0] * 2, "b": (None, g[0])}, (g[0] * 3, None)),
    lambda g: ({"a": g[0]},),  # TypeError: too short
    lambda g: g[0],  # TypeError: not a tuple
    lambda g: ({"a": g[0], "b": (1.0, np.ones(2))}, None),  # ValueError: shape at a key path
]


def _custom_vjp_bwd_forms(m):
    x = {"a": np.float32(1.0), "b": (np.float32(2.0), np.float32(3.0))}
    d = (np.float32(4.0), None)
    out = []
    for form in CUSTOM_VJP_BWD_FORMS:
        @m.custom_vjp
        def f(x, d):
            return x["a"] * 2, d[0]

        f.defvjp(lambda x, d: (f(x, d), None), lambda _, g, form=form: form(g))
        try:
            grads = m.jit(m.grad(lambda x, d: f(x, d)[0], (0, 1)))(x, d)
            out.append(m.tree_util.tree_map(float, grads))
        except (TypeError, ValueError) as e:
            out.append((type(e).__name__, str(e)))
    return out


def test_custom_vjp_bwd_output_forms():
    jax = _oracle()
    mine = _custom_vjp_bwd_forms(jaxkit)
    assert mine[0] == ({"a": 2.0, "b": (0.0, 0.0)}, (5.0, None))
    assert mine == _custom_vjp_bwd_forms(jax)


def _custom_vjp_fwd_trace(m):
    state = functools.partial(m.extend.core.get_opaque_trace_state, convention="nnx")
    seen = {}

    @m.custom_vjp
    def inner(x):
        seen["inner"] = state()
        return x * 3

    inner.defvjp(lambda x: (inner(x), None), lambda _, g: (g * 3,))

    @m.custom_vjp
    def f(x):
        return inner(x) * 2

    def f_fwd(x):
        seen["fwd"] = state()
        return inner(x) * 2, x

    f.defvjp(f_fwd, lambda x, g: (g * 2 * x,))
    out = []
    for g in (m.grad(f), m.jit(m.grad(f))):
        out.append((float(g(2.0)), seen["fwd"] == seen["inner"]))
    return out


def test_custom_vjp_fwd_runs_at_the_trace_of_its_nested_calls():
    jax = _oracle()
    pytest.importorskip("jax.extend")
    assert _custom_vjp_fwd_trace(jaxkit) == _custom_vjp_fwd_trace(jax) == [(4.0, True),
                                                                          (4.0, False)]
