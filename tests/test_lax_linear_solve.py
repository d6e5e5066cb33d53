"""``lax.custom_linear_solve`` and ``lax.custom_root`` against NumPy and the JAX oracle: values
(dense systems, pytree right-hand sides, symmetric and not, auxiliary outputs), ``jit`` against
eager, derivatives against finite differences (with respect to ``b`` and to the matrix that
``matvec`` closes over) and against JAX, ``vmap`` against a Python loop, and the errors JAX
raises, class for class.
"""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from gradcheck import check_grads
from vmapcheck import check_vmap

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import lax

TOL = 1e-10


pytestmark = pytest.mark.usefixtures("x64_module")


_rng = np.random.default_rng(0)
A = _rng.standard_normal((3, 3)) + 3 * np.eye(3)          # nonsymmetric, well conditioned
S = (lambda m: m @ m.T + 3 * np.eye(3))(_rng.standard_normal((3, 3)))  # symmetric positive
B = _rng.standard_normal(3)
B2 = _rng.standard_normal(2)


def make_solve(np_like, linalg_solve):
    """``solve(a, b)`` written once for both libraries (``np_like`` is jaxkit.numpy or
    jax.numpy, ``custom_linear_solve`` the matching lax function)."""
    def run(custom_linear_solve, a, b, symmetric=False, with_transpose=True):
        def matvec(x):
            return np_like.dot(a, x)

        def solve(mv, y):
            return linalg_solve(a, y)

        def transpose_solve(vm, y):
            return linalg_solve(a.T, y)

        tsolve = transpose_solve if with_transpose and not symmetric else None
        return custom_linear_solve(matvec, b, solve, tsolve, symmetric=symmetric)
    return run


_k_run = make_solve(jnp, jnp.linalg.solve)
_j_run = make_solve(jjnp, jjnp.linalg.solve)


def k_solve(a, b, symmetric=False):
    return _k_run(lax.custom_linear_solve, a, b, symmetric)


def j_solve(a, b, symmetric=False):
    return _j_run(jax.lax.custom_linear_solve, a, b, symmetric)


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("symmetric", [False, True])
def test_dense_values_match_numpy_and_jax(symmetric):
    a = S if symmetric else A
    out = k_solve(a, B, symmetric)
    np.testing.assert_allclose(out, np.linalg.solve(a, B), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(out, j_solve(a, B, symmetric), rtol=TOL, atol=TOL)
    assert out.dtype == np.float64


def test_jit_matches_eager():
    eager = k_solve(A, B)
    jitted = jaxkit.jit(k_solve)(A, B)
    np.testing.assert_allclose(jitted, eager, rtol=TOL, atol=TOL)


def test_float32_keeps_its_dtype():
    a, b = A.astype(np.float32), B.astype(np.float32)
    out = k_solve(a, b)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.linalg.solve(a, b), rtol=1e-5, atol=1e-5)


def _block(np_like):
    """A pytree system: two blocks of a block-diagonal matrix, b a dict."""
    a1, a2 = A, A[:2, :2] + np.eye(2)

    def matvec(x):
        return {"u": np_like.dot(a1, x["u"]), "v": np_like.dot(a2, x["v"])}

    def solve(mv, y):
        return {"u": np_like.linalg.solve(a1, y["u"]), "v": np_like.linalg.solve(a2, y["v"])}

    def transpose_solve(vm, y):
        return {"u": np_like.linalg.solve(a1.T, y["u"]),
                "v": np_like.linalg.solve(a2.T, y["v"])}
    return matvec, solve, transpose_solve, (a1, a2)


