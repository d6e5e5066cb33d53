"""A roofline estimate of a function: flops, memory traffic and interconnect traffic,
counted from its jaxpr with one rule per primitive (``rooflines.py`` holds jaxkit's rules).

``roofline(f)(*args)`` traces ``f`` (optionally under ``shard_map`` over a mesh, optionally
its VJP), drops dead equations and walks the equations: a rule gives an equation's
``RooflineResult``; equations holding a ``jaxpr`` (``jit``, ``scan``, ``checkpoint``) or a
``call_jaxpr`` (``custom_jvp``/``custom_vjp``) are walked into, once. Alongside, the walk
tracks the bytes live at each point (inputs, then each result until its last use) and
reports the peak. A primitive without a rule is skipped with a logged warning, as in JAX:
the result is an estimate, and one unknown equation should not stop it.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, Protocol

import numpy as np

from jaxkit import core, source_info
from jaxkit import numpy as jnp
from jaxkit._util import foreach, safe_map
from jaxkit.api import ShapeDtypeStruct, make_jaxpr, vjp as _vjp
from jaxkit.interpreters.partial_eval import dce_jaxpr
from jaxkit.sharding import AbstractMesh, Mesh, NamedSharding
from jaxkit.tree_util import broadcast_prefix, tree_flatten, tree_map, tree_unflatten
from jaxkit.transforms.shard_map import shard_map, shard_map_p

__all__ = ["RooflineResult", "RooflineRuleContext", "RooflineShape", "register_roofline",
           "register_standard_roofline", "roofline", "roofline_and_grad"]

logger = logging.getLogger(__name__)

ShapeDtypeStructTree = Any
map = safe_map  # noqa: A001  (JAX's module rebinds it to the checked form)
Specs = Any


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineRuleContext:
    """What a rule may know besides its operands' shapes. ``jaxpr_eqn_ctx`` is JAX's
    per-equation context (compute type, XLA metadata); jaxkit's equations carry none, so it
    is always None."""

    name_stack: source_info.NameStack
    primitive: core.Primitive
    avals_in: Sequence[core.ShapedArray]
    avals_out: Sequence[core.ShapedArray]
    jaxpr_eqn_ctx: Any
    mesh: Mesh | AbstractMesh | None
    pin_lhs_in_vmem: bool
    pin_rhs_in_vmem: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineShape:
    """An array's shape and dtype, with its element count and bytes."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @classmethod
    def from_aval(cls, aval: core.ShapedArray) -> RooflineShape:
        if not isinstance(aval, core.ShapedArray):
            raise TypeError(f"Expected ShapedArray, got {type(aval)}.")
        if not isinstance(aval.dtype, np.dtype):
            raise TypeError(f"Expected numpy or prng.KeyTy dtype, got {type(aval.dtype)}.")
        return cls(shape=aval.shape, dtype=aval.dtype)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def bytes(self) -> int:
        return int(self.size * self.dtype.itemsize)

    @classmethod
    def total_bytes(cls, avals: Sequence[core.ShapedArray]) -> int:
        return sum(cls.from_aval(aval).bytes for aval in avals)


