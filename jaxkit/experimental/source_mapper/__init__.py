"""``jax.experimental.source_mapper``: map a function's compiled forms (its jaxpr,
StableHLO, HLO before and after XLA's optimizations) back to the Python lines that produced
them, as TC39 source maps.

    dumps = generate_sourcemaps(f, all_passes())(x)   # one SourceMapDump per pass
    dumps[0].source_map.to_json()

The maps are built from what jaxkit records: each equation's ``source_info`` (file, line,
column of the innermost user frame) and the MLIR locations the lowering makes of it, which
XLA keeps as HLO metadata. JAX records the whole user call stack; jaxkit records the
innermost frame, so lines map to the same source lines but JAX's maps may also list the
callers' files (the ``return`` of a StableHLO function maps to the ``jit`` call there).
"""
# Registration order is the order of all_passes(): the jaxpr pass first, as in JAX.
from jaxkit.experimental.source_mapper import jaxpr  # noqa: F401
from jaxkit.experimental.source_mapper import hlo  # noqa: F401
from jaxkit.experimental.source_mapper.common import (Pass, SourceMapDump, all_passes,
                                                      compile_with_env, filter_passes,
                                                      register_pass)
from jaxkit.experimental.source_mapper.generate_map import generate_sourcemaps
from jaxkit.experimental.source_mapper.jaxpr import canonicalize_filename
from jaxkit.experimental.source_mapper.mlir import create_mlir_sourcemap
from jaxkit.experimental.source_mapper.sourcemap import MappingsGenerator, SourceMap

__all__ = ["MappingsGenerator", "Pass", "SourceMap", "SourceMapDump", "all_passes",
           "canonicalize_filename", "compile_with_env", "create_mlir_sourcemap",
           "filter_passes", "generate_sourcemaps", "register_pass"]
