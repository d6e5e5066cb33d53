"""``jaxkit.scipy.fft`` (DCTs) and ``jaxkit.scipy.signal`` (convolutions, correlations,
detrend) against SciPy and the JAX oracle: values, jit vs eager, vmap vs a loop and float64
gradients checked numerically."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.fft as sfft
import scipy.signal as ssig
from gradcheck import check_grads

import jaxkit
from jaxkit.scipy import fft as kfft
from jaxkit.scipy import signal as ksig

jax = pytest.importorskip("jax")
import jax.scipy.fft as jfft  # noqa: E402
import jax.scipy.signal as jsig  # noqa: E402


def _r(shape, seed=0, dtype=np.float32):
    return np.random.RandomState(seed).randn(*shape).astype(dtype)


A75, B34, A8, B3, A5 = _r((7, 5)), _r((3, 4), 1), _r((8,), 2), _r((3,), 3), _r((2, 5), 4)
A6 = _r((3, 6), 5)

# (module name, function name, positional args, keywords)
RECORDS = [
    ("fft", "dct", (A6,), {}), ("fft", "dct", (A5,), {"norm": "ortho"}),
    ("fft", "dct", (A6,), {"n": 4, "axis": 0}), ("fft", "dct", (A6,), {"n": 9}),
    ("fft", "idct", (A6,), {}), ("fft", "idct", (A5,), {"norm": "ortho"}),
    ("fft", "idct", (A5,), {"n": 8}),
    ("fft", "dctn", (A75,), {}), ("fft", "dctn", (A75,), {"norm": "ortho", "s": (4, 6)}),
    ("fft", "idctn", (A75,), {}), ("fft", "idctn", (A6,), {"axes": (1,), "norm": "ortho"}),
    ("signal", "convolve", (A8, B3), {}), ("signal", "convolve", (A8, B3), {"mode": "same"}),
    ("signal", "convolve", (A8, B3), {"mode": "valid"}),
    ("signal", "convolve", (A75, B34), {"mode": "same"}),
    ("signal", "correlate", (A8, B3), {}), ("signal", "correlate", (A75, B34), {"mode": "same"}),
    ("signal", "correlate", (A75, B34), {"mode": "valid"}),
    ("signal", "convolve2d", (A75, B34), {}),
    ("signal", "convolve2d", (A75, B34), {"mode": "same"}),
    ("signal", "correlate2d", (A75, B34), {"mode": "same"}),
    ("signal", "correlate2d", (A75, B34), {"mode": "valid"}),
    ("signal", "fftconvolve", (A75, B34), {}),
    ("signal", "fftconvolve", (A75, B34), {"mode": "same"}),
    ("signal", "fftconvolve", (A75, B34), {"mode": "valid"}),
    ("signal", "fftconvolve", (A75, _r((7, 3), 5)), {"axes": 1}),
    ("signal", "detrend", (A75,), {}), ("signal", "detrend", (A75,), {"axis": 0}),
    ("signal", "detrend", (A75,), {"type": "constant"}),
    ("signal", "detrend", (A8,), {"bp": [3, 5]}),
]
IDS = [f"{f}-{i}" for i, (_, f, _, _) in enumerate(RECORDS)]
KIT = {"fft": kfft, "signal": ksig}
SCI = {"fft": sfft, "signal": ssig}
JAX = {"fft": jfft, "signal": jsig}


def _f(mod, name, kw):
    return lambda *a: getattr(KIT[mod], name)(*a, **kw)


@pytest.mark.parametrize("mod,name,args,kw", RECORDS, ids=IDS)
def test_values_vs_scipy_and_jax(mod, name, args, kw):
    out = getattr(KIT[mod], name)(*args, **kw)
    ref = getattr(SCI[mod], name)(*[a.astype(np.float64) for a in args], **kw)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=2e-4, atol=2e-4)
    jref = getattr(JAX[mod], name)(*args, **kw)
    assert out.shape == jref.shape and out.dtype == jref.dtype


@pytest.mark.parametrize("mod,name,args,kw", RECORDS, ids=IDS)
def test_jit_matches_eager(mod, name, args, kw):
    f = _f(mod, name, kw)
    np.testing.assert_allclose(np.asarray(jaxkit.jit(f)(*args)), np.asarray(f(*args)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mod,name,args,kw", RECORDS, ids=IDS)
def test_vmap_matches_loop(mod, name, args, kw):
    f = _f(mod, name, kw)
    xs = np.stack([args[0], args[0] * 2 + 1, -args[0]])
    got = jaxkit.vmap(lambda x: f(x, *args[1:]))(xs)
    want = np.stack([np.asarray(f(x, *args[1:])) for x in xs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mod,name,args,kw", RECORDS, ids=IDS)
def test_grads_float64(mod, name, args, kw):
    with jaxkit.config.override(jax_enable_x64=True):
        check_grads(_f(mod, name, kw), tuple(a.astype(np.float64) for a in args), order=1,
                    modes=("fwd", "rev"))


def test_errors():
    with pytest.raises(NotImplementedError, match="type=2"):
        kfft.dct(A8, type=3)
    with pytest.raises(ValueError, match="mode"):
        ksig.convolve(A8, B3, mode="bad")
    with pytest.raises(ValueError, match="2-dimensional"):
        ksig.convolve2d(A8, B3)
    with pytest.raises(ValueError, match="Trend type"):
        ksig.detrend(A8, type="cubic")
