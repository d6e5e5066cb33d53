"""Unreduced and reduced mesh axes in types: the rules that say which a result has.

Over Explicit mesh axes a type may say, besides its split, that the value is *unreduced* over
some axes (each device holds a summand: ``f32[8@x,4]{U:y}``) or *reduced* over them (each
device holds the whole sum, and a cotangent flowing back is unreduced: ``{R:y}``). Each
primitive's sharding rule is followed by its ``ur`` rule, registered here with ``defur``:
``rule(*avals, **params) -> (unreduced, reduced)`` (two lists, one entry per result, for a
primitive with several). A primitive with no ``ur`` rule refuses operands that carry either
set, as JAX 0.10.2 does, with its words.

The rules are JAX's: a sum of values unreduced over the same axes is unreduced (``add``); a
product is unreduced only when the other factor is reduced over those axes (``mul`` is
bilinear); a contraction over a split dimension is unreduced when ``out_sharding`` says so
(no all-reduce is emitted); structural primitives and ``reduce_sum`` keep their operand's
sets; most elementwise primitives keep ``reduced`` and refuse ``unreduced``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import core
from jaxkit.avals import NO_MUR
from jaxkit.core import ShapedArray, ShardingTypeError
from jaxkit.runtime.sharding import current_abstract_mesh

__all__ = ["defur", "getr", "getu", "ur_rules"]

URPair = tuple  # (unreduced, reduced): two frozensets, or two lists of them

ur_rules: dict[core.Primitive, Callable[..., URPair]] = {}

_ISSUE = "Please file an issue at https://github.com/jax-ml/jax/issues"


def defur(prim: core.Primitive, rule: Callable[..., URPair]) -> None:
    """Register ``rule(*avals, **params) -> (unreduced, reduced)`` as ``prim``'s rule for the
    unreduced and reduced mesh axes of its result(s)."""
    ur_rules[prim] = rule


def getu(aval: Any) -> frozenset:
    """The mesh axes over which ``aval`` is unreduced (empty when its type says none): Explicit
    axes its sharding names, and manual axes inside a ``shard_map`` body."""
    s = getattr(aval, "_sharding", None)
    manual = getattr(aval, "mur", NO_MUR)[0]
    return manual if s is None else s.spec.unreduced | manual


def getr(aval: Any) -> frozenset:
    """The mesh axes over which ``aval`` is reduced (empty when its type says none)."""
    s = getattr(aval, "_sharding", None)
    manual = getattr(aval, "mur", NO_MUR)[1]
    return manual if s is None else s.spec.reduced | manual


def no_rule_error(name: str) -> NotImplementedError:
    """JAX's error for a primitive with no unreduced/reduced rule given such an operand."""
    return NotImplementedError(f"unreduced/reduced rule for {name} is not implemented. "
                               f"{_ISSUE}")


def _unreduced_error(name: str) -> NotImplementedError:
    return NotImplementedError(f"unreduced rule for {name} is not implemented. {_ISSUE}")


# ---- the standard rules ----

def keep_rule(x: ShapedArray, *rest: Any, **params) -> URPair:
    """The result keeps the (first) operand's sets: structural primitives move summands
    around without mixing them."""
    return getu(x), getr(x)


def keep_each_rule(n_out: Callable[..., int]) -> Callable[..., URPair]:
    """``keep_rule`` for a primitive with ``n_out(x, **params)`` results."""
    def rule(x: ShapedArray, *rest: Any, **params) -> URPair:
        n = n_out(x, **params)
        return [getu(x)] * n, [getr(x)] * n
    return rule


def unop_rule(name: str) -> Callable[..., URPair]:
    """A unary elementwise primitive: a reduced operand gives a reduced result; an unreduced
    one is refused (a nonlinear function of a summand is not a summand)."""
    def rule(x: ShapedArray, *rest: Any, **params) -> URPair:
        if getu(x):
            raise _unreduced_error(name)
        return frozenset(), getr(x)
    return rule


def _flat(spec_entries: Sequence) -> frozenset:
    return frozenset(a for p in spec_entries if p is not None
                     for a in ((p,) if isinstance(p, str) else p))


