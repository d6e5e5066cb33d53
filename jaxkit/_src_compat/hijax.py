"""``jax.experimental.hijax`` (imported by Flax NNX's ``variablelib``; used when a variable is
made with ``hijax=True``): ``jaxkit.experimental.hijax`` (high-level types and
primitives, user primitives, the AD helpers) with the effect registry Flax adds its effect to
(``install_as_jax`` maps ``jax.experimental.hijax`` here)."""
from __future__ import annotations

from jaxkit.core import ShapedArray
from jaxkit.experimental.hijax import (AbstractRef, AvalMutableQDD, AvalQDD,  # noqa: F401
                                       HiPrimitive, HiType, MutableHiType, VJPHiPrimitive,
                                       Zero, aval_method, aval_property, instantiate_zeros,
                                       is_undefined_primal, register_hitype)

__all__ = ["AbstractRef", "AbstractValue", "AvalMutableQDD", "AvalQDD", "HiPrimitive",
           "HiType", "MutableHiType", "ShapedArray", "VJPHiPrimitive", "Zero", "aval_method",
           "aval_property", "control_flow_allowed_effects", "instantiate_zeros",
           "is_undefined_primal", "register_hitype"]

AbstractValue = ShapedArray


class _EffectTypeSet:
    """The effect types that may appear inside control flow (JAX's
    ``effects.control_flow_allowed_effects``). jaxkit's jaxprs carry no high-level effects
    (high-level primitives are lowered where they are bound), so this only records them."""

    def __init__(self):
        self._types: set = set()

    def add_type(self, t: type) -> None:
        self._types.add(t)

    def contains(self, effect) -> bool:
        return any(isinstance(effect, t) for t in self._types)


control_flow_allowed_effects = _EffectTypeSet()
