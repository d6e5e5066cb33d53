"""Sharding rules: how the explicit shardings in operand types give the result's.

Over a mesh whose axes are ``Explicit``, a type carries its layout (``f32[8@x,4]``: the first
dimension split over mesh axis ``x``). Each primitive's shape rule is followed, through
``jaxkit.core.sharding_hook``, by its sharding rule, registered here with ``defsharding``
next to the primitive's other rules. A rule gets the operand types and the parameters and
returns the result's sharding spec (one entry per dimension: None, an axis name or a tuple
of names), or one per result for a primitive with several.

The unreduced and reduced mesh axes of a result (``{U:y}``, ``{R:y}``) are given by a second
rule, registered with ``defur`` (see ``sharding_ur``).

Primitives that carry a jaxpr (``jit``, ``cond``, ``scan``...) type their results by
tracing it, so they need no rule; any other primitive with an explicitly sharded operand and
no rule raises ``NotImplementedError``, as a missing rule does elsewhere.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from jaxkit import avals, core, dtypes
from jaxkit.avals import shape_sharding_str
from jaxkit.interpreters import ad
from jaxkit.lax import sharding_ur
from jaxkit.lax.sharding_ur import defur
from jaxkit.runtime import context_mesh
from jaxkit.core import ShapedArray, ShardingTypeError
from jaxkit.runtime.sharding import (AbstractMesh, AxisType, DuplicateSpecError, NamedSharding,
                                     PartitionSpec, current_abstract_mesh, typed_sharding)

__all__ = ["defsharding", "defur", "keeps_operand_mesh", "resolve_out_sharding", "sharding_rules",
           "type_sharding_of"]

Spec = tuple  # one entry per dimension: None, a mesh axis name, or a tuple of names

sharding_rules: dict[core.Primitive, Callable[..., Any]] = {}


def defsharding(prim: core.Primitive, rule: Callable[..., Any]) -> None:
    """Register ``rule(*avals, **params) -> spec`` (a list of specs for a primitive with
    several results) as ``prim``'s sharding rule."""
    sharding_rules[prim] = rule
    if getattr(rule, "keeps_operand_mesh", False):
        context_mesh.untyped_results.add(prim)


