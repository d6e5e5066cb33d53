"""Automatic differentiation: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev,
hessian and stop_gradient, on pytrees, nested, and composed with jit and vmap; the errors.

Functions are written with ``jaxkit.lax`` so that these tests exercise AD alone. Where the
``jax`` package is installed the numbers are compared with it as an oracle.
"""
from __future__ import annotations

import collections
import re

import numpy as np
import pytest

import jaxkit
from jaxkit import core, dtypes, lax, tree_util
from jaxkit.api import (
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    stop_gradient,
    value_and_grad,
    vjp,
)
from jaxkit.transforms.vmap import vmap
from jaxkit.interpreters import ad, dispatch

F32 = np.float32


def sum_logistic(x):
    return lax.reduce_sum(lax.div(F32(1), lax.add(F32(1), lax.exp(lax.neg(x)))), (0,))


def cube(x):
    return lax.mul(x, lax.mul(x, x))


def vsum(x):
    return lax.reduce_sum(x, tuple(range(np.ndim(x))))


def assert_close(x, y, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


# --------------------------------------------------------------------------------------------
# The tutorial numbers
# --------------------------------------------------------------------------------------------


def test_grad_sum_logistic_seed_numbers():
    g = grad(sum_logistic)(np.arange(3.0, dtype=F32))
    assert_close(g, [0.25, 0.19661194, 0.10499357])
    assert g.dtype == np.float32 and g.shape == (3,)


def test_grad_of_logistic_primitive_matches_exp_form():
    x = np.arange(3.0, dtype=F32)
    g = grad(lambda x: vsum(lax.logistic(x)))(x)
    assert_close(g, grad(sum_logistic)(x))


def test_value_and_grad_has_aux_and_argnums_tuple():
    def loss(w, b, x):
        y = lax.add(lax.mul(w, x), b)
        return vsum(lax.mul(y, y)), {"pred": y}

    w, b, x = F32(2.0), F32(0.5), np.array([1.0, -1.0, 3.0], F32)
    (val, aux), (gw, gb) = value_and_grad(loss, argnums=(0, 1), has_aux=True)(w, b, x)
    y = 2.0 * x + 0.5
    assert_close(val, np.sum(y ** 2))
    assert_close(aux["pred"], y)
    assert_close(gw, np.sum(2 * y * x))
    assert_close(gb, np.sum(2 * y))
    g, aux2 = grad(loss, argnums=2, has_aux=True)(w, b, x)
    assert_close(g, 2 * y * 2.0)
    assert_close(aux2["pred"], y)
    # aux holds plain values, not tracers
    assert not isinstance(aux["pred"], core.Tracer)


def test_negative_argnums_and_kwargs_pass_through():
    f = lambda x, y, *, scale: lax.mul(scale, lax.mul(x, y))
    assert_close(grad(f, argnums=-1)(F32(2.0), F32(3.0), scale=F32(5.0)), 10.0)


# --------------------------------------------------------------------------------------------
# jvp, linearize, vjp
# --------------------------------------------------------------------------------------------


def f_vec(x):
    """R^3 -> R^2 with a known Jacobian."""
    a = lax.mul(lax.sin(x), x)
    return lax.concatenate([lax.slice(a, (0,), (1,)), lax.slice(lax.mul(x, x), (2,), (3,))], 0)


def jac_f_vec(x):
    j = np.zeros((2, 3), np.float32)
    j[0, 0] = np.cos(x[0]) * x[0] + np.sin(x[0])
    j[1, 2] = 2 * x[2]
    return j


X3 = np.array([0.3, -1.2, 2.0], F32)


def test_jvp_and_vjp_recover_the_jacobian():
    cols = [jvp(f_vec, (X3,), (np.eye(3, dtype=F32)[i],))[1] for i in range(3)]
    y, pullback = vjp(f_vec, X3)
    rows = [pullback(np.eye(2, dtype=F32)[i])[0] for i in range(2)]
    assert_close(np.stack(cols, 1), jac_f_vec(X3))
    assert_close(np.stack(rows, 0), jac_f_vec(X3))
    assert_close(y, f_vec(X3))


def test_jvp_returns_primal_and_weak_types_like_jax():
    p, t = jvp(lax.sin, (0.1,), (0.2,))
    assert_close(p, 0.09983342)
    assert_close(t, 0.19900084)
    assert p.weak_type and t.weak_type


def test_linearize_matches_jvp_and_does_not_retrace():
    calls = []

    def f(x):
        calls.append(1)
        return lax.add(lax.mul(F32(3.0), lax.sin(x)), lax.cos(lax.div(x, F32(2.0))))

    y, f_jvp = linearize(f, F32(2.0))
    assert_close(y, 3 * np.sin(2.0) + np.cos(1.0))
    assert_close(f_jvp(F32(3.0)), -5.007528, rtol=1e-5)
    assert_close(f_jvp(F32(4.0)), -6.676704, rtol=1e-5)
    assert len(calls) == 1
    with pytest.raises(ValueError, match="inconsistent with the original primal"):
        f_jvp(np.ones(2, F32))


def test_linearized_function_is_a_pytree_of_its_residuals():
    """As JAX's ``Partial``: it passes through ``jit`` and ``vmap`` as an argument."""
    y, f_jvp = linearize(lambda x: jaxkit.numpy.sin(x) * 2, np.ones(3, F32))
    assert isinstance(f_jvp, tree_util.Partial)
    leaves = tree_util.tree_leaves(f_jvp)
    assert leaves and all(isinstance(x, jaxkit.Array) for x in leaves)
    want = 2 * np.cos(1.0) * np.ones(3)
    assert_close(jaxkit.jit(lambda f, t: f(t))(f_jvp, np.ones(3, F32)), want)
    assert_close(jaxkit.vmap(f_jvp)(np.ones((2, 3), F32)), np.stack([want, want]))


def test_vjp_of_multiple_outputs_and_zero_cotangent_paths():
    def f(x, y):
        return lax.sin(x), lax.cos(y)

    (a, b), pullback = vjp(f, F32(0.5), F32(1.0))
    assert_close(a, np.sin(0.5))
    assert_close(b, np.cos(1.0))
    xbar, ybar = pullback((F32(-0.7), F32(0.3)))
    assert_close(xbar, -0.61430776)
    assert_close(ybar, -0.2524413)
    # an argument the output does not depend on gets a zero cotangent
    _, pb = vjp(lambda x, y: lax.sin(x), F32(0.5), F32(1.0))
    gx, gy = pb(F32(1.0))
    assert_close(gx, np.cos(0.5))
    assert_close(gy, 0.0)
    assert np.asarray(gy).dtype == np.float32


def test_vjp_function_is_a_pytree_and_works_under_jit():
    y, pullback = vjp(lambda x: lax.mul(x, x), np.array([1.0, 2.0], F32))
    assert_close(y, [1.0, 4.0])
    leaves = tree_util.tree_leaves(pullback)
    assert leaves, "the residuals are the leaves of the vjp function"
    out = jaxkit.jit(lambda pb, ct: pb(ct))(pullback, np.ones(2, F32))
    assert_close(out[0], [2.0, 4.0])


def test_vjp_cotangent_errors():
    _, pullback = vjp(lambda x: (x, lax.mul(x, x)), np.ones(3, F32))
    with pytest.raises(ValueError, match="tree structure"):
        pullback(np.ones(3, F32))
    msg = ("unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
           "float32[2], but expected float32[3] because the corresponding output of the "
           "differentiated function had JAX type float32[3]")
    with pytest.raises(ValueError, match=re.escape(msg)):
        pullback((np.ones(2, F32), np.ones(3, F32)))
    with pytest.raises(ValueError, match="got int32\\[3\\], but expected float32\\[3\\]"):
        pullback((np.ones(3, np.int32), np.ones(3, F32)))
    with pytest.raises(TypeError, match="must be called with a single argument"):
        pullback(np.ones(3, F32), np.ones(3, F32))


def test_jvp_argument_errors():
    with pytest.raises(TypeError, match="must be tuples or lists; found float and float"):
        jvp(lax.sin, 1.0, 1.0)
    with pytest.raises(TypeError, match="same tree structure"):
        jvp(lambda x, y: x, (F32(1), F32(2)), (F32(1),))
    with pytest.raises(TypeError, match="dtypes must be equal.*expected tangent dtype float32"):
        jvp(lax.sin, (F32(1),), (np.int32(1),))
    with pytest.raises(ValueError, match=re.escape(
            "jvp called with different primal and tangent shapes;Got primal shape (3,) and "
            "tangent shape as (4,)")):
        jvp(lax.sin, (np.ones(3, F32),), (np.ones(4, F32),))


# --------------------------------------------------------------------------------------------
# Jacobians and Hessians
# --------------------------------------------------------------------------------------------


def test_jacfwd_equals_jacrev_equals_closed_form():
    jf, jr = jacfwd(f_vec)(X3), jacrev(f_vec)(X3)
    assert jf.shape == jr.shape == (2, 3)
    assert_close(jf, jac_f_vec(X3))
    assert_close(jr, jac_f_vec(X3))


def test_jacobians_of_matrix_functions_have_out_shape_plus_in_shape():
    m = np.arange(6, dtype=F32).reshape(2, 3)
    f = lambda m: lax.mul(lax.sin(m), F32(2.0))
    jf, jr = jacfwd(f)(m), jacrev(f)(m)
    assert jf.shape == jr.shape == (2, 3, 2, 3)
    expected = np.zeros((2, 3, 2, 3), F32)
    for i in range(2):
        for j in range(3):
            expected[i, j, i, j] = 2 * np.cos(m[i, j])
    assert_close(jf, expected)
    assert_close(jr, expected)


def test_hessian_closed_form():
    def g(x):
        x0 = lax.slice(x, (0,), (1,))
        x1 = lax.slice(x, (1,), (2,))
        return lax.reshape(lax.sub(lax.sub(cube(x0), lax.mul(F32(2), lax.mul(x0, x1))),
                                   lax.integer_pow(x1, 6)), ())

    h = hessian(g)(np.array([1.0, 2.0], F32))
    assert_close(h, [[6.0, -2.0], [-2.0, -480.0]])


def test_jacobians_with_pytrees_and_argnums():
    def f(d, s):
        return {"u": lax.mul(d["a"], s), "v": lax.mul(d["b"], d["b"])}

    d = {"a": np.array([1.0, 2.0], F32), "b": F32(3.0)}
    s = F32(2.0)
    for jac in (jacfwd, jacrev):
        j = jac(f)(d, s)
        assert set(j) == {"u", "v"} and set(j["u"]) == {"a", "b"}
        assert j["u"]["a"].shape == (2, 2) and j["u"]["b"].shape == (2,)
        assert_close(j["u"]["a"], 2 * np.eye(2))
        assert_close(j["v"]["b"], 6.0)
        assert_close(j["v"]["a"], [0.0, 0.0])
        j2 = jac(f, argnums=(0, 1))(d, s)
        assert isinstance(j2["u"], tuple) and len(j2["u"]) == 2
        assert_close(j2["u"][1], [1.0, 2.0])


def test_jacfwd_jacrev_has_aux():
    f = lambda x: (lax.mul(x, x), {"x": x})
    x = np.array([1.0, 3.0], F32)
    for jac in (jacfwd, jacrev):
        j, aux = jac(f, has_aux=True)(x)
        assert_close(j, np.diag(2 * x))
        assert_close(aux["x"], x)


def test_hessian_of_a_dict_against_jax_oracle():
    jax = pytest.importorskip("jax")
    d = {"a": np.array([1.0, 2.0], F32), "b": F32(3.0)}
    h = hessian(lambda d: vsum(lax.mul(lax.mul(d["a"], d["a"]), d["b"])))(d)
    hj = jax.hessian(lambda d: (d["a"] * d["a"] * d["b"]).sum())(d)
    for k1 in d:
        for k2 in d:
            assert np.shape(h[k1][k2]) == np.shape(hj[k1][k2])
            assert_close(h[k1][k2], hj[k1][k2])


def test_jacobian_against_jax_oracle():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f_ours(x):
        return lax.mul(lax.sin(x), lax.exp(lax.mul(x, F32(0.5))))

    def f_jax(x):
        return jnp.sin(x) * jnp.exp(x * 0.5)

    x = np.array([0.1, 0.7, -0.4], F32)
    assert_close(jacrev(f_ours)(x), jax.jacrev(f_jax)(x))
    assert_close(hessian(lambda x: vsum(f_ours(x)))(x), jax.hessian(lambda x: f_jax(x).sum())(x))


# --------------------------------------------------------------------------------------------
# Higher order, nesting, perturbation confusion
# --------------------------------------------------------------------------------------------


def test_higher_order_grads_closed_forms():
    x = F32(0.7)
    d = lax.sin
    for k, expected in enumerate([np.cos(x), -np.sin(x), -np.cos(x), np.sin(x)], 1):
        d = grad(d)
        assert_close(d(x), expected, rtol=1e-5)
    assert_close(grad(grad(grad(cube)))(F32(2.0)), 6.0)


def test_forward_over_reverse_and_reverse_over_forward():
    f = lambda x: lax.mul(lax.sin(x), x)
    fwd_rev = lambda x: jvp(grad(f), (x,), (F32(1.0),))[1]
    rev_fwd = grad(lambda x: jvp(f, (x,), (F32(1.0),))[1])
    x = F32(1.3)
    expected = 2 * np.cos(x) - x * np.sin(x)
    assert_close(fwd_rev(x), expected)
    assert_close(rev_fwd(x), expected)


def test_no_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = d/dx [x] = 1 (a tape mixing the two perturbations gives 2)
    def outer(x):
        inner = lambda y: lax.add(x, y)
        return lax.mul(x, jvp(inner, (F32(1.0),), (F32(1.0),))[1])

    assert_close(jvp(outer, (F32(1.0),), (F32(1.0),))[1], 1.0)
    assert_close(grad(outer)(F32(1.0)), 1.0)
    # and the closure case from the brief
    g = lambda x: jvp(lambda y: lax.mul(x, y), (F32(2.0),), (F32(1.0),))[1]
    assert_close(jvp(g, (F32(3.0),), (F32(1.0),))[1], 1.0)


def test_grad_of_closure_over_outer_tracer():
    def f(x):
        return grad(lambda y: lax.mul(lax.mul(x, y), y))(F32(3.0))  # = 6x

    assert_close(grad(f)(F32(2.0)), 6.0)


def test_python_control_flow_on_primal_values_works_under_grad():
    def f(x):
        if x > 0:  # a concrete primal value: allowed, as in JAX
            return lax.mul(x, x)
        return lax.neg(x)

    assert_close(grad(f)(F32(3.0)), 6.0)
    assert_close(grad(f)(F32(-3.0)), -1.0)
    # the same function cannot be jitted
    with pytest.raises(core.TracerBoolConversionError):
        jaxkit.jit(grad(f))(F32(3.0))


# --------------------------------------------------------------------------------------------
# Pytrees
# --------------------------------------------------------------------------------------------


Pair = collections.namedtuple("Pair", ["first", "second"])


@tree_util.register_pytree_node_class
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def tree_flatten(self):
        return (self.x, self.y), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def test_grad_over_pytrees_of_every_kind():
    def loss(params):
        d, t, nt, none, p = params
        s = lax.mul(d["w"], d["w"])
        s = lax.add(s, lax.mul(t[0], t[1]))
        s = lax.add(s, lax.mul(nt.first, F32(3.0)))
        s = lax.add(s, lax.mul(p.x, p.y))
        assert none is None
        return lax.add(s, vsum(nt.second))

    params = ({"w": F32(1.5)}, (F32(2.0), F32(4.0)), Pair(F32(1.0), np.ones(2, F32)), None,
              Point(F32(2.0), F32(5.0)))
    g = grad(loss)(params)
    d, t, nt, none, p = g
    assert_close(d["w"], 3.0)
    assert_close(t[0], 4.0)
    assert_close(t[1], 2.0)
    assert isinstance(nt, Pair) and none is None and isinstance(p, Point)
    assert_close(nt.first, 3.0)
    assert_close(nt.second, [1.0, 1.0])
    assert_close(p.x, 5.0)
    assert_close(p.y, 2.0)


def test_jvp_and_vjp_with_pytree_outputs():
    def f(p):
        return {"s": lax.mul(p.x, p.y), "t": (p.x, None)}

    p = Point(F32(2.0), F32(3.0))
    out, tan = jvp(f, (p,), (Point(F32(1.0), F32(0.0)),))
    assert_close(tan["s"], 3.0)
    assert tan["t"][1] is None
    assert_close(out["s"], 6.0)
    out, pullback = vjp(f, p)
    assert out["t"][1] is None
    (g,) = pullback({"s": F32(1.0), "t": (F32(1.0), None)})
    assert isinstance(g, Point)
    assert_close(g.x, 4.0)
    assert_close(g.y, 2.0)


# --------------------------------------------------------------------------------------------
# Integer inputs, float0, stop_gradient
# --------------------------------------------------------------------------------------------


def test_integer_inputs_get_float0():
    f = lambda x, n: lax.mul(x, lax.convert_element_type(n, np.float32))
    gx, gn = grad(f, argnums=(0, 1), allow_int=True)(F32(2.0), np.int32(3))
    assert_close(gx, 3.0)
    assert gn.dtype == dtypes.float0 and gn.shape == ()
    out, tan = jvp(f, (F32(2.0), np.int32(3)), (F32(1.0), np.zeros((), dtypes.float0)))
    assert_close(out, 6.0)
    assert_close(tan, 3.0)
    _, pullback = vjp(f, F32(2.0), np.arange(3, dtype=np.int32))
    gx, gn = pullback(np.ones(3, F32))
    assert gn.dtype == dtypes.float0 and gn.shape == (3,)
    # integer outputs have float0 tangents
    _, t = jvp(lambda x: lax.convert_element_type(x, np.int32), (F32(2.5),), (F32(1.0),))
    assert t.dtype == dtypes.float0


def test_stop_gradient():
    f = lambda x: lax.mul(x, stop_gradient(x))
    assert_close(grad(f)(F32(3.0)), 3.0)
    assert_close(jvp(f, (F32(3.0),), (F32(1.0),))[1], 3.0)
    # it is the identity on values and pytrees; eagerly, host values come back as JAX's
    # bind takes them (typed, canonical dtypes), Python scalars weakly typed
    tree = {"a": F32(1.0), "n": np.int32(2), "f": 2.5}
    out = stop_gradient(tree)
    assert repr(out["n"]) == "TypedNdArray(2, dtype=int32)"
    assert repr(out["f"]) == "TypedFloat(2.5, dtype=float32)" and out["f"] == 2.5
    jaxpr = jaxkit.make_jaxpr(stop_gradient)(F32(1.0))
    assert [e.primitive.name for e in jaxpr.eqns] == ["stop_gradient"]
    assert_close(vmap(stop_gradient)(np.arange(3.0, dtype=F32)), [0.0, 1.0, 2.0])
    assert_close(jaxkit.jit(grad(f))(F32(3.0)), 3.0)


# --------------------------------------------------------------------------------------------
# Composition with jit and vmap
# --------------------------------------------------------------------------------------------


def test_jit_composition_in_all_orders():
    x = F32(2.0)
    expected = {1: 12.0, 2: 12.0, 3: 6.0}
    assert_close(grad(jaxkit.jit(cube))(x), expected[1])
    assert_close(jaxkit.jit(grad(cube))(x), expected[1])
    assert_close(grad(jaxkit.jit(grad(cube)))(x), expected[2])
    assert_close(jaxkit.jit(grad(jaxkit.jit(grad(cube))))(x), expected[2])
    assert_close(grad(grad(jaxkit.jit(grad(cube))))(x), expected[3])
    assert_close(jvp(jaxkit.jit(cube), (x,), (F32(1.0),))[1], expected[1])
    assert_close(jacfwd(jaxkit.jit(grad(cube)))(x), expected[2])
    assert_close(jaxkit.jit(hessian(cube))(x), expected[2])
    _, f_jvp = linearize(jaxkit.jit(cube), x)
    assert_close(f_jvp(F32(1.0)), expected[1])


def test_grad_of_jit_keeps_the_primal_part_known_and_caches():
    traces = []

    @jaxkit.jit
    def f(x):
        traces.append(1)
        return lax.mul(lax.sin(x), x)

    grad(f)(F32(1.0))
    n_programs = dispatch.programs.compiles
    for _ in range(3):
        grad(f)(F32(1.0))
    assert len(traces) == 1, "the jit body is traced once; derived jaxprs are cached"
    assert dispatch.programs.compiles == n_programs, "derived programs compile once"
    # vjp through jit: the forward part ran (its value is concrete), the tangent part is a
    # jit equation in the linear jaxpr
    y, _ = vjp(f, F32(1.0))
    assert not isinstance(y, core.Tracer)
    jaxpr = jaxkit.make_jaxpr(lambda x: vjp(f, x)[1](F32(1.0)))(F32(1.0))
    names = [e.primitive.name for e in jaxpr.eqns]
    assert names.count("jit") == 2, jaxpr  # known part (forward) + transposed tangent part


def test_grad_of_jit_with_python_scalars_and_closures():
    w = np.array([1.0, 2.0, 3.0], F32)

    @jaxkit.jit
    def f(x):
        return vsum(lax.mul(w, lax.sin(x)))

    x = np.array([0.1, 0.2, 0.3], F32)
    assert_close(grad(f)(x), w * np.cos(x))


def test_vmap_of_grad_and_grad_of_vmap():
    xs = np.array([0.1, 0.5, 1.0], F32)
    per_example = vmap(grad(lambda x: lax.mul(lax.sin(x), x)))(xs)
    assert_close(per_example, np.sin(xs) + xs * np.cos(xs))
    g = grad(lambda xs: vsum(vmap(lambda x: lax.mul(lax.sin(x), x))(xs)))(xs)
    assert_close(g, per_example)
    jv = vmap(lambda t: jvp(lax.sin, (xs,), (t,))[1])(np.eye(3, dtype=F32))
    assert_close(jv, np.diag(np.cos(xs)))


def test_grad_inside_jit_prints_a_linear_jaxpr():
    text = str(jaxkit.make_jaxpr(grad(lambda x: lax.mul(x, x)))(F32(3.0)))
    assert "1.0:f32[]" in text  # the output cotangent is an inline literal
    assert "add_any" in text


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def test_grad_error_messages():
    with pytest.raises(TypeError, match=re.escape(
            "Gradient only defined for scalar-output functions. Output had shape: (3,).")):
        grad(lambda x: x)(np.ones(3, F32))
    with pytest.raises(TypeError, match=re.escape(
            "grad requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
            "np.inexact), but got int32. If you want to use Boolean- or integer-valued inputs, "
            "use vjp or set allow_int to True.")):
        grad(lambda x: x)(np.int32(1))
    with pytest.raises(TypeError, match="requires real-valued outputs.*but got int32"):
        grad(lambda x: lax.convert_element_type(x, np.int32))(F32(1.0))
    with pytest.raises(TypeError, match="grad with holomorphic=True requires inputs with complex"):
        grad(lax.sin, holomorphic=True)(F32(1.0))
    with pytest.raises(TypeError, match=re.escape(
            "differentiating with respect to argnums=(0, 3) requires at least 4 positional "
            "arguments to be passed by the caller, but got only 2 positional arguments.")):
        grad(lambda x, y: x, argnums=(0, 3))(F32(1.0), F32(2.0))
    with pytest.raises(TypeError, match="to return a two-element tuple"):
        grad(lambda x: x, has_aux=True)(F32(1.0))
    with pytest.raises(TypeError, match="argnums must be an int or a sequence"):
        grad(lambda x: x, argnums="x")
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        grad(lambda x: x)("hello")
    with pytest.raises(TypeError, match="Expected a callable"):
        grad(3)


def test_complex_holomorphic_grad():
    z = np.complex64(1.0 + 2.0j)
    g = grad(lambda z: lax.mul(z, z), holomorphic=True)(z)
    assert_close(g, 2 * z)
    with pytest.raises(TypeError, match="grad requires real-valued outputs.*complex64"):
        grad(lambda z: lax.mul(z, z))(z)


def test_missing_rules_raise_not_implemented():
    p = core.Primitive("no_rules_here")
    p.def_impl(lambda x: x)
    p.def_abstract_eval(lambda x: x)
    with pytest.raises(NotImplementedError, match="JVP rule for 'no_rules_here'"):
        jvp(p.bind, (F32(1.0),), (F32(1.0),))
    q = core.Primitive("no_transpose_here")
    q.def_impl(lambda x: x)
    q.def_abstract_eval(lambda x: x)
    ad.defjvp_rule(q, lambda primals, tangents: (q.bind(*primals), q.bind(*tangents)))
    try:
        assert_close(jvp(q.bind, (F32(1.0),), (F32(2.0),))[1], 2.0)
        with pytest.raises(NotImplementedError, match="transpose rule for 'no_transpose_here'"):
            grad(q.bind)(F32(1.0))
    finally:
        del ad.jvp_rules[q]


def test_leaked_jvp_tracer_is_detected():
    leaked = []

    def f(x):
        leaked.append(x)
        return x

    jvp(f, (F32(1.0),), (F32(1.0),))
    with pytest.raises(core.UnexpectedTracerError):
        jvp(lambda y: lax.add(y, leaked[0]), (F32(1.0),), (F32(1.0),))


def test_vjp_function_shows_its_structures_and_linear_program():
    """``in_tree``/``out_tree`` as JAX's; ``jaxpr`` is the linear program the pullback
    transposes, closed over ``opaque_residuals`` (jaxkit's residuals, not JAX's choice)."""
    jax = pytest.importorskip("jax")
    f = lambda x, y: {"a": jaxkit.numpy.sin(x) * y}  # noqa: E731
    g = lambda x, y: {"a": jax.numpy.sin(x) * y}  # noqa: E731
    x = np.arange(3.0, dtype=F32)
    _, pull = vjp(f, x, F32(2.0))
    _, want = jax.vjp(g, x, F32(2.0))
    assert (pull.in_tree, pull.out_tree) == (tree_util.tree_structure((x, 1.0)),
                                             tree_util.tree_structure({"a": 1}))
    assert (str(pull.in_tree), str(pull.out_tree)) == (str(want.in_tree), str(want.out_tree))
    tangents = [np.ones(3, F32), F32(0.5)]
    linear = core.eval_jaxpr(pull.jaxpr, pull.opaque_residuals, *tangents)
    _, jvp_out = jaxkit.jvp(f, (x, F32(2.0)), tuple(tangents))
    assert_close(linear[0], jvp_out["a"])
