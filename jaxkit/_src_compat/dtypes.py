"""``jax._src.dtypes`` and the public ``jax.dtypes`` (Flax tests RNGs against
``dtypes.prng_key``; its fp8 layers reach ``extended``): jaxkit's dtype module, plus the
extended-dtype names."""
from jaxkit.dtypes import *  # noqa: F401,F403
from jaxkit.dtypes import (DType, extended, finfo, issubdtype, prng_key,  # noqa: F401
                           supports_inf)


class ExtendedDType:
    """Base of JAX's extended dtype classes; jaxkit's one (``key<fry>``) is
    ``jaxkit.random.prng.KeyTy``."""