def keeps_operand_mesh(rule: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``rule`` as one that copies or narrows an operand's type, as JAX's rule for the
    primitive does: its result's type then carries a mesh only when an operand's does (an
    eager ``sin`` of host data under ``set_mesh`` is ``P()`` over an Explicit mesh, an
    ``add`` is ``P(None,)``; see ``runtime.context_mesh``)."""
    rule.keeps_operand_mesh = True  # type: ignore[attr-defined]
    return rule


def parts(aval: ShapedArray) -> Spec:
    """The spec of ``aval``'s explicit sharding, one entry per dimension (all None when the
    type carries none)."""
    s = getattr(aval, "_sharding", None)
    return (None,) * len(aval.shape) if s is None else s.spec.partitions


def _mesh_of(prim_name: str, avals: Sequence) -> AbstractMesh | None:
    mesh = None
    for a in avals:
        s = getattr(a, "_sharding", None)
        if s is None:
            continue
        if mesh is not None and s.mesh != mesh:
            raise ShardingTypeError(f"Mesh for all inputs should be equal. Got one mesh: {mesh} "
                                    f"and another mesh: {s.mesh}")
        mesh = s.mesh
    return mesh


def type_sharding_of(sharding: Any, ndim: int) -> NamedSharding | None:
    """The type-level sharding of a value laid out as ``sharding`` (a ``NamedSharding`` over
    a concrete or abstract mesh), for a rank-``ndim`` value."""
    if not isinstance(sharding, NamedSharding):
        return None
    spec = sharding.spec.partitions + (None,) * (ndim - len(sharding.spec))
    return typed_sharding(sharding.mesh, spec[:ndim], sharding.spec.unreduced,
                          sharding.spec.reduced)


# ---- the hook: a result type plus its sharding ----

def _sharding_hook(prim: core.Primitive, avals: Sequence, params: dict, out: Any) -> Any:
    rule = sharding_rules.get(prim)
    sharded = [a for a in avals if getattr(a, "_sharding", None) is not None]
    if rule is None:
        if not sharded or next(core.subjaxprs(params), None) is not None:
            return out
        raise NotImplementedError(
            f"sharding rule for '{prim.name}' is not implemented (an operand's type is sharded "
            f"over Explicit mesh axes: {', '.join(a.str_short() for a in sharded)}). Run it "
            "with those axes Auto: jax.sharding.auto_axes(f, out_sharding=...), or reshard "
            "the operand to P() first.")
    outs = list(out) if prim.multiple_results else [out]
    specs = (rule(outs, *avals, **params) if getattr(rule, "takes_out", False)
             else rule(*avals, **params))
    if specs is None:
        specs = [None] * len(outs)
    elif not prim.multiple_results:
        specs = [specs]
    mesh = _mesh_of(prim.name, avals) or current_abstract_mesh()
    typed = []
    for o, spec in zip(outs, specs):
        if type(o) is not ShapedArray:  # tokens, references: no layout in their type
            typed.append(None)
            continue
        s = spec if isinstance(spec, NamedSharding) or spec is None else _named(
            prim, avals, o, mesh, spec)
        if isinstance(s, NamedSharding):  # asked for (out_sharding=): padded, Explicit axes
            s = type_sharding_of(s, len(o.shape))
        typed.append(s)
    typed = _with_unreduced_reduced(prim, avals, params, outs, typed, mesh)
    typed_outs = []
    for o, s in zip(outs, typed):
        if type(o) is not ShapedArray:  # tokens, references: no layout in their type
            typed_outs.append(o)
            continue
        if s is not None:
            _check_divisibility(s, o.shape)
        typed_outs.append(ShapedArray(o.shape, o.dtype, o.weak_type, s))
    return typed_outs if prim.multiple_results else typed_outs[0]


def _with_unreduced_reduced(prim, avals, params, outs, typed, mesh) -> list:
    """The results' shardings with the unreduced and reduced axes ``prim``'s ur rule gives
    (see ``sharding_ur``); a primitive without one refuses operands (and results asked for)
    that carry either set, as JAX does."""
    ur = sharding_ur.ur_rules.get(prim)
    if ur is None:
        if any(sharding_ur.getu(a) or sharding_ur.getr(a) for a in avals) or any(
                s is not None and (s.spec.unreduced or s.spec.reduced) for s in typed):
            raise sharding_ur.no_rule_error(prim.name)
        return typed
    us, rs = ur(*avals, **params)
    if not prim.multiple_results:
        us, rs = [us], [rs]
    out = []
    for o, s, u, r in zip(outs, typed, us, rs):
        if type(o) is not ShapedArray or (s is None and not (u or r)) or (
                s is not None and s.spec.unreduced == u and s.spec.reduced == r):
            out.append(s)  # the common case: nothing to change
            continue
        spec = s.spec.partitions if s is not None else (None,) * len(o.shape)
        out.append(typed_sharding(s.mesh if s is not None else mesh, spec, u, r))
    return out


def _check_divisibility(s: NamedSharding, shape: tuple) -> None:
    """A type splits each dimension evenly (JAX checks every sharded type, with these words)."""
    sizes = dict(zip(s.mesh.axis_names, s.mesh.axis_sizes))
    for dim, (p, n) in enumerate(zip(s.spec.partitions, shape)):
        if p is None:
            continue
        axes = p if isinstance(p, tuple) else (p,)
        size = math.prod(sizes[a] for a in axes)
        if n % size:
            raise ValueError(f"Sharding spec {axes} implies that array axis {dim} is "
                             f"partitioned {size} times, but does not evenly divide the "
                             f"dimension size {n}. Got shape: {shape} and sharding {s}")


def _named(prim, avals, out: ShapedArray, mesh: AbstractMesh, spec: Sequence):
    if mesh.empty:
        return None
    try:
        return typed_sharding(mesh, spec)
    except DuplicateSpecError:
        shown = ", ".join(a.str_short() for a in avals)
        result = (f"{dtypes.short_dtype_name(out.dtype)}"
                  f"[{shape_sharding_str(out.shape, spec)}]")
        raise ShardingTypeError(f"{prim.name} operation with inputs: {shown} produces an "
                                f"illegally sharded result: {result}") from None


avals.sharding_hook = _sharding_hook


# ---- the rules ----

def elementwise_rule(*avals: ShapedArray, **params) -> Spec | None:
    """Broadcasting operands: along each dimension the operands must agree, size-1 unsplit
    dimensions taking the others' split (rank-0 operands are left out)."""
    ranked = [a for a in avals if a.shape]
    if not ranked or not any(getattr(a, "_sharding", None) is not None for a in ranked):
        return None
    specs = [parts(a) for a in ranked]
    out = []
    for ss in zip(*specs):
        if all(s == ss[0] for s in ss[1:]):
            out.append(ss[0])
            continue
        chosen = None  # the one split the operands that are split agree on
        for s in ss:
            if chosen is not None and s is not None and s != chosen:
                name = params.get("_name", "elementwise")
                raise ShardingTypeError(f"{name} got incompatible shardings for broadcasting: "
                                        f"{', '.join(map(str, specs))}.")
            chosen = chosen if s is None else s
        out.append(chosen)
    return tuple(out)