def _merge(d1: dict[str, int], d2: dict[str, int]) -> dict[str, int]:
    return {k: d1.get(k, 0) + d2.get(k, 0) for k in set(d1) | set(d2)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineResult:
    """Counts for a program or an equation. ``flops``/``hbm_bytes`` count what stays after
    fusion (matrix products); the ``unfused_`` ones count every equation as its own kernel.
    ``ici_bytes``/``ici_latency`` are per mesh axis; ``peak_hbm_bytes`` is the most bytes
    live at once. Results add (peaks take the maximum) and scale by a number."""

    flops: int = 0
    unfused_flops: int = 0
    ici_bytes: dict[str, int] = field(default_factory=dict)
    ici_latency: dict[str, int] = field(default_factory=dict)
    hbm_bytes: int = 0
    peak_hbm_bytes: int = 0
    unfused_hbm_bytes: int = 0

    @classmethod
    def zeros(cls) -> RooflineResult:
        return cls()

    def __add__(self, other: RooflineResult) -> RooflineResult:
        return RooflineResult(
            flops=self.flops + other.flops,
            unfused_flops=self.unfused_flops + other.unfused_flops,
            ici_bytes=_merge(self.ici_bytes, other.ici_bytes),
            ici_latency=_merge(self.ici_latency, other.ici_latency),
            hbm_bytes=self.hbm_bytes + other.hbm_bytes,
            peak_hbm_bytes=max(self.peak_hbm_bytes, other.peak_hbm_bytes),
            unfused_hbm_bytes=self.unfused_hbm_bytes + other.unfused_hbm_bytes)

    def __mul__(self, constant: int | float) -> RooflineResult:
        def scale(v):
            return int(v * constant)
        return RooflineResult(
            flops=scale(self.flops), unfused_flops=scale(self.unfused_flops),
            ici_bytes={k: scale(v) for k, v in self.ici_bytes.items()},
            ici_latency={k: scale(v) for k, v in self.ici_latency.items()},
            hbm_bytes=scale(self.hbm_bytes), peak_hbm_bytes=scale(self.peak_hbm_bytes),
            unfused_hbm_bytes=scale(self.unfused_hbm_bytes))

    def __rmul__(self, constant: int | float) -> RooflineResult:
        return self.__mul__(constant)


class _RooflineRule(Protocol):
    def __call__(self, ctx: RooflineRuleContext, *args: RooflineShape,
                 **kw) -> RooflineResult: ...


_rooflines: dict[core.Primitive, _RooflineRule] = {}


def register_roofline(prim: core.Primitive) -> Callable[[_RooflineRule], _RooflineRule]:
    """Decorator: ``rule(ctx, *operand_shapes, **params) -> RooflineResult`` for ``prim``."""
    def register(rule: _RooflineRule) -> _RooflineRule:
        _rooflines[prim] = rule
        return rule
    return register


def _zero_rule(ctx: RooflineRuleContext, *args, **kwargs) -> RooflineResult:
    return RooflineResult.zeros()


def register_standard_roofline(prim: core.Primitive) -> None:
    """``prim`` costs nothing of its own (data movement XLA folds into its neighbours)."""
    _rooflines[prim] = _zero_rule


def _aval(v: core.Atom) -> core.ShapedArray:
    return core.get_aval(v.val) if type(v) is core.Literal else v.aval


def _last_uses(jaxpr: core.Jaxpr) -> dict:
    """var -> the last equation reading it (None for the program's outputs: kept)."""
    last: dict = {v: None for v in jaxpr.outvars if type(v) is not core.Literal}
    for eqn in reversed(jaxpr.eqns):
        for v in eqn.invars:
            if type(v) is not core.Literal and v not in last:
                last[v] = eqn
    return last


def _interpret(f_name: str, jaxpr: core.Jaxpr | core.ClosedJaxpr,
               mesh: Mesh | AbstractMesh | None, *, pin_lhs_in_vmem: bool = False,
               pin_rhs_in_vmem: bool = False) -> RooflineResult:
    names = source_info.NameStack().extend(f"roofline({f_name})")
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
    result = RooflineResult.zeros()
    env: dict = {v: RooflineShape.from_aval(_aval(v))
                 for v in (*jaxpr.constvars, *jaxpr.invars)}
    last_used = _last_uses(jaxpr)
    live = sum(s.bytes for s in env.values())
    peak = live
    for eqn in jaxpr.eqns:
        eqn_names = names + (eqn.source_info.name_stack if eqn.source_info is not None
                             else source_info.NameStack())
        sub = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
        if isinstance(sub, (core.Jaxpr, core.ClosedJaxpr)):
            result += _interpret(f"{eqn.primitive.name}({f_name})", sub, mesh,
                                 pin_lhs_in_vmem=pin_lhs_in_vmem,
                                 pin_rhs_in_vmem=pin_rhs_in_vmem)
        elif eqn.primitive not in _rooflines:
            logger.warning("No roofline rule for %s, skipping...\n%s", eqn.primitive, eqn)
        else:
            ctx = RooflineRuleContext(
                name_stack=eqn_names, primitive=eqn.primitive,
                avals_in=[_aval(v) for v in eqn.invars],
                avals_out=[v.aval for v in eqn.outvars], jaxpr_eqn_ctx=None, mesh=mesh,
                pin_lhs_in_vmem=pin_lhs_in_vmem, pin_rhs_in_vmem=pin_rhs_in_vmem)
            operands = [RooflineShape.from_aval(_aval(v)) if type(v) is core.Literal
                        else env[v] for v in eqn.invars]
            result += _rooflines[eqn.primitive](ctx, *operands, **eqn.params)
        outs = map(lambda v: RooflineShape.from_aval(v.aval), eqn.outvars)
        live += sum(s.bytes for s in outs)
        foreach(env.__setitem__, eqn.outvars, outs)
        # An operand read twice by its last equation counts twice, as JAX counts it.
        dead = [v for v in eqn.invars
                if type(v) is not core.Literal and last_used.get(v) is eqn]
        live -= sum(env[v].bytes for v in dead)
        for v in dead:
            env.pop(v, None)
        peak = max(peak, live)
    return result + RooflineResult(peak_hbm_bytes=peak)


def _with_vjp(f: Callable) -> Callable:
    """``f``'s VJP pulled back from bfloat16 cotangents (the backward pass)."""
    @wraps(f)
    def run(*args):
        primals, f_vjp = _vjp(f, *args)
        return f_vjp(tree_map(jnp.bfloat16, primals))
    return run


def _qualname(f: Callable) -> str:
    return getattr(f, "__qualname__", getattr(f, "__name__", type(f).__name__))


def roofline(f: Callable, mesh: Mesh | AbstractMesh | None = None,
             in_specs: Specs | None = None, out_specs: Specs | None = None, *,
             pin_lhs_in_vmem: bool = False, pin_rhs_in_vmem: bool = False, vjp: bool = False,
             print_jaxpr: bool = False
             ) -> Callable[..., tuple[ShapeDtypeStructTree, RooflineResult]]:
    """``roofline(f)(*args) -> (output shapes, RooflineResult)``; ``args`` may be arrays or
    ``ShapeDtypeStruct``s. With ``mesh``, ``in_specs`` and ``out_specs`` the function runs
    under ``shard_map`` and the per-device body is counted (collectives included);
    ``vjp=True`` counts the backward pass; ``pin_*_in_vmem`` leave a matrix product's
    operand out of its memory traffic."""
    @wraps(f)
    def run(*args):
        g = f
        if in_specs is not None and out_specs is not None and mesh is not None:
            g = shard_map(g, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
        if vjp:
            g = _with_vjp(g)
        closed, out_shapes = make_jaxpr(g, return_shape=True)(*args)
        if out_specs is not None and mesh is not None:
            # The shapes say how the outputs are laid out over the mesh, as JAX's do.
            flat, tree = tree_flatten(out_shapes)
            specs = broadcast_prefix(out_specs, out_shapes)
            out_shapes = tree_unflatten(tree, map(
                lambda s, spec: ShapeDtypeStruct(s.shape, s.dtype,
                                                 sharding=NamedSharding(mesh, spec)),
                flat, specs))
        # As JAX: dead equations and the inputs nothing reads leave the count.
        jaxpr, _ = dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars),
                                prune_invars=True)
        shard_maps = [e for e in jaxpr.eqns if e.primitive is shard_map_p]
        if shard_maps:
            jaxpr = shard_maps[-1].params["jaxpr"]
        if print_jaxpr:
            print(jaxpr)
        return out_shapes, _interpret(_qualname(f), jaxpr, mesh,
                                      pin_lhs_in_vmem=pin_lhs_in_vmem,
                                      pin_rhs_in_vmem=pin_rhs_in_vmem)
    return run


def roofline_and_grad(f: Callable, mesh: Mesh | AbstractMesh, in_specs: Specs,
                      out_specs: Specs, *, pin_lhs_in_vmem: bool = False,
                      pin_rhs_in_vmem: bool = False, print_jaxpr: bool = False
                      ) -> Callable[..., tuple[ShapeDtypeStructTree, RooflineResult,
                                               RooflineResult]]:
    """``(output shapes, forward result, backward result)``; the backward pass is counted
    with the inputs as bfloat16 (int32 inputs stay int32), as JAX does."""
    options = dict(pin_lhs_in_vmem=pin_lhs_in_vmem, pin_rhs_in_vmem=pin_rhs_in_vmem,
                   print_jaxpr=print_jaxpr)

    @wraps(f)
    def run(*args):
        shapes, fwd = roofline(f, mesh, in_specs, out_specs, **options)(*args)
        bf16_args = tree_map(
            lambda x: ShapeDtypeStruct(x.shape, jnp.int32 if x.dtype == jnp.int32
                                       else jnp.bfloat16, sharding=getattr(x, "sharding", None)),
            args)
        _, bwd = roofline(f, mesh, in_specs, out_specs, vjp=True, **options)(*bf16_args)
        return shapes, fwd, bwd
    return run
