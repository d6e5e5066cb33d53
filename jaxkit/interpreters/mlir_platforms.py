"""Lowering for several platforms at once (``lower(lowering_platforms=('cpu', 'cuda'))``,
``export(..., platforms=[...])``), as JAX does it.

Every function of such a module takes the platform's index first: ``main``'s ``%arg0:
tensor<i32> {jax.global_constant = "_platform_index"}``, passed on to each private function,
and set by whoever runs the module (an ``Exported``'s caller). An equation whose lowering
rules are the same on every platform is lowered once, so a module without platform-specific
operations is the one-platform module plus that parameter. One whose rules differ becomes a
``stablehlo.case`` with one branch per distinct rule, each lowered for one of its platforms,
chosen by a ``case`` mapping the platform index to the branch (JAX's form).

The module context (``mlir.ModuleContext``) holds ``platforms`` and the stack of the current
function's index parameter (``platform_index``); this module reads them duck-typed, as it
sits beside ``mlir`` (which calls it)."""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from jaxkit import core
from jaxkit.interpreters.mlir_ir import aval_to_ir_type, dtype_to_ir_type, hlo, ir, ir_constant

_INDEX_NAME = "_platform_index"

# Rules that choose what to emit by the platform they lower for (``ctx.module_context.
# platform``: the linear algebra rules, LAPACK on a CPU, cuSOLVER on an NVIDIA GPU): the same
# function on every platform, lowered once per platform all the same.
_reads_platform: set = set()


def reads_platform(rule: Callable) -> Callable:
    """Mark a lowering rule that reads the platform it lowers for (a decorator)."""
    _reads_platform.add(rule)
    return rule


def is_multi(mctx: Any) -> bool:
    """Whether the module is lowered for several platforms (then every function takes the
    platform's index)."""
    return len(mctx.platforms) > 1


def targets(mctx: Any) -> tuple[str, ...]:
    """The platforms the equations being lowered are for: the module's, or, inside a branch
    of a ``case`` over them, that branch's one."""
    return mctx.eqn_platforms or mctx.platforms or (mctx.platform,)


def index_types(mctx: Any) -> list:
    """The leading parameter type of every function of the module (none for one platform)."""
    return [_i32()] if is_multi(mctx) else []


def index_arg_attrs(mctx: Any) -> list[dict]:
    """The leading parameter's attributes, as JAX marks it."""
    return [{"jax.global_constant": ir.StringAttr.get(_INDEX_NAME)}] if is_multi(mctx) else []


def index_args(mctx: Any) -> list:
    """What a call passes first: the calling function's platform index."""
    return [mctx.platform_index[-1]] if is_multi(mctx) else []


@contextlib.contextmanager
def function_body(mctx: Any, arguments: Sequence) -> Iterator[list]:
    """Lower a function body whose block arguments are ``arguments``: yields the others,
    the platform index (the first) being current inside."""
    if not is_multi(mctx):
        yield list(arguments)
        return
    mctx.platform_index.append(arguments[0])
    try:
        yield list(arguments)[1:]
    finally:
        mctx.platform_index.pop()


def branch_index(mctx: Any, branches: Sequence[int]) -> ir.Value:
    """The index of the branch to run, ``branches[i]`` on the module's platform ``i``: a
    ``case`` on the platform index returning each constant."""
    case = hlo.CaseOp([_i32()], mctx.platform_index[-1], len(branches))
    for region, branch in zip(case.regions, branches):
        with ir.InsertionPoint(region.blocks.append()):
            hlo.ReturnOp([ir_constant(np.int32(branch))])
    return case.result


def rule_for(mctx: Any, prim: core.Primitive,
             rule_on: Callable[[str], Callable | None]) -> Callable | None:
    """The lowering rule of ``prim`` for the module's platforms: the one rule all of them
    take, or one emitting a ``case`` over the distinct rules (``rule_on(platform)``: that
    platform's rule, None if it has none)."""
    platforms = targets(mctx)
    rules = [rule_on(p) for p in platforms]
    if all(r is rules[0] for r in rules) and rules[0] not in _reads_platform:
        return rules[0]
    missing = [p for p, r in zip(platforms, rules) if r is None]
    if missing:
        raise NotImplementedError(f"lowering rule for '{prim.name}' is not implemented for "
                                  f"platform {missing[0]!r} (lowering for platforms "
                                  f"{platforms})")
    distinct: list[tuple[Callable, str]] = []  # (rule, the first platform taking it)
    branches = []
    for platform, rule in zip(platforms, rules):
        index = next((i for i, (r, p) in enumerate(distinct) if r is rule and (
            p == platform or rule not in _reads_platform)), None)
        if index is None:
            index = len(distinct)
            distinct.append((rule, platform))
        branches.append(index)

    def per_platform(ctx: Any, *args, **params):
        outer = ctx.module_context
        out_types = [aval_to_ir_type(core.physical_aval(a) if isinstance(a, core.ShapedArray)
                                     else a) for a in ctx.avals_out]
        case = hlo.CaseOp(out_types, branch_index(outer, branches), len(distinct))
        for region, (rule, platform) in zip(case.regions, distinct):
            with ir.InsertionPoint(region.blocks.append()):
                # (inside, this platform's rules; functions still take the index, as JAX's)
                inner = dataclasses.replace(outer, platform=platform, eqn_platforms=(platform,))
                outs = rule(ctx.replace(module_context=inner), *args, **params)
                hlo.ReturnOp(list(outs) if isinstance(outs, (list, tuple)) else [outs])
        results = list(case.results)
        return results if prim.multiple_results else results[0]

    return per_platform


def _i32() -> ir.Type:
    return ir.RankedTensorType.get([], dtype_to_ir_type(np.dtype(np.int32)))
