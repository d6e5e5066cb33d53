"""custom_jvp, custom_vjp, closure_convert and checkpoint (remat): the JAX documentation's
examples, composition with jit, vmap and nested differentiation, and the errors."""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from vmapcheck import check_vmap

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import core, lax
from jaxkit.api import grad, jacfwd, jacrev, jvp, value_and_grad, vjp
from jaxkit.transforms.checkpoint import checkpoint, checkpoint_name, checkpoint_policies, remat
from jaxkit.transforms.custom_derivatives import closure_convert, custom_jvp
from jaxkit.transforms.custom_vjp import custom_vjp
from jaxkit.transforms.vmap import vmap

F32 = np.float32


def assert_close(x, y, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def vsum(x):
    return lax.reduce_sum(x, tuple(range(np.ndim(x))))


# --------------------------------------------------------------------------------------------
# custom_jvp
# --------------------------------------------------------------------------------------------


@custom_jvp
def log1pexp(x):
    return lax.log(lax.add(F32(1.0), lax.exp(x)))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    ans = log1pexp(x)
    return ans, lax.mul(lax.sub(F32(1.0), lax.div(F32(1.0), lax.add(F32(1.0), lax.exp(x)))), t)


def test_custom_jvp_docs_example_is_stable_at_large_inputs():
    assert_close(log1pexp(F32(3.0)), np.log1p(np.exp(3.0)))
    assert_close(grad(log1pexp)(F32(100.0)), 1.0)  # the naive rule gives nan here
    assert_close(jaxkit.jit(grad(log1pexp))(F32(3.0)), 1 - 1 / (1 + np.exp(3.0)))
    assert_close(vmap(jaxkit.jit(grad(log1pexp)))(np.array([0.0, 2.0, 100.0], F32)),
                 [0.5, 1 - 1 / (1 + np.exp(2.0)), 1.0])
    # the rule is used by forward mode too
    assert_close(jvp(log1pexp, (F32(100.0),), (F32(2.0),))[1], 2.0)


@custom_jvp
def f_twice(x, y):
    return lax.mul(x, y)


@f_twice.defjvp
def f_twice_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    # deliberately "wrong" (10x in x) so that using the rule is visible
    return f_twice(x, y), lax.add(lax.mul(lax.mul(tx, y), F32(10.0)), lax.mul(x, ty))


def test_custom_jvp_rule_is_used_in_every_context():
    x, y = F32(2.0), F32(3.0)
    assert_close(f_twice(x, y), 6.0)
    assert_close(jvp(f_twice, (x, y), (F32(1.0), F32(0.0)))[1], 30.0)
    assert_close(grad(f_twice)(x, y), 30.0)
    assert_close(grad(f_twice, 1)(x, y), 2.0)
    assert_close(jaxkit.jit(grad(f_twice))(x, y), 30.0)
    assert_close(grad(jaxkit.jit(f_twice))(x, y), 30.0)
    xs = np.arange(3.0, dtype=F32)
    assert_close(vmap(f_twice)(xs, np.ones(3, F32)), xs)
    assert_close(vmap(grad(f_twice))(xs, np.ones(3, F32)), [10.0] * 3)
    assert_close(grad(lambda xs: vsum(vmap(f_twice)(xs, np.ones(3, F32))))(xs), [10.0] * 3)
    assert_close(jvp(vmap(f_twice), (xs, np.ones(3, F32)), (np.ones(3, F32),
                                                              np.zeros(3, F32)))[1], [10.0] * 3)
    assert_close(jacfwd(f_twice)(x, y), 30.0)
    assert_close(jacrev(f_twice)(x, y), 30.0)


def test_custom_jvp_staged_as_a_primitive_carrying_its_jaxpr():
    jaxpr = jaxkit.make_jaxpr(f_twice)(F32(2.0), F32(3.0))
    (eqn,) = jaxpr.eqns
    assert eqn.primitive.name == "custom_jvp_call"
    assert [e.primitive.name for e in eqn.params["call_jaxpr"].eqns] == ["mul"]
    assert "jvp=f_twice_jvp" in str(jaxpr)


def test_custom_jvp_second_order_differentiates_the_rule():
    @custom_jvp
    def f(x):
        return lax.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), lax.mul(lax.mul(F32(2.0), lax.cos(x)), t)  # 2 cos x

    x = F32(0.4)
    assert_close(grad(f)(x), 2 * np.cos(x))
    assert_close(grad(grad(f))(x), -2 * np.sin(x))
    assert_close(jaxkit.jit(grad(grad(f)))(x), -2 * np.sin(x))
    assert_close(jacfwd(grad(f))(x), -2 * np.sin(x))


