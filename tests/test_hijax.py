"""``jax.experimental.hijax.VJPHiPrimitive``: user primitives written as classes, run under
eager, jit, grad, jvp, vmap and their compositions, against the JAX oracle (the same class
bodies subclass each library's base)."""
import numpy as np
import pytest

import jaxkit
from jaxkit._src_compat import hijax as compat_hijax
from jaxkit.experimental import hijax as khijax
from jaxkit.interpreters import partial_eval as pe

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.experimental.hijax  # noqa: E402


def make_classes(m, hijax):
    """The test primitives written against library ``m`` (jax or jaxkit)."""
    jnp = m.numpy

    class Mul(hijax.VJPHiPrimitive):
        def __init__(self, aval):
            self.in_avals = (aval, aval)
            self.out_aval = aval
            self.params = {}
            super().__init__()

        def expand(self, x, y):
            return x * y

        def vjp_fwd(self, nzs_in, x, y):
            return x * y, (x, y)

        def vjp_bwd_retval(self, res, g):
            x, y = res
            return g * y, g * x

        def batch_dim_rule(self, axis_data, dims):
            return dims[0] if dims[0] is not None else dims[1]

        def jvp(self, primals, tangents):
            (x, y), (tx, ty) = primals, tangents
            return x * y, tx * y + x * ty

    class ScaledSin(hijax.VJPHiPrimitive):
        """One input, a static parameter, VJP only, accumulator-style backward rule."""

        def __init__(self, aval, scale):
            self.in_avals = (aval,)
            self.out_aval = aval
            self.params = dict(scale=scale)
            super().__init__()

        def expand(self, x):
            return self.scale * jnp.sin(x)

        def vjp_fwd(self, nzs_in, x):
            return self.scale * jnp.sin(x), jnp.cos(x)

        def vjp_bwd(self, c, g, x_acc):
            x_acc.accum(self.scale * g * c)

    class SumAndProd(hijax.VJPHiPrimitive):
        """Pytree output: (sum, prod) of a vector."""

        def __init__(self, aval):
            self.in_avals = (aval,)
            self.out_aval = (aval.update(shape=()), aval.update(shape=()))
            self.params = {}
            super().__init__()

        def expand(self, x):
            return jnp.sum(x), jnp.prod(x)

        def vjp_fwd(self, nzs_in, x):
            return (jnp.sum(x), jnp.prod(x)), x

        def vjp_bwd_retval(self, x, g):
            gs, gp = (hijax.instantiate_zeros(c) for c in g)
            return (gs * jnp.ones_like(x) + gp * jnp.prod(x) / x,)

    return Mul, ScaledSin, SumAndProd


X = np.arange(1.0, 4.0, dtype=np.float32)
XB = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)


def _cases(m, classes):
    Mul, ScaledSin, SumAndProd = classes
    a, a0 = m.typeof(m.numpy.asarray(X)), m.typeof(m.numpy.asarray(X[0]))
    mul, s, sp = Mul(a), ScaledSin(a, 2.0), SumAndProd(a)
    return {
        "repr": lambda: (repr(mul), repr(s)),
        "eager": lambda: mul(X, X + 1),
        "jit": lambda: m.jit(mul)(X, X),
        "jaxpr": lambda: str(m.make_jaxpr(mul)(X, X)),
        "grad": lambda: m.grad(lambda x: mul(x, x).sum())(X),
        "grad_both": lambda: m.grad(lambda x, y: mul(x, y).sum(), argnums=(0, 1))(X, 2 * X),
        "jit_grad": lambda: m.jit(m.grad(lambda x: s(x).sum()))(X),
        "grad_accum": lambda: m.grad(lambda x: s(x).sum())(X),
        "jvp": lambda: m.jvp(mul, (X, X), (X, X)),
        "vjp": lambda: m.vjp(mul, X, X)[1](X),
        "vmap": lambda: m.vmap(Mul(a0))(X, X),
        "vmap_one_side": lambda: m.vmap(Mul(a0), in_axes=(0, None))(X, X[0]),
        "grad_vmap": lambda: m.grad(lambda x: m.vmap(Mul(a0))(x, x).sum())(X),
        "jit_vmap": lambda: m.jit(m.vmap(Mul(a)))(XB, XB),
        "pytree_out": lambda: sp(X),
        "pytree_grad": lambda: m.grad(lambda x: sp(x)[0] + 2 * sp(x)[1])(X),
        "second_order_jit": lambda: m.jit(lambda x: m.grad(lambda y: sp(y)[1])(x))(X),
        "eq_hash": lambda: (s == ScaledSin(a, 2.0), s == ScaledSin(a, 3.0),
                            hash(s) == hash(ScaledSin(a, 2.0))),
    }


OURS = _cases(jaxkit, make_classes(jaxkit, khijax))
THEIRS = _cases(jax, make_classes(jax, jax.experimental.hijax))


@pytest.mark.parametrize("case", sorted(OURS))
def test_matches_jax(case):
    ours, theirs = OURS[case](), THEIRS[case]()
    if isinstance(theirs, (str, bool)) or (isinstance(theirs, tuple) and
                                           isinstance(theirs[0], (str, bool))):
        assert ours == theirs
        return
    for a, b in zip(jaxkit.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


ERRORS = {
    "jvp_without_jvp": lambda m, c: m.jvp(c[1](m.typeof(m.numpy.asarray(X)), 1.0), (X,), (X,)),
    "vmap_without_rule": lambda m, c: m.vmap(c[1](m.typeof(m.numpy.asarray(X[0])), 1.0))(X),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_jax(case):
    with pytest.raises(NotImplementedError) as theirs:
        ERRORS[case](jax, make_classes(jax, jax.experimental.hijax))
    with pytest.raises(NotImplementedError) as ours:
        ERRORS[case](jaxkit, make_classes(jaxkit, khijax))
    assert str(ours.value).replace("jaxkit", "jax") == str(theirs.value)


@pytest.mark.parametrize("hijax", [khijax, jax.experimental.hijax], ids=["jaxkit", "jax"])
def test_subclass_must_set_types(hijax):
    class Bad(hijax.VJPHiPrimitive):
        def __init__(self):
            super().__init__()

    with pytest.raises(AttributeError, match="should set `self.in_avals`"):
        Bad()


def test_dce_drops_unused_call():
    Mul = make_classes(jaxkit, khijax)[0]
    mul = Mul(jaxkit.typeof(jaxkit.numpy.asarray(X)))
    closed = jaxkit.make_jaxpr(lambda x: (mul(x, x), x + 1)[1])(X)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["call_hi_primitive", "add"]
    jaxpr, _ = pe.dce_jaxpr(closed.jaxpr)
    assert [e.primitive.name for e in jaxpr.eqns] == ["add"]


def test_reexported_names():
    assert khijax.Zero is jaxkit.interpreters.ad.Zero
    assert khijax.ShapedArray is type(jaxkit.typeof(jaxkit.numpy.ones(2)))
    assert khijax.is_undefined_primal(jaxkit.interpreters.ad.UndefinedPrimal(
        jaxkit.typeof(jaxkit.numpy.ones(2))))


def test_install_as_jax_module_has_the_real_names():
    # install_as_jax maps jax.experimental.hijax to the compatibility module Flax imports.
    assert compat_hijax.VJPHiPrimitive is khijax.VJPHiPrimitive
    assert compat_hijax.instantiate_zeros is khijax.instantiate_zeros
    zero = khijax.Zero(jaxkit.typeof(jaxkit.numpy.ones(2)))
    np.testing.assert_array_equal(compat_hijax.instantiate_zeros(zero), np.zeros(2))
