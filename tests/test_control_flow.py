"""Staged control flow: cond, switch, while_loop, fori_loop, scan, map, associative_scan.

Each construct against a Python reference, under jit, grad, vmap and their compositions, plus
the errors a user sees (type mismatches with tree paths, reverse mode through while_loop,
the seed's concretization errors and their fixes).
"""
from functools import partial

import numpy as np
import pytest

import jaxkit as jax
import jaxkit.numpy as jnp
from jaxkit import lax

X = np.array([0.3, -1.2, 2.0], np.float32)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ---- cond / switch ---------------------------------------------------------------------


def branchy(x):
    return lax.cond(jnp.sum(x) > 0, lambda v: jnp.sin(v) * v, lambda v: jnp.cos(v) - v, x)


def branchy_ref(x):
    return np.sin(x) * x if x.sum() > 0 else np.cos(x) - x


@pytest.mark.parametrize("x", [X, -X])
def test_cond_eager_jit_grad_vmap(x):
    close(branchy(x), branchy_ref(x))
    close(jax.jit(branchy)(x), branchy_ref(x))
    g = jax.grad(lambda v: jnp.sum(branchy(v)))(x)
    ref = (np.cos(x) * x + np.sin(x)) if x.sum() > 0 else (-np.sin(x) - 1)
    close(g, ref)
    close(jax.jit(jax.grad(lambda v: jnp.sum(branchy(v))))(x), ref)
    batch = np.stack([x, -x])
    close(jax.vmap(branchy)(batch), np.stack([branchy_ref(x), branchy_ref(-x)]))
    close(jax.vmap(jax.grad(lambda v: jnp.sum(branchy(v))))(batch)[0], ref)


def test_cond_with_python_bool_and_int_predicates():
    assert float(lax.cond(True, lambda: 1.0, lambda: 2.0)) == 1.0
    assert float(lax.cond(0, lambda: 1.0, lambda: 2.0)) == 2.0


def test_switch_clamps_index_and_differentiates():
    branches = [lambda a: a * 2.0, lambda a: a * a, lambda a: -a]
    for i, ref in [(-5, 6.0), (0, 6.0), (1, 9.0), (2, -3.0), (9, -3.0)]:
        assert float(lax.switch(i, branches, 3.0)) == ref
    assert float(jax.grad(lambda a: lax.switch(1, branches, a))(3.0)) == 6.0
    out = jax.vmap(lambda i, a: lax.switch(i, branches, a))(jnp.array([0, 1, 2]),
                                                            jnp.array([1.0, 2.0, 3.0]))
    close(out, [2.0, 4.0, -3.0])


def test_cond_branch_type_mismatch_names_path_and_types():
    with pytest.raises(TypeError, match=r"(?s)cond branches must have equal output types.*"
                                        r"path \['b'\] has type float32\[3\].*float32\[2\]"):
        lax.cond(True, lambda: {"a": 1.0, "b": jnp.ones(3)},
                 lambda: {"a": 1.0, "b": jnp.ones(2)})
    with pytest.raises(TypeError, match="structure"):
        lax.cond(True, lambda: (1.0, 2.0), lambda: [1.0, 2.0])


def test_cond_predicate_errors():
    with pytest.raises(TypeError, match="Pred must be a scalar"):
        lax.cond(jnp.ones(2) > 0, lambda: 1.0, lambda: 2.0)


# ---- while_loop / fori_loop ------------------------------------------------------------


def test_while_loop_semantics_jit_vmap():
    def count(n):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2.0), (0, 1.0))

    assert [int(v) for v in count(5)[:1]] == [5] and float(count(5)[1]) == 32.0
    assert float(jax.jit(count)(3)[1]) == 8.0
    i, v = jax.vmap(count)(jnp.array([1, 3, 5]))  # batched predicate: lanes stop separately
    close(i, [1, 3, 5])
    close(v, [2.0, 8.0, 32.0])


def test_while_loop_forward_mode_and_reverse_mode_error():
    def power(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x), (0, 1.0))[1]

    primal, tangent = jax.jvp(power, (2.0,), (1.0,))
    assert float(primal) == 8.0 and float(tangent) == 12.0
    assert float(jax.jacfwd(power)(2.0)) == 12.0
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for "
                                         "lax.while_loop"):
        jax.grad(power)(2.0)


def test_while_loop_carry_type_error():
    with pytest.raises(TypeError, match=r"(?s)while_loop body function carry input and carry "
                                        r"output must have equal types.*float32\[\].*"
                                        r"float32\[2\]"):
        lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.ones(2)), (0, 1.0))
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        lax.while_loop(lambda c: c, lambda c: c + 1, 0)


