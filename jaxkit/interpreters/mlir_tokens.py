"""Tokens of ordered effects while a module is lowered, as JAX's ``TokenSet``.

An ordered callback (``debug.print(ordered=True)``, ``io_callback(ordered=True)``) takes the
token of the previous call of its effect kind and returns the next one, so that XLA keeps
them in program order. Each block of the module (``main``, a loop's body, a branch, a private
function) holds its *current token* per effect kind. A construct with a sub-jaxpr that has
ordered effects carries those tokens in and out: extra leading ``!stablehlo.token`` operands
and results of its ``while``/``case``/``func.call`` (and parameters/results of the called
function), the body's block starting from the tokens it receives and handing back the last
ones it made. So one chain per effect kind runs through the whole program, as in JAX.

Which equations have an ordered effect is told by ``def_ordered_effect`` (a primitive's
effect depends on its parameters); ``ordered_effects`` finds them in a jaxpr and in the
jaxprs nested in its equations.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jaxkit import core
# The IR half of mlir only: mlir imports mlir_callbacks, which builds on this module.
from jaxkit.interpreters import mlir_ir as mlir

if TYPE_CHECKING:
    from jaxkit.interpreters.mlir import ModuleContext

# primitive -> params -> its ordered effect object, or None when the equation is unordered.
ordered_effect_rules: dict[core.Primitive, Callable[..., Any]] = {}


def def_ordered_effect(prim: core.Primitive, effect_of: Callable[..., Any]) -> None:
    """``effect_of(**params)``: the ordered effect of an equation of ``prim`` (or None)."""
    ordered_effect_rules[prim] = effect_of


# jaxpr -> the sorted effect kinds it has (jaxprs are immutable once traced).
_jaxpr_kinds: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _kinds(jaxpr: core.Jaxpr) -> frozenset:
    found = _jaxpr_kinds.get(jaxpr)
    if found is None:
        kinds = set()
        for eqn in jaxpr.eqns:
            rule = ordered_effect_rules.get(eqn.primitive)
            effect = rule(**eqn.params) if rule is not None else None
            if effect is not None:
                kinds.add(type(effect))
            for sub in core.subjaxprs(eqn.params):
                kinds |= _kinds(sub)
        found = _jaxpr_kinds[jaxpr] = frozenset(kinds)
    return found


def ordered_effects(*jaxprs: core.Jaxpr | core.ClosedJaxpr) -> list[type]:
    """The kinds (effect types) of the ordered effects of ``jaxprs`` and of the jaxprs nested
    in them, in a fixed order (by name): the order of the tokens a construct carries."""
    kinds: set = set()
    for j in jaxprs:
        kinds |= _kinds(j.jaxpr if isinstance(j, core.ClosedJaxpr) else j)
    return sorted(kinds, key=lambda k: (k.__module__, k.__qualname__))


# Per module being lowered: (block, effect kind) -> the block's current token of that kind.
_block_tokens: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _table(mctx: ModuleContext) -> dict:
    return _block_tokens.setdefault(mctx.module, {})


def _block() -> Any:
    return mlir.ir.InsertionPoint.current.block


def current_tokens(mctx: ModuleContext, kinds: Sequence[type]) -> list[mlir.ir.Value]:
    """The current block's tokens of ``kinds``; a kind without one yet starts from a fresh
    ``stablehlo.after_all`` (the first ordered call of a program)."""
    table, block = _table(mctx), _block()
    out = []
    for kind in kinds:
        token = table.get((block, kind))
        if token is None:
            token = table[(block, kind)] = mlir.hlo.AfterAllOp([]).result
        out.append(token)
    return out


def set_tokens(mctx: ModuleContext, kinds: Sequence[type],
               tokens: Sequence[mlir.ir.Value]) -> None:
    """Make ``tokens`` the current block's tokens of ``kinds`` (what an ordered call or a
    construct carrying tokens returned, or a body block's token arguments)."""
    table, block = _table(mctx), _block()
    for kind, token in zip(kinds, tokens, strict=True):
        table[(block, kind)] = token


def token_types(kinds: Sequence[type]) -> list[mlir.ir.Type]:
    return [mlir.hlo.TokenType.get() for _ in kinds]
