"""jaxkit.nn and jaxkit.nn.initializers against the jax oracle: values, first derivatives
(including the custom JVPs: relu'(0) = 0) and the initialisers' numbers for the same key."""
import numpy as np
import pytest

import jaxkit
from jaxkit import nn, random
from jaxkit.api import grad
from jaxkit.transforms.vmap import vmap

jax = pytest.importorskip("jax")
jnn = jax.nn


def assert_close(x, ref, rtol=1e-5, atol=1e-6):
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.dtype == ref.dtype, (x.dtype, ref.dtype)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    if x.dtype == np.bool_ or np.issubdtype(x.dtype, np.integer):
        np.testing.assert_array_equal(x, ref)
    else:
        np.testing.assert_allclose(x, ref, rtol=rtol, atol=atol, equal_nan=True)


# The kinks (0, 6, +-1, +-3) are included on purpose: derivatives there follow JAX's choices.
X = np.array([-7., -3., -1.5, -1., -0.25, 0., 0.3, 1., 2.5, 3., 6., 8.], np.float32)
X2 = np.array([[0.5, -1.0, 2.0, 0.1], [1.0, 1.0, -3.0, 0.0], [-2., 4., 0.5, 0.5]],
              np.float32)
MASK = np.array([[True, False, True, True], [True, True, True, False],
                 [False, True, True, True]])

ELEMENTWISE = [
    ("relu", lambda m, x: m.relu(x)),
    ("relu6", lambda m, x: m.relu6(x)),
    ("softplus", lambda m, x: m.softplus(x)),
    ("sigmoid", lambda m, x: m.sigmoid(x)),
    ("silu", lambda m, x: m.silu(x)),
    ("swish", lambda m, x: m.swish(x)),
    ("log_sigmoid", lambda m, x: m.log_sigmoid(x)),
    ("soft_sign", lambda m, x: m.soft_sign(x)),
    ("elu", lambda m, x: m.elu(x)),
    ("elu_alpha", lambda m, x: m.elu(x, 0.5)),
    ("celu", lambda m, x: m.celu(x, 1.5)),
    ("selu", lambda m, x: m.selu(x)),
    ("leaky_relu", lambda m, x: m.leaky_relu(x)),
    ("leaky_relu_slope", lambda m, x: m.leaky_relu(x, 0.2)),
    ("hard_tanh", lambda m, x: m.hard_tanh(x)),
    ("hard_sigmoid", lambda m, x: m.hard_sigmoid(x)),
    ("hard_silu", lambda m, x: m.hard_silu(x)),
    ("hard_swish", lambda m, x: m.hard_swish(x)),
    ("gelu_approx", lambda m, x: m.gelu(x)),
    ("gelu_exact", lambda m, x: m.gelu(x, approximate=False)),
    ("mish", lambda m, x: m.mish(x)),
    ("squareplus", lambda m, x: m.squareplus(x)),
    ("sparse_plus", lambda m, x: m.sparse_plus(x)),
    ("sparse_sigmoid", lambda m, x: m.sparse_sigmoid(x)),
    ("tanh", lambda m, x: m.tanh(x)),
    ("identity", lambda m, x: m.identity(x)),
    ("log1mexp", lambda m, x: m.log1mexp(abs(x) + 0.1)),
]
ELEMENTWISE_IDS = [row[0] for row in ELEMENTWISE]

