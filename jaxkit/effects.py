"""The side effects an equation or a jaxpr has (JAX's ``effects`` module): ``jaxpr.effects``.

An effect is an object; a set of them is a jaxpr's or an equation's effect type. Kinds:

* callbacks' effects (``DebugEffect``, ``OrderedIOEffect``...: ``transforms.callback``);
* ``JaxprInputEffect``: an effect on one input of the jaxpr, the ``Ref`` read or written
  (``ReadEffect``, ``WriteEffect``, ``AccumEffect``); its ``input`` is the ``Var`` of that input;
* ``InternalMutableArrayEffect``: a jaxpr that makes a ``Ref`` of its own.

jaxkit's transformations do not read these sets (they decide from the primitives: see
``partial_eval.effectful_primitives`` and ``mlir_tokens``); the sets are what a user or a
library inspecting a jaxpr sees, computed when asked (``jaxpr.effect_rules``).
"""
from __future__ import annotations

from typing import Any


class Effect:
    """Base class of side effects (JAX's ``core.Effect``). Libraries subclass it to declare
    effect types of their own."""


Effects = frozenset
no_effects: frozenset = frozenset()


class JaxprInputEffect(Effect):
    """An effect on one input of an equation or a jaxpr: ``input`` is its ``Var``."""

    def __init__(self, input: Any):  # noqa: A002 (JAX's name)
        self.input = input

    def replace(self, input: Any) -> JaxprInputEffect:  # noqa: A002
        return type(self)(input)

    # (``input`` is a ``Var``, compared by identity, or, in a library's abstract eval rule,
    # the operand's position)
    def _key(self):
        return self.input if type(self.input) is int else id(self.input)

    def __eq__(self, other):
        if not isinstance(other, JaxprInputEffect):
            return NotImplemented
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash((type(self), self._key()))

    def __repr__(self):
        return f"{type(self).__name__}({self.input!r})"


class RefEffect(JaxprInputEffect):
    """An effect on a ``Ref`` input."""


class ReadEffect(RefEffect):
    """The input ``Ref`` is read."""


class WriteEffect(RefEffect):
    """The input ``Ref`` is written."""


class AccumEffect(RefEffect):
    """The input ``Ref`` is added to in place."""


class InternalMutableArrayEffect(Effect):
    """The jaxpr makes a ``Ref`` of its own (``new_ref``)."""


internal_mutable_array_effect = InternalMutableArrayEffect()
