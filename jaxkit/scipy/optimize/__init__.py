"""``jaxkit.scipy.optimize``: ``minimize`` (BFGS, and JAX's experimental L-BFGS) and
``OptimizeResults``."""
from jaxkit.scipy.optimize.minimize import OptimizeResults, minimize  # noqa: F401
