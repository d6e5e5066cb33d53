"""``jax.experimental.hijax``: user-defined high-level primitives, ``VJPHiPrimitive``.

A subclass describes one operation: its input and output types (``in_avals``, ``out_aval``,
pytrees of ``ShapedArray``), its hashable ``params`` (readable as attributes), how it runs in
ordinary operations (``expand``), and optionally its derivatives (``vjp_fwd`` with
``vjp_bwd_retval`` or ``vjp_bwd``, ``jvp``), its batching (``batch`` or ``batch_dim_rule``)
and its dead-code rule (``dce``). Calling an instance binds ``call_hi_primitive[_prim=...]``:
one equation in a jaxpr, evaluated, lowered and transformed through the subclass's methods.

Reverse mode as in JAX's linearization: the JVP rule runs ``vjp_fwd`` on the primals and emits
``call_hi_primitive_linearized`` on (residuals, primals, tangents); its transpose calls the
backward rule. Evaluated forward (``jax.jvp``), that primitive calls the subclass's ``jvp``
instead, so a class with only a VJP fails forward mode with JAX's message, and one with both
gets each where JAX uses it.

User types (``HiType``, ``MutableHiType``, ``register_hitype``, QDD) and their primitives
(``HiPrimitive``) come from ``jaxkit.interpreters.hijax``, which says how jaxkit runs them;
``TransformedRef`` (a traced ref's ``ref.at[...]`` view) from ``jaxkit._ref_views``.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any


from jaxkit import core, lax, tree_util
from jaxkit._ref_views import TransformedRef
from jaxkit.avals import ShapedArray
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.interpreters.ad import Zero, instantiate_zeros, is_undefined_primal
from jaxkit.interpreters.hijax import (AvalMutableQDD, AvalQDD, HiPrimitive, HiType,
                                       MutableHiType, aval_method, aval_property,
                                       register_hitype)
from jaxkit.ref import AbstractRef
from jaxkit.transforms.vmap import vmap

__all__ = ["AbstractRef", "AvalMutableQDD", "AvalQDD", "HiPrimitive", "HiPspec", "HiType",
           "MutableHiType", "ShapedArray", "TransformedRef", "VJPHiPrimitive", "Zero",
           "aval_method", "aval_property", "call_hi_primitive_p",
           "call_hi_primitive_linearized_p", "control_flow_allowed_effects",
           "instantiate_zeros", "is_undefined_primal", "register_hitype"]


def _leaves(tree_def, tree: Any) -> list:
    """The leaves of ``tree``, which must have structure ``tree_def``."""
    leaves, got = tree_util.tree_flatten(tree, is_leaf=lambda x: x is None)
    if got != tree_def:
        raise TypeError(f"expected a value of structure {tree_def}, got {got}")
    return leaves


class _EffectTypeSet:
    """The effect types that may appear inside control flow (JAX's
    ``effects.control_flow_allowed_effects``; Flax adds its variable effect). jaxkit's jaxprs
    carry no high-level effects (high-level primitives are lowered where they are bound), so
    this only records them."""

    def __init__(self):
        self._types: set = set()

    def add_type(self, t: type) -> None:
        self._types.add(t)

    def contains(self, effect) -> bool:
        return any(isinstance(effect, t) for t in self._types)


control_flow_allowed_effects = _EffectTypeSet()


class HiPspec:
    """The base class of a ``shard_map`` spec for a high-level type: a subclass says which
    ``PartitionSpec`` each of the type's lowered arrays takes (``to_lo``) and the specs of
    its tangents and cotangents. JAX's ``shard_map`` reads it where a high-level type's
    ``shard``/``unshard`` use it; jaxkit's ``shard_map`` takes arrays only, so it is the
    interface for such types, which jaxkit does not shard yet."""

    def to_lo(self) -> tuple:
        raise AssertionError("must override")

    def to_tangent_spec(self) -> HiPspec:
        raise AssertionError("must override")

    def to_ct_spec(self) -> HiPspec:
        raise AssertionError("must override")


class _Accum:
    """A cotangent accumulator handed to ``vjp_bwd`` (JAX's ``GradAccum``): ``accum(v)``
    adds ``v`` into it."""

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.value: Any = None

    def accum(self, v: Any) -> None:
        if v is None or type(v) is Zero:
            return
        self.value = v if self.value is None else self.value + v


class VJPHiPrimitive:
    """Base class of a user primitive; see the module docstring. A subclass's ``__init__``
    sets ``in_avals``, ``out_aval`` and ``params``, then calls ``super().__init__()``."""

    in_avals: tuple
    out_aval: Any
    params: dict[str, Hashable]
    effects: frozenset = frozenset()

    def __init__(self):
        for attr in ("in_avals", "out_aval", "params"):
            if not hasattr(self, attr):
                raise AttributeError(f"subclass __init__ should set `self.{attr}`")
        if (type(self).vjp_bwd is not VJPHiPrimitive.vjp_bwd and
                type(self).vjp_bwd_retval is not VJPHiPrimitive.vjp_bwd_retval):
            raise AttributeError(f"subclass {type(self)} should not override both "
                                 "`vjp_bwd` and `vjp_bwd_retval`")
        self.in_avals_flat, self.in_tree = tree_util.tree_flatten(self.in_avals)
        self.out_avals_flat, self.out_tree = tree_util.tree_flatten(self.out_aval)
        self.__dict__.update(self.params)
        self.check(*self.in_avals)

    def expand(self, *args):
        raise NotImplementedError(f"subclass {type(self)} must implement `expand`")

    def vjp_fwd(self, nzs_in, /, *args):
        raise NotImplementedError(f"for grad support, subclass {type(self)} must "
                                  "implement `vjp_fwd`")

    def vjp_bwd(self, res, outgrad, /, *arg_accums):
        args_grad = self.vjp_bwd_retval(res, outgrad)
        tree_util.tree_map(lambda acc, v: isinstance(acc, _Accum) and acc.accum(v),
                           arg_accums, args_grad, is_leaf=lambda x: x is None)

    def vjp_bwd_retval(self, res, outgrad, /):
        raise NotImplementedError(f"for grad support, subclass {type(self)} must "
                                  "implement `vjp_bwd` or `vjp_bwd_retval`")

    def jvp(self, primals, tangents):
        raise NotImplementedError(f"for jvp support, subclass {type(self)} must "
                                  "implement `jvp`")

    def transpose(self, out_ct, *maybe_accums):
        raise NotImplementedError(f"for transpose support, subclass {type(self)} "
                                  "must implement `transpose`")

    def batch(self, axis_data, args, dims):
        out_dim = self.batch_dim_rule(axis_data, dims)
        return VmapOf(self, axis_data, dims, out_dim)(*args), out_dim

    def batch_dim_rule(self, axis_data, dims, /):
        raise NotImplementedError(f"for vmap support, subclass {type(self)} must "
                                  "implement `batch` or `batch_dim_rule`")

    def dce(self, used_outs):
        """``(used inputs, produced outputs, primitive)`` (prefix trees of booleans); the
        default keeps everything unless no output is used (then the primitive is None)."""
        if not any(_leaves(self.out_tree, used_outs)):
            return False, False, None
        return True, True, self

    def __call__(self, *args):
        ans = call_hi_primitive_p.bind(*_leaves(self.in_tree, args), _prim=self)
        return tree_util.tree_unflatten(self.out_tree, ans)

    def check(self, *arg_tys) -> None:
        """Optional: raise if the input types are not acceptable."""

    def __repr__(self):
        return f"{self.__class__.__name__}[{self.params}]"

    def __hash__(self):
        return hash((self.__class__.__name__, tuple(self.params.items()), self.effects))

    def __eq__(self, other):
        return (type(self) is type(other) and self.params == other.params
                and self.effects == other.effects)


class VmapOf(VJPHiPrimitive):
    """``prim`` batched over an axis (what ``batch`` builds from ``batch_dim_rule``): each
    method is ``vmap`` of ``prim``'s."""

    def __init__(self, prim: VJPHiPrimitive, axis_data, in_dims, out_dim):
        size = axis_data.size
        self.in_avals = tree_util.tree_map(lambda a, d: batching.mapped_aval(size, d, a),
                                           prim.in_avals, in_dims)
        self.out_aval = tree_util.tree_map(lambda a, d: batching.mapped_aval(size, d, a),
                                           prim.out_aval, out_dim)
        self.params = dict(prim=prim, axis_data=axis_data, in_dims=in_dims, out_dim=out_dim)
        super().__init__()

    def _vmap(self, f, in_axes, out_axes):
        return vmap(f, in_axes=in_axes, out_axes=out_axes, axis_size=self.axis_data.size,
                    axis_name=self.axis_data.name)

    def expand(self, *args):
        return self._vmap(self.prim.expand, self.in_dims, self.out_dim)(*args)

    def jvp(self, primals, tangents):
        tangents = tuple(instantiate_zeros(t) for t in tangents)
        return self._vmap(self.prim.jvp, (self.in_dims, self.in_dims),
                          (self.out_dim, self.out_dim))(primals, tangents)

    def vjp_fwd(self, in_nzs, *args):
        # Every residual gets the batch axis at 0, so the backward rule maps over it there.
        fwd = lambda *a: self.prim.vjp_fwd(in_nzs, *a)[:2]  # noqa: E731
        return self._vmap(fwd, self.in_dims, (self.out_dim, 0))(*args)

    def vjp_bwd_retval(self, res, g):
        out_dims = tree_util.tree_map(lambda d: 0 if d is None else d, self.in_dims,
                                      is_leaf=lambda x: x is None)
        g = instantiate_zeros(g) if type(g) is Zero else g
        cts = self._vmap(lambda r, c: tuple(self.prim.vjp_bwd_retval(r, c)), (0, self.out_dim),
                         tuple(out_dims))(res, g)
        # An unbatched input's cotangent is the sum over the batch.
        return tuple(tree_util.tree_map(
            lambda ct, d: lax.reduce_sum(ct, (0,)) if d is None else ct, cts,
            tuple(self.in_dims), is_leaf=lambda x: x is None))

    def batch_dim_rule(self, axis_data, in_dims):
        fix = lambda d, d_: d if (d is None or d_ is None) else d - (d_ < d)  # noqa: E731
        in_dims_ = tree_util.tree_map(fix, in_dims, self.in_dims, is_leaf=lambda x: x is None)
        out_dim = self.prim.batch_dim_rule(axis_data, in_dims_)
        return tree_util.tree_map(lambda d, d_: d + (d_ < d), out_dim, self.out_dim)


# ---- call_hi_primitive: one equation per call of a VJPHiPrimitive ------------------------

def _expand_flat(*args_flat, _prim: VJPHiPrimitive) -> list:
    ans = _prim.expand(*tree_util.tree_unflatten(_prim.in_tree, args_flat))
    return _leaves(_prim.out_tree, ans)


def _overrides(prim: VJPHiPrimitive, name: str) -> bool:
    return getattr(type(prim), name) is not getattr(VJPHiPrimitive, name)


def _call_jvp(primals, tangents, *, _prim: VJPHiPrimitive):
    if not (_overrides(_prim, "vjp_fwd") or isinstance(_prim, VmapOf)):
        return _user_jvp(_prim, primals, tangents)
    nzs = [not ad.is_zero(t) for t in tangents]
    ans, residuals = _prim.vjp_fwd(tree_util.tree_unflatten(_prim.in_tree, nzs),
                                   *tree_util.tree_unflatten(_prim.in_tree, primals))[:2]
    res_flat, res_tree = tree_util.tree_flatten(residuals)
    tangents_out = call_hi_primitive_linearized_p.bind(
        *res_flat, *primals, *(t for t in tangents if not ad.is_zero(t)), _prim=_prim,
        residuals_tree=res_tree, nz_in_flat=tuple(nzs))
    return _leaves(_prim.out_tree, ans), tangents_out


def _user_jvp(prim: VJPHiPrimitive, primals, tangents) -> tuple[list, list]:
    unflat = lambda xs: tree_util.tree_unflatten(prim.in_tree, xs)  # noqa: E731
    out, out_dot = prim.jvp(unflat(primals), unflat([instantiate_zeros(t) for t in tangents]))
    return _leaves(prim.out_tree, out), _leaves(prim.out_tree, out_dot)


def _call_transpose(cts, *args, _prim: VJPHiPrimitive):
    accums = [_Accum(a.aval) if is_undefined_primal(a) else a for a in args]
    _prim.transpose(tree_util.tree_unflatten(_prim.out_tree, cts), *accums)
    return [(a.value if a.value is not None else Zero(a.aval.to_tangent_aval()))
            if isinstance(a, _Accum) else None for a in accums]


def _call_batch(axis_data, args, dims, *, _prim: VJPHiPrimitive):
    unflat = lambda xs: tree_util.tree_unflatten(_prim.in_tree, xs)  # noqa: E731
    ans, out_dims = _prim.batch(axis_data, unflat(args), unflat(dims))
    return _leaves(_prim.out_tree, ans), _prim.out_tree.flatten_up_to(out_dims)


def _broadcast_prefix(prefix: Any, tree_def) -> list[bool]:
    if isinstance(prefix, bool):
        return [prefix] * tree_def.num_leaves
    return [bool(x) for x in tree_util.tree_leaves(
        tree_util.tree_map(lambda p, sub: [p] * tree_util.tree_structure(sub).num_leaves,
                           prefix, tree_util.tree_unflatten(tree_def,
                                                            [0] * tree_def.num_leaves)))]


def _call_dce(used_outs: list[bool], eqn: core.JaxprEqn):
    prim = eqn.params["_prim"]
    used_ins, produced, new_prim = prim.dce(tree_util.tree_unflatten(prim.out_tree,
                                                                      used_outs))
    if new_prim is None:
        return [False] * len(eqn.invars), None
    used_in_flat = _broadcast_prefix(used_ins, prim.in_tree)
    produced_flat = _broadcast_prefix(produced, prim.out_tree)
    return used_in_flat, eqn.replace(
        invars=[x for x, u in zip(eqn.invars, used_in_flat) if u],
        outvars=[v for v, u in zip(eqn.outvars, produced_flat) if u],
        params=dict(_prim=new_prim))


call_hi_primitive_p = core.Primitive("call_hi_primitive")
call_hi_primitive_p.multiple_results = True
call_hi_primitive_p.def_impl(_expand_flat)
call_hi_primitive_p.def_abstract_eval(lambda *avals, _prim: list(_prim.out_avals_flat))
ad.defjvp_rule(call_hi_primitive_p, _call_jvp)
ad.deftranspose(call_hi_primitive_p, _call_transpose)
batching.defrule(call_hi_primitive_p, _call_batch)
pe.dce_rules[call_hi_primitive_p] = _call_dce
mlir.register_lowering(call_hi_primitive_p, mlir.lower_fun(_expand_flat, multiple_results=True))


# ---- the linear part of a VJPHiPrimitive's JVP --------------------------------------------

def _split_lin(args, prim: VJPHiPrimitive, residuals_tree, nz_in_flat):
    n_res, n_in = residuals_tree.num_leaves, len(prim.in_avals_flat)
    res = tree_util.tree_unflatten(residuals_tree, args[:n_res])
    primals = list(args[n_res:n_res + n_in])
    nz_tangents = iter(args[n_res + n_in:])
    tangents = [next(nz_tangents) if nz else Zero(a.to_tangent_aval())
                for a, nz in zip(prim.in_avals_flat, nz_in_flat)]
    return res, primals, tangents


def _lin_forward(*args, _prim: VJPHiPrimitive, residuals_tree, nz_in_flat):
    # Forward mode (jax.jvp) reaches here: the tangent comes from the class's own jvp.
    _, primals, tangents = _split_lin(args, _prim, residuals_tree, nz_in_flat)
    return _user_jvp(_prim, primals, tangents)[1]


def _lin_transpose(cts, *args, _prim: VJPHiPrimitive, residuals_tree, nz_in_flat):
    res, primals, _ = _split_lin(args, _prim, residuals_tree, nz_in_flat)
    # As in JAX, a zero output cotangent reaches the rule as a symbolic ``Zero``.
    cts = tree_util.tree_unflatten(_prim.out_tree, list(cts))
    if _overrides(_prim, "vjp_bwd"):
        accums = [_Accum(a) for a in _prim.in_avals_flat]
        _prim.vjp_bwd(res, cts, *tree_util.tree_unflatten(_prim.in_tree, accums))
        in_cts = [a.value for a in accums]
    else:
        in_cts = _leaves(_prim.in_tree, _prim.vjp_bwd_retval(res, cts))
    in_cts = [Zero(a.to_tangent_aval()) if c is None else c
              for c, a in zip(in_cts, _prim.in_avals_flat)]
    n_lead = residuals_tree.num_leaves + len(primals)
    return [None] * n_lead + [c for c, nz in zip(in_cts, nz_in_flat) if nz]


def _lin_pp_params(params: dict) -> dict:
    return dict(params, _prim=str(params["_prim"].__class__), residuals_tree="...")


call_hi_primitive_linearized_p = core.Primitive("call_hi_primitive_linearized")
call_hi_primitive_linearized_p.multiple_results = True
call_hi_primitive_linearized_p.def_impl(_lin_forward)
call_hi_primitive_linearized_p.def_abstract_eval(
    lambda *avals, _prim, **_: [a.to_tangent_aval() for a in _prim.out_avals_flat])
ad.deftranspose(call_hi_primitive_linearized_p, _lin_transpose)
core.defpp_params(call_hi_primitive_linearized_p, _lin_pp_params)
mlir.register_lowering(call_hi_primitive_linearized_p,
                       mlir.lower_fun(_lin_forward, multiple_results=True))


# --------------------------------------------------------------------------------------------
# AbstractValue (helper names36): JAX's base class of every type a value can have, the
# core's (``jax.core.AbstractValue`` too); ``isinstance`` holds for arrays', refs' and
# high-level types, and a user type may subclass it.
# --------------------------------------------------------------------------------------------

AbstractValue = core.AbstractValue
