"""``custom_vjp``: a function with a user-given forward pass and backward pass (JAX's API).

``custom_vjp_call`` carries ``call_jaxpr``, ``fwd`` and ``bwd`` (flat callables). Its JVP
rule runs ``fwd`` and emits ``custom_lin``, a linear primitive on the residuals and input
tangents whose transpose calls ``bwd``. ``custom_lin`` cannot be evaluated forward, which is
how forward-mode differentiation of a ``custom_vjp`` function fails with JAX's error.

With ``defvjp(..., symbolic_zeros=True)`` the rules see what is zero, as JAX's: ``fwd`` gets
each argument as a ``CustomVJPPrimal`` (its ``value`` and whether it is ``perturbed``, i.e.
has a nonzero tangent) and ``bwd`` gets a ``SymbolicZero`` for each output cotangent known to
be zero. The machinery shared with ``custom_jvp`` is ``custom_derivatives``'.
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.transforms.custom_derivatives import (
    CustomVJPException, SymbolicZero, _batch_flat_fun, _batched_inputs,
    _call_jaxpr_abstract_eval, _call_jaxpr_impl, _call_jaxpr_lowering, _check_avals_match,
    _custom_call_pp_params, _CustomDerivativeFunction, _fun_name, _is_array_leaf, _merge_static,
    _owned_by, _trace_primal)
from jaxkit.transforms.remat_opt import optimize_remat_of_custom_vjp_fwd

__all__ = ["CustomVJPPrimal", "custom_lin_p", "custom_vjp", "custom_vjp_call_p"]


@dataclasses.dataclass(slots=True)
class CustomVJPPrimal:
    """A primal argument of a ``custom_vjp`` forward rule in ``symbolic_zeros`` mode: the
    ``value`` and whether it is ``perturbed`` (has a nonzero tangent)."""

    value: Any
    perturbed: bool


# Which flat arguments of the forward rule about to run have nonzero tangents (set by the JVP
# rules around the call; a batched forward rule calls the flat one inside it).
_perturbed: contextvars.ContextVar[tuple[bool, ...] | None] = contextvars.ContextVar(
    "custom_vjp_perturbed", default=None)


def _run_fwd(fwd: Callable, primals: Sequence, tangents: Sequence) -> list:
    token = _perturbed.set(tuple(not ad.is_zero(t) for t in tangents))
    try:
        return fwd(*primals)
    finally:
        _perturbed.reset(token)


class custom_vjp(_CustomDerivativeFunction):
    """A function with a custom VJP: ``defvjp(fwd, bwd)``.

    ``fwd(*args) -> (out, residuals)``; ``bwd(*nondiff_args, residuals, out_cotangent)``
    returns a tuple with one cotangent per (differentiable) argument, None meaning zero.
    Forward-mode differentiation (``jvp``, ``jacfwd``) of such a function is an error."""

    _rule_attr = "fwd"
    _missing_rule = "No VJP defined for custom_vjp function {name} using defvjp."

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()):
        super().__init__(fun, nondiff_argnums, nondiff_argnames)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.symbolic_zeros = False
        self.optimize_remat = False

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        """Set the forward rule (primal output and residuals) and the backward rule; with
        ``symbolic_zeros`` they see which arguments are perturbed and which cotangents are
        zero (see the module's docstring)."""
        if optimize_remat:  # fwd runs as one remat_opt equation, which DCE can drop
            if symbolic_zeros:
                raise NotImplementedError("custom_vjp.defvjp with both symbolic_zeros=True "
                                          "and optimize_remat=True is not supported by jaxkit")
            fwd = optimize_remat_of_custom_vjp_fwd(self.fun, fwd, self.nondiff_argnums)
        self.fwd = fwd
        self.bwd = bwd
        self.symbolic_zeros = symbolic_zeros
        self.optimize_remat = optimize_remat

    def _check_static(self, static: Sequence) -> None:
        for s in static:
            if any(isinstance(x, core.Tracer) for x in tree_util.tree_leaves(s)):
                raise TypeError(
                    "Found a JAX Tracer object passed as an argument to a custom_vjp "
                    "function in a position indicated by nondiff_argnums as "
                    "non-differentiable. Tracers cannot be passed as non-differentiable "
                    "arguments to custom_vjp functions; instead, nondiff_argnums should "
                    "only be used for arguments that can't be or contain JAX tracers, "
                    "e.g. function-valued arguments. In particular, array-valued "
                    "arguments should typically not be indicated as nondiff_argnums.")

    def _rule_jvp(self, name: str, static: Sequence, in_tree, primals: Sequence,
                  tangents: Sequence):
        if self.nondiff_argnums:
            n = len(static) + len(tree_util.treedef_children(in_tree))
            fwd = lambda *d: self.fwd(*_merge_static(n, self.nondiff_argnums, static, d))
            bwd = functools.partial(self.bwd, *static)
        else:
            fwd, bwd = self.fwd, self.bwd
        in_avals = [core.get_aval(x) for x in primals]
        res_tree_cell: list = []
        out_tree_cell: list = []
        flat_fwd = _flatten_fwd(fwd, in_tree, None, None, res_tree_cell, name,
                                _fun_name(self.fwd), out_tree_cell, self.symbolic_zeros)
        flat_bwd = _flatten_bwd(bwd, in_tree, in_avals, out_tree_cell, res_tree_cell,
                                _fun_name(self.bwd), self.symbolic_zeros)
        with core.set_current_trace(_primal_trace(core.current_trace(), primals)):
            outs = _run_fwd(flat_fwd, primals, tangents)
        n_out = len(outs) - res_tree_cell[0].num_leaves
        primals_out, tangents_out = _fwd_and_lin(outs, n_out, flat_bwd, tangents)
        return out_tree_cell[0], primals_out, tangents_out

    def _bind(self, name: str, n: int, static: Sequence, dyn: Sequence):
        self._check_static(static)
        if self.nondiff_argnums:
            merge = functools.partial(_merge_static, n, self.nondiff_argnums, static)
            fun = lambda *d: self.fun(*merge(d))
            fwd = lambda *d: self.fwd(*merge(d))
            bwd = functools.partial(self.bwd, *static)
        else:
            fun, fwd, bwd = self.fun, self.fwd, self.bwd
        closed, consts, flat, in_tree, out_tree = _trace_primal(fun, dyn, name)
        in_avals = [core.get_aval(x) for x in flat]
        res_tree_cell: list = []
        flat_fwd = _flatten_fwd(fwd, in_tree, out_tree, closed.out_avals, res_tree_cell, name,
                                _fun_name(self.fwd), None, self.symbolic_zeros)
        flat_bwd = _flatten_bwd(bwd, in_tree, in_avals, [out_tree], res_tree_cell,
                                _fun_name(self.bwd), self.symbolic_zeros)
        outs = custom_vjp_call_p.bind(*consts, *flat, call_jaxpr=closed, fwd=flat_fwd,
                                      bwd=flat_bwd, num_consts=len(consts), name=name)
        return tree_util.tree_unflatten(out_tree, outs)


def _primal_trace(trace: core.Trace, primals: Sequence) -> core.Trace:
    """The trace a forward rule runs under: ``trace``, or below it past linearize's
    partial-evaluation traces owning none of ``primals``. Their known values belong to the
    trace below, and JAX's linearize runs the primal computation there: libraries that compare
    trace states (Flax's nnx Variables, created in fwd by nested calls that go down to that
    trace) must see the same trace in fwd as in those calls."""
    while isinstance(trace, pe.JaxprTrace) and not any(_owned_by(trace, x) for x in primals):
        trace = trace.parent
    return trace


def _flatten_fwd(fwd: Callable, in_tree, out_tree, out_avals, res_tree_cell: list,
                 fun_name: str, fwd_name: str, out_tree_cell: list | None = None,
                 symbolic_zeros: bool = False) -> Callable:
    """``fwd`` on flat values: ``flat(*args) -> [*primals_out, *residuals]``. ``out_tree``
    and ``out_avals`` (the primal function's) are checked when given; the output tree goes to
    ``out_tree_cell`` when one is given. With ``symbolic_zeros`` each argument is given as a
    ``CustomVJPPrimal`` (perturbed as the JVP rule calling it says: ``_run_fwd``)."""
    def flat(*args):
        if symbolic_zeros:
            perturbed = _perturbed.get() or (True,) * len(args)
            args = [CustomVJPPrimal(a, p) for a, p in zip(args, perturbed)]
        out = fwd(*tree_util.tree_unflatten(in_tree, args))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {fun_name} must "
                            "produce a pair (list or tuple of length two) representing primal "
                            "outputs and residuals (values stored from the forward pass for "
                            f"use on the backward pass), got {out!r}.")
        primals_out, p_tree = tree_util.tree_flatten(out[0])
        if out_tree_cell is not None:
            out_tree_cell[:] = [p_tree]
        if out_tree is not None and p_tree != out_tree:
            raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {fun_name} must "
                            "produce a pair (list or tuple of length two) where the first "
                            "element represents the primal output (equal to the output of the "
                            f"custom_vjp-decorated function {fun_name}) and the second element "
                            "represents residuals, but the first element had container "
                            f"(pytree) structure {p_tree} while the function's output had "
                            f"{out_tree}.")
        if out_avals is not None:
            _check_avals_match(f"Custom VJP fwd rule {fwd_name} for function {fun_name} "
                               "must produce primal outputs equal in shape and dtype to the "
                               "function's output", primals_out, out_avals, out_tree)
        res, res_tree = tree_util.tree_flatten(out[1])
        for r in res:
            if not _is_array_leaf(r):
                raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {fun_name} "
                                f"returned a residual of type {type(r).__name__}; residuals "
                                "must be arrays (or pytrees of arrays).")
        res_tree_cell[:] = [res_tree]
        return list(primals_out) + list(res)

    flat.__name__ = fwd_name
    return flat