def named_elementwise_rule(name: str) -> Callable[..., Spec | None]:
    """``elementwise_rule`` for primitive ``name`` (named in its errors)."""
    return lambda *avals, **params: elementwise_rule(*avals, _name=name)


def add_rule(x: ShapedArray, y: ShapedArray) -> Spec | None:
    """``add``: the elementwise rule (its unreduced axes: ``sharding_ur.add_rule``)."""
    return elementwise_rule(x, y, _name="add")


@keeps_operand_mesh
def unary_rule(x: ShapedArray, **params) -> Spec | None:
    """A result laid out as the (only) operand."""
    return parts(x) if getattr(x, "_sharding", None) is not None else None


@keeps_operand_mesh
def reduce_rule(x: ShapedArray, *, axes: Sequence[int], **params) -> Spec | None:
    """A reduction drops the reduced dimensions and their mesh axes."""
    if getattr(x, "_sharding", None) is None:
        return None
    return tuple(p for i, p in enumerate(parts(x)) if i not in set(axes))


@keeps_operand_mesh
def reduce_sum_rule(x: ShapedArray, *, axes: Sequence[int],
                    out_sharding: NamedSharding | None = None) -> Any:
    """``reduce_sum``: the layout ``out_sharding`` asks for, else ``reduce_rule``'s."""
    return out_sharding if out_sharding is not None else reduce_rule(x, axes=axes)


@keeps_operand_mesh
def squeeze_rule(x: ShapedArray, *, dimensions: Sequence[int]) -> Spec | None:
    """The removed (size-1, so unsplit) dimensions drop out."""
    if getattr(x, "_sharding", None) is None:
        return None
    return tuple(p for i, p in enumerate(parts(x)) if i not in set(dimensions))


@keeps_operand_mesh
def transpose_rule(x: ShapedArray, *, permutation: Sequence[int]) -> Spec | None:
    if getattr(x, "_sharding", None) is None:
        return None
    spec = parts(x)
    return tuple(spec[i] for i in permutation)


def broadcast_in_dim_rule(x: ShapedArray, *, shape: Sequence[int],
                          broadcast_dimensions: Sequence[int], sharding=None) -> Any:
    """Operand dimensions keep their split; the new dimensions are unsplit (unless
    ``sharding``, the ``out_sharding`` asked for, says otherwise)."""
    if sharding is not None:
        return sharding
    if getattr(x, "_sharding", None) is None:
        return None
    spec = iter(parts(x))
    dims = set(broadcast_dimensions)
    return tuple(next(spec) if i in dims else None for i in range(len(shape)))


def _reshape_error(x: ShapedArray, new_sizes) -> ShardingTypeError:
    return ShardingTypeError(
        "This reshape is not supported. Please specify the sharding of the output via the "
        "`out_sharding` argument of jax.lax.reshape. Got operand type: "
        f"{x}, new sizes: {tuple(new_sizes)}")


def _split_axes(mesh_sizes: dict, axes: tuple, sizes: Sequence[int], x, new_sizes) -> list:
    """Mesh axes ``axes`` (major first) of one dimension spread over the dimensions of
    ``sizes`` it is reshaped into, major first: each takes axes while they divide it."""
    it = iter(axes)
    out = []
    pending = next(it, None)
    for size in sizes:
        mine = []
        while pending is not None and size > 1:
            size, rem = divmod(size, mesh_sizes[pending])
            if rem:
                raise _reshape_error(x, new_sizes)
            mine.append(pending)
            pending = next(it, None)
        out.append(None if not mine else mine[0] if len(mine) == 1 else tuple(mine))
    if pending is not None:
        raise _reshape_error(x, new_sizes)
    return out


