"""``jaxkit.lax``: the primitives, each with its rules, and their thin wrappers.

``jaxkit.numpy``, ``jaxkit.random`` and ``jaxkit.nn`` are written only in terms of these
functions. Names and signatures follow ``jax.lax``.
"""
# ruff: noqa: F401, F403
from jaxkit.interpreters.ad import stop_gradient
from jaxkit.lax import interpreter_hooks  # noqa: F401  (registers lax's ops with ad/batching)
from jaxkit.lax.cond import *
from jaxkit.lax.loops import *
from jaxkit.lax.convolution import *
from jaxkit.lax.convolution_patches import *
from jaxkit.lax.cumulative import *
from jaxkit.lax.dot import *
from jaxkit.lax.dot_algorithms import *
from jaxkit.lax.fft import *
from jaxkit.lax.clamp import *
from jaxkit.lax.composite import *
from jaxkit.lax.elementwise import *
from jaxkit.lax.elementwise_bits import *
from jaxkit.lax.elementwise_math import *
from jaxkit.lax.elementwise_special import *
from jaxkit.lax import linalg  # noqa: F401  (lax.linalg.eig, a submodule as in JAX)
from jaxkit.lax.gather_scatter import *
from jaxkit.lax.linear_solve import *
from jaxkit.lax.parallel import *
from jaxkit.lax.parallel_extra import *
from jaxkit.lax.parallel_ur import all_gather, pcast  # noqa: F401
from jaxkit.lax.ragged_dot import *
from jaxkit.lax.reductions import *
from jaxkit.lax.rng import *
from jaxkit.lax.scaled_dot import *
from jaxkit.lax.sharding import *
from jaxkit.lax.shape_helpers import *
from jaxkit.lax.slicing import *
from jaxkit.lax.stacking import *
from jaxkit.lax.staging import *
from jaxkit.lax.windowed_reductions import *
from jaxkit.lax.special import betainc, regularized_incomplete_beta_p
from jaxkit.lax.sorting import *
from jaxkit.lax.approx_top_k import *
from jaxkit.lax.structural import (broadcast, broadcast_in_dim, broadcast_in_dim_p,
                                   broadcasted_iota, collapse, concatenate, concatenate_p,
                                   convert_element_type, convert_element_type_p, expand_dims,
                                   full, full_like, iota, iota_p, reduce_sum, reduce_sum_p,
                                   reshape, reshape_p, rev, rev_p, split, split_p, squeeze,
                                   squeeze_p, transpose, transpose_p, zeros_like_array)

import sys as _sys  # noqa: E402

# Module objects by name: ``from jaxkit.lax.dot import *`` rebinds ``dot`` to the function.
_STAR_MODULES = (
    "approx_top_k",
    "clamp",
    "composite",
    "cond",
    "convolution",
    "convolution_patches",
    "cumulative",
    "dot",
    "dot_algorithms",
    "elementwise",
    "elementwise_bits",
    "elementwise_math",
    "elementwise_special",
    "fft",
    "gather_scatter",
    "linear_solve",
    "loops",
    "parallel",
    "parallel_extra",
    "ragged_dot",
    "reductions",
    "rng",
    "scaled_dot",
    "sharding",
    "shape_helpers",
    "slicing",
    "sorting",
    "stacking",
    "staging",
    "windowed_reductions",
)
__all__ = sorted({name for module in _STAR_MODULES
                  for name in _sys.modules[f"jaxkit.lax.{module}"].__all__} | {
    "stop_gradient", "betainc", "regularized_incomplete_beta_p",
    "broadcast", "broadcast_in_dim", "broadcasted_iota", "collapse",
    "concatenate", "convert_element_type", "expand_dims", "full", "full_like", "iota",
    "reduce_sum", "reshape", "rev", "split", "squeeze", "transpose", "zeros_like_array"})
from jaxkit.lax import pp_rules as _pp_rules  # noqa: E402,F401  (printing of params)

from jaxkit._deprecations import deprecation_getattr as _deprecation_getattr  # noqa: E402
from jaxkit._deprecations import removed as _removed  # noqa: E402

# As JAX 0.10.2, which still answers for the name it dropped.
_deprecations = {
    "pvary": _removed("jax.lax.pvary was deprecated in JAX v0.8.2 and removed in JAX v0.10.0; "
                      "use `jax.lax.pcast(..., to='varying')"),
}
__getattr__ = _deprecation_getattr(__name__, _deprecations)