def test_pytree_b():
    b = {"u": B, "v": B2}
    mv, solve, tsolve, (a1, a2) = _block(jnp)
    out = lax.custom_linear_solve(mv, b, solve, tsolve)
    assert sorted(out) == ["u", "v"]
    np.testing.assert_allclose(out["u"], np.linalg.solve(a1, B), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(out["v"], np.linalg.solve(a2, B2), rtol=TOL, atol=TOL)
    jmv, jsolve, jtsolve, _ = _block(jjnp)
    ref = jax.lax.custom_linear_solve(jmv, b, jsolve, jtsolve)
    for k in ("u", "v"):
        np.testing.assert_allclose(out[k], ref[k], rtol=TOL, atol=TOL)


def test_pytree_b_gradients():
    mv, solve, tsolve, _ = _block(jnp)

    def f(u, v):
        return lax.custom_linear_solve(mv, {"u": u, "v": v}, solve, tsolve)

    check_grads(f, (B, B2), order=2)
    jmv, jsolve, jtsolve, _ = _block(jjnp)

    def loss(fn, ls, u, v):
        x = ls(fn[0], {"u": u, "v": v}, fn[1], fn[2])
        return (x["u"] ** 2).sum() + (x["v"] ** 3).sum()

    g = jaxkit.grad(lambda u, v: loss((mv, solve, tsolve), lax.custom_linear_solve, u, v),
                    (0, 1))(B, B2)
    jg = jax.grad(lambda u, v: loss((jmv, jsolve, jtsolve), jax.lax.custom_linear_solve, u, v),
                  (0, 1))(B, B2)
    for x, y in zip(g, jg):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9)


def _aux_solvers(np_like):
    def solve(mv, y):
        x = np_like.linalg.solve(A, y)
        return x, {"residual": np_like.linalg.norm(mv(x) - y), "iters": np_like.int32(1)}

    def transpose_solve(vm, y):
        x = np_like.linalg.solve(A.T, y)
        return x, {"residual": np_like.linalg.norm(vm(x) - y), "iters": np_like.int32(2)}
    return solve, transpose_solve


def test_has_aux_values_and_gradient():
    solve, tsolve = _aux_solvers(jnp)
    jsolve, jtsolve = _aux_solvers(jjnp)

    def k(b):
        return lax.custom_linear_solve(lambda x: jnp.dot(A, x), b, solve, tsolve, has_aux=True)

    def j(b):
        return jax.lax.custom_linear_solve(lambda x: jjnp.dot(A, x), b, jsolve, jtsolve,
                                           has_aux=True)

    x, aux = k(B)
    jx, jaux = j(B)
    np.testing.assert_allclose(x, jx, rtol=TOL, atol=TOL)
    assert int(aux["iters"]) == 1 and float(aux["residual"]) < 1e-12
    np.testing.assert_allclose(aux["residual"], jaux["residual"], atol=1e-12)
    jx2, jaux2 = jaxkit.jit(k)(B)
    np.testing.assert_allclose(jx2, x, rtol=TOL, atol=TOL)
    g = jaxkit.grad(lambda b: (k(b)[0] ** 2).sum())(B)
    jg = jax.grad(lambda b: (j(b)[0] ** 2).sum())(B)
    np.testing.assert_allclose(g, jg, rtol=1e-9, atol=1e-9)
    (xo, auxo), (xt, auxt) = jaxkit.jvp(k, (B,), (B2[:1].repeat(3),))
    (jxo, _), (jxt, _) = jax.jvp(j, (B,), (B2[:1].repeat(3),))
    np.testing.assert_allclose(xt, jxt, rtol=1e-9, atol=1e-9)
    assert float(np.abs(np.asarray(auxt["residual"]))) == 0.0  # aux is not differentiated


# --------------------------------------------------------------------------------------------
# Derivatives
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("symmetric", [False, True])
def test_gradients_wrt_b_and_matrix_numerically(symmetric):
    a = S if symmetric else A
    check_grads(lambda b: k_solve(a, b, symmetric), (B,), order=2)
    # The matrix is a constant closed over by matvec: its derivative goes through A' x.
    check_grads(lambda m, b: k_solve(m, b, symmetric), (a, B), order=2, modes=("fwd",))
    check_grads(lambda m, b: k_solve(m, b, symmetric), (a, B), order=1, modes=("rev",))


@pytest.mark.parametrize("symmetric", [False, True])
def test_gradients_match_jax(symmetric):
    a = S if symmetric else A

    def loss(solve_fn, m, b):
        return (solve_fn(m, b, symmetric) ** 3).sum()

    g = jaxkit.grad(lambda m, b: loss(k_solve, m, b), (0, 1))(a, B)
    jg = jax.grad(lambda m, b: loss(j_solve, m, b), (0, 1))(a, B)
    for x, y in zip(g, jg):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9)
    t = (np.ones_like(a), B2[:1].repeat(3))
    _, kt = jaxkit.jvp(lambda m, b: k_solve(m, b, symmetric), (a, B), t)
    _, jt = jax.jvp(lambda m, b: j_solve(m, b, symmetric), (a, B), t)
    np.testing.assert_allclose(kt, jt, rtol=1e-9, atol=1e-9)


