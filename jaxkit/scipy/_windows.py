"""Window functions for the spectral estimators (``stft``, ``welch``, ...), named as SciPy's
``get_window`` names them and computed on the host in float64 (a window is a constant of the
program). ``fftbins=True`` gives the periodic window (for spectral analysis, SciPy's default):
the symmetric window of length n + 1 without its last point.
"""
from __future__ import annotations

import numpy as np


def _cosine_sum(coefficients):
    def window(n):
        phase = 2 * np.pi * np.arange(n) / max(n - 1, 1)
        return sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients))
    return window


def _triang(n):
    k = np.arange(1, (n + 1) // 2 + 1)
    half = 2 * k / (n + 1) if n % 2 else (2 * k - 1) / n
    return np.concatenate([half, half[::-1][n % 2:]])


def _bartlett(n):
    k = np.arange(n)
    return np.where(k <= (n - 1) / 2, 2 * k / max(n - 1, 1), 2 - 2 * k / max(n - 1, 1))


def _bohman(n):
    x = np.abs(np.linspace(-1, 1, n)[1:-1])
    inner = (1 - x) * np.cos(np.pi * x) + np.sin(np.pi * x) / np.pi
    return np.concatenate([[0.0], inner, [0.0]]) if n > 1 else np.ones(n)


def _parzen(n):
    k = np.arange(-(n - 1) / 2, (n - 1) / 2 + 0.5, 1.0)
    a = np.abs(k) / (n / 2)
    return np.where(np.abs(k) <= (n - 1) / 4, 1 - 6 * a ** 2 + 6 * a ** 3, 2 * (1 - a) ** 3)


def _cosine(n):
    return np.sin(np.pi / n * (np.arange(n) + 0.5))


def _kaiser(n, beta):
    k = np.arange(n)
    alpha = (n - 1) / 2
    return np.i0(beta * np.sqrt(1 - ((k - alpha) / max(alpha, 1e-300)) ** 2)) / np.i0(beta)


def _gaussian(n, std):
    k = np.arange(n) - (n - 1) / 2
    return np.exp(-k ** 2 / (2 * std ** 2))


def _general_gaussian(n, p, sig):
    k = np.arange(n) - (n - 1) / 2
    return np.exp(-0.5 * np.abs(k / sig) ** (2 * p))


def _tukey(n, alpha=0.5):
    if alpha <= 0:
        return np.ones(n)
    if alpha >= 1:
        return _cosine_sum([0.5, 0.5])(n)
    k = np.arange(n)
    width = int(np.floor(alpha * (n - 1) / 2))
    w = np.ones(n)
    edge = k[:width + 1]
    w[:width + 1] = 0.5 * (1 + np.cos(np.pi * (-1 + 2 * edge / alpha / (n - 1))))
    tail = k[n - width - 1:]
    w[n - width - 1:] = 0.5 * (1 + np.cos(np.pi * (-2 / alpha + 1 + 2 * tail / alpha / (n - 1))))
    return w


def _barthann(n):
    fraction = np.arange(n) / max(n - 1, 1) - 0.5
    return 0.62 - 0.48 * np.abs(fraction) + 0.38 * np.cos(2 * np.pi * fraction)


def _lanczos(n):
    return np.sinc(2 * np.arange(n) / max(n - 1, 1) - 1)


def _general_cosine(n, coefficients):
    return _cosine_sum(list(coefficients))(n)


def _general_hamming(n, alpha):
    return _cosine_sum([alpha, 1 - alpha])(n)


def _exponential(n, center=None, tau=1.0):
    center = (n - 1) / 2 if center is None else center
    return np.exp(-np.abs(np.arange(n) - center) / tau)


_WINDOWS = {
    "boxcar": np.ones, "triang": _triang, "bartlett": _bartlett, "bohman": _bohman,
    "parzen": _parzen, "cosine": _cosine,
    "hann": _cosine_sum([0.5, 0.5]), "hamming": _cosine_sum([0.54, 0.46]),
    "blackman": _cosine_sum([0.42, 0.50, 0.08]),
    "nuttall": _cosine_sum([0.3635819, 0.4891775, 0.1365995, 0.0106411]),
    "blackmanharris": _cosine_sum([0.35875, 0.48829, 0.14128, 0.01168]),
    "flattop": _cosine_sum([0.21557895, 0.41663158, 0.277263158, 0.083578947,
                            0.006947368]),
    "kaiser": _kaiser, "gaussian": _gaussian, "general_gaussian": _general_gaussian,
    "tukey": _tukey, "exponential": _exponential, "barthann": _barthann, "lanczos": _lanczos,
    "general_cosine": _general_cosine, "general_hamming": _general_hamming,
}
_ALIASES = {"rect": "boxcar", "rectangular": "boxcar", "ones": "boxcar", "box": "boxcar",
            "triangle": "triang", "tri": "triang", "bart": "bartlett", "brt": "bartlett",
            "han": "hann", "brthan": "barthann", "bth": "barthann", "sinc": "lanczos",
            "general cosine": "general_cosine", "general hamming": "general_hamming",
            "hamm": "hamming", "ham": "hamming",
            "black": "blackman", "blk": "blackman", "nutl": "nuttall", "nut": "nuttall",
            "blackharr": "blackmanharris", "bkh": "blackmanharris", "flat": "flattop",
            "flt": "flattop", "parz": "parzen", "par": "parzen", "bman": "bohman",
            "bmn": "bohman", "ksr": "kaiser", "gauss": "gaussian", "gss": "gaussian",
            "general gaussian": "general_gaussian", "general_gauss": "general_gaussian",
            "ggs": "general_gaussian", "tuk": "tukey", "poisson": "exponential"}
# windows that need a parameter (SciPy's tuple form: ('kaiser', beta))
_NEEDS_PARAMETER = {"kaiser", "gaussian", "general_gaussian", "general_cosine",
                    "general_hamming"}


def get_window(window, nperseg: int, fftbins: bool = True) -> np.ndarray:
    """The window ``window`` names (a string, or a tuple of a name and its parameters) with
    ``nperseg`` points, as SciPy's ``get_window`` computes it."""
    if isinstance(window, tuple):
        name, params = window[0], window[1:]
    else:
        name, params = window, ()
    if not isinstance(name, str):
        raise ValueError(f"window must be a string, a tuple (name, parameters...) or a 1-D "
                         f"array, got {window!r}")
    key = _ALIASES.get(name.lower(), name.lower())
    if key not in _WINDOWS:
        raise ValueError(f"Unknown window type {name!r}. Known windows: "
                         f"{', '.join(sorted(_WINDOWS))}; or pass the window as an array.")
    if key in _NEEDS_PARAMETER and not params:
        raise ValueError(f"The {key!r} window needs a parameter: pass a tuple such as "
                         f"({key!r}, value).")
    n = int(nperseg)
    if n <= 1:
        return np.ones(max(n, 0))
    make = _WINDOWS[key]
    full = make(n + 1, *params) if fftbins else make(n, *params)
    return np.asarray(full[:n] if fftbins else full, dtype=np.float64)
