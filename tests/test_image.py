"""jax.image against JAX: every method, up- and downsampling, antialias on and off, integer
input, several spatial dimensions; scale_and_translate with traced scales, and gradients."""
import numpy as np
import pytest

import jaxkit as jk

jax = pytest.importorskip("jax")

METHODS = ["nearest", "linear", "cubic", "cubic-pytorch", "lanczos3", "lanczos5", "area"]
SHAPES = [((3, 4), (5, 3)), ((8, 6), (3, 4)), ((2, 7, 5, 3), (2, 4, 9, 3)), ((6,), (6,)),
          ((5,), (11,))]


@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_resize_matches_jax(method, shapes, antialias):
    src, dst = shapes
    x = np.random.default_rng(0).normal(size=src).astype(np.float32)
    got = jk.image.resize(x, dst, method, antialias=antialias)
    want = jax.image.resize(x, dst, method, antialias=antialias)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)


def test_integer_images_and_method_names():
    x = np.arange(12).reshape(3, 4)
    for method in ["nearest", "bilinear", jk.image.ResizeMethod.LANCZOS3]:
        jmethod = method if isinstance(method, str) else jax.image.ResizeMethod.LANCZOS3
        got, want = jk.image.resize(x, (5, 7), method), jax.image.resize(x, (5, 7), jmethod)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match='Unknown resize method "bilinea"'):
        jk.image.resize(x, (5, 7), "bilinea")
    with pytest.raises(ValueError, match="shape must have length equal"):
        jk.image.resize(x, (5,), "linear")


def test_scale_and_translate_traced_and_differentiable():
    x = np.random.default_rng(1).normal(size=(6, 5)).astype(np.float32)
    args = ((8, 4), (0, 1), np.array([1.37, 0.71], np.float32),
            np.array([0.31, -0.43], np.float32), "cubic")  # no sample on a kernel kink
    np.testing.assert_allclose(np.asarray(jk.image.scale_and_translate(x, *args)),
                               np.asarray(jax.image.scale_and_translate(x, *args)),
                               rtol=2e-5, atol=2e-5)

    def loss(lib, s):
        return lib.numpy.sum(lib.image.scale_and_translate(x, (8, 4), (0, 1), s, args[3],
                                                           "linear") ** 2)

    s = args[2]
    np.testing.assert_allclose(np.asarray(jk.jit(jk.grad(lambda s: loss(jk, s)))(s)),
                               np.asarray(jax.grad(lambda s: loss(jax, s))(s)), rtol=1e-4)
    with pytest.raises(ValueError, match="Nearest neighbor"):
        jk.image.scale_and_translate(x, (8, 4), (0, 1), s, args[3], "nearest")
