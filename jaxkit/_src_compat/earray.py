"""``jax._src.earray``: concrete arrays of a user-defined extended dtype (JAX's ``EArray``).
Flax's fp8 layers import it to learn that extended-dtype values may live outside ``jit``
(``fp8_ops.CAN_USE_EARRAY``); the class is ``jaxkit.experimental._extended_dtypes.EArray``."""
from jaxkit.experimental._extended_dtypes import EArray

__all__ = ["EArray"]
