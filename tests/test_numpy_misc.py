"""Statistics, convolution, polynomials, windows, bit packing and index tricks against the
JAX oracle (and NumPy where the results coincide)."""
from __future__ import annotations

import numpy as np
import pytest
from _numpy_checks import check, jjnp, rng_array

import jaxkit
import jaxkit.numpy as jnp

F32 = rng_array((3, 4), np.float32)
V4 = rng_array((4,), np.float32, seed=1)
V7 = rng_array((7,), np.float32, seed=2)
I32 = rng_array((3, 4), np.int32, seed=3)
C4 = rng_array((4,), np.complex64, seed=4)
SORTED4 = np.sort(V4)

ROWS = [
    ("convolve", (V7, V4), {"mode": "full"}), ("convolve", (V7, V4), {"mode": "same"}),
    ("convolve", (V4, V7), {"mode": "valid"}), ("convolve", (np.array([1, 2, 3]),
                                                             np.array([0, 1])), {}),
    ("correlate", (V7, V4), {}), ("correlate", (V4, V7), {"mode": "full"}),
    ("correlate", (V7, V4), {"mode": "same"}), ("correlate", (C4, C4), {"mode": "full"}),
    ("cov", (F32,), {}), ("cov", (F32,), {"rowvar": False}), ("cov", (V4, V7[:4]), {}),
    ("cov", (F32,), {"bias": True, "aweights": V4 + 5, "fweights": np.array([1, 2, 1, 3])}),
    ("cov", (F32,), {"ddof": 0}), ("corrcoef", (F32,), {}), ("corrcoef", (V4, V7[:4]), {}),
    ("cov", (I32,), {"dtype": np.float16, "fweights": np.array([1, -2, 1, 3])}),
    ("cov", (F32,), {"aweights": -V4 - 5, "dtype": np.complex64}),
    ("cov", (np.ones((2, 0), np.float32),), {}), ("corrcoef", (I32,), {"dtype": np.float16}),
    ("gradient", (F32,), {}), ("gradient", (F32, 2.0), {"axis": 1}),
    ("gradient", (V7, np.cumsum(np.abs(V7) + 0.1).astype(np.float32)), {}),
    ("histogram", (F32,), {}), ("histogram", (F32, 5), {"range": (-1, 1), "density": True}),
    ("histogram", (F32, SORTED4), {"weights": F32}), ("histogram_bin_edges", (F32, 4), {}),
    ("histogram2d", (F32[0], F32[1], 3), {}), ("histogramdd", (F32.T.copy(), 2), {}),
    ("bartlett", (7,), {}), ("blackman", (7,), {}), ("hamming", (7,), {}),
    ("hanning", (7,), {}), ("hanning", (1,), {}), ("kaiser", (6, 3.0), {}), ("i0", (F32,), {}),
    ("packbits", (I32 > 0,), {}), ("packbits", (I32 > 0,), {"axis": 1, "bitorder": "little"}),
    ("unpackbits", (np.array([3, 255, 7], np.uint8),), {}),
    ("unpackbits", (np.array([[3, 9]], np.uint8),), {"axis": 1, "count": 10}),
    ("ix_", (np.array([0, 2]), np.array([1, 3])), {}), ("tril_indices", (3,), {}),
    ("ravel_multi_index", ((np.array([0, 1, -1]), np.array([2, 0, 5])), (3, 4)),
     {"mode": "wrap", "dtype": np.int8}),
    ("ravel_multi_index", ((np.array([0, 1, -1]), np.array([2, 0, 5])), (3, 4)),
     {"mode": "clip", "dtype": "uint16", "order": "F"}),
    ("triu_indices", (3, 1, 4), {}), ("tril_indices_from", (F32,), {}),
    ("triu_indices_from", (F32, -1), {}), ("diag_indices", (3,), {}),
    ("diag_indices_from", (F32[:3, :3],), {}),
    ("fill_diagonal", (F32, 9.0), {"inplace": False}),
    ("fill_diagonal", (F32, V4[:2]), {"inplace": False}),
    ("choose", (np.array([0, 1, 2, 1]), [V4, V4 * 2, V4 * 3]), {}),
    ("choose", (np.array([0, 5, -1, 1]), [V4, V4 * 2]), {"mode": "wrap"}),
    ("choose", (np.array([0, 5, -1, 1]), [V4, V4 * 2]), {"mode": "clip"}),
    ("polyval", (V4, F32), {}), ("polyval", (np.array([1, 2, 3]), 2), {}),
    ("polyadd", (V4, V7), {}), ("polysub", (V7, V4), {}), ("polymul", (V4, V7), {}),
    ("polydiv", (V7, V4), {}), ("polyder", (V7, 2), {}), ("polyint", (V4, 2, 1.0), {}),
    ("poly", (V4,), {}), ("interp", (F32, SORTED4, V4), {}),
    ("interp", (F32, SORTED4, V4), {"left": -9.0, "right": 9.0}),
    ("interp", (F32, SORTED4, V4), {"period": 2.0}), ("unwrap", (np.cumsum(F32, 1) * 3,), {}),
    ("trapezoid", (F32,), {}), ("trapezoid", (F32, V4), {}), ("trapezoid", (F32,),
                                                               {"dx": 0.5, "axis": 0}),
    ("vander", (V4,), {}), ("vander", (V4, 3, True), {}), ("diff", (F32,), {}),
    ("diff", (F32, 2, 0), {}), ("diff", (F32,), {"prepend": 0.0, "append": 1.0}),
    ("diff", (I32 > 0,), {}), ("ediff1d", (F32,), {"to_begin": np.array([1.0], np.float32)}),
    ("angle", (C4,), {"deg": True}), ("select", ([F32 > 0, F32 < -1], [F32, I32], 9), {}),
    ("piecewise", (V4, [V4 < 0, V4 > 1], [-1.0, lambda x: x * 2, 0.5]), {}),
]


