"""``jaxkit.scipy``: the parts of SciPy that JAX 0.10.2 provides (``jax.scipy``), written in
jaxkit's numpy and lax. As in JAX, a submodule is imported on first use: ``jaxkit.scipy.special``
works after ``import jaxkit``, without paying for every submodule at start-up."""
import importlib

_SUBMODULES = frozenset({"cluster", "fft", "integrate", "interpolate", "linalg", "ndimage",
                         "optimize", "signal", "sparse", "spatial", "special", "stats"})


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _SUBMODULES)