def _flatten_bwd(bwd: Callable, in_tree, in_avals: Sequence[core.ShapedArray],
                 out_tree_cell: list, res_tree_cell: list, bwd_name: str,
                 symbolic_zeros: bool = False) -> Callable:
    """``bwd`` on flat residuals and cotangents; the trees come in cells, known once the
    forward rule has run. Its cotangents are matched to the arguments as JAX does. With
    ``symbolic_zeros`` zero cotangents (``Zero``s) reach ``bwd`` as ``SymbolicZero``s, and
    it may return them."""
    n_args = len(in_avals)

    def flat(*args):
        res_tree = res_tree_cell[0]
        n_res = res_tree.num_leaves
        res = tree_util.tree_unflatten(res_tree, args[:n_res])
        cts = args[n_res:]
        if symbolic_zeros:  # (otherwise custom_lin's transpose gave instantiated zeros)
            cts = [SymbolicZero(c.aval) if type(c) is ad.Zero else c for c in cts]
        cts = tree_util.tree_unflatten(out_tree_cell[0], cts)
        out = bwd(res, cts)
        if isinstance(out, list) and len(out) == len(tree_util.treedef_children(in_tree)):
            out = tuple(out)
        result = []
        for path, aval, ct in _match_cotangents(out, in_tree):
            expected = aval.to_tangent_aval()
            if ct is None or expected.dtype == dtypes.float0 or ad.is_zero(ct) or \
                    type(ct) is SymbolicZero:
                result.append(ad.Zero(expected))
                continue
            got = core.get_aval(ct)
            if got.shape != expected.shape or not (
                    got.dtype == expected.dtype
                    or dtypes.issubdtype(expected.dtype, np.inexact)
                    or dtypes.issubdtype(got.dtype, dtypes.extended)):
                raise ValueError(
                    "Custom VJP bwd rule must produce an output with the same type as the args "
                    f"tuple of the primal function, but at output{tree_util.keystr(path)} the "
                    f"bwd rule produced an output of type {_long_type(got)} corresponding to "
                    f"an input of type {_long_type(aval)}{_mismatch_note(expected, got)}")
            result.append(ct)
        assert len(result) == n_args
        return result

    def _match_cotangents(out, tree):
        """(key path, primal aval, cotangent or None) per flat argument. As in JAX, the
        rule's output must be a tuple whose structure, with None as a leaf, is a prefix of the
        arguments': None stands for zeros of the whole subtree below it, another leaf is
        used for every argument leaf below it."""
        marks = tree_util.tree_unflatten(tree, [object()] * tree.num_leaves)
        paths = [p for p, _ in tree_util.tree_flatten_with_path(marks)[0]]
        try:
            if not isinstance(out, tuple):
                raise ValueError
            ct_tree = tree_util.tree_structure(out, is_leaf=lambda x: x is None)
            subtrees = ct_tree.flatten_up_to(marks)
        except ValueError:
            raise TypeError(
                "Custom VJP bwd rule must produce an output with the same container (pytree) "
                "structure as the args tuple of the primal function, and in particular must "
                "produce a tuple of length equal to the number of arguments to the primal "
                "function, but got bwd output structure "
                f"{tree_util.tree_structure(out)} for primal input structure "
                f"{tree}.") from None
        flat_cts: list = []
        for ct, sub in zip(tree_util.tree_leaves(out, is_leaf=lambda x: x is None), subtrees):
            flat_cts += [ct] * len(tree_util.tree_leaves(sub))
        return zip(paths, in_avals, flat_cts)

    flat.__name__ = bwd_name
    flat.symbolic_zeros = symbolic_zeros  # (custom_lin's transpose then passes Zeros on)
    return flat


