"""``jaxkit.experimental.ode.odeint`` against closed forms, SciPy's ``odeint`` and the JAX
oracle: one record per problem, generic checks of values, jit vs eager, vmap vs a loop and
adjoint gradients (against JAX's adjoint and closed forms)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import odeint as scipy_odeint

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.experimental.ode import odeint

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.experimental.ode import odeint as jax_odeint  # noqa: E402


def decay(np_):
    return lambda y, t, k: -k * y


def forced(np_):
    return lambda y, t, k: -k * y + np_.sin(3 * t)


def lotka_volterra(np_):
    def f(y, t, a, b):
        prey, predator = y[0], y[1]
        return np_.stack([a * prey - b * prey * predator, b * prey * predator - a * predator])
    return f


def oscillator(np_):  # a pytree state
    return lambda s, t, w: {"x": s["v"], "v": -w * w * s["x"]}


# (name, make_f(numpy module) -> f, y0, times, args)
RECORDS = [
    ("decay", decay, np.array([1.0, -2.0, 0.5]), np.linspace(0.0, 2.0, 5), (0.8,)),
    ("forced", forced, np.array([0.3]), np.array([0.0, 0.1, 0.7, 2.0, 4.0]), (1.3,)),
    ("lotka_volterra", lotka_volterra, np.array([1.0, 0.5]), np.linspace(0.0, 5.0, 6),
     (1.1, 0.9)),
    ("oscillator", oscillator, {"x": np.array(1.0), "v": np.array(0.0)},
     np.linspace(0.0, 3.0, 4), (2.0,)),
]
IDS = [r[0] for r in RECORDS]


def _leaves(tree):
    return [np.asarray(x) for x in jaxkit.tree_util.tree_leaves(tree)]


def _scipy(make_f, y0, ts, args):
    if isinstance(y0, dict):  # the oscillator as a flat system
        w, = args
        out = scipy_odeint(lambda s, t: [s[1], -w * w * s[0]], [y0["x"], y0["v"]], ts,
                           rtol=1e-12, atol=1e-12)
        return [out[:, 1], out[:, 0]]  # leaves in key order: v, x
    return [scipy_odeint(make_f(np), y0, ts, args=args, rtol=1e-12, atol=1e-12)]


@pytest.mark.parametrize("name,make_f,y0,ts,args", RECORDS, ids=IDS)
def test_values_vs_scipy_and_jax(name, make_f, y0, ts, args, x64):
    ours = odeint(make_f(kjnp), y0, ts, *args)
    theirs = jax_odeint(make_f(jjnp), y0, ts, *args)
    assert jaxkit.tree_util.tree_structure(ours).num_leaves == len(_leaves(theirs))
    for o, t, s in zip(_leaves(ours), _leaves(theirs), _scipy(make_f, y0, ts, args)):
        assert o.shape == t.shape and o.dtype == t.dtype
        np.testing.assert_allclose(o, s, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(o, t, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name,make_f,y0,ts,args", RECORDS, ids=IDS)
def test_jit_matches_eager(name, make_f, y0, ts, args):
    f = make_f(kjnp)
    run = lambda y0, *args: odeint(f, y0, ts, *args, rtol=1e-6, atol=1e-6)  # noqa: E731
    for j, e in zip(_leaves(jaxkit.jit(run)(y0, *args)), _leaves(run(y0, *args))):
        np.testing.assert_allclose(j, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,make_f,y0,ts,args", RECORDS, ids=IDS)
def test_vmap_matches_loop(name, make_f, y0, ts, args):
    f = make_f(kjnp)
    starts = [jaxkit.tree_util.tree_map(lambda x, s=s: np.asarray(x, np.float32) * s, y0)
              for s in (1.0, 0.5, 2.0)]
    stacked = jaxkit.tree_util.tree_map(lambda *xs: np.stack(xs), *starts)
    got = jaxkit.vmap(lambda y: odeint(f, y, ts, *args, rtol=1e-6, atol=1e-6))(stacked)
    for i, start in enumerate(starts):
        want = odeint(f, start, ts, *args, rtol=1e-6, atol=1e-6)
        for g, w in zip(_leaves(got), _leaves(want)):
            np.testing.assert_allclose(g[i], w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,make_f,y0,ts,args", RECORDS, ids=IDS)
def test_adjoint_gradients_match_jax(name, make_f, y0, ts, args, x64):
    def loss(lib_odeint, f):
        def run(y0, ts, *args):
            ys = lib_odeint(f, y0, ts, *args, rtol=1e-10, atol=1e-10)
            return sum((leaf ** 2).sum() for leaf in jax.tree_util.tree_leaves(ys))
        return run

    argnums = tuple(range(2 + len(args)))
    ours = jaxkit.grad(loss(odeint, make_f(kjnp)), argnums)(y0, ts, *args)
    theirs = jax.grad(loss(jax_odeint, make_f(jjnp)), argnums)(y0, ts, *args)
    for o, t in zip(_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(o, np.asarray(t), rtol=1e-6, atol=1e-8)


def test_gradients_match_closed_form(x64):
    ts, y0 = np.linspace(0.0, 2.0, 5), np.array([1.5])

    def final(k, y0):  # y(T) = y0 exp(-k T)
        return odeint(lambda y, t: -k * y, y0, ts, rtol=1e-10, atol=1e-10)[-1, 0]

    dk, dy0 = jaxkit.grad(final, (0, 1))(0.7, y0)
    np.testing.assert_allclose(float(dk), -2.0 * 1.5 * np.exp(-1.4), rtol=1e-7)
    np.testing.assert_allclose(np.asarray(dy0), [np.exp(-1.4)], rtol=1e-7)
    # the adjoint is reverse mode only: forward mode raises JAX's error
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jaxkit.jvp(lambda k: final(k, y0), (0.7,), (1.0,))


def test_limits_and_errors():
    f = lambda y, t: -y  # noqa: E731
    # hmax caps the step (the answer stays right); mxstep caps the steps between output
    # times: with one step allowed the solver stops short and, as JAX's, extrapolates the last
    # step's interpolant to the output time (no error), so the value is JAX's, not exp(-50)
    capped = odeint(f, 1.0, np.array([0.0, 1.0]), hmax=0.1)
    np.testing.assert_allclose(np.asarray(capped)[-1], np.exp(-1.0), rtol=1e-6)
    short = odeint(f, 1.0, np.array([0.0, 50.0]), mxstep=1)
    jax_short = jax_odeint(lambda y, t: -y, 1.0, np.array([0.0, 50.0]), mxstep=1)
    np.testing.assert_allclose(np.asarray(short), np.asarray(jax_short), rtol=1e-5)
    with pytest.raises(TypeError, match="must be arrays or scalars"):
        odeint(lambda y, t, s: -y, 1.0, np.array([0.0, 1.0]), "fast")
    with pytest.raises(ValueError, match="1-D array of times"):
        odeint(f, 1.0, np.array([[0.0, 1.0]]))
