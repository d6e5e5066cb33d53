"""``jax.extend.mlir``: jaxlib's MLIR Python bindings (``ir``, ``passmanager``, ``dialects``)
and the StableHLO module utilities JAX exports beside them.

These are the bindings jaxkit's own lowering uses, so a module from
``jit(f).lower(x).compiler_ir()`` is an ``ir.Module`` of this very ``ir``; a library can parse,
edit or build modules with them and hand them back to jaxkit.
"""
from __future__ import annotations

from jaxkit.extend.mlir import dialects, ir, passmanager
from jaxkit.interpreters import mlir as _mlir

__all__ = ["deserialize_portable_artifact", "dialects", "hlo_to_stablehlo", "ir",
           "lower_with_sharding_in_types", "passmanager", "refine_polymorphic_shapes",
           "serialize_portable_artifact"]

_api = _mlir.jaxlib_module("jaxlib._jax.mlir")

# jaxlib's C++ functions, as JAX exports them:
# serialize_portable_artifact(module: str | bytes, target: str) -> bytes: a StableHLO module
#   (text or bytecode) as a versioned portable artifact readable by StableHLO ``target``;
# deserialize_portable_artifact(artifact: bytes, context=None) -> ir.Module;
# refine_polymorphic_shapes(module: bytes, ...) -> bytes: static shapes propagated through
#   a module whose ``main`` has static argument shapes;
# hlo_to_stablehlo(serialized HloModuleProto: bytes) -> bytes: StableHLO bytecode.
serialize_portable_artifact = _api.serialize_portable_artifact
deserialize_portable_artifact = _api.deserialize_portable_artifact
refine_polymorphic_shapes = _api.refine_polymorphic_shapes
hlo_to_stablehlo = _api.hlo_to_stablehlo


def lower_with_sharding_in_types(ctx, op, aval):
    """``op`` annotated with the sharding in ``aval``'s type, as a lowering rule's result.

    jaxkit's types carry no mesh axes (``aval.sharding`` is replicated over the empty abstract
    mesh), so there is nothing to annotate and ``op`` is returned unchanged, as JAX does for a
    type on the empty mesh."""
    mesh = aval.sharding.mesh
    if not mesh.empty:
        raise NotImplementedError(
            "lower_with_sharding_in_types: jaxkit's types carry no mesh axes, so a type "
            f"sharded over {mesh} cannot arise; shard values with jax.sharding.NamedSharding")
    return op
