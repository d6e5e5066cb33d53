"""``jaxkit.custom_derivatives.linear_call`` and ``zero_from_primal`` against the JAX oracle:
one record per linear function; each is checked eagerly, under ``jit``, ``jvp``, ``grad``,
``linear_transpose`` (which must use the custom transpose) and transposed twice; then the
errors."""
from __future__ import annotations

import types

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit import custom_derivatives as kcd

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax import custom_derivatives as jcd  # noqa: E402

KIT = types.SimpleNamespace(jax=jaxkit, jnp=kjnp, cd=kcd)
JAX = types.SimpleNamespace(jax=jax, jnp=jjnp, cd=jcd)


def _div_add(m):
    # JAX's documentation example: x + x / denom, transposed by a custom rule.
    return lambda x: x + m.cd.linear_call(lambda r, x: x / r, lambda r, t: t / r, 3.0, x)


def _custom_id(m):
    # A deliberately "wrong" transpose (the constant 7), which transposition must use.
    return lambda x: m.cd.linear_call(lambda _, x: x, lambda _, t: 7.0 * m.jnp.ones_like(t),
                                      (), x)


def _matvec(m):
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    return lambda x: m.cd.linear_call(lambda a, x: a @ x, lambda a, ct: a.T @ ct, a, x)


def _pytree(m):
    def fun(r, lin):
        return {"s": lin[0] * r["k"] + lin[1].sum(), "v": lin[1] * r["k"]}

    def fun_t(r, ct):
        return (ct["s"] * r["k"], ct["s"] + ct["v"] * r["k"])

    k = np.float32(1.5)
    return lambda x: m.cd.linear_call(fun, fun_t, {"k": k}, (x[0], x))["v"] * 2.0


X3 = np.array([1.0, -2.0, 0.5], np.float32)

# (name, make(m) -> f, primal example, whether the transpose is the true one)
RECORDS = [
    ("div_add", _div_add, np.float32(2.0), True),
    ("custom_id", _custom_id, np.float32(1.0), False),
    ("matvec", _matvec, X3, True),
    ("pytree", _pytree, X3, False),  # fun_t treats lin[0] as independent of lin[1]
]
IDS = [r[0] for r in RECORDS]


def _close(a, b):
    for x, y in zip(jaxkit.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)
        assert np.asarray(x).dtype == np.asarray(y).dtype


def _both(check):
    return check(KIT), check(JAX)


@pytest.mark.parametrize("name,make,x,true_transpose", RECORDS, ids=IDS)
def test_eager_and_jit_match_jax(name, make, x, true_transpose):
    _close(*_both(lambda m: make(m)(x)))
    _close(*_both(lambda m: m.jax.jit(make(m))(x)))


@pytest.mark.parametrize("name,make,x,true_transpose", RECORDS, ids=IDS)
def test_jvp_matches_jax(name, make, x, true_transpose):
    t = np.ones_like(x) * np.float32(0.25)
    _close(*_both(lambda m: m.jax.jvp(make(m), (x,), (t,))))


@pytest.mark.parametrize("name,make,x,true_transpose", RECORDS, ids=IDS)
def test_transposes_match_jax(name, make, x, true_transpose):
    def transposes(m):
        f = make(m)
        return (m.jax.linear_transpose(f, x)(f(x)),
                m.jax.grad(lambda y: (f(y) ** 2).sum())(x))

    got, want = _both(transposes)
    _close(got, want)
    if true_transpose:  # the custom transpose agrees with transposing fun's body
        body = {"div_add": lambda x: x + x / 3.0,
                "matvec": lambda x: np.arange(6.0, dtype=np.float32).reshape(2, 3) @ x}[name]
        _close(got[0], jaxkit.linear_transpose(body, x)(body(x)))


@pytest.mark.parametrize("name,make,x,true_transpose", RECORDS, ids=IDS)
def test_transposing_twice_gives_back_fun(name, make, x, true_transpose):
    # The transpose of the transposed call is a call of fun again. (Not compared with JAX:
    # JAX 0.10.2 fails with an AssertionError transposing the pytree record twice.)
    f = make(KIT)
    ct = f(x)
    t1 = jaxkit.linear_transpose(f, x)
    t2 = jaxkit.linear_transpose(lambda c: t1(c)[0], ct)
    _close(t2(x)[0], make(JAX)(x))


def test_residuals_cannot_be_differentiated():
    f = lambda r: kcd.linear_call(lambda r, x: x / r, lambda r, t: t / r, r, 2.0)  # noqa: E731
    with pytest.raises(TypeError, match="cannot differentiate with respect to residual_args"):
        jaxkit.jvp(f, (3.0,), (1.0,))


def test_vmap_has_no_rule_as_in_jax():
    f = _div_add
    with pytest.raises(NotImplementedError, match="linear_call"):
        jaxkit.vmap(f(KIT))(kjnp.ones(2))
    with pytest.raises(NotImplementedError, match="linear_call"):
        jax.vmap(f(JAX))(jjnp.ones(2))


def test_transpose_structure_mismatch_is_a_type_error_as_in_jax():
    def run(m):
        f = lambda x: m.cd.linear_call(lambda r, x: x * r, lambda r, c: (c, c), 2.0,  # noqa
                                       x)
        with pytest.raises(TypeError) as info:
            m.jax.linear_transpose(f, 1.0)(1.0)
        return str(info.value)

    got, want = _both(run)
    assert got == want


@pytest.mark.parametrize("symbolic", [False, True])
def test_zero_from_primal_matches_jax(symbolic):
    val = {"a": 1.0, "b": np.ones(2, np.int32), "c": np.ones((2, 3), np.float32)}
    got = kcd.zero_from_primal(val, symbolic_zeros=symbolic)
    want = jcd.zero_from_primal(val, symbolic_zeros=symbolic)
    assert jaxkit.tree_util.tree_structure(got) == jaxkit.tree_util.tree_structure(
        {"a": 0, "b": 0, "c": 0})
    for key in val:
        g, w = got[key], want[key]
        if symbolic:
            assert isinstance(g, kcd.SymbolicZero) and isinstance(w, jcd.SymbolicZero)
            assert (g.shape, g.dtype) == (w.shape, w.dtype)
        else:
            assert np.shape(g) == np.shape(w)
            assert np.asarray(g).dtype == np.asarray(w).dtype
            if np.asarray(g).dtype.kind != "V":  # float0 holds no data
                assert not np.asarray(g).any()
