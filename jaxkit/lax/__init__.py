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

# Structural, slicing, indexing and reduction primitives.
from jaxkit.lax.structural import (broadcast, broadcasted_iota, collapse,  # noqa: F401,E402
                                   concatenate, concatenate_p, expand_dims, full_like, iota,
                                   iota_p, reduce_sum, reduce_sum_p, rev, rev_p, split, split_p,
                                   squeeze, squeeze_p, zeros_like_array)
from jaxkit.lax.reductions import *  # noqa: F401,F403,E402
from jaxkit.lax.reductions import __all__ as _reductions_all  # noqa: E402
from jaxkit.lax.indexing import (GatherDimensionNumbers, GatherScatterMode,  # noqa: F401,E402
                                 ScatterDimensionNumbers, gather, gather_p, scatter, scatter_add,
                                 scatter_add_p, scatter_max, scatter_max_p, scatter_min,
                                 scatter_min_p, scatter_mul, scatter_mul_p, scatter_p,
                                 scatter_sub, scatter_sub_p)
from jaxkit.lax.slicing import *  # noqa: F401,F403,E402
from jaxkit.lax.slicing import __all__ as _slicing_all  # noqa: E402

__all__ += ["broadcast", "broadcasted_iota", "collapse", "concatenate", "expand_dims",
            "full_like", "iota", "rev", "split", "squeeze", "zeros_like_array",
            "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather",
            "scatter", "scatter_add", "scatter_max", "scatter_min", "scatter_mul", "scatter_sub"]
__all__ += list(_reductions_all) + list(_slicing_all)
from jaxkit.lax.dot import *  # noqa: F401,F403,E402
from jaxkit.lax.dot import __all__ as _dot_all  # noqa: E402

__all__ += list(_dot_all)

# Transcendental and special elementwise functions.
from jaxkit.lax.elementwise_math import *  # noqa: F401,F403,E402
from jaxkit.lax.elementwise_math import __all__ as _elementwise_math_all  # noqa: E402

__all__ += list(_elementwise_math_all)
from jaxkit.lax.elementwise_bits import *  # noqa: F401,F403,E402
from jaxkit.lax.elementwise_bits import __all__ as _elementwise_bits_all  # noqa: E402

__all__ += list(_elementwise_bits_all)
from jaxkit.lax.sorting import *  # noqa: F401,F403,E402
from jaxkit.lax.sorting import __all__ as _sorting_all  # noqa: E402

__all__ += list(_sorting_all)
from jaxkit.lax.elementwise_special import *  # noqa: F401,F403,E402
from jaxkit.lax.elementwise_special import __all__ as _elementwise_special_all  # noqa: E402

__all__ += list(_elementwise_special_all)
from jaxkit.lax.cumulative import *  # noqa: F401,F403,E402
from jaxkit.lax.cumulative import __all__ as _cumulative_all  # noqa: E402

__all__ += list(_cumulative_all)
from jaxkit.lax.convolution import *  # noqa: F401,F403,E402
from jaxkit.lax.convolution import __all__ as _convolution_all  # noqa: E402

__all__ += list(_convolution_all)