@pytest.mark.parametrize("name,args,kw", ROWS, ids=[f"{n}-{i}" for i, (n, _, _) in
                                                    enumerate(ROWS)])
def test_matches_jax(name, args, kw):
    check(name, *args, kw=kw, rtol=2e-4 if name in ("polydiv", "gradient") else 2e-5,
          atol=2e-4 if name == "polydiv" else 2e-6)


def test_matches_numpy():
    for mode in ("full", "same", "valid"):
        np.testing.assert_allclose(np.asarray(jnp.convolve(V7, V4, mode)),
                                   np.convolve(V7, V4, mode), rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(jnp.correlate(V7, V4, mode)),
                                   np.correlate(V7, V4, mode), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jnp.cov(F32)), np.cov(F32), rtol=2e-5)
    np.testing.assert_allclose(np.asarray(jnp.corrcoef(F32)), np.corrcoef(F32), rtol=2e-5)
    np.testing.assert_allclose(np.asarray(jnp.gradient(F32, axis=0)), np.gradient(F32, axis=0),
                               rtol=2e-5)
    counts, edges = jnp.histogram(F32, 5)
    want_counts, want_edges = np.histogram(F32, 5)
    np.testing.assert_array_equal(np.asarray(counts), want_counts)
    # atol: JAX's (and jaxkit's) linspace edges differ from NumPy's by ~3e-9 near zero.
    np.testing.assert_allclose(np.asarray(edges), want_edges, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(jnp.kaiser(6, 3.0)), np.kaiser(6, 3.0), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(jnp.packbits(I32 > 0)), np.packbits(I32 > 0))
    np.testing.assert_allclose(np.asarray(jnp.polymul(V4, V7)), np.polymul(V4, V7), rtol=2e-5)


def test_index_tricks():
    for kit, ref in [(jnp.mgrid[0:3, 0:4:2], jjnp.mgrid[0:3, 0:4:2]),
                     (jnp.mgrid[0:1:5j], jjnp.mgrid[0:1:5j]),
                     (jnp.r_[V4, 0, 1:3], jjnp.r_[V4, 0, 1:3]),
                     (jnp.r_["0,2", V4, V4], jjnp.r_["0,2", V4, V4]),
                     (jnp.c_[V4, V4], jjnp.c_[V4, V4]), (jnp.r_["r", V4], jjnp.r_["r", V4])]:
        np.testing.assert_allclose(np.asarray(kit), np.asarray(ref), rtol=1e-6)
        assert kit.dtype == ref.dtype
    og = jnp.ogrid[0:3, 0:1:5j]
    assert [o.shape for o in og] == [(3, 1), (1, 5)]
    assert jnp.s_[1:2] == np.s_[1:2] and jnp.index_exp[1] == (1,)
    rows, cols = jnp.mask_indices(3, jnp.triu)
    np.testing.assert_array_equal(np.asarray(rows), np.triu_indices(3)[0])
    np.testing.assert_array_equal(np.asarray(cols), np.triu_indices(3)[1])