def _long_type(aval: core.ShapedArray) -> str:
    """An aval as JAX's bwd-rule errors print it: ``float32[3]``."""
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


def _mismatch_note(a: core.ShapedArray, b: core.ShapedArray) -> str:
    wrong = [w for w, differs in (("dtypes", a.dtype != b.dtype), ("shapes", a.shape != b.shape))
             if differs]
    return ", so " + ", and ".join(f"the {w} do not match" for w in wrong) if wrong else ""


def _custom_vjp_call_jvp(primals, tangents, *, call_jaxpr: ClosedJaxpr, fwd: Callable,
                         bwd: Callable, num_consts: int, name: str):
    if any(not ad.is_zero(t) for t in tangents[:num_consts]):
        raise CustomVJPException()
    outs = _run_fwd(fwd, primals[num_consts:], tangents[num_consts:])
    return _fwd_and_lin(outs, len(call_jaxpr.out_avals), bwd, tangents[num_consts:])


def _fwd_and_lin(outs: Sequence, n: int, bwd: Callable, arg_tangents: Sequence):
    """The JVP of a custom_vjp function from its forward rule's flat output (``n`` primal
    outputs, then residuals): the primal outputs and ``custom_lin`` of the input tangents."""
    primals_out, res = outs[:n], outs[n:]
    in_nonzero = tuple(not ad.is_zero(t) for t in arg_tangents)
    out_avals = tuple(core.get_aval(p).to_tangent_aval() for p in primals_out)
    tangents_out = custom_lin_p.bind(*res, *[t for t in arg_tangents if not ad.is_zero(t)],
                                     num_res=len(res), bwd=bwd, out_avals=out_avals,
                                     in_nonzero=in_nonzero)
    return primals_out, tangents_out