def test_grad_under_jit_matches_eager():
    f = jaxkit.grad(lambda m, b: (k_solve(m, b) ** 2).sum(), (0, 1))
    for x, y in zip(jaxkit.jit(f)(A, B), f(A, B)):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-10)


def test_solver_constants_are_not_differentiated():
    # As in JAX: only matvec defines the system; a solver that closes over the (differentiated)
    # matrix contributes no derivative of its own. (JAX 0.10.2 itself fails here in forward
    # mode, passing a symbolic zero to the primitive; jaxkit returns the zero derivative.)
    def k(m):
        return lax.custom_linear_solve(lambda x: jnp.dot(A, x), B,
                                       lambda mv, y: jnp.linalg.solve(m, y),
                                       lambda vm, y: jnp.linalg.solve(m.T, y))

    np.testing.assert_allclose(k(A), np.linalg.solve(A, B), rtol=TOL, atol=TOL)
    assert float(np.abs(np.asarray(jaxkit.jacfwd(k)(A))).max()) == 0.0
    assert float(np.abs(np.asarray(jaxkit.jacrev(k)(A))).max()) == 0.0


# --------------------------------------------------------------------------------------------
# vmap
# --------------------------------------------------------------------------------------------

As = np.stack([A, A + np.eye(3), A.T])
Bs = np.stack([B, 2 * B, B[::-1].copy()])


@pytest.mark.parametrize("in_axes,args", [((None, 0), (A, Bs)), ((0, None), (As, B)),
                                          ((0, 0), (As, Bs)), ((None, 1), (A, Bs.T.copy())),
                                          ((2, 0), (np.moveaxis(As, 0, 2).copy(), Bs))])
def test_vmap_matches_a_loop(in_axes, args):
    check_vmap(k_solve, args, in_axes)
    check_vmap(lambda m, b: k_solve(m, b, True), args, in_axes)


def test_vmap_values_match_numpy():
    out = jaxkit.vmap(k_solve)(As, Bs)
    np.testing.assert_allclose(out, np.stack([np.linalg.solve(a, b) for a, b in zip(As, Bs)]),
                               rtol=TOL, atol=TOL)


def test_vmap_of_grad_and_grad_of_vmap():
    def loss(m, b):
        return (k_solve(m, b) ** 2).sum()

    per_example = jaxkit.vmap(jaxkit.grad(loss, (0, 1)))(As, Bs)
    loop = [jaxkit.grad(loss, (0, 1))(a, b) for a, b in zip(As, Bs)]
    for k in range(2):
        np.testing.assert_allclose(per_example[k], np.stack([g[k] for g in loop]),
                                   rtol=1e-10, atol=1e-10)
    total = jaxkit.grad(lambda ms, bs: jaxkit.vmap(loss)(ms, bs).sum(), (0, 1))(As, Bs)
    for k in range(2):
        np.testing.assert_allclose(total[k], per_example[k], rtol=1e-10, atol=1e-10)
    jtotal = jax.grad(lambda ms, bs: jax.vmap(lambda m, b: (j_solve(m, b) ** 2).sum())(
        ms, bs).sum(), (0, 1))(As, Bs)
    for k in range(2):
        np.testing.assert_allclose(total[k], jtotal[k], rtol=1e-9, atol=1e-9)


def test_vmap_under_jit_and_with_aux():
    solve, tsolve = _aux_solvers(jnp)

    def f(b):
        x, aux = lax.custom_linear_solve(lambda x: jnp.dot(A, x), b, solve, tsolve,
                                         has_aux=True)
        return x, aux["residual"]

    x, res = jaxkit.jit(jaxkit.vmap(f))(Bs)
    np.testing.assert_allclose(x, np.linalg.solve(A, Bs.T).T, rtol=TOL, atol=TOL)
    assert res.shape == (3,)


# --------------------------------------------------------------------------------------------
# custom_root
# --------------------------------------------------------------------------------------------


def _scalar_newton(np_like, grad):
    def solve(f, x0):
        def body(_, x):
            return x - f(x) / grad(f)(x)
        return _fori(np_like)(0, 30, body, x0)
    return solve


