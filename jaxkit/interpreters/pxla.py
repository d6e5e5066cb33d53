"""``jax.interpreters.pxla``: what JAX 0.10.2 still exports from its SPMD executable layer, the
options of a program compiled for several devices (the rest of the module is deprecated or
removed in JAX; jaxkit compiles partitioned programs in ``runtime.sharding``)."""
from __future__ import annotations

from jaxkit._deprecations import deprecation_getattr, removed
from jaxkit.runtime.compile_config import create_compile_options

__all__ = ["create_compile_options"]


# JAX 0.10.2 still serves these with a warning; jaxkit has no pmap executable layer to serve
# them from (its partitioned programs are compiled in runtime.sharding), so reading one
# raises, and a library's hasattr() probe stays False (Orbax, Flax look for these).
_UNSERVED = " jaxkit does not provide it: it has no pxla executable layer."
_deprecated = {
    "Index": "", "MeshAxisName": " Use jax.sharding.Mesh axis names directly.",
    "MeshComputation": "", "MeshExecutable": "", "global_aval_to_result_handler": "",
    "global_avals_to_results_handler": "", "global_result_handlers": "",
    "thread_resources": " Please switch to using `with jax.set_mesh(mesh)` instead of "
                        "`with mesh:` and then use `jax.sharding.get_abstract_mesh()` to get "
                        "the current mesh.",
    "are_hlo_shardings_equal": "", "is_hlo_sharding_replicated": "",
    "op_sharding_to_indices": "", "ArrayMapping": "", "_UNSPECIFIED": "",
    "array_mapping_to_axis_resources": ""}
_PMAP_GONE = " Please use `jax.shard_map` instead of `jax.pmap`."
_removed_names = {"MapTracer": "", "PmapExecutable": "", "parallel_callable": "",
                  "shard_args": "", **dict.fromkeys(
                      ("Chunked", "NoSharding", "Replicated", "ShardedAxis", "ShardingSpec",
                       "Unstacked", "spec_to_indices"), _PMAP_GONE)}
_deprecations = {
    **{name: removed(f"jax.interpreters.pxla.{name} is deprecated as of JAX v0.8.2.{advice}"
                     f"{_UNSERVED}") for name, advice in _deprecated.items()},
    **{name: removed(f"jax.interpreters.pxla.{name} was removed in JAX v0.10.0.{advice}")
       for name, advice in _removed_names.items()},
}
__getattr__ = deprecation_getattr(__name__, _deprecations)
