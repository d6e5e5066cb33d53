"""``jax.experimental.pallas.fuser``: fuse the computation around a Pallas kernel into it.

``fusible`` marks a kernel-launching function; ``fuse`` hands it the computations before
and after it as ``Fusion`` functions; ``get_fusion_values`` splits a fusion into the arrays
it reads and a function of them, and ``pull_block_spec``/``push_block_spec`` carry block
specs through a fusion so the kernel can evaluate it block by block (``evaluate`` runs a
function equation by equation, refusing loops and conditionals).
"""
from jaxkit.experimental.pallas.fuser.block_spec import (BlockIndexTransform,
                                                         get_fusion_values,
                                                         get_stateful_input_fusion_values,
                                                         get_stateful_output_fusion_values,
                                                         make_scalar_prefetch_handler,
                                                         pull_block_spec, push_block_spec)
from jaxkit.experimental.pallas.fuser import block_spec_rules as _block_spec_rules  # noqa: F401
from jaxkit.experimental.pallas.fuser import block_spec_structural as _structural  # noqa: F401
from jaxkit.experimental.pallas.fuser.custom_fusion import custom_fusion
from jaxkit.experimental.pallas.fuser.evaluate import evaluate
from jaxkit.experimental.pallas.fuser.fusible import fusible
from jaxkit.experimental.pallas.fuser.fusion import Fusion
from jaxkit.experimental.pallas.fuser.jaxpr_fusion import fuse

__all__ = ["BlockIndexTransform", "Fusion", "custom_fusion", "evaluate", "fuse", "fusible",
           "get_fusion_values", "get_stateful_input_fusion_values",
           "get_stateful_output_fusion_values", "make_scalar_prefetch_handler",
           "pull_block_spec", "push_block_spec"]
