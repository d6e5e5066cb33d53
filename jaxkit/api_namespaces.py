"""The small namespaces at the top of JAX's API: ``jax.ad`` (the markers of
``vjp(...)[1].with_refs``) and ``jax.memory`` (``memory.Space``, where an array lives).

``with_refs`` takes one marker per primal: ``GradValue()`` returns that cotangent (the
default), ``DontWant()`` skips it (``DidntWant()`` comes back in its place) and a ``Ref``
receives the cotangent added in place (``GradRef()`` comes back).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from jaxkit import core, tree_util
from jaxkit.avals import MemorySpace
from jaxkit.interpreters.state import AbstractRef, Ref

__all__ = ["DidntWant", "DontWant", "GradRef", "GradValue", "MemorySpace", "VJPFunction", "ad",
           "memory"]


@dataclasses.dataclass(frozen=True, slots=True)
class GradValue:
    """``with_refs`` marker: return this primal's cotangent (what a plain call does)."""


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class GradRef:
    """Returned for a primal whose cotangent went into a ``Ref`` (an empty pytree)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DontWant:
    """``with_refs`` marker: this primal's cotangent is not wanted."""


@tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, slots=True)
class DidntWant:
    """Returned for a primal marked ``DontWant`` (an empty pytree)."""


def _is_ref(x: Any) -> bool:
    return isinstance(x, Ref) or (isinstance(x, core.Tracer) and
                                  isinstance(x.aval, AbstractRef))


class VJPFunction(tree_util.Partial):
    """The pullback ``jax.vjp`` returns: ``f(ct)`` gives one cotangent per primal, and
    ``f.with_refs(*markers)(ct)`` routes each as its marker says (see the module docstring).
    As JAX's, it shows the primals' and outputs' structures (``in_tree``, ``out_tree``), the
    linear program it transposes (``jaxpr``, the residuals its constvars) and the residuals
    (``opaque_residuals``)."""

    in_tree = property(lambda self: self.func.args[0].in_tree)
    out_tree = property(lambda self: self.func.args[0].out_tree)
    jaxpr = property(lambda self: self.func.args[0].lin.jaxpr)
    opaque_residuals = property(lambda self: list(self.args[0]))

    def with_refs(self, *maybe_ct_refs: Any) -> Callable[[Any], Any]:
        markers, tree = tree_util.tree_flatten(
            maybe_ct_refs, is_leaf=lambda x: isinstance(x, (GradValue, DontWant)) or _is_ref(x))

        def pullback(ct: Any) -> Any:
            cts, ct_tree = tree_util.tree_flatten(self(ct))
            if ct_tree != tree:
                raise TypeError("with_refs takes one marker (GradValue(), DontWant() or a Ref) "
                                f"per primal, in the primals' structure {ct_tree}; got {tree}")
            out = []
            for marker, c in zip(markers, cts):
                if isinstance(marker, DontWant):
                    out.append(DidntWant())
                elif _is_ref(marker):
                    marker[...] += c
                    out.append(GradRef())
                else:
                    out.append(c)
            return tree_util.tree_unflatten(tree, out)
        return pullback


tree_util.register_pytree_node(
    VJPFunction, lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: VJPFunction(func, *children[0], **children[1]))


ad = SimpleNamespace(DontWant=DontWant, DidntWant=DidntWant, GradRef=GradRef,
                     GradValue=GradValue)
memory = SimpleNamespace(Space=MemorySpace)