@keeps_operand_mesh
def reshape_rule(x: ShapedArray, *, new_sizes: Sequence[int], dimensions=None,
                 **params) -> Spec | None:
    """Dimensions kept, split or merged keep their mesh axes: a split dimension's axes go to
    the major pieces that they divide; merged dimensions may be split only from the major
    one down. Other reshapes of a split dimension are refused, as in JAX. An ``out_sharding``
    asked for (the ``sharding`` parameter) is the result's."""
    if params.get("sharding") is not None:
        return params["sharding"]
    s = getattr(x, "_sharding", None)
    if s is None:
        return None
    spec = parts(x)
    if all(p is None for p in spec):
        return None
    old, new = list(x.shape), list(new_sizes)
    if [d for d in old if d != 1] == [d for d in new if d != 1]:
        it = iter(p for d, p in zip(old, spec) if d != 1)
        return tuple(None if d == 1 else next(it) for d in new)
    if dimensions is not None:
        raise _reshape_error(x, new_sizes)
    mesh_sizes = dict(zip(s.mesh.axis_names, s.mesh.axis_sizes))
    out: list = []
    i = j = 0
    while i < len(old) or j < len(new):  # groups of dimensions with equal products
        gi, gj = [i], [j]
        a, b = (old[i] if i < len(old) else 1), (new[j] if j < len(new) else 1)
        i, j = i + 1, j + 1
        while a != b:
            if a < b and i < len(old):
                a *= old[i]
                gi.append(i)
                i += 1
            elif j < len(new):
                b *= new[j]
                gj.append(j)
                j += 1
            else:
                raise _reshape_error(x, new_sizes)
        gi = [k for k in gi if k < len(old)]
        gj = [k for k in gj if k < len(new)]
        axes = [a for k in gi for a in ((spec[k],) if isinstance(spec[k], str)
                                         else spec[k] or ())]
        if not axes:
            out.extend([None] * len(gj))
            continue
        sharded = [k for k in gi if spec[k] is not None]
        if len(gi) > 1 and (sharded[0] != gi[0] or sharded != gi[:len(sharded)]
                            or any(math.prod(old[k] for k in [s_]) !=
                                   math.prod(mesh_sizes[a] for a in (
                                       (spec[s_],) if isinstance(spec[s_], str) else spec[s_]))
                                   for s_ in sharded[:-1])):
            raise _reshape_error(x, new_sizes)
        out.extend(_split_axes(mesh_sizes, tuple(axes), [new[k] for k in gj], x, new_sizes))
    return tuple(out)


@keeps_operand_mesh
def cumulative_rule(x: ShapedArray, *, axis: int, reverse: bool) -> Spec | None:
    """A cumulative reduction keeps the layout; the axis it runs along must be unsplit."""
    if getattr(x, "_sharding", None) is None:
        return None
    if parts(x)[axis] is not None:
        raise ShardingTypeError("Input should be unsharded over the axis being reduced. Got "
                                f"input type={x} and axis={axis}")
    return parts(x)


def _meshed(avals: Sequence[ShapedArray]) -> list[ShapedArray]:
    """The operands whose layout counts: under a mesh in context every operand has one (an
    untyped one is unsplit over it, as JAX types it); with none, only those whose type carries
    a sharding (values made with no mesh in context take the others' layout)."""
    if not current_abstract_mesh().empty:
        return list(avals)
    return [a for a in avals if getattr(a, "_sharding", None) is not None]


def _shown(a: ShapedArray) -> NamedSharding:
    """``a``'s sharding as JAX's messages show it: an untyped value under a mesh in context is
    unsplit over that mesh."""
    mesh = current_abstract_mesh()
    if getattr(a, "_sharding", None) is None and not mesh.empty:
        return NamedSharding(mesh, PartitionSpec(*[None] * len(a.shape)))
    return a.sharding


def concatenate_rule(*operands: ShapedArray, dimension: int) -> Spec | None:
    """The operands must be laid out alike; so is the result."""
    typed = _meshed(operands)
    if not any(getattr(o, "_sharding", None) is not None for o in typed):
        return None
    if any(parts(o) != parts(typed[0]) for o in typed[1:]):
        shown = ", ".join(str(_shown(o)) for o in operands)
        raise ShardingTypeError(f"All operands should have the same sharding. Got shardings "
                                f"{shown}")
    return parts(typed[0])


def select_n_rule(which: ShapedArray, *cases: ShapedArray) -> Spec | None:
    """The cases must be laid out alike (see ``_meshed`` for a case whose type carries no
    sharding); a non-scalar predicate as they are."""
    specs = {parts(c) for c in _meshed(cases)} or {parts(cases[0])}
    if len(specs) > 1:
        shown = ", ".join(str(_shown(c)) for c in cases)
        raise ShardingTypeError(f"select cases must have the same shardings, got [{shown}].")
    spec = specs.pop()
    if which.shape and getattr(which, "_sharding", None) is not None and parts(which) != spec:
        raise ShardingTypeError(
            "select `which` must be scalar or have the same sharding as cases, got `which` "
            f"sharding {which.sharding} but case sharding {cases[0].sharding}.")
    if all(p is None for p in spec):
        return parts(which) if which.shape and which._sharding is not None else None
    return spec