AXIS_FUNCS = [
    ("softmax", lambda m, x: m.softmax(x)),
    ("softmax_axis0", lambda m, x: m.softmax(x, axis=0)),
    ("softmax_all", lambda m, x: m.softmax(x, axis=None)),
    ("softmax_where", lambda m, x: m.softmax(x, where=MASK)),
    ("log_softmax", lambda m, x: m.log_softmax(x)),
    ("log_softmax_axis0", lambda m, x: m.log_softmax(x, axis=0)),
    ("log_softmax_where", lambda m, x: m.log_softmax(x, where=MASK)),
    ("logsumexp", lambda m, x: m.logsumexp(x)),
    ("logsumexp_axis", lambda m, x: m.logsumexp(x, axis=-1)),
    ("logsumexp_keepdims", lambda m, x: m.logsumexp(x, axis=(0, 1), keepdims=True)),
    ("logsumexp_b", lambda m, x: m.logsumexp(x, axis=0, b=np.array([1., 2., 0.5, 0.],
                                                                    np.float32))),
    ("logsumexp_where", lambda m, x: m.logsumexp(x, axis=1, where=MASK)),
    ("logmeanexp", lambda m, x: m.logmeanexp(x, axis=1)),
    ("standardize", lambda m, x: m.standardize(x)),
    ("standardize_axis0_stable", lambda m, x: m.standardize(x, axis=0, algorithm="stable")),
    ("standardize_where", lambda m, x: m.standardize(x, where=MASK)),
    ("glu", lambda m, x: m.glu(x)),
]
AXIS_IDS = [row[0] for row in AXIS_FUNCS]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("call", [row[1] for row in ELEMENTWISE], ids=ELEMENTWISE_IDS)
def test_elementwise_values(call, dtype):
    x = X.astype(dtype)
    tol = 1e-5 if dtype == "float32" else 2e-3
    assert_close(call(nn, x), call(jnn, x), rtol=tol, atol=tol)


@pytest.mark.parametrize("call", [row[1] for row in ELEMENTWISE], ids=ELEMENTWISE_IDS)
def test_elementwise_grad(call):
    # The derivative at each point (elementwise functions: grad of the sum).
    g = grad(lambda x: call(nn, x).sum())(X)
    ref = jax.grad(lambda x: call(jnn, x).sum())(X)
    assert_close(g, ref)


def test_custom_jvps_at_kinks():
    assert float(grad(nn.relu)(0.)) == 0.0
    assert float(grad(nn.relu)(2.)) == 1.0
    assert float(grad(nn.relu6)(6.)) == 0.0
    assert float(grad(nn.relu6)(3.)) == 1.0
    np.testing.assert_array_equal(vmap(grad(nn.relu))(np.array([-1., 0., 1.], np.float32)),
                                  [0., 0., 1.])


@pytest.mark.parametrize("call", [row[1] for row in AXIS_FUNCS], ids=AXIS_IDS)
def test_axis_functions(call):
    assert_close(call(nn, X2), call(jnn, X2))
    # Derivative of a generic weighted sum of the outputs.
    w = np.linspace(-1, 2, X2.size).astype(np.float32).reshape(X2.shape)

    def loss(m, x):
        y = call(m, x)
        y = y if y.shape == X2.shape else y * y
        return (y * (w if y.shape == X2.shape else 1.0)).sum()

    out = grad(lambda x: loss(nn, x))(X2)
    ref = jax.grad(lambda x: loss(jnn, x))(X2)
    assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_logsumexp_return_sign():
    b = np.array([[1., -2., 0.5, 0.], [-1., -1., 1., 1.], [1., 1., 1., -3.]], np.float32)
    out, sign = nn.logsumexp(X2, axis=1, b=b, return_sign=True)
    ref, ref_sign = jnn.logsumexp(X2, axis=1, b=b, return_sign=True)
    assert_close(out, ref)
    assert_close(sign, ref_sign)
    assert_close(nn.logsumexp(X2, axis=1, b=b), jnn.logsumexp(X2, axis=1, b=b))


def test_softmax_stable_for_large_inputs():
    x = np.array([1000., 1001., 1002.], np.float32)
    assert_close(nn.softmax(x), jnn.softmax(x))
    assert_close(nn.log_softmax(x), jnn.log_softmax(x))
    assert_close(grad(lambda x: nn.log_softmax(x)[0])(x), jax.grad(
        lambda x: jnn.log_softmax(x)[0])(x))


@pytest.mark.parametrize("kwargs", [{}, {"dtype": np.int32}, {"axis": 0}, {"axis": 1},
                                    {"dtype": np.bool_, "axis": -2}], ids=str)
def test_one_hot(kwargs):
    idx = np.array([[0, 2, 5], [1, -1, 3]], np.int32)
    assert_close(nn.one_hot(idx, 4, **kwargs), jnn.one_hot(idx, 4, **kwargs))


