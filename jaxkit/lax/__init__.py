"""``jaxkit.lax``: the primitives, each with its rules, and their thin wrappers.

``jaxkit.numpy`` is written only in terms of these functions.
"""
from jaxkit.lax.elementwise import *  # noqa: F401,F403
from jaxkit.lax.elementwise import __all__ as _elementwise_all
from jaxkit.lax.structural import (broadcast_in_dim, broadcast_in_dim_p,  # noqa: F401
                                   convert_element_type, convert_element_type_p, full, reshape,
                                   reshape_p, transpose, transpose_p)

__all__ = list(_elementwise_all) + ["broadcast_in_dim", "convert_element_type", "full",
                                    "reshape", "transpose"]