@keeps_operand_mesh
def dot_general_rule(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers,
                     out_sharding=None, **params) -> Spec | NamedSharding | None:
    """Batch dimensions, then the free dimensions of ``lhs`` and of ``rhs``, keep their
    splits; a contracting dimension split on both sides leaves the result's layout open, an
    error unless ``out_sharding`` chooses it."""
    if out_sharding is not None:
        return out_sharding
    if getattr(lhs, "_sharding", None) is None and getattr(rhs, "_sharding", None) is None:
        return None
    (lc, rc), (lb, rb) = dimension_numbers
    ls, rs = parts(lhs), parts(rhs)
    lcs, rcs = tuple(ls[i] for i in lc), tuple(rs[i] for i in rc)
    lbs, rbs = tuple(ls[i] for i in lb), tuple(rs[i] for i in rb)
    for a, b in zip(lbs, rbs):
        if a is not None and b is not None and a != b:
            raise ShardingTypeError("dot_general requires lhs batch dimensions and rhs batch "
                                    "dimensions to have the consistent sharding, got "
                                    f"{lbs} and {rbs}.")
    for a, b in zip(lcs, rcs):
        if a is not None and b is not None and a != b:
            raise ShardingTypeError("dot_general requires contracting dimensions to have "
                                    f"consistent sharding, got {lcs} and {rcs}.")
    for a, b in zip(lcs, rcs):
        if a is not None and b is not None:
            raise ShardingTypeError(
                "Contracting dimensions are sharded and it is ambiguous how the output should "
                "be sharded. Please specify the output sharding via the `out_sharding` "
                f"parameter. Got lhs_contracting_spec={lcs} and rhs_contracting_spec={rcs}")
    lfree = tuple(p for i, p in enumerate(ls) if i not in set(lc) | set(lb))
    rfree = tuple(p for i, p in enumerate(rs) if i not in set(rc) | set(rb))
    return lbs + lfree + rfree


def sharding_constraint_rule(x: ShapedArray, *, sharding: NamedSharding) -> Any:
    """``reshard``/``with_sharding_constraint``: the result is typed by the layout asked for
    over the Explicit axes, as the mesh in context types them (``explicit_axes`` makes the
    axes of a mesh set as Auto Explicit within its block)."""
    context = current_abstract_mesh()
    if context.shape_tuple == sharding.mesh.shape_tuple:
        sharding = NamedSharding(context, sharding.spec)
    return type_sharding_of(sharding, len(x.shape))


def resolve_out_sharding(name: str, out_sharding: Any) -> NamedSharding | None:
    """The type-level sharding an ``out_sharding=`` argument asks for: a ``PartitionSpec``
    (over the mesh in context) or a ``NamedSharding``, over the abstract mesh. ``P()`` asks
    for an unsplit result; None when there is no mesh at all (what libraries pass by
    default). Axes that are not Explicit cannot be asked for, as in JAX."""
    if out_sharding is None:
        return None
    if isinstance(out_sharding, PartitionSpec):
        mesh = current_abstract_mesh()
        if mesh.empty and all(p is None or p == () for p in out_sharding):
            return None
        if mesh.empty:  # JAX's words, as for any API given a bare spec
            raise ValueError("Using PartitionSpec when you are not under a mesh context is not "
                             "allowed. Please pass a NamedSharding instance or enter into a "
                             f"mesh context via `jax.set_mesh`. Got {out_sharding}")
        out_sharding = NamedSharding(mesh, out_sharding)
    if not isinstance(out_sharding, NamedSharding):
        raise TypeError(f"{name}: out_sharding must be a PartitionSpec or a NamedSharding, got "
                        f"{out_sharding!r}")
    spec = out_sharding.spec
    if out_sharding.mesh.empty:
        return None
    kinds = dict(zip(out_sharding.mesh.axis_names, out_sharding.mesh.axis_types))
    for axes in spec._normalized(0):
        for a in axes:
            if kinds[a] is not AxisType.Explicit:
                raise ValueError(
                    f"PartitionSpec passed to {name} cannot contain axis names that are of "
                    f"type Auto or Manual. Got PartitionSpec: {spec} with axis name: {a} of "
                    f"type: AxisType.{kinds[a].name}. (Lay the result out with "
                    "jax.lax.with_sharding_constraint instead.)")
    return NamedSharding(out_sharding.mesh.abstract_mesh,
                         PartitionSpec(*spec.partitions, unreduced=spec.unreduced,
                                       reduced=spec.reduced))


