"""``jax.experimental.hijax`` (imported by Flax NNX's ``variablelib``; used when a variable is
made with ``hijax=True``): ``jaxkit.experimental.hijax`` (high-level types and
primitives, user primitives, the AD helpers, the effect registry Flax adds its effect to) and
JAX's ``AbstractValue`` (``install_as_jax`` maps ``jax.experimental.hijax`` here)."""
from __future__ import annotations

from jaxkit.core import ShapedArray
from jaxkit.experimental.hijax import (AbstractRef, AvalMutableQDD, AvalQDD,  # noqa: F401
                                       HiPrimitive, HiType, MutableHiType, VJPHiPrimitive,
                                       Zero, aval_method, aval_property,
                                       control_flow_allowed_effects, instantiate_zeros,
                                       is_undefined_primal, register_hitype)

__all__ = ["AbstractRef", "AbstractValue", "AvalMutableQDD", "AvalQDD", "HiPrimitive",
           "HiType", "MutableHiType", "ShapedArray", "VJPHiPrimitive", "Zero", "aval_method",
           "aval_property", "control_flow_allowed_effects", "instantiate_zeros",
           "is_undefined_primal", "register_hitype"]

AbstractValue = ShapedArray