def test_under_jit_and_vmap():
    f = jaxkit.jit(lambda x: nn.softmax(x) + nn.gelu(x) + nn.relu(x))
    fj = jax.jit(lambda x: jnn.softmax(x) + jnn.gelu(x) + jnn.relu(x))
    assert_close(f(X2), fj(X2))
    assert_close(vmap(nn.log_softmax)(X2), jax.vmap(jnn.log_softmax)(X2))
    assert_close(vmap(lambda x: nn.one_hot(x, 3))(np.array([0, 2, 1])),
                 jax.vmap(lambda x: jnn.one_hot(x, 3))(np.array([0, 2, 1])))


# --------------------------------------------------------------------------------------------
# Initializers
# --------------------------------------------------------------------------------------------

INITS = [
    ("zeros", lambda m: m.zeros),
    ("ones", lambda m: m.ones),
    ("constant", lambda m: m.constant(0.3)),
    ("uniform", lambda m: m.uniform()),
    ("uniform_scale", lambda m: m.uniform(2.0)),
    ("normal", lambda m: m.normal()),
    ("normal_stddev", lambda m: m.normal(0.5)),
    ("truncated_normal", lambda m: m.truncated_normal(1.5)),
    ("glorot_uniform", lambda m: m.glorot_uniform()),
    ("glorot_normal", lambda m: m.glorot_normal()),
    ("xavier_uniform", lambda m: m.xavier_uniform()),
    ("he_uniform", lambda m: m.he_uniform()),
    ("he_normal", lambda m: m.he_normal()),
    ("kaiming_normal", lambda m: m.kaiming_normal()),
    ("lecun_uniform", lambda m: m.lecun_uniform()),
    ("lecun_normal", lambda m: m.lecun_normal()),
    ("variance_scaling_fan_out_normal", lambda m: m.variance_scaling(2., "fan_out", "normal")),
    ("variance_scaling_geo_axes", lambda m: m.variance_scaling(
        1., "fan_geo_avg", "uniform", in_axis=(0, 1), out_axis=-1)),
    ("orthogonal", lambda m: m.orthogonal()),
    ("orthogonal_scale_axis0", lambda m: m.orthogonal(2.0, column_axis=0)),
]
INIT_IDS = [row[0] for row in INITS]


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4, 5)], ids=str)
@pytest.mark.parametrize("name,make", INITS, ids=INIT_IDS)
def test_initializers(name, make, shape):
    init, jinit = make(nn.initializers), make(jnn.initializers)
    assert_close(init(random.PRNGKey(3), shape), jinit(jax.random.PRNGKey(3), shape))
    # Typed keys, and a second dtype (JAX has no float16 QR on CPU: orthogonal stays f32).
    dtype, tol = (np.float32, 1e-5) if name.startswith("orthogonal") else (np.float16, 2e-3)
    assert_close(init(random.key(4), shape, dtype), jinit(jax.random.key(4), shape, dtype),
                 rtol=tol, atol=tol)


def test_initializer_complex_and_errors():
    for name in ("glorot_uniform", "lecun_normal"):
        init = getattr(nn.initializers, name)()
        jinit = getattr(jnn.initializers, name)()
        assert_close(init(random.PRNGKey(1), (3, 4), np.complex64),
                     jinit(jax.random.PRNGKey(1), (3, 4), np.complex64))
    with pytest.raises(ValueError, match="Can't compute input and output sizes"):
        nn.initializers.glorot_uniform()(random.PRNGKey(0), (5,))
    with pytest.raises(ValueError, match="invalid mode"):
        nn.initializers.variance_scaling(1., "bad", "normal")(random.PRNGKey(0), (2, 2))


def test_delta_orthogonal():
    init, jinit = nn.initializers.delta_orthogonal(), jnn.initializers.delta_orthogonal()
    for shape in [(3, 4, 4), (3, 3, 2, 5)]:
        assert_close(init(random.PRNGKey(2), shape), jinit(jax.random.PRNGKey(2), shape))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        init(random.PRNGKey(2), (4, 4))