def test_custom_jvp_defjvps():
    @custom_jvp
    def f(x, y):
        return lax.mul(lax.sin(x), y)

    f.defjvps(lambda x_dot, ans, x, y: lax.mul(lax.mul(lax.cos(x), x_dot), y),
              lambda y_dot, ans, x, y: lax.mul(lax.sin(x), y_dot))
    x, y = F32(0.5), F32(2.0)
    gx, gy = grad(f, (0, 1))(x, y)
    assert_close(gx, np.cos(x) * y)
    assert_close(gy, np.sin(x))
    g = custom_jvp(lambda x, y: lax.mul(x, y))
    g.defjvps(None, lambda t, ans, x, y: lax.mul(x, t))
    assert_close(grad(g, (0, 1))(x, y)[0], 0.0)


def test_custom_jvp_nondiff_argnums_with_a_function_argument():
    @functools.partial(custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    @app.defjvp
    def app_jvp(f, primals, tangents):
        (x,), (t,) = primals, tangents
        return app(f, x), lax.mul(F32(3.0), t)

    assert_close(app(lax.sin, F32(1.0)), np.sin(1.0))
    assert_close(grad(app, 1)(lax.sin, F32(1.0)), 3.0)
    assert_close(jaxkit.jit(grad(app, 1), static_argnums=0)(lax.sin, F32(1.0)), 3.0)


def test_custom_jvp_symbolic_zeros():
    seen = []

    @custom_jvp
    def f(x, y):
        return lax.mul(x, y)

    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append((type(tx).__name__, type(ty).__name__))
        out = lax.mul(tx, y) if type(tx).__name__ != "SymbolicZero" else tx
        return f(x, y), out

    f.defjvp(f_jvp, symbolic_zeros=True)
    assert_close(grad(f)(F32(2.0), F32(3.0)), 3.0)
    assert seen[-1][0] != "SymbolicZero" and seen[-1][1] == "SymbolicZero"
    t = jvp(f, (F32(2.0), F32(3.0)), (F32(0.0), F32(1.0)))[1]
    assert_close(t, 0.0)


def test_custom_jvp_closure_over_differentiated_value_is_an_error():
    # As in JAX 0.10.2: under grad the custom rule runs instead of the function, and the rule
    # calling f (which closes over a tracer of the outer differentiation) at the enclosing
    # level meets that tracer outside its transformation.
    from jaxkit.core import UnexpectedTracerError

    def outer(w):
        @custom_jvp
        def f(x):
            return lax.mul(w, x)

        @f.defjvp
        def f_jvp(primals, tangents):
            return f(*primals), tangents[0]

        return f(w)

    with pytest.raises((UnexpectedTracerError, core.TracerArrayConversionError)):
        grad(outer)(F32(2.0))

    def outer_const(w):
        @custom_jvp
        def f(x):
            return lax.mul(w, lax.sin(x))

        f.defjvp(lambda p, t: (f(*p), t[0]))
        return f(F32(1.0))

    # JAX raises UnexpectedTracerError; jaxkit's eager evaluation meets the closed-over
    # tracer first and says it cannot be converted (both reject the program).
    with pytest.raises((UnexpectedTracerError, core.TracerArrayConversionError)):
        grad(outer_const)(F32(2.0))


def test_custom_jvp_errors():
    f = custom_jvp(lambda x: x)
    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function"):
        f(F32(1.0))
    g = custom_jvp(lambda x: lax.sin(x))
    g.defjvp(lambda p, t: (p[0], (t[0], t[0])))
    with pytest.raises(TypeError, match="equal container"):
        jvp(g, (F32(1.0),), (F32(1.0),))
    h = custom_jvp(lambda x: lax.sin(x))
    h.defjvp(lambda p, t: (h(p[0]), np.ones(2, F32)))
    with pytest.raises(TypeError, match=re.escape("Expected float32[] (tangent type of "
                                                  "float32[]) but got float32[2]")):
        jvp(h, (F32(1.0),), (F32(1.0),))


# --------------------------------------------------------------------------------------------
# custom_vjp
# --------------------------------------------------------------------------------------------


@custom_vjp
def fv(x, y):
    return lax.mul(lax.sin(x), y)


def fv_fwd(x, y):
    return fv(x, y), (lax.cos(x), lax.sin(x), y)


def fv_bwd(res, g):
    cos_x, sin_x, y = res
    return (lax.mul(lax.mul(cos_x, g), y), lax.mul(sin_x, g))


fv.defvjp(fv_fwd, fv_bwd)


def test_custom_vjp_docs_example():
    x, y = F32(3.0), F32(4.0)
    assert_close(fv(x, y), np.sin(3.0) * 4.0)
    assert_close(grad(fv)(x, y), np.cos(3.0) * 4.0)
    gx, gy = grad(fv, (0, 1))(x, y)
    assert_close(gx, np.cos(3.0) * 4.0)
    assert_close(gy, np.sin(3.0))
    assert_close(jaxkit.jit(grad(fv))(x, y), np.cos(3.0) * 4.0)
    assert_close(grad(jaxkit.jit(fv))(x, y), np.cos(3.0) * 4.0)
    xs = np.array([0.1, 0.2, 0.3], F32)
    assert_close(vmap(grad(fv))(xs, np.full(3, 2.0, F32)), np.cos(xs) * 2)
    assert_close(jacrev(fv)(x, y), np.cos(3.0) * 4.0)
    # vmap of the pullback (jacrev of a vector function) transposes custom_lin under vmap
    twos = np.full(3, 2.0, F32)
    assert_close(jacrev(lambda xs: fv(xs, twos))(xs), np.diag(np.cos(xs) * 2))


def test_custom_vjp_rule_is_used_and_nested_grad_differentiates_bwd():
    @custom_vjp
    def g(x):
        return lax.mul(x, x)

    g.defvjp(lambda x: (g(x), x), lambda x, ct: (lax.mul(ct, lax.mul(lax.mul(x, x),
                                                                     F32(10.0))),))
    x = F32(3.0)
    assert_close(grad(g)(x), 90.0)  # 10 x^2 (the rule, not 2x)
    assert_close(grad(grad(g))(x), 60.0)  # d/dx of the bwd rule: 20 x
    assert_close(jaxkit.jit(grad(grad(g)))(x), 60.0)


def test_custom_vjp_under_vmap_sums_cotangents_of_unbatched_arguments():
    w = F32(2.0)
    xs = np.array([0.1, 0.2, 0.3], F32)
    gw = grad(lambda w: vsum(vmap(fv, in_axes=(0, None))(xs, w)), 0)(w)
    assert_close(gw, np.sum(np.sin(xs)))
    gxs = grad(lambda xs: vsum(vmap(fv, in_axes=(0, None))(xs, w)))(xs)
    assert_close(gxs, np.cos(xs) * 2)
    assert_close(vmap(fv, in_axes=(0, None))(xs, w), np.sin(xs) * 2)
    jaxpr = jaxkit.make_jaxpr(vmap(fv, in_axes=(0, None)))(xs, w)
    assert [e.primitive.name for e in jaxpr.eqns] == ["custom_vjp_call"]


def test_custom_vjp_forward_mode_is_an_error():
    msg = "can't apply forward-mode autodiff (jvp) to a custom_vjp function."
    with pytest.raises(TypeError, match=re.escape(msg)):
        jvp(fv, (F32(1.0), F32(2.0)), (F32(1.0), F32(0.0)))
    with pytest.raises(TypeError, match=re.escape(msg)):
        jacfwd(fv)(F32(1.0), F32(2.0))
    with pytest.raises(TypeError, match=re.escape(msg)):
        jaxkit.jit(lambda x: jvp(fv, (x, F32(2.0)), (F32(1.0), F32(0.0))))(F32(1.0))


def test_custom_vjp_bwd_none_means_zero_and_nondiff_argnums():
    @functools.partial(custom_vjp, nondiff_argnums=(0,))
    def scale(k, x, y):
        return lax.add(lax.mul(k, x), y)

    scale.defvjp(lambda k, x, y: (scale(k, x, y), None),
                 lambda k, res, g: (lax.mul(F32(k), g), None))
    gx, gy = grad(scale, (1, 2))(3.0, F32(1.0), F32(1.0))
    assert_close(gx, 3.0)
    assert_close(gy, 0.0)
    with pytest.raises(TypeError, match="Tracers cannot be passed as non-differentiable"):
        grad(lambda k: scale(k, F32(1.0), F32(1.0)))(F32(3.0))


@custom_vjp
def clip_gradient(lo, hi, x):
    return x


def _clip_fwd(lo, hi, x):
    return x, (lo, hi)


def _clip_bwd(res, g):
    lo, hi = res
    return (None, None, lax.clamp(lo, g, hi))


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_clip_gradient_docs_example():
    f = lambda x: lax.sin(clip_gradient(F32(-0.75), F32(0.75), x))
    assert_close(grad(f)(F32(0.1)), np.clip(np.cos(0.1), -0.75, 0.75))
    assert_close(grad(f)(F32(2.0)), -0.4161468)  # cos(2) inside the clip range
    assert_close(grad(lambda x: lax.mul(F32(3.0), clip_gradient(F32(-0.75), F32(0.75), x)))(
        F32(0.1)), 0.75)


def test_custom_vjp_errors():
    h = custom_vjp(lambda x: lax.sin(x))
    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function"):
        h(F32(1.0))
    h.defvjp(lambda x: lax.sin(x), lambda r, g: (g,))
    with pytest.raises(TypeError, match="must produce a pair"):
        grad(h)(F32(1.0))
    k = custom_vjp(lambda x, y: lax.mul(x, y))
    k.defvjp(lambda x, y: (k(x, y), None), lambda r, g: (g,))
    with pytest.raises(TypeError, match="tuple of length equal to the number of arguments"):
        grad(k)(F32(1.0), F32(2.0))
    m = custom_vjp(lambda x: lax.sin(x))
    m.defvjp(lambda x: (m(x), None), lambda r, g: (np.ones(3, F32),))
    with pytest.raises(ValueError, match="produced an output of type float32\\[3\\] "
                                         "corresponding to an input of type float32\\[\\], "
                                         "so the shapes do not match"):
        grad(m)(F32(1.0))

    def outer(w):
        n = custom_vjp(lambda x: lax.mul(w, x))
        n.defvjp(lambda x: (n(x), None), lambda r, g: (g,))
        return n(F32(1.0))

    # JAX 0.10.2: the forward rule runs at the enclosing level and meets the outer tracer.
    with pytest.raises((core.UnexpectedTracerError, core.TracerArrayConversionError)):
        grad(outer)(F32(2.0))


def test_closure_convert_allows_differentiating_closed_over_values():
    n_consts = []

    def outer(w):
        def f(x):
            return lax.mul(w, lax.sin(x))

        converted, consts = closure_convert(f, F32(1.0))
        n_consts.append(len(consts))

        @custom_vjp
        def g(x, *consts):
            return converted(x, *consts)

        def g_fwd(x, *consts):
            out, pullback = vjp(converted, x, *consts)
            return out, pullback

        g.defvjp(g_fwd, lambda pullback, ct: pullback(ct))
        return g(F32(1.0), *consts)

    assert_close(outer(F32(2.0)), 2 * np.sin(1.0))
    assert_close(grad(outer)(F32(2.0)), np.sin(1.0))
    assert n_consts[-1] == 1  # under grad, w is a tracer: hoisted into an argument


# --------------------------------------------------------------------------------------------
# checkpoint / remat
# --------------------------------------------------------------------------------------------


def sin_sin(x):
    return lax.sin(lax.sin(x))


def _backward_eqns(fun, x):
    """The primitive names inside the checkpoint equation of the backward pass."""
    jaxpr = jaxkit.make_jaxpr(lambda x: vjp(fun, x)[1](F32(1.0)))(x)
    (eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "remat2"]
    assert eqn.params["differentiated"] is True
    return [e.primitive.name for e in eqn.params["jaxpr"].eqns], jaxpr


def test_checkpoint_recomputes_the_forward_pass_in_the_backward_pass():
    x = F32(2.0)
    f = checkpoint(sin_sin)
    assert_close(f(x), np.sin(np.sin(2.0)))
    assert_close(grad(f)(x), grad(sin_sin)(x))
    names, jaxpr = _backward_eqns(f, x)
    assert "sin" in names, jaxpr  # the forward computation appears again
    # outside the checkpoint, the forward pass ran: the backward part has no other sin
    outer = [e.primitive.name for e in jaxpr.eqns]
    assert outer.count("sin") == 2 and "cos" not in outer


def test_checkpoint_policies():
    x = F32(2.0)
    names, _ = _backward_eqns(checkpoint(sin_sin, policy=checkpoint_policies.everything_saveable),
                              x)
    assert "sin" not in names  # everything saved: only the linear part is left
    names, _ = _backward_eqns(checkpoint(sin_sin, policy=checkpoint_policies.nothing_saveable), x)
    assert "sin" in names

    def matmuls(w):
        h = lax.sin(lax.dot_general(w, w, (((1,), (0,)), ((), ()))))
        return vsum(lax.dot_general(h, w, (((1,), (0,)), ((), ()))))

    w = np.eye(2, dtype=F32) * 0.5
    fd = checkpoint(matmuls, policy=checkpoint_policies.dots_saveable)
    names, _ = _backward_eqns(fd, w)
    assert "sin" in names and names.count("dot_general") >= 1
    assert_close(grad(fd)(w), grad(matmuls)(w))

    def named(x):
        a = checkpoint_name(lax.sin(x), "a")
        return lax.sin(lax.cos(a))

    fn = checkpoint(named, policy=checkpoint_policies.save_only_these_names("a"))
    names, _ = _backward_eqns(fn, x)
    assert "cos" in names and "sin" in names  # sin(cos(a)) recomputed from saved a...
    assert names.count("sin") == 1  # ...but not sin(x), which was saved as "a"
    assert_close(grad(fn)(x), grad(named)(x))


def test_checkpoint_composes_with_jit_vmap_and_higher_order():
    f = remat(sin_sin)
    x = F32(0.6)
    assert_close(jaxkit.jit(grad(f))(x), grad(sin_sin)(x))
    assert_close(grad(jaxkit.jit(f))(x), grad(sin_sin)(x))
    assert_close(grad(grad(f))(x), grad(grad(sin_sin))(x))
    xs = np.array([0.1, 0.5], F32)
    assert_close(vmap(grad(f))(xs), vmap(grad(sin_sin))(xs))
    assert_close(jvp(f, (x,), (F32(1.0),))[1], np.cos(np.sin(x)) * np.cos(x))
    g = checkpoint(lambda x, n: lax.integer_pow(x, n), static_argnums=(1,))
    assert_close(grad(g)(F32(2.0), 3), 12.0)
    v, gr = value_and_grad(checkpoint(lambda d: lax.mul(d["a"], d["b"])))({"a": F32(2.0),
                                                                          "b": F32(5.0)})
    assert_close(v, 10.0)
    assert_close(gr["a"], 5.0)


def test_checkpoint_lowering_has_an_optimization_barrier():
    f = jaxkit.jit(grad(checkpoint(sin_sin)))
    text = f.lower(F32(1.0)).as_text()
    assert "optimization_barrier" in text


def test_checkpoint_jaxpr_prints_like_jax():
    jaxpr = jaxkit.make_jaxpr(checkpoint(sin_sin))(F32(1.0))
    (eqn,) = jaxpr.eqns
    assert eqn.primitive.name == "remat2"
    assert eqn.params["prevent_cse"] is True and eqn.params["differentiated"] is False
    assert isinstance(eqn.params["jaxpr"], core.ClosedJaxpr)


# --------------------------------------------------------------------------------------------
# Batching rules of custom_jvp_call, custom_vjp_call, custom_lin and checkpoint, against a
# Python loop (vmapcheck), for several in_axes, and differentiated inside and outside vmap
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("in_axes", [(0, None), (1, 0), (None, 1)])
@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp", "checkpoint"])
def test_batching_rules_against_a_loop(kind, in_axes):
    fun = {"custom_jvp": f_twice, "custom_vjp": fv, "checkpoint": checkpoint(
        lambda x, y: lax.mul(lax.sin(x), y))}[kind]
    batch = {  # a batch of 2 examples of shape (3,), along axis 0, axis 1, or one example
        0: lambda m: m, 1: lambda m: m.T.copy(), None: lambda m: m[0]}
    a = np.arange(6, dtype=F32).reshape(2, 3) * 0.1
    b = np.arange(6, dtype=F32).reshape(2, 3) * 0.2 + 1
    args = (batch[in_axes[0]](a), batch[in_axes[1]](b))

    def f(x, y):
        return vsum(fun(x, y))

    check_vmap(lambda x, y: fun(x, y), args, in_axes)
    check_vmap(grad(f, (0, 1)), args, in_axes)
    check_vmap(lambda x, y: grad(f, (0, 1))(x, y), args, in_axes, jit=True)


def test_custom_jvp_function_applied_to_tangents_transposes_through_its_body():
    # jnp.linalg.solve is a custom_jvp function: linearized in b, its equation is applied to
    # tangents and reverse mode transposes its body (JAX inlines it there).
    a = np.array([[3.0, 1.0], [2.0, 2.0]], np.float32)
    lin = jaxkit.linearize(lambda b: jnp.linalg.solve(a, b), np.ones(2, np.float32))[1]
    (ct,) = jaxkit.vjp(lin, np.ones(2, np.float32))[1](np.array([1.0, 2.0], np.float32))
    np.testing.assert_allclose(ct, np.linalg.solve(a.T, [1.0, 2.0]), rtol=1e-5)

    def cube_root(p):  # a tangent_solve that calls jnp.linalg.solve, differentiated by grad
        newton = lambda f, x0: jaxkit.lax.fori_loop(  # noqa: E731
            0, 30, lambda i, x: x - f(x) / (3 * x ** 2), x0)
        tangent_solve = lambda g, y: jnp.linalg.solve(  # noqa: E731
            jaxkit.jacobian(g)(jnp.zeros_like(y)), y)
        return jaxkit.lax.custom_root(lambda x: x ** 3 - p, jnp.ones(2), newton,
                                      tangent_solve).sum()

    p = np.array([8.0, 27.0], np.float32)
    np.testing.assert_allclose(jaxkit.grad(cube_root)(p), 1 / (3 * p ** (2 / 3)), rtol=1e-5)