def _replicated_axes(aval: ShapedArray, mesh) -> frozenset:
    mur = getattr(aval, "mur", NO_MUR)
    manual = getattr(aval, "vma", frozenset()) | mur[0] | mur[1]  # inside a shard_map body
    s = getattr(aval, "_sharding", None)
    if s is None:
        return frozenset(mesh.axis_names) - manual
    return frozenset(mesh.axis_names) - (_flat(s.spec.partitions) | s.spec.unreduced
                                         | s.spec.reduced | manual)


def nary_reduced(*avals: ShapedArray) -> frozenset:
    """JAX's check of an n-ary elementwise primitive's reduced operands: all reduced over the
    same axes, and no other operand split or replicated over them (that would mix a reduced
    value with one that is not). Rank-0 operands are left out: JAX reshards a replicated
    scalar to reduced before the primitive (``R * 2.0`` is reduced)."""
    sets = {r for a in avals if (r := getr(a))}
    if len(sets) > 1:
        raise ShardingTypeError("All inputs should be reduced across the same mesh axes. Got "
                                f"specs: {sets}")
    reduced = sets.pop() if sets else frozenset()
    if not reduced:
        return reduced
    mesh = current_abstract_mesh()
    for a in avals:
        if not a.shape and not getr(a):
            continue
        if _replicated_axes(a, mesh) & reduced:
            raise ShardingTypeError("Inputs cannot be replicated on the same axes that another "
                                    f"input is reduced on. Got input type: {a} and reduced "
                                    f"spec: {reduced}")
        s = getattr(a, "_sharding", None)
        if s is not None and _flat(s.spec.partitions) & reduced:
            raise ShardingTypeError(
                "Inputs cannot be sharded/varying on the same axes that another input is "
                "reduced on. Reshard the input which is reduced to be sharded on the mesh axes "
                "it is reduced on via `jax.sharding.reshard(inp, jax.P(...))`. Got input type: "
                f"{a} and reduced spec: {reduced}")
    return reduced


def nary_rule(name: str) -> Callable[..., URPair]:
    """An n-ary elementwise primitive: reduced operands must agree (``nary_reduced``);
    unreduced ones are refused."""
    def rule(*avals: ShapedArray, **params) -> URPair:
        reduced = nary_reduced(*avals)
        if any(getu(a) for a in avals):
            raise _unreduced_error(name)
        return frozenset(), reduced
    return rule


def add_rule(x: ShapedArray, y: ShapedArray, **params) -> URPair:
    """A sum of two values unreduced over the same axes is unreduced over them; one unreduced
    operand alone is refused (adding it would need an all-reduce first)."""
    reduced = nary_reduced(x, y)
    xu, yu = getu(x), getu(y)
    if xu and yu and xu != yu:
        raise ShardingTypeError("lhs and rhs to `add` must be unreduced along the same mesh "
                                f"axes. Got lhs={xu}, rhs={yu}")
    if bool(xu) != bool(yu):
        one, other = ("lhs", "rhs") if xu else ("rhs", "lhs")
        raise ShardingTypeError(
            f"{one} is unreduced while {other} is not. `add` operation does not allow this "
            "because there will be implicit communication. Please reduce "
            f"{one} via `reshard` before calling `add`.")
    return xu, reduced


def mul_rule(x: ShapedArray, y: ShapedArray, **params) -> URPair:
    """``mul`` is bilinear: an unreduced factor times one reduced over the same axes is
    unreduced over them (each summand scaled by the whole other factor); two unreduced
    factors, or an unreduced one times anything else, are refused."""
    reduced = nary_reduced(x, y)
    xu, yu = getu(x), getu(y)
    if xu and yu:
        raise ShardingTypeError("lhs and rhs to `mul` cannot be unreduced since mul is "
                                f"bilinear. Got lhs={xu}, rhs={yu}")
    if xu and xu != getr(y):
        raise ShardingTypeError("RHS should be reduced along the same axes LHS is unreduced "
                                f"on. Got lhs={x} and rhs={y}")
    if yu and yu != getr(x):
        raise ShardingTypeError("LHS should be reduced along the same axes RHS is unreduced "
                                f"on. Got lhs={x} and rhs={y}")
    unreduced = xu or yu
    return unreduced, (frozenset() if unreduced else reduced)


