"""``jaxkit.scipy.signal``'s spectral estimators (``stft``, ``istft``, ``welch``, ``csd``) and
their windows, against SciPy and the JAX oracle: values, shapes and dtypes, jit vs eager,
vmap vs a loop, float64 gradients checked numerically, and the errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.signal as ssig
from gradcheck import check_grads

import jaxkit
from jaxkit.scipy import signal as ksig
from jaxkit.scipy._windows import get_window

jax = pytest.importorskip("jax")
import jax.scipy.signal as jsig  # noqa: E402

# stft's default nperseg (256) is longer than the records' signals: JAX and jaxkit warn and
# shorten it (test_errors checks the warning)
pytestmark = pytest.mark.filterwarnings("ignore:nperseg=256 is greater than input_length")


def _r(shape, seed=0):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


X, Y = _r((2, 200)), _r((2, 180), 1)
Z_STFT = ssig.stft(_r((150,), 2), nperseg=32)[2].astype(np.complex64)
Z_STFT_64 = ssig.stft(_r((2, 150), 3), nperseg=64, noverlap=48)[2].astype(np.complex64)

# (function, positional args, keywords). SciPy's welch/csd default to nperseg=256 and JAX's
# to the signal's length: records that compare with both give nperseg.
RECORDS = [
    ("stft", (X,), {}),
    ("stft", (X,), {"nperseg": 64}),
    ("stft", (X,), {"nperseg": 50, "noverlap": 10, "nfft": 64}),
    ("stft", (X,), {"window": "hamming", "nperseg": 32, "detrend": "linear"}),
    ("stft", (X,), {"nperseg": 40, "return_onesided": False}),
    ("stft", (X,), {"nperseg": 33, "boundary": "even", "fs": 100.0}),
    ("stft", (X,), {"nperseg": 33, "boundary": "odd"}),
    ("stft", (X,), {"nperseg": 33, "boundary": "constant", "padded": False}),
    ("stft", (X.T,), {"nperseg": 32, "axis": 0, "window": ("kaiser", 4.0)}),
    ("welch", (X,), {"nperseg": 200}),
    ("welch", (X,), {"nperseg": 64}),
    ("welch", (X,), {"nperseg": 64, "average": "median"}),
    ("welch", (X,), {"nperseg": 32, "scaling": "spectrum", "window": "blackman"}),
    ("welch", (X,), {"nperseg": 50, "noverlap": 20, "detrend": "linear"}),
    ("welch", (X,), {"nperseg": 63, "return_onesided": False, "fs": 8.0}),
    ("welch", (X.T,), {"nperseg": 48, "axis": 0, "detrend": False, "window": "flattop"}),
    ("csd", (X, Y), {"nperseg": 64}),
    ("csd", (X, Y), {"nperseg": 64, "average": "median"}),
    ("csd", (X, Y), {"nperseg": 32, "scaling": "spectrum", "return_onesided": False}),
    ("istft", (Z_STFT,), {}),
    ("istft", (Z_STFT,), {"nperseg": 32, "boundary": False}),
    ("istft", (Z_STFT_64,), {"noverlap": 48, "fs": 4.0}),
]
IDS = [f"{f}-{i}" for i, (f, _, _) in enumerate(RECORDS)]


def _leaves(out):
    return [np.asarray(o) for o in out]


@pytest.mark.parametrize("name,args,kw", RECORDS, ids=IDS)
def test_values_vs_scipy_and_jax(name, args, kw):
    ours = _leaves(getattr(ksig, name)(*args, **kw))
    theirs = _leaves(getattr(jsig, name)(*args, **kw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy's NOLA/length warnings
        ref = getattr(ssig, name)(*[a.astype(np.complex128 if a.dtype.kind == "c"
                                              else np.float64) for a in args], **kw)
    assert [o.shape for o in ours] == [t.shape for t in theirs]
    assert [o.dtype for o in ours] == [t.dtype for t in theirs]
    for o, t, s in zip(ours, theirs, ref):
        np.testing.assert_allclose(o, s, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(o, t, rtol=2e-4, atol=2e-5)


def _f(name, kw):
    return lambda *a: getattr(ksig, name)(*a, **kw)


@pytest.mark.parametrize("name,args,kw", RECORDS, ids=IDS)
def test_jit_matches_eager(name, args, kw):
    f = _f(name, kw)
    for j, e in zip(jaxkit.jit(f)(*args), f(*args)):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,args,kw", RECORDS, ids=IDS)
def test_vmap_matches_loop(name, args, kw):
    f = _f(name, kw)
    xs = np.stack([args[0], args[0] * 2 + 1, -args[0]])
    got = jaxkit.vmap(lambda x: f(x, *args[1:])[-1])(xs)
    want = np.stack([np.asarray(f(x, *args[1:])[-1]) for x in xs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,args,kw", RECORDS, ids=IDS)
def test_grads_float64(name, args, kw):
    f = _f(name, kw)

    def magnitude(*a):  # a real function of the spectrum (or the signal)
        out = f(*a)[-1]
        return (out * out.conj()).real if out.dtype.kind == "c" else out

    with jaxkit.config.override(jax_enable_x64=True):
        wide = tuple(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
                     for a in args)
        check_grads(magnitude, wide, order=1, modes=("fwd", "rev"))


WINDOWS = ["boxcar", "triang", "bartlett", "bohman", "parzen", "cosine", "hann", "hamming",
           "blackman", "nuttall", "blackmanharris", "flattop", ("kaiser", 3.0),
           ("gaussian", 7.0), ("general_gaussian", 1.5, 7.0), "tukey", ("tukey", 0.3),
           "exponential", "han", "rect", "barthann", "lanczos", ("general_hamming", 0.6),
           ("general_cosine", [0.5, 0.3, 0.2])]


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: str(w).replace(" ", ""))
@pytest.mark.parametrize("n", [1, 2, 7, 16])
def test_windows_match_scipy(window, n):
    np.testing.assert_allclose(get_window(window, n), ssig.get_window(window, n),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(get_window(window, n, fftbins=False),
                               ssig.get_window(window, n, fftbins=False), rtol=1e-12,
                               atol=1e-14)


def test_errors():
    with pytest.raises(ValueError, match="Unknown window type 'bogus'"):
        ksig.stft(X, window="bogus")
    with pytest.raises(ValueError, match="needs a parameter"):
        ksig.welch(X, window="kaiser")
    with pytest.raises(ValueError, match="noverlap must be less than nperseg"):
        ksig.stft(X, nperseg=16, noverlap=16)
    with pytest.raises(ValueError, match="nfft must be greater than or equal to nperseg"):
        ksig.welch(X, nperseg=32, nfft=16)
    with pytest.raises(ValueError, match="nperseg must be a positive integer"):
        ksig.stft(X, nperseg=0)
    with pytest.raises(ValueError, match="Unknown scaling"):
        ksig.welch(X, scaling="power")
    with pytest.raises(ValueError, match='average must be "median" or "mean"'):
        ksig.welch(X, average="max")
    with pytest.raises(ValueError, match="same rank"):
        ksig.csd(X, Y[0])
    with pytest.raises(ValueError, match="Unknown boundary"):
        ksig.stft(X, boundary="wrap")
    with pytest.raises(ValueError, match="window is longer than input signal"):
        ksig.welch(X[:, :8], window=np.ones(16))
    with pytest.raises(ValueError, match="at least 2d"):
        ksig.istft(np.ones(8, np.complex64))
    with pytest.raises(ValueError, match="differing time and frequency axes"):
        ksig.istft(Z_STFT, time_axis=0, freq_axis=0)
    with pytest.warns(UserWarning, match="greater than input_length"):
        ksig.welch(X[:, :8], nperseg=16)
