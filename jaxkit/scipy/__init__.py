"""``jaxkit.scipy``: SciPy's numerical surface as ``jax.scipy`` has it (submodules)."""
from jaxkit.scipy import fft, signal  # noqa: F401