def test_fori_loop_static_bounds_is_reverse_differentiable():
    def f(x):
        return lax.fori_loop(0, 4, lambda i, c: c * x + i, 1.0)

    ref = lambda x: (((x + 0) * x + 1) * x + 2) * x + 3  # noqa: E731
    assert float(f(1.5)) == pytest.approx(ref(1.5))
    eps = 1e-3
    fd = (ref(1.5 + eps) - ref(1.5 - eps)) / (2 * eps)
    assert float(jax.grad(f)(1.5)) == pytest.approx(fd, rel=1e-3)
    assert "scan" in str(jax.make_jaxpr(f)(1.5))


def test_fori_loop_traced_bounds_is_a_while_loop():
    f = jax.jit(lambda n: lax.fori_loop(0, n, lambda i, c: c + i, 0))
    assert int(f(5)) == 10
    assert "while" in str(jax.make_jaxpr(lambda n: lax.fori_loop(0, n, lambda i, c: c + i,
                                                                 0))(5))


# ---- scan / map / associative_scan -----------------------------------------------------


def cumulative(xs, reverse=False):
    return lax.scan(lambda c, x: (c + x, c * x), 0.0, xs, reverse=reverse)


def cumulative_ref(xs, reverse=False):
    c, ys = 0.0, []
    for x in (xs[::-1] if reverse else xs):
        ys.append(c * x)
        c = c + x
    ys = ys[::-1] if reverse else ys
    return np.float32(c), np.array(ys, np.float32)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_python_loop(reverse):
    c, ys = cumulative(X, reverse)
    rc, rys = cumulative_ref(X, reverse)
    close(c, rc)
    close(ys, rys)
    jc, jys = jax.jit(partial(cumulative, reverse=reverse))(X)
    close(jys, rys)


def test_scan_grad_vmap_and_unroll():
    def loss(w, xs):
        def step(h, x):
            h = jnp.tanh(w * h + x)
            return h, h * h
        h, ys = lax.scan(step, 0.0, xs)
        return h + jnp.sum(ys)

    def loss_ref(w, xs):
        h, total = 0.0, 0.0
        for x in xs:
            h = np.tanh(w * h + x)
            total += h * h
        return h + total

    w = 0.7
    close(loss(w, X), loss_ref(w, X.astype(np.float64)), 1e-5)
    eps = 1e-4
    fd = (loss_ref(w + eps, X.astype(np.float64)) - loss_ref(w - eps, X.astype(np.float64))) / (
        2 * eps)
    close(jax.grad(loss)(w, X), fd, 1e-3)
    close(jax.jit(jax.grad(loss))(w, X), fd, 1e-3)
    ws = jnp.array([0.1, 0.7, -0.4])
    close(jax.vmap(loss, (0, None))(ws, X),
          [loss_ref(float(v), X.astype(np.float64)) for v in ws], 1e-5)
    unrolled = lax.scan(lambda c, x: (c + x, c), 0.0, X, unroll=2)
    close(unrolled[1], cumulative_ref(X)[1] * 0 + np.array([0.0, X[0], X[0] + X[1]]))


def test_scan_without_xs_and_length():
    c, ys = lax.scan(lambda c, _: (c * 2, c), 1, None, length=4)
    assert int(c) == 16
    close(ys, [1, 2, 4, 8])
    with pytest.raises(ValueError, match="length"):
        lax.scan(lambda c, x: (c, x), 0.0, jnp.ones(3), length=4)


def test_scan_carry_mismatch_error():
    with pytest.raises(TypeError, match="scan body function carry input and carry output"):
        lax.scan(lambda c, x: (jnp.ones(2), x), 0.0, X)


def test_map_and_associative_scan():
    close(lax.map(lambda v: v * v + 1, X), X * X + 1)
    close(lax.associative_scan(jnp.add, jnp.arange(1.0, 8.0)), np.cumsum(np.arange(1.0, 8.0)))
    close(lax.associative_scan(jnp.maximum, jnp.array([1.0, 3.0, 2.0, 5.0, 4.0]),
                               reverse=True), [5.0, 5.0, 5.0, 5.0, 4.0])


# ---- the seed's concretization errors and fixes (seed 002) ----------------------------


