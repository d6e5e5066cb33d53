"""Primitives only a TPU or GPU kernel compiler lowers (Mosaic, Triton). On the CPU JAX has no
lowering for them, so a kernel using them fails in interpret mode with JAX's
``NotImplementedError`` naming the primitive, and eagerly with JAX's error for a missing
evaluation rule; ``device_only_primitive`` gives a primitive that does exactly that."""
from __future__ import annotations

from functools import partial

from jaxkit import core
from jaxkit.interpreters import mlir
from jaxkit.runtime import pjrt

__all__ = ["device_only_primitive"]


def _platform() -> str:
    platform = pjrt.default_backend().lower()
    return "cuda" if platform == "gpu" else platform


def _no_lowering(name: str, ctx, *args, **params):
    raise NotImplementedError(f"MLIR translation rule for primitive '{name}' not found for "
                              f"platform {_platform()}")


def _no_impl(name: str, *args, **params):
    raise NotImplementedError(f"Evaluation rule for '{name}' not implemented")


def device_only_primitive(name: str, multiple_results: bool = False) -> core.Primitive:
    """A primitive named ``name`` whose lowering raises JAX's error for a missing rule
    (give it an abstract evaluation rule)."""
    prim = core.Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_impl(partial(_no_impl, name))
    mlir.register_lowering(prim, partial(_no_lowering, name))
    return prim