def _custom_vjp_call_batch(axis_data, args, dims, *, call_jaxpr: ClosedJaxpr, fwd: Callable,
                           bwd: Callable, num_consts: int, name: str):
    args, in_batched = _batched_inputs(axis_data, args, dims)
    batched_jaxpr, _ = batching.batch_jaxpr(call_jaxpr, axis_data, in_batched, True)
    arg_batched = list(in_batched[num_consts:])
    batched_fwd = _batch_flat_fun(fwd, axis_data, arg_batched)
    # The batched fwd and call give every residual and output a batch axis at 0.
    batched_bwd = _batch_bwd(bwd, axis_data, None, arg_batched)
    outs = custom_vjp_call_p.bind(*args, call_jaxpr=batched_jaxpr, fwd=batched_fwd,
                                  bwd=batched_bwd, num_consts=num_consts, name=name)
    return outs, [0] * len(outs)


def _batch_bwd(bwd: Callable, axis_data, in_batched: Sequence[bool] | None,
               arg_batched: Sequence[bool]) -> Callable:
    """``bwd`` on batched residuals and cotangents (batched at axis 0 where ``in_batched``;
    all of them if None). The cotangent of an unbatched argument is the sum over the batch of
    the per-example cotangents."""

    def batched(*args):
        ins = [True] * len(args) if in_batched is None else in_batched
        outs = _batch_flat_fun(bwd, axis_data, ins)(*args)
        result = []
        for ct, b in zip(outs, arg_batched):
            if type(ct) is ad.Zero:
                result.append(ad.Zero(batching.unmapped_aval(0, ct.aval)) if not b else ct)
            elif b:
                result.append(ct)
            else:
                result.append(lax.reduce_sum(ct, (0,)))
        return result

    batched.__name__ = _fun_name(bwd)
    batched.symbolic_zeros = getattr(bwd, "symbolic_zeros", False)
    return batched