def _fori(np_like):
    return lax.fori_loop if np_like is jnp else jax.lax.fori_loop


def _sqrt(np_like, grad, custom_root):
    """The square root of ``a`` as the root of ``x^2 - a``, Newton's method forward."""
    def sqrt(a):
        return custom_root(lambda x: x ** 2 - a, 1.0, _scalar_newton(np_like, grad),
                           lambda g, y: y / g(1.0))
    return sqrt


k_sqrt = _sqrt(jnp, jaxkit.grad, lax.custom_root)
j_sqrt = _sqrt(jjnp, jax.grad, jax.lax.custom_root)


def test_custom_root_scalar():
    a = 2.0
    np.testing.assert_allclose(k_sqrt(a), np.sqrt(a), rtol=1e-12)
    np.testing.assert_allclose(jaxkit.jit(k_sqrt)(a), np.sqrt(a), rtol=1e-12)
    np.testing.assert_allclose(jaxkit.grad(k_sqrt)(a), 0.5 / np.sqrt(a), rtol=1e-10)
    np.testing.assert_allclose(jaxkit.grad(k_sqrt)(a), jax.grad(j_sqrt)(a), rtol=1e-10)
    np.testing.assert_allclose(jaxkit.grad(jaxkit.grad(k_sqrt))(a), jax.grad(jax.grad(j_sqrt))(a),
                               rtol=1e-9)
    check_grads(k_sqrt, (np.array(2.0),), order=2)
    xs = np.array([1.0, 2.0, 9.0])
    np.testing.assert_allclose(jaxkit.vmap(k_sqrt)(xs), np.sqrt(xs), rtol=1e-12)
    np.testing.assert_allclose(jaxkit.vmap(jaxkit.grad(k_sqrt))(xs), 0.5 / np.sqrt(xs),
                               rtol=1e-10)


def _vector_root(np_like, jacfwd, custom_root):
    """x with M x + 0.1 x^3 = c, by Newton's method with a dense Jacobian."""
    def solve(f, x0):
        def body(_, x):
            return x - np_like.linalg.solve(jacfwd(f)(x), f(x))
        return _fori(np_like)(0, 40, body, x0)

    def tangent_solve(g, y):
        if np_like is jjnp:
            return np_like.linalg.solve(jacfwd(g)(y), y)
        # JAX's jnp.linalg.solve is a custom_linear_solve, so reverse mode transposes it;
        # jaxkit's is a custom_jvp function, so the tangent solve says so itself.
        jac = jacfwd(g)(y)
        return lax.custom_linear_solve(g, y, lambda mv, r: jnp.linalg.solve(jac, r),
                                       lambda vm, r: jnp.linalg.solve(jac.T, r))

    def root(m, c):
        return custom_root(lambda x: np_like.dot(m, x) + 0.1 * x ** 3 - c, np_like.zeros(3),
                           solve, tangent_solve)
    return root


k_root = _vector_root(jnp, jaxkit.jacfwd, lax.custom_root)
j_root = _vector_root(jjnp, jax.jacfwd, jax.lax.custom_root)