def test_apply_over_axes_and_io(tmp_path):
    out = jnp.apply_over_axes(jnp.sum, jnp.asarray(F32), [0, 1])
    assert out.shape == (1, 1)
    np.testing.assert_allclose(np.asarray(out), F32.sum(keepdims=True), rtol=1e-5)
    path = tmp_path / "x.npy"
    jnp.save(path, jnp.asarray(F32))
    loaded = jnp.load(path)
    assert isinstance(loaded, jaxkit.Array)
    np.testing.assert_array_equal(np.asarray(loaded), F32)
    np.testing.assert_array_equal(np.asarray(jnp.frombuffer(b"\x01\x02", dtype=np.uint8)),
                                  [1, 2])
    np.testing.assert_array_equal(np.asarray(jnp.fromiter(range(3), dtype=np.int32)),
                                  [0, 1, 2])
    with pytest.raises(NotImplementedError, match="jnp.fromfile"):
        jnp.fromfile(path)


def test_misc_errors():
    with pytest.raises(ValueError, match="only support 1-dimensional inputs"):
        jnp.convolve(jnp.asarray(F32), jnp.asarray(V4))
    with pytest.raises(ValueError, match="mode must be one of"):
        jnp.convolve(V4, V4, mode="wide")
    with pytest.raises(ValueError, match="invalid entry in choice array"):
        jnp.choose(np.array([0, 3]), [V4[:2], V4[:2]])
    with pytest.raises(NotImplementedError, match="JAX arrays are immutable, must use inplace"):
        jnp.fill_diagonal(jnp.asarray(F32), 1.0)
    with pytest.raises(NotImplementedError, match="string values for `bins`"):
        jnp.histogram_bin_edges(F32, bins="auto")
    with pytest.raises(TypeError):  # histogram converts bins to an array first, as JAX's
        jnp.histogram(F32, bins="auto")
    idx = (np.array([0, 1]), np.array([2, 0]))
    with pytest.raises(ValueError, match=r"dtype=dtype\('float32'\) is not an integer type"):
        jnp.ravel_multi_index(idx, (3, 4), mode="wrap", dtype=np.float32)
    with pytest.raises(ValueError, match="dtype=dtype\\('int8'\\) not large enough to hold"):
        jnp.ravel_multi_index(idx, (30, 40), mode="wrap", dtype=np.int8)
    with pytest.raises(ValueError, match="Expected 'raise', 'wrap', 'clip', or 'ignore'"):
        jnp.ravel_multi_index(idx, (3, 4), mode="bad")
    with pytest.raises(ValueError, match="cov: dtype must be a subclass of float or complex"):
        jnp.cov(F32, dtype=np.int32)
    with pytest.raises(ValueError, match="corrcoef: dtype must be a subclass of float"):
        jnp.corrcoef(F32, dtype=bool)


def test_polyfit():
    x = np.linspace(0, 1, 10).astype(np.float32)
    y = (3 * x ** 2 - x + 0.5).astype(np.float32)
    check("polyfit", x, y, 2, rtol=1e-4, atol=1e-4)
    check("polyfit", x, np.stack([y, 2 * y], 1), 1, kw={"w": np.ones(10, np.float32)},
          rtol=1e-4, atol=1e-4)
    got = jnp.polyfit(x, y, 2, full=True)
    assert len(got) == 5
    np.testing.assert_allclose(np.asarray(got[0]), [3, -1, 0.5], rtol=1e-4, atol=1e-4)


def test_vectorize_and_apply_along_axis():
    f = jnp.vectorize(lambda a, b: a * b + 1)
    check("vectorize", np.arange(3.0, dtype=np.float32), np.ones((2, 1), np.float32),
          kit_fn=f, jax_fn=jjnp.vectorize(lambda a, b: a * b + 1))
    g = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    check("vectorize", F32, V4, kit_fn=g, jax_fn=jjnp.vectorize(jjnp.dot,
                                                                  signature="(n),(n)->()"))
    h = jnp.vectorize(lambda v, p: v ** p, excluded={1})
    np.testing.assert_allclose(np.asarray(h(F32, 2)), F32 ** 2, rtol=1e-6)
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        jnp.vectorize(jnp.sum, signature="n->")(F32)
    with pytest.raises(ValueError, match="inconsistent size for core dimension"):
        g(F32, V4[:3])
    for axis in (0, 1):
        check("apply_along_axis", lambda v: jnp.cumsum(v[::-1]), axis, F32,
              kit_fn=jnp.apply_along_axis,
              jax_fn=lambda fn, ax, arr: jjnp.apply_along_axis(
                  lambda v: jjnp.cumsum(v[::-1]), ax, arr))