custom_vjp_call_p = core.Primitive("custom_vjp_call")
custom_vjp_call_p.multiple_results = True
custom_vjp_call_p.def_impl(_call_jaxpr_impl)
custom_vjp_call_p.def_abstract_eval(_call_jaxpr_abstract_eval)
ad.defjvp_rule(custom_vjp_call_p, _custom_vjp_call_jvp)
core.defpp_params(custom_vjp_call_p, _custom_call_pp_params)
core.pp_display_only_names.add(custom_vjp_call_p)
batching.defrule(custom_vjp_call_p, _custom_vjp_call_batch, named_axis=True)
mlir.register_lowering(custom_vjp_call_p, _call_jaxpr_lowering)


# ---- custom_lin: the linear part of a custom_vjp's JVP; its transpose calls bwd ------------
def _raise_custom_vjp_error_on_jvp(*args, **params):
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


def _custom_lin_transpose(cts, *args, num_res: int, bwd: Callable, out_avals: tuple,
                          in_nonzero: tuple):
    res = args[:num_res]
    if not getattr(bwd, "symbolic_zeros", False):
        cts = [ad.instantiate_zeros(c) if type(c) is ad.Zero else c for c in cts]
    cts_in = bwd(*res, *cts)
    nz_cts = [c for c, nz in zip(cts_in, in_nonzero) if nz]
    return [None] * num_res + nz_cts


def _custom_lin_batch(axis_data, args, dims, *, num_res: int, bwd: Callable, out_avals: tuple,
                      in_nonzero: tuple):
    args, batched = _batched_inputs(axis_data, args, dims)
    tangent_batched = iter(batched[num_res:])
    # bwd gives a cotangent per argument of the custom_vjp function; those of zero tangents
    # are dropped by the transpose, so how they are batched does not matter.
    arg_batched = [next(tangent_batched) if nz else True for nz in in_nonzero]
    in_batched = list(batched[:num_res]) + [True] * len(out_avals)
    new_bwd = _batch_bwd(bwd, axis_data, in_batched, arg_batched)
    new_avals = tuple(batching.mapped_aval(axis_data.size, 0, a) for a in out_avals)
    outs = custom_lin_p.bind(*args, num_res=num_res, bwd=new_bwd, out_avals=new_avals,
                             in_nonzero=in_nonzero)
    return outs, [0] * len(outs)


custom_lin_p = core.Primitive("custom_lin")
custom_lin_p.multiple_results = True
custom_lin_p.def_impl(_raise_custom_vjp_error_on_jvp)
custom_lin_p.def_abstract_eval(lambda *avals, out_avals, **_: list(out_avals))
ad.deftranspose(custom_lin_p, _custom_lin_transpose)
ad.transpose_zero_cotangents.add(custom_lin_p)
batching.defrule(custom_lin_p, _custom_lin_batch, named_axis=True)
mlir.register_lowering(custom_lin_p, _raise_custom_vjp_error_on_jvp)