def test_custom_root_vector():
    x = k_root(A, B)
    np.testing.assert_allclose(A @ x + 0.1 * np.asarray(x) ** 3, B, atol=1e-10)
    np.testing.assert_allclose(x, j_root(A, B), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(jaxkit.jit(k_root)(A, B), x, rtol=1e-10, atol=1e-10)
    g = jaxkit.grad(lambda m, c: (k_root(m, c) ** 2).sum(), (0, 1))(A, B)
    jg = jax.grad(lambda m, c: (j_root(m, c) ** 2).sum(), (0, 1))(A, B)
    for u, v in zip(g, jg):
        np.testing.assert_allclose(u, v, rtol=1e-8, atol=1e-8)
    check_grads(k_root, (A, B), order=1)
    check_vmap(k_root, (As, Bs), (0, 0))
    check_vmap(k_root, (A, Bs), (None, 0))


def test_custom_root_has_aux():
    def solve(f, x0):
        x = lax.fori_loop(0, 30, lambda _, x: x - f(x) / (2 * x), x0)
        return x, {"steps": jnp.int32(30), "err": jnp.abs(f(x))}

    def sqrt(a):
        return lax.custom_root(lambda x: x ** 2 - a, 1.0, solve, lambda g, y: y / g(1.0),
                               has_aux=True)

    x, aux = sqrt(3.0)
    np.testing.assert_allclose(x, np.sqrt(3.0), rtol=1e-12)
    assert int(aux["steps"]) == 30
    np.testing.assert_allclose(jaxkit.grad(lambda a: sqrt(a)[0])(3.0), 0.5 / np.sqrt(3.0),
                               rtol=1e-10)


# --------------------------------------------------------------------------------------------
# Errors, class for class with JAX
# --------------------------------------------------------------------------------------------


def _error_class(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return None, None


_SOLVE_ERRORS = {
    "matvec_shape": lambda mod, np_like: mod.custom_linear_solve(
        lambda x: np_like.ones(4), B, lambda mv, y: y),
    "matvec_leaves": lambda mod, np_like: mod.custom_linear_solve(
        lambda x: (x, x), B, lambda mv, y: y),
    "solve_shape": lambda mod, np_like: mod.custom_linear_solve(
        lambda x: x, B, lambda mv, y: np_like.ones(4)),
    "solve_tree": lambda mod, np_like: mod.custom_linear_solve(
        lambda x: x, B, lambda mv, y: [y]),
    "aux_missing": lambda mod, np_like: mod.custom_linear_solve(
        lambda x: x, B, lambda mv, y: y, has_aux=True),
    "transpose_solve_tree": lambda mod, np_like: mod.custom_linear_solve(
        lambda x: x, B, lambda mv, y: y, lambda vm, y: (y,)),
    "root_f_tree": lambda mod, np_like: mod.custom_root(
        lambda x: (x ** 2 - 2,), 1.0, lambda f, x: x, lambda g, y: y),
    "root_aux_missing": lambda mod, np_like: mod.custom_root(
        lambda x: x ** 2 - 2, 1.0, lambda f, x: x, lambda g, y: y, has_aux=True),
    "root_solve_tree": lambda mod, np_like: mod.custom_root(
        lambda x: x ** 2 - 2, 1.0, lambda f, x: [x], lambda g, y: y),
    "root_tangent_solve_tree": lambda mod, np_like: jaxkit.grad(lambda a: mod.custom_root(
        lambda x: x ** 2 - a, 1.0, lambda f, x: x, lambda g, y: (y,)))(2.0)
    if mod is lax else jax.grad(lambda a: mod.custom_root(
        lambda x: x ** 2 - a, 1.0, lambda f, x: x, lambda g, y: (y,)))(2.0),
}


@pytest.mark.parametrize("case", sorted(_SOLVE_ERRORS))
def test_errors_match_jax(case):
    kind, msg = _error_class(lambda: _SOLVE_ERRORS[case](lax, jnp))
    jkind, jmsg = _error_class(lambda: _SOLVE_ERRORS[case](jax.lax, jjnp))
    assert jkind is not None and kind is jkind, (case, kind, msg, jkind, jmsg)
    # The first line names the same function and problem.
    assert msg.split(",")[0] == jmsg.split(",")[0], (msg, jmsg)


def test_reverse_mode_without_transpose_solve_is_a_type_error():
    with pytest.raises(TypeError, match="transpose_solve required for backwards mode"):
        jaxkit.grad(lambda b: _k_run(lax.custom_linear_solve, A, b, False, False).sum())(B)
    with pytest.raises(TypeError, match="transpose_solve required for backwards mode"):
        jax.grad(lambda b: _j_run(jax.lax.custom_linear_solve, A, b, False, False).sum())(B)
    # Forward mode needs no transpose.
    _, t = jaxkit.jvp(lambda b: _k_run(lax.custom_linear_solve, A, b, False, False), (B,), (B,))
    np.testing.assert_allclose(t, np.linalg.solve(A, B), rtol=TOL, atol=TOL)


def test_jaxpr_has_one_custom_linear_solve():
    jaxpr = jaxkit.make_jaxpr(k_solve)(A, B)
    names = [e.primitive.name for e in jaxpr.jaxpr.eqns]
    assert names.count("custom_linear_solve") == 1
    assert lax.linear_solve_p.name == "custom_linear_solve" == jax.lax.linear_solve_p.name
