"""``jaxkit.scipy``: the parts of SciPy that JAX 0.10.2 provides (``jax.scipy``), written in
jaxkit's numpy and lax. Submodules are imported on first use, as ``import jax.scipy.special``."""
