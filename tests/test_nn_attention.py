"""jax.nn.dot_product_attention against JAX: grouped heads, bias, masks, causal, local
windows, sequence lengths, residuals, low-rank inputs, dtypes, errors; and its gradient."""
import numpy as np
import pytest

import jaxkit as jk

jax = pytest.importorskip("jax")

rng = np.random.default_rng(0)
B, T, S, N, K, H = 2, 5, 6, 4, 2, 8
Q = rng.normal(size=(B, T, N, H)).astype(np.float32)
KEY = rng.normal(size=(B, S, K, H)).astype(np.float32)
V = rng.normal(size=(B, S, K, H)).astype(np.float32)
CASES = {
    "plain": {},
    "bias per head": {"bias": rng.normal(size=(B, N, T, S)).astype(np.float32)},
    "bias shared": {"bias": rng.normal(size=(B, 1, T, S)).astype(np.float32)},
    "mask": {"mask": rng.random(size=(B, N, T, S)) > 0.3},
    "causal": {"is_causal": True},
    "window": {"local_window_size": (1, 2)},
    "window int": {"local_window_size": 1},
    "lengths": {"query_seq_lengths": np.array([3, 5], np.int32),
                "key_value_seq_lengths": np.array([6, 2], np.int32)},
    "scale": {"scale": 0.5, "is_causal": True},
    "residual": {"return_residual": True, "is_causal": True},
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_jax(name):
    kw = CASES[name]
    got = jk.nn.dot_product_attention(Q, KEY, V, **kw)
    want = jax.nn.dot_product_attention(Q, KEY, V, **kw)
    for g, w in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, want))):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)


def test_low_rank_inputs_bfloat16_and_gradient():
    q, k, v = Q[0, :, :2], KEY[0, :, :2], V[0, :, :2]  # (T, N, H) with N == K
    np.testing.assert_allclose(np.asarray(jk.nn.dot_product_attention(q, k, v)),
                               np.asarray(jax.nn.dot_product_attention(q, k, v)), rtol=2e-5,
                               atol=2e-5)
    bf = jk.numpy.bfloat16
    got = jk.nn.dot_product_attention(Q.astype(bf), KEY.astype(bf), V.astype(bf))
    want = jax.nn.dot_product_attention(Q.astype(bf), KEY.astype(bf), V.astype(bf))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=2e-2, atol=2e-2)

    def loss(lib, q):
        return lib.numpy.sum(lib.nn.dot_product_attention(q, KEY, V, is_causal=True) ** 2)

    np.testing.assert_allclose(np.asarray(jk.jit(jk.grad(lambda q: loss(jk, q)))(Q)),
                               np.asarray(jax.grad(lambda q: loss(jax, q))(Q)), rtol=1e-4,
                               atol=1e-5)


def test_bad_inputs():
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        jk.nn.dot_product_attention(Q[:, :, :3], KEY, V)
    with pytest.raises(ValueError, match="mask dtype should be bool"):
        jk.nn.dot_product_attention(Q, KEY, V, mask=np.ones((B, N, T, S), np.float32))
    with pytest.raises(ValueError, match="value shape should be"):
        jk.nn.dot_product_attention(Q, KEY, V[:, :3])
