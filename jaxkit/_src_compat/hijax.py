"""``jax.experimental.hijax`` (imported by Flax NNX's ``variablelib`` at module level, used only
when Flax's ``flax_hijax_variable`` option is on, off by default): JAX's "high-level types"
extension point. jaxkit has no high-level types: the base classes exist so that Flax's module
defines its classes, and any use raises ``NotImplementedError``. What jaxkit does implement,
user primitives (``VJPHiPrimitive``) and the AD helpers, comes from ``jaxkit.experimental.hijax``
(``install_as_jax`` maps ``jax.experimental.hijax`` here)."""
from __future__ import annotations

from jaxkit.core import Primitive, ShapedArray
from jaxkit.experimental.hijax import (AbstractRef, VJPHiPrimitive, Zero,  # noqa: F401
                                       instantiate_zeros, is_undefined_primal)

__all__ = ["AbstractRef", "AbstractValue", "AvalMutableQDD", "AvalQDD", "HiPrimitive",
           "MutableHiType", "ShapedArray", "VJPHiPrimitive", "Zero", "aval_method",
           "aval_property", "control_flow_allowed_effects", "instantiate_zeros",
           "is_undefined_primal", "register_hitype"]

AbstractValue = ShapedArray


def _unsupported(what: str):
    raise NotImplementedError(f"jax.experimental.hijax.{what}: jaxkit has no high-level types "
                              "(for Flax, leave the flax_hijax_variable option off)")


class HiPrimitive(Primitive):
    """A primitive over high-level types: it can be made (Flax makes its primitives when its
    module loads) but not bound."""

    def bind(self, *args, **params):
        _unsupported(f"{type(self).__name__}.bind")


class MutableHiType:
    def __init__(self, *args, **kwargs):
        _unsupported(type(self).__name__)


class AvalQDD:
    def __init__(self, *args, **kwargs):
        _unsupported("AvalQDD")


class AvalMutableQDD(AvalQDD):
    pass


class aval_method:  # noqa: N801  (JAX's name)
    """Marks a method of a high-level type's value as available on its abstract value."""

    def __init__(self, fun):
        self.fun = fun

    def __get__(self, obj, objtype=None):
        _unsupported("aval_method")


class aval_property(property):  # noqa: N801
    pass


class _EffectTypeSet:
    def __init__(self):
        self._types: set = set()

    def add_type(self, t: type) -> None:
        self._types.add(t)

    def contains(self, effect) -> bool:
        return any(isinstance(effect, t) for t in self._types)


control_flow_allowed_effects = _EffectTypeSet()
_hitypes: dict = {}


def register_hitype(cls: type, to_aval) -> None:
    """Recorded only: jaxkit never creates values of high-level types."""
    _hitypes[cls] = to_aval