# stop_gradient and add_any live with the AD interpreter, below lax: their rules are
# registered here. add_any (summing cotangents) is typed as its first operand, as in JAX.
defsharding(ad.stop_gradient_p, unary_rule)
defsharding(ad.add_jaxvals_p, lambda x, y: parts(x))
defur(ad.add_jaxvals_p, sharding_ur.keep_rule)
defur(ad.stop_gradient_p, sharding_ur.keep_rule)


# ---- slicing, padding, indexing ----

def with_out(rule: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``rule`` as one that also gets the result types (first argument): the rules of
    primitives whose result shape their parameters give only indirectly."""
    rule.takes_out = True  # type: ignore[attr-defined]
    return rule


def _sub_spec_size(mesh: AbstractMesh, entry: Any) -> int:
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    return math.prod(sizes[a] for a in ((entry,) if isinstance(entry, str) else entry))


def _varying_shape(name: str, x: ShapedArray, out_shape: tuple) -> Spec | None:
    """The operand's layout for a result of another shape (a slice, a padding): each split
    dimension that changes size must stay divisible by its mesh axes (uneven splits are not
    in JAX's types either)."""
    s = getattr(x, "_sharding", None)
    if s is None:
        return None
    for d_in, d_out, p in zip(x.shape, out_shape, parts(x)):
        if d_in != d_out and p is not None and d_out % _sub_spec_size(s.mesh, p):
            shown = p if isinstance(p, str) else ", ".join(p)
            raise ShardingTypeError(
                f"{name} on sharded dims where out dim ({d_out}) is not divisible by mesh axes "
                f"({_sub_spec_size(s.mesh, p)}) with spec ({shown}) is not implemented. Got "
                f"input type={x.str_short()} and output shape={out_shape}")
    return parts(x)


@keeps_operand_mesh
@with_out
def slice_rule(outs, x: ShapedArray, **params) -> Spec | None:
    return _varying_shape("slicing", x, outs[0].shape)


@keeps_operand_mesh
@with_out
def dynamic_slice_rule(outs, x: ShapedArray, *starts, **params) -> Spec | None:
    return _varying_shape("dynamic_slice", x, outs[0].shape)


@keeps_operand_mesh
@with_out
def pad_rule(outs, x: ShapedArray, padding_value: ShapedArray, **params) -> Spec | None:
    return _varying_shape("padding", x, outs[0].shape)


@with_out
def split_rule(outs, x: ShapedArray, *, sizes: Sequence[int], axis: int) -> list | None:
    """Each piece keeps the operand's layout (a split dimension must stay divisible)."""
    return [_varying_shape("split", x, o.shape) for o in outs]


@keeps_operand_mesh
def fft_rule(x: ShapedArray, *, fft_type: Any, fft_lengths: Sequence[int]) -> Spec | None:
    """The result keeps the operand's layout, whatever the transform does to the minor
    dimensions' sizes (JAX's type takes the operand's sharding as it is)."""
    return parts(x)


@keeps_operand_mesh
def top_k_rule(x: ShapedArray, *, k: int, axis: int) -> list | None:
    """Values and indices keep the operand's layout; the axis searched must not be split."""
    if parts(x)[axis] is not None:
        raise ShardingTypeError("The input should be unsharded over the axis along which to "
                                f"compute the top_k values. Got input type={x} and "
                                f"axis={axis}")
    return [parts(x), parts(x)]


def rng_bit_generator_rule(key: ShapedArray, *, out_sharding: Any = None, **params) -> list:
    """The new key keeps the key's layout; the bits are laid out as ``out_sharding`` asks
    (unsplit by default)."""
    return [parts(key), resolve_out_sharding("rng_bit_generator", out_sharding)]


@keeps_operand_mesh
@with_out
def conv_general_dilated_rule(outs, lhs: ShapedArray, rhs: ShapedArray, *,
                              dimension_numbers: Any, **params) -> Spec | None:
    """JAX's rule: with an unsplit kernel and an unsplit input-feature dimension the result
    takes the input's spec position by position (each split dimension must stay divisible);
    anything else needs an explicit layout."""
    out_sharding = params.get("out_sharding")
    if out_sharding is not None:
        return out_sharding
    if all(p is None for p in parts(rhs)) and \
            parts(lhs)[dimension_numbers.lhs_spec[1]] is None:
        return _varying_shape("conv_general_dilated", lhs, outs[0].shape)
    raise ShardingTypeError("Please specify the output sharding via `out_sharding` parameter "
                            "of `conv_general_dilated`")


def _axis_types_str(mesh: AbstractMesh) -> str:
    """``{Explicit: ('x', 'y')}``: a mesh's axes grouped by type, as JAX's messages show."""
    groups: dict[str, list[str]] = {}
    for name, kind in zip(mesh.axis_names, mesh.axis_types):
        groups.setdefault(kind.name, []).append(name)
    return "{" + ", ".join(f"{k}: {tuple(v)}" for k, v in groups.items()) + "}"


def _typed_str(x: ShapedArray, mesh: AbstractMesh) -> str:
    return (f"{x.dtype.name}[{shape_sharding_str(x.shape, parts(x))}]"
            f"({_axis_types_str(mesh)})")


@keeps_operand_mesh
def dynamic_update_slice_rule(x: ShapedArray, update: ShapedArray, *starts) -> Spec | None:
    """The update must be laid out as the operand; so is the result."""
    if parts(x) != parts(update):
        mesh = _mesh_of("dynamic_update_slice", (x, update)) or current_abstract_mesh()
        raise ShardingTypeError(
            "dynamic_update_slice operand sharding must be equal to update sharding, got "
            f"operand sharding {_typed_str(x, mesh)} and update sharding "
            f"{_typed_str(update, mesh)}.")
    return unary_rule(x)


@keeps_operand_mesh
def clamp_rule(lo: ShapedArray, x: ShapedArray, hi: ShapedArray) -> Spec | None:
    """The result is laid out as the operand clamped (the bounds are not consulted, as in
    JAX)."""
    return unary_rule(x)


@keeps_operand_mesh
def argminmax_rule(x: ShapedArray, *, axes: Sequence[int], **params) -> Spec | None:
    return reduce_rule(x, axes=axes)


@keeps_operand_mesh
def sort_rule(*operands: ShapedArray, dimension: int, **params) -> list | None:
    """Sorted operands keep their (common) layout; the sorting dimension must be unsplit."""
    typed = [o for o in operands if getattr(o, "_sharding", None) is not None]
    if not typed:
        return None
    for o in typed:
        if parts(o)[dimension] is not None:
            raise ShardingTypeError("Arguments to sort must be unsharded over the sorting "
                                    f"dimension. Got arg sharding={o.sharding} and sorting "
                                    f"dimension={dimension}")
        if parts(o) != parts(typed[0]):
            shown = " ".join(str(t.sharding) for t in typed)
            raise ShardingTypeError(f"Arguments to sort must have equal shardings, got: "
                                    f"{shown}")
    return [parts(o) if getattr(o, "_sharding", None) is not None else None
            for o in operands]


def gather_rule(operand: ShapedArray, indices: ShapedArray, *, dimension_numbers,
                slice_sizes: Sequence[int], **params) -> Spec | None:
    """Operand dimensions not indexed into (or indexed with a full slice) keep their split
    in the offset dimensions; indices' batch dimensions keep theirs. Indexing into a split
    dimension, or with split (non-batch) indices, would need collectives: refused, as in
    JAX, with the way to say the result's layout."""
    if (getattr(operand, "_sharding", None) is None
            and getattr(indices, "_sharding", None) is None):
        return None
    dn = dimension_numbers
    op_spec, idx_spec = parts(operand), list(parts(indices))
    full_or_unsplit = all(slice_sizes[i] == operand.shape[i] or op_spec[i] is None
                          for i in dn.start_index_map)
    pairs = list(zip(dn.operand_batching_dims, dn.start_indices_batching_dims))
    batch_ok = all(op_spec[o] is None or idx_spec[i] is None or op_spec[o] == idx_spec[i]
                   for o, i in pairs)
    idx_unsplit = all(p is None for i, p in enumerate(idx_spec)
                      if i not in set(dn.start_indices_batching_dims))
    if not (full_or_unsplit and batch_ok and idx_unsplit):
        raise ShardingTypeError(
            "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
            "indexing as out sharding could not be resolved unambiguously (or would require "
            f"collectives on inputs). Got operand={operand!r}, indices={indices!r}")
    for o, i in pairs:
        idx_spec[i] = idx_spec[i] or op_spec[o]
    windows = iter(op_spec[i] for i in range(len(operand.shape))
                   if i not in set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims))
    rest = iter(idx_spec)
    rank = len(dn.offset_dims) + len(indices.shape) - 1
    return tuple(next(windows) if d in set(dn.offset_dims) else next(rest)
                 for d in range(rank))


def scatter_rule(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *,
                 dimension_numbers, **params) -> Spec | None:
    """The mirror image of ``gather_rule``: batch dimensions of the three must agree, window
    dimensions of the updates must be laid out as the operand's (or all unsplit), and the
    queries (non-batch index and update dimensions) unsplit."""
    if all(getattr(a, "_sharding", None) is None for a in (operand, indices, updates)):
        return None
    dn = dimension_numbers
    op_spec, idx_spec, up_spec = parts(operand), parts(indices), parts(updates)
    vec_dim = len(indices.shape) - 1
    up_batch = [d for d in range(len(updates.shape)) if d not in set(dn.update_window_dims)]
    up_batch = [up_batch[i] for i in dn.scatter_indices_batching_dims]
    op_windows = [i for i in range(len(operand.shape))
                  if i not in set(dn.inserted_window_dims) | set(dn.operand_batching_dims)]

    def agree(*ps):
        named = {p for p in ps if p is not None}
        return len(named) <= 1

    ok = (all(agree(op_spec[o], idx_spec[i], up_spec[u]) for o, i, u in
              zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims, up_batch))
          and all((updates.shape[u] == operand.shape[o] and up_spec[u] == op_spec[o])
                  or (up_spec[u] is None and op_spec[o] is None)
                  for u, o in zip(dn.update_window_dims, op_windows))
          and all(op_spec[i] is None for i in dn.inserted_window_dims)
          and all(p is None for i, p in enumerate(up_spec)
                  if i not in set(up_batch) | set(dn.update_window_dims))
          and all(p is None for i, p in enumerate(idx_spec[:vec_dim])
                  if i not in set(dn.scatter_indices_batching_dims))
          and idx_spec[vec_dim] is None)
    if not ok:
        raise ShardingTypeError(
            "Use `.at[...].set/add/mul/...(out_sharding=)` to provide output PartitionSpec for "
            "the scatter update as out sharding could not be resolved unambiguously (or would "
            "require collectives on inputs). Got "
            f"operand={operand!r}, indices={indices!r}, updates={updates!r}")
    out = list(op_spec)
    for o, i, u in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims, up_batch):
        out[o] = out[o] or idx_spec[i] or up_spec[u]
    for u, o in zip(dn.update_window_dims, op_windows):
        out[o] = out[o] or up_spec[u]
    return tuple(out)


