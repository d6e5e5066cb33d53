"""``lax.composite`` and ``lax.platform_dependent`` against the JAX oracle: values, the
jaxpr and the ``stablehlo.composite`` op they lower to, and the rules jaxkit adds beyond JAX
(a composite differentiates and batches through its decomposition)."""
from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_grads

import jaxkit
import jaxkit.lax as klax
import jaxkit.numpy as knp

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402

X = np.linspace(-1.0, 2.0, 6, dtype=np.float32).reshape(2, 3)


def _op(L, N):
    return L.composite(lambda x, y: x * N.sin(y), name="my.op", version=2)


def _scaled(L, N):
    return L.composite(lambda x, *, scale, n: x * scale * n, name="my.scale")


CALLS = [
    ("two_operands", lambda L, N, x: _op(L, N)(x, x + 1)),
    ("attributes", lambda L, N, x: _scaled(L, N)(x, scale=2.0, n=3)),
    ("pytree_out", lambda L, N, x: L.composite(lambda x: (x, {"a": 2 * x}), name="my.tree")(x)),
    ("twice", lambda L, N, x: _op(L, N)(x, x) + _op(L, N)(x, 2 * x)),
]


@pytest.mark.parametrize("name,fn", CALLS, ids=[c[0] for c in CALLS])
def test_composite_values_jaxpr_and_hlo_match_jax(name, fn):
    ours = fn(klax, knp, X)
    theirs = fn(jax.lax, jjnp, X)
    for o, t in zip(jaxkit.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(o, t, rtol=1e-6)
    jitted = jaxkit.jit(lambda x: fn(klax, knp, x))(X)
    for o, t in zip(jaxkit.tree_util.tree_leaves(jitted), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(o, t, rtol=1e-6)
    hlo = jaxkit.jit(lambda x: fn(klax, knp, x)).lower(X).as_text()
    their_hlo = jax.jit(lambda x: fn(jax.lax, jjnp, x)).lower(X).as_text()
    ops = lambda text: [ln.split("{")[0].split("=", 1)[1].strip() for ln in text.splitlines()  # noqa: E731
                        if "stablehlo.composite" in ln]
    assert ops(hlo) == ops(their_hlo)
    attrs = lambda text: [ln[ln.index("{"):] for ln in text.splitlines()  # noqa: E731
                          if "stablehlo.composite" in ln]
    assert attrs(hlo) == attrs(their_hlo)


def test_composite_jaxpr_prints_like_jax():
    ours = jaxkit.make_jaxpr(lambda x, y: _op(klax, knp)(x, y))(X, X)
    theirs = jax.make_jaxpr(lambda x, y: _op(jax.lax, jjnp)(x, y))(X, X)
    assert str(ours) == str(theirs)


def test_composite_differentiates_and_batches_through_its_decomposition(x64):
    # JAX raises for both; jaxkit keeps the primal one composite op
    f = lambda x, y: _op(klax, knp)(x, y)  # noqa: E731
    check_grads(f, (X.astype(np.float64), X.astype(np.float64) + 1), order=2)
    g = jaxkit.grad(lambda x: f(x, x).sum())(X)
    np.testing.assert_allclose(g, np.sin(X) + X * np.cos(X), rtol=1e-5)
    batched = jaxkit.vmap(f, in_axes=(0, None))(np.stack([X, 2 * X]), X)
    np.testing.assert_allclose(batched, np.stack([f(X, X), f(2 * X, X)]), rtol=1e-6)
    assert "stablehlo.composite" in jaxkit.jit(jaxkit.vmap(f)).lower(X, X).as_text()


def test_composite_closes_over_traced_values():
    def outer(x, y):
        return klax.composite(lambda a: a * y, name="my.closure")(x)

    np.testing.assert_allclose(jaxkit.jit(outer)(X, X), X * X)
    np.testing.assert_allclose(jaxkit.grad(lambda y: outer(X, y).sum())(X), X)


def test_platform_dependent_picks_the_cpu_branch_like_jax():
    f = lambda L, N, x: L.platform_dependent(x, cpu=N.sin, default=N.cos)  # noqa: E731
    g = lambda L, N, x: L.platform_dependent(x, cuda=N.sin, default=N.cos)  # noqa: E731
    for fn in (f, g):
        theirs = fn(jax.lax, jjnp, X)
        np.testing.assert_allclose(fn(klax, knp, X), theirs, rtol=1e-6)
        np.testing.assert_allclose(jaxkit.jit(lambda x: fn(klax, knp, x))(X), theirs, rtol=1e-6)
    np.testing.assert_allclose(jaxkit.grad(lambda x: f(klax, knp, x).sum())(X), np.cos(X),
                               rtol=1e-6)
    np.testing.assert_allclose(jaxkit.vmap(lambda x: f(klax, knp, x))(X), np.sin(X), rtol=1e-6)


def test_composite_name_must_be_namespaced():
    with pytest.raises(ValueError, match="namespaced"):
        klax.composite(lambda x: x, name="plain")


def test_platform_dependent_errors_as_jax():
    # An unknown name is a platform JAX may lower for (``mosaic``): only the missing branch
    # at lowering, ``gpu`` and non-callables are errors.
    for kw in [dict(tpu=np.sin), dict(gpu=np.sin), dict(cpu=3), dict(cpu=np.sin, default=3)]:
        with pytest.raises(Exception) as theirs:
            jax.lax.platform_dependent(X, **kw)
        with pytest.raises(theirs.type) as ours:
            klax.platform_dependent(X, **kw)
        assert str(ours.value) == str(theirs.value)
