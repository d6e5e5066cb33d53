"""``jax._src.dtypes`` and the public ``jax.dtypes`` (Flax tests RNGs against
``dtypes.prng_key``; its fp8 layers define their own extended dtype): jaxkit's dtype module,
plus the extended-dtype names.

A user-defined extended dtype subclasses ``ExtendedDType`` and says how it behaves through a
``_rules`` class, JAX's protocol (Flax's ``fp8_meta_dtype_wrapper``: a float32 whose
cotangents accumulate by ``max``); that class, ``EArray`` and ``primal_tangent_dtype`` live in
``jaxkit.experimental._extended_dtypes`` (``jax.experimental`` names two of them).
"""
from jaxkit.dtypes import *  # noqa: F401,F403
from jaxkit.dtypes import (DType, extended, finfo, issubdtype, prng_key,  # noqa: F401
                           supports_inf)
from jaxkit.experimental._extended_dtypes import (EArray, ExtendedDType,  # noqa: F401
                                                PrimalTangentDType, primal_tangent_dtype)