def broadcast_shardings(shape: Sequence[int], *operands: ShapedArray) -> NamedSharding | None:
    """The layout of ``operands`` broadcast together to ``shape`` (JAX's
    ``lax.broadcast_shardings``, which jnp's broadcasting asks for its ``out_sharding``): the
    elementwise rule over their types aligned to the right. None with no mesh in context
    (the broadcast operands then take the others' layout, as in JAX)."""
    mesh = current_abstract_mesh()
    if mesh.empty:
        return None
    ranked = []
    for a in operands:
        if a.shape:
            lead = (None,) * (len(shape) - len(a.shape))
            spec = tuple(None if d == 1 else p for d, p in zip(a.shape, parts(a)))
            ranked.append(ShapedArray(shape, a.dtype, False,
                                      typed_sharding(mesh, lead + spec)))
    spec = elementwise_rule(*ranked, _name="broadcast_shardings")
    return None if spec is None else typed_sharding(mesh, spec)


def stack_rule(*operands: ShapedArray, axis: int) -> Spec | None:
    """As ``concatenate_rule``, with the new (unsplit) dimension inserted at ``axis``."""
    spec = concatenate_rule(*operands, dimension=axis)
    return None if spec is None else spec[:axis] + (None,) + spec[axis:]


def unstack_rule(x: ShapedArray, *, axis: int) -> list | None:
    """Each piece keeps the other dimensions' splits; the unstacked one must be unsplit."""
    if getattr(x, "_sharding", None) is None:
        return None
    spec = parts(x)
    if spec[axis] is not None:
        raise ShardingTypeError(f"unstack operand cannot be sharded on the unstacking axis "
                                f"{axis}. Got operand type={x.str_short()}")
    return [spec[:axis] + spec[axis + 1:]] * x.shape[axis]
