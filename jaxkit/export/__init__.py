"""``jax.export``: functions exported as serializable StableHLO, and called back.

``export(jit(f))(*args)`` gives an ``Exported``: the StableHLO of ``f`` at the argument types
with its calling signature; ``Exported.serialize()`` writes it as bytes, ``deserialize`` reads
them back (in another process, or later), and ``Exported.call`` runs it from jaxkit code,
under ``jit``, and under ``grad`` when the VJP was exported with it (``vjp_order``).
"""
from jaxkit.export._exported import (DisabledSafetyCheck, Exported, default_export_platform,
                                     export, maximum_supported_calling_convention_version,
                                     minimum_supported_calling_convention_version)
from jaxkit.export._serialization import (deserialize, register_namedtuple_serialization,
                                          register_pytree_node_serialization)
from jaxkit.export._shape_poly import (SymbolicScope, is_symbolic_dim, symbolic_args_specs,
                                       symbolic_shape)

__all__ = ["DisabledSafetyCheck", "Exported", "export", "deserialize",
           "register_pytree_node_serialization", "register_namedtuple_serialization",
           "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "default_export_platform",
           "SymbolicScope", "is_symbolic_dim", "symbolic_args_specs", "symbolic_shape"]