def dot_general_rule(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers,
                     out_sharding=None, **params) -> URPair:
    """Operands may not be unreduced. A contraction over dimensions split (alike) on both
    sides is unreduced over those axes when ``out_sharding`` names them as unreduced: each
    device's partial product is a summand, and no all-reduce is emitted."""
    if getu(lhs) or getu(rhs):
        raise ShardingTypeError(f"lhs or rhs passed to dot_general cannot be unreduced. Got "
                                f"lhs={lhs!r} and rhs={rhs!r}")
    wanted = getattr(getattr(out_sharding, "spec", None), "unreduced", frozenset())
    if not wanted:
        return frozenset(), frozenset()
    (lc, rc), _ = dimension_numbers
    lspec = tuple(_parts(lhs)[i] for i in lc)
    rspec = tuple(_parts(rhs)[i] for i in rc)
    if lspec != rspec:
        raise ShardingTypeError(
            "lhs and rhs contracting dims should be sharded identically when out_sharding "
            "provided to dot_general mentions unreduced_axes. Got "
            f"lhs_contracting_spec={lspec}, rhs_contracting_spec={rspec}")
    if wanted != _flat(lspec):
        raise ShardingTypeError("out_sharding's unreduced axes should be equal to the "
                                f"contracting specs. Got unreduced axes={wanted} and "
                                f"contracting spec={lspec}")
    return wanted, frozenset()


def _parts(aval: ShapedArray) -> tuple:
    s = getattr(aval, "_sharding", None)
    return (None,) * len(aval.shape) if s is None else s.spec.partitions


def same_sets_rule(*operands: ShapedArray, **params) -> URPair:
    """``concatenate``/``stack``: the operands that carry sets must carry the same ones."""
    us = {u for o in operands if (u := getu(o))}
    if len(us) > 1:
        raise ShardingTypeError("All operands should be unreduced along the same mesh axes. "
                                f"Got unreduced specs: {us}")
    rs = {r for o in operands if (r := getr(o))}
    if len(rs) > 1:
        raise ShardingTypeError("All operands should be reduced along the same mesh axes. "
                                f"Got reduced specs: {rs}")
    return (us.pop() if us else frozenset()), (rs.pop() if rs else frozenset())


def select_n_rule(which: ShapedArray, *cases: ShapedArray) -> URPair:
    """The cases' sets (their layouts are checked equal by the sharding rule)."""
    return getu(cases[0]), getr(cases[0])


def dynamic_slice_rule(x: ShapedArray, *rest: Any, **params) -> URPair:
    """As JAX: reduced kept, unreduced refused."""
    if getu(x):
        raise _unreduced_error("dynamic_slice")
    return frozenset(), getr(x)


def dynamic_update_slice_rule(x: ShapedArray, update: ShapedArray, *starts) -> URPair:
    """The update must carry the operand's sets; so does the result."""
    for what, get in (("unreduced", getu), ("reduced", getr)):
        if get(x) != get(update):
            raise ShardingTypeError(
                f"dynamic_update_slice operand and update must be {what} along the same axes. "
                f"Got operand sharding {x.str_short()} and update sharding "
                f"{update.str_short()}.")
    return getu(x), getr(x)


def reduce_sum_rule(x: ShapedArray, *, axes: Sequence[int],
                    out_sharding: Any = None) -> URPair:
    """A sum of summands is a summand: the operand's sets are kept. ``out_sharding`` may ask
    for the result unreduced over the mesh axes of the summed dimensions (each device's
    partial sum is a summand: no all-reduce)."""
    wanted = getattr(getattr(out_sharding, "spec", None), "unreduced", frozenset())
    if not wanted:
        return getu(x), getr(x)
    summed = _flat(p for i, p in enumerate(_parts(x)) if i in set(axes)) | getu(x)
    if not wanted <= summed:
        raise ShardingTypeError(
            "out_sharding's unreduced axes should be in operand's specs that were summed over. "
            f"Got operand={x!r}, axes={frozenset(axes)}, unreduced_spec={wanted}")
    return wanted, getr(x)


def asked_rule(x: ShapedArray, *, sharding: Any = None, **params) -> URPair:
    """``reshard``/``with_sharding_constraint``: the sets asked for."""
    spec = getattr(sharding, "spec", None)
    if spec is None:
        return frozenset(), frozenset()
    return spec.unreduced, spec.reduced