def test_seed_if_on_traced_value_and_static_fixes():
    def f(x):
        if x > 0:
            return x
        return 2 * x

    def g(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i

    with pytest.raises(jax.errors.TracerBoolConversionError, match="argument x"):
        jax.jit(f)(10)
    with pytest.raises(jax.errors.ConcretizationTypeError, match="argument n"):
        jax.jit(g)(10, 20)
    assert int(jax.jit(f, static_argnums=0)(10)) == 10
    assert int(jax.jit(g, static_argnames=["n"])(10, 20)) == 30

    @partial(jax.jit, static_argnames=["n"])
    def g_jit_decorated(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i

    assert int(g_jit_decorated(10, 20)) == 30


def test_python_control_flow_on_primals_works_under_grad():
    def f(x):
        return x * x if x > 0 else -x

    assert float(jax.grad(f)(3.0)) == 6.0
    assert float(jax.grad(f)(-3.0)) == -1.0


# Residuals of scan's reverse mode against the JAX oracle (issue #22: JAX's host-offloading
# tutorial). A forward scan must stack only what changes per iteration: an x it was given goes
# to the backward scan as it is, a const or a value computed from consts alone goes in once.
def _two_layers(x, w):
    w1, w2 = w
    return (x @ w1) @ w2, None


def _scanned(np_, lax_, checkpoint, w, x):
    return np_.sum(lax_.scan(checkpoint(_two_layers), x, w)[0])


def _closure(np_, lax_, checkpoint, w, x):
    a = w[0][0, :, :4]  # loop-invariant: its uses in the body are computed before the loop

    def body(c, _):
        return np_.tanh(c @ a) @ (a.T * a), None
    return np_.sum(lax_.scan(body, x, None, length=3)[0])


def _fori(np_, lax_, checkpoint, w, x):
    a, b = w
    return np_.sum(lax_.fori_loop(0, 3, lambda i, c: np_.tanh((c @ a[i]) @ b[i]), x))


def _scan_signatures(closed):
    """Each top-level scan as (consts, carries, operand shapes, result shapes)."""
    return [(e.params["num_consts"], e.params["num_carry"],
             [tuple(v.aval.shape) for v in e.invars], [tuple(v.aval.shape) for v in e.outvars])
            for e in closed.eqns if e.primitive.name == "scan"]


def _live_lines(closed) -> list[str]:
    # JAX builds the unused zero tangent of the carry while transposing, jaxkit while
    # linearizing: the same dead equation at another place.
    return [ln for ln in str(closed).splitlines() if not ln.lstrip().startswith("_:f32[4,4] = b")]


@pytest.mark.parametrize("which", ["scan", "remat", "closure", "fori"])
def test_scan_grad_residuals_and_temp_memory_match_jax(which):
    ojax = pytest.importorskip("jax")
    fun = {"scan": _scanned, "remat": _scanned, "closure": _closure, "fori": _fori}[which]
    w = (np.full((3, 4, 16), 1e-3, np.float32), np.full((3, 16, 4), 1e-3, np.float32))
    x = np.full((4, 4), 1e-3, np.float32)
    results = []
    for lib in (jax, ojax):
        ckpt = lib.checkpoint if which == "remat" else (lambda f: f)
        g = lib.grad(partial(fun, lib.numpy, lib.lax, ckpt))
        compiled = lib.jit(g).lower(w, x).compile()
        temp = compiled.memory_analysis().temp_size_in_bytes
        results.append((temp, lib.make_jaxpr(g)(w, x), compiled(w, x)))
    (temp, jaxpr, grads), (o_temp, o_jaxpr, o_grads) = results
    assert temp == o_temp
    for a, b in zip(grads, o_grads):
        close(a, b)
    if which != "fori":  # jnp indexing in fori's body stages other index arithmetic than JAX's
        assert _scan_signatures(jaxpr) == _scan_signatures(o_jaxpr)
    if which in ("scan", "remat"):
        assert _live_lines(jaxpr) == _live_lines(o_jaxpr)


def test_scan_forwards_read_only_carries_and_ys_that_are_xs_like_jax():
    ojax = pytest.importorskip("jax")

    def f(lib, c, xs):
        def body(carry, x):
            a, b = carry
            return (a, b + x * a), (x, b)
        return lib.lax.scan(body, (c, c), xs)

    xs = np.arange(3.0, dtype=np.float32)
    ours = jax.make_jaxpr(partial(f, jax))(1.0, xs)
    theirs = ojax.make_jaxpr(partial(f, ojax))(1.0, xs)
    assert str(ours) == str(theirs)  # the carry `a` is a const, the ys `x` is not stacked
    (a, b), (ys_x, ys_b) = f(jax, 1.0, xs)
    (oa, ob), (oys_x, oys_b) = f(ojax, 1.0, xs)
    assert type(a) is type(oa) and a == oa  # the initial value itself, as in JAX
    for u, v in ((b, ob), (ys_x, oys_x), (ys_b, oys_b)):
        close(u, v)
    # A NumPy x closed over is stacked as a residual, not forwarded into the staged jaxpr.
    ws = np.arange(1.0, 4.0, dtype=np.float32)

    def g(lib, w):
        return lib.lax.scan(lambda c, x: (lib.numpy.sin(c * w * x), None), 1.0, ws)[0]
    assert (_scan_signatures(jax.make_jaxpr(jax.grad(partial(g, jax)))(2.0))
            == _scan_signatures(ojax.make_jaxpr(ojax.grad(partial(g, ojax)))(2.0)))
