"""User-defined derivatives: ``custom_jvp`` and ``custom_vjp`` (JAX's API), and
``closure_convert`` (re-exported from ``closure_convert.py``).

Both are primitives that carry the jaxpr of the primal function:

* ``custom_jvp_call`` carries ``call_jaxpr`` and ``jvp``, a flat Python callable running the
  user's rule (traced only when a JVP is actually taken). Its JVP rule calls ``jvp``; every
  other rule treats it as a call of ``call_jaxpr``.
* ``custom_vjp_call`` carries ``call_jaxpr``, ``fwd`` and ``bwd`` (flat callables). Its JVP
  rule runs ``fwd`` and emits ``custom_lin``, a linear primitive on the residuals and input
  tangents whose transpose calls ``bwd``. ``custom_lin`` cannot be evaluated forward, which is
  how forward-mode differentiation of a ``custom_vjp`` function fails with JAX's error.

Called outside any transformation, a custom function simply runs its Python code, as in JAX.
Values closed over by the primal function become leading inputs of the primitive
(``num_consts``); differentiating with respect to them is an error when the custom rule
applies (the rule only covers the explicit arguments).
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.transforms.closure_convert import closure_convert
from jaxkit.transforms.remat_opt import optimize_remat_of_custom_vjp_fwd

__all__ = ["SymbolicZero", "closure_convert", "custom_jvp", "custom_vjp"]


class SymbolicZero:
    """A zero tangent passed to a ``custom_jvp`` rule defined with ``symbolic_zeros=True``
    (the rule may return one as well). ``aval``, ``shape`` and ``dtype`` describe it."""

    def __init__(self, aval: core.ShapedArray):
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    def instantiate(self):
        return ad.zeros_like_aval(self.aval)

    def __repr__(self):
        return f"SymbolicZero({self.aval.str_short()})"


class CustomJVPException(Exception):
    def __init__(self):
        super().__init__(
            "Detected differentiation of a custom_jvp function with respect to a closed-over "
            "value. That isn't supported because the custom JVP rule only specifies how to "
            "differentiate the custom_jvp function with respect to explicit input parameters. "
            "Try passing the closed-over value into the custom_jvp function as an argument, "
            "and adapting the custom_jvp rule.")


class CustomVJPException(Exception):
    def __init__(self):
        super().__init__(
            "Detected differentiation of a custom_vjp function with respect to a closed-over "
            "value. That isn't supported because the custom VJP rule only specifies how to "
            "differentiate the custom_vjp function with respect to explicit input parameters. "
            "Try passing the closed-over value into the custom_vjp function as an argument, "
            "and adapting the custom_vjp fwd and bwd rules.")


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------


def _fun_name(f) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _positional_count(fun: Callable) -> int:
    """How many positional parameters ``fun`` has: called with fewer, the defaults of the
    rest are filled in. 0 where the signature is opaque (``functools.partial``, as in JAX) or
    unknown, so that nothing is filled in."""
    if isinstance(fun, functools.partial):
        return 0
    try:
        params = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _resolve_kwargs(fun: Callable, args: tuple, kwargs: dict, n_positional: int = 0) -> tuple:
    """All arguments as positional ones, defaults included, as JAX's (custom derivative rules
    take positional args; ``nondiff_argnums`` may name a parameter left to its default, as
    Flax's ``dot_general_with_precision`` does)."""
    if not kwargs and len(args) >= n_positional:
        return args
    try:
        ba = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"cannot bind the arguments of {_fun_name(fun)}: {e}") from None
    ba.apply_defaults()
    if ba.kwargs:
        raise TypeError("keyword-only arguments are not supported by custom_jvp/custom_vjp "
                        f"functions; {_fun_name(fun)} got {sorted(ba.kwargs)}")
    return ba.args


def _is_array_leaf(x) -> bool:
    return isinstance(x, core.Tracer) or core.is_array_like(x)


def _owned_by(trace: core.Trace, x) -> bool:
    return isinstance(x, core.Tracer) and x._trace is trace


def _stop_gradient_tree(x):
    """``stop_gradient`` on the inexact array leaves of ``x`` (other leaves, e.g. functions,
    pass through): non-differentiable arguments must not carry tangents."""
    def stop(leaf):
        if _is_array_leaf(leaf) and dtypes.issubdtype(core.get_aval(leaf).dtype, np.inexact):
            return ad.stop_gradient(leaf)
        return leaf
    return tree_util.tree_map(stop, x)


def _split_static(args: tuple, nondiff_argnums: Sequence[int]):
    nondiff = set(nondiff_argnums)
    for i in nondiff:
        if not 0 <= i < len(args):
            raise TypeError(f"nondiff_argnums {tuple(nondiff_argnums)} refers to argument {i}, "
                            f"but the function was called with {len(args)} positional "
                            "arguments")
    static = [args[i] for i in sorted(nondiff)]
    dyn = tuple(a for i, a in enumerate(args) if i not in nondiff)
    return static, dyn


def _merge_static(n: int, nondiff_argnums: Sequence[int], static: list, dyn: Sequence) -> list:
    nondiff = sorted(set(nondiff_argnums))
    st, dy = iter(static), iter(dyn)
    return [next(st) if i in nondiff else next(dy) for i in range(n)]


def _trace_primal(fun: Callable, dyn_args: tuple, name: str):
    """Trace ``fun`` (pytree in/out) at the types of ``dyn_args``: the closed jaxpr (constants
    as leading inputs), the constants, the flat arguments and the trees."""
    flat, in_tree = tree_util.tree_flatten(dyn_args)
    for x in flat:
        if not _is_array_leaf(x):
            raise TypeError(f"custom derivative function {name} got an argument of type "
                            f"{type(x).__name__}, which is not a valid jaxkit type; mark "
                            "non-array arguments with nondiff_argnums")
    avals = [core.get_aval(x) for x in flat]
    debug = pe.debug_info("custom derivative", fun, [f"args[{i}]" for i in range(len(flat))])
    jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(lambda a: fun(*a), in_tree, avals, debug)
    closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), [])
    return closed, consts, flat, in_tree, out_tree


def _check_avals_match(what: str, got: Sequence, expected: Sequence[core.ShapedArray],
                       tree) -> None:
    got_avals = [core.get_aval(x) for x in got]
    if any(not core.typematch(a, b) for a, b in zip(got_avals, expected)):
        raise TypeError(f"{what}: expected shapes/dtypes "
                        f"{tree_util.tree_unflatten(tree, [a.str_short() for a in expected])} "
                        "but got "
                        f"{tree_util.tree_unflatten(tree, [a.str_short() for a in got_avals])}")


def _call_jaxpr_lowering(ctx, *args, call_jaxpr: ClosedJaxpr, **_):
    return mlir.closed_subcomp(ctx.module_context, call_jaxpr, *args)


def _call_jaxpr_abstract_eval(*avals, call_jaxpr: ClosedJaxpr, **_):
    return call_jaxpr.out_avals


def _call_jaxpr_impl(*args, call_jaxpr: ClosedJaxpr, **_):
    return core.eval_jaxpr(call_jaxpr.jaxpr, call_jaxpr.consts, *args)


def _batched_inputs(axis_data, args, dims):
    """Batched arguments moved to axis 0, and which ones are batched."""
    in_batched = [d is not batching.not_mapped for d in dims]
    args = [batching.moveaxis(x, d, 0) if b else x for x, d, b in zip(args, dims, in_batched)]
    return args, in_batched


def _batch_flat_fun(fun: Callable, axis_data, in_batched: Sequence[bool]) -> Callable:
    """``fun`` (flat in, flat out, ``Zero``s allowed both ways) on batches: inputs batched at
    axis 0 where ``in_batched``, every output batched at axis 0."""

    def batched(*args):
        trace = batching.BatchTrace(axis_data)
        with core.new_trace(trace):
            ins = []
            for x, b in zip(args, in_batched):
                if type(x) is ad.Zero:
                    ins.append(ad.Zero(batching.unmapped_aval(0, x.aval)) if b else x)
                else:
                    ins.append(batching.BatchTracer(trace, x, 0) if b else x)
            outs = fun(*ins)
            pairs = [(o, None) if type(o) is ad.Zero else trace.to_batch_info(o) for o in outs]
        result = []
        for v, d in pairs:
            if type(v) is ad.Zero:
                result.append(ad.Zero(batching.mapped_aval(axis_data.size, 0, v.aval)))
            else:
                result.append(batching.matchaxis(d, 0, v, axis_data.size))
        return result

    batched.__name__ = _fun_name(fun)
    return batched


# --------------------------------------------------------------------------------------------
# custom_jvp
# --------------------------------------------------------------------------------------------


class _CustomDerivativeFunction:
    """What ``custom_jvp`` and ``custom_vjp`` share: wrapping, method binding, and the start of
    a call (keyword arguments resolved, plain evaluation outside transformations,
    ``nondiff_argnums`` split off). Subclasses bind their primitive in ``_bind``."""

    _rule_attr = ""     # the attribute a rule must be set on before calling
    _missing_rule = ""  # the error when it is not

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self._n_positional = _positional_count(fun)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        name = _fun_name(self.fun)
        if getattr(self, self._rule_attr) is None:
            raise AttributeError(self._missing_rule.format(name=name))
        args = _resolve_kwargs(self.fun, args, kwargs, self._n_positional)
        if core.current_trace() is core.eval_trace:
            return self.fun(*args)
        if self.nondiff_argnums:
            static, dyn = _split_static(args, self.nondiff_argnums)
        else:
            static, dyn = (), args
        trace = core.current_trace()
        if isinstance(trace, ad.JVPTrace):
            return self._process_jvp(trace, name, len(args), static, dyn)
        if isinstance(trace, (pe.JaxprTrace, batching.BatchTrace)) and not any(
                _owned_by(trace, x) for x in tree_util.tree_leaves((static, dyn))):
            # As JAX's partial-eval and batch traces do: known (unbatched) inputs only, so
            # the call happens at the enclosing trace (eagerly, when that is evaluation).
            with core.set_current_trace(trace.parent):
                return self(*args)
        return self._bind(name, len(args), static, dyn)

    def _process_jvp(self, trace: ad.JVPTrace, name: str, n: int, static: Sequence,
                     dyn: Sequence):
        """Differentiation by the custom rule alone, as JAX's JVP trace does: the user's
        function is never called (no Python side effects, Python control flow on concrete
        primals works). Without any tangent, the call goes to the enclosing trace."""
        self._check_static(static)
        own = lambda x: trace.to_primal_tangent_pair(x)[0] if _owned_by(trace, x) else x
        static = [tree_util.tree_map(own, s) for s in static]
        flat, in_tree = tree_util.tree_flatten(dyn)
        pairs = [trace.to_primal_tangent_pair(x) for x in flat]
        primals = [p for p, _ in pairs]
        if all(type(t) is ad.Zero for _, t in pairs):
            with core.set_current_trace(trace.parent):
                dyn_primals = tree_util.tree_unflatten(in_tree, primals)
                if self.nondiff_argnums:
                    return self(*_merge_static(n, self.nondiff_argnums, static, dyn_primals))
                return self(*dyn_primals)
        with core.set_current_trace(trace.parent):
            out_tree, primals_out, tangents_out = self._rule_jvp(
                name, static, in_tree, primals, [t for _, t in pairs])
        return tree_util.tree_unflatten(
            out_tree, [trace.box(p, t) for p, t in zip(primals_out, tangents_out)])

    def _check_static(self, static: Sequence) -> None:
        pass


class custom_jvp(_CustomDerivativeFunction):
    """A function with a custom JVP rule (``defjvp``) or per-argument rules (``defjvps``).

    Use as a decorator: ``@custom_jvp`` or ``@partial(custom_jvp, nondiff_argnums=(0,))``.
    Non-differentiable arguments are passed first to the rule:
    ``rule(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``."""

    _rule_attr = "jvp"
    _missing_rule = "No JVP defined for custom_jvp function {name} using defjvp."

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.jvp: Callable | None = None
        self.symbolic_zeros = False

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Set the JVP rule ``jvp(primals, tangents) -> (primal_out, tangent_out)``."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """One rule per argument, ``rule(g, ans, *primals)`` giving its contribution to the
        output tangent (None: the argument's contribution is zero)."""
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            primal_out = self(*primals)
            terms = [rule(t, primal_out, *primals) for rule, t in zip(jvps, tangents)
                     if rule is not None]
            if not terms:
                return primal_out, tree_util.tree_map(
                    lambda x: ad.zeros_like_aval(core.get_aval(x).to_tangent_aval()),
                    primal_out)
            total = terms[0]
            for term in terms[1:]:
                total = tree_util.tree_map(ad.add_tangents, total, term)
            return primal_out, total

        self.defjvp(jvp)

    def _bind(self, name: str, n: int, static: Sequence, dyn: Sequence):
        if self.nondiff_argnums:
            static = [_stop_gradient_tree(s) for s in static]
            fun = lambda *d: self.fun(*_merge_static(n, self.nondiff_argnums, static, d))
            jvp = functools.partial(self.jvp, *static)
        else:
            fun, jvp = self.fun, self.jvp
        closed, consts, flat, in_tree, out_tree = _trace_primal(fun, dyn, name)
        flat_jvp = _flatten_jvp(jvp, in_tree, out_tree, closed.out_avals, self.symbolic_zeros,
                                name, _fun_name(self.jvp))
        outs = custom_jvp_call_p.bind(*consts, *flat, call_jaxpr=closed, jvp=flat_jvp,
                                      num_consts=len(consts),
                                      symbolic_zeros=self.symbolic_zeros, name=name)
        return tree_util.tree_unflatten(out_tree, outs)

    def _rule_jvp(self, name: str, static: Sequence, in_tree, primals: Sequence,
                  tangents: Sequence):
        jvp = functools.partial(self.jvp, *static) if self.nondiff_argnums else self.jvp
        out_tree_cell: list = []
        flat_jvp = _flatten_jvp(jvp, in_tree, None, None, self.symbolic_zeros, name,
                                _fun_name(self.jvp), out_tree_cell)
        outs = flat_jvp(*primals, *tangents)
        m = len(outs) // 2
        return out_tree_cell[0], outs[:m], outs[m:]


def _flatten_jvp(jvp: Callable, in_tree, out_tree, out_avals: Sequence[core.ShapedArray] | None,
                 symbolic_zeros: bool, fun_name: str, jvp_name: str,
                 out_tree_cell: list | None = None) -> Callable:
    """The user's rule on flat values: ``flat(*primals, *tangents) -> [*primals_out,
    *tangents_out]`` (tangent inputs may be ``Zero``s, outputs may be ``Zero``s).

    ``out_tree``/``out_avals`` (the primal function's, when it was traced) are checked against
    the rule's primal output; when None, the rule's output tree goes to ``out_tree_cell``."""

    def flat(*args):
        n = len(args) // 2
        primals, tangents = args[:n], args[n:]
        if symbolic_zeros:
            tangents = [SymbolicZero(t.aval) if type(t) is ad.Zero else t for t in tangents]
        else:
            tangents = [ad.instantiate_zeros(t) for t in tangents]
        out = jvp(tree_util.tree_unflatten(in_tree, primals),
                  tree_util.tree_unflatten(in_tree, tangents))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"Custom JVP rule {jvp_name} for function {fun_name} must produce "
                            "a pair (list or tuple of length two) representing primal and "
                            f"tangent outputs, but got {out!r}.")
        primals_out, p_tree = tree_util.tree_flatten(out[0])
        tangents_out, t_tree = tree_util.tree_flatten(
            out[1], is_leaf=lambda x: isinstance(x, SymbolicZero))
        if out_tree is not None and p_tree != out_tree:
            raise TypeError(f"Custom JVP rule {jvp_name} for function {fun_name} must produce "
                            "primal outputs with the same container (pytree) structure as the "
                            f"function's output {out_tree}, but got {p_tree}.")
        if out_tree_cell is not None:
            out_tree_cell[:] = [p_tree]
        if t_tree != p_tree:
            raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                            f"equal container (pytree) structures, but got {p_tree} and "
                            f"{t_tree} respectively.")
        if out_avals is not None:
            _check_avals_match(f"Custom JVP rule {jvp_name} for function {fun_name} must "
                               "produce primal outputs equal in shape and dtype to the "
                               "function's output", primals_out, out_avals, out_tree)
        result_t = []
        for p, t in zip(primals_out, tangents_out):
            expected = core.get_aval(p).to_tangent_aval()
            if type(t) is SymbolicZero or ad.is_zero(t):
                result_t.append(ad.Zero(expected))
                continue
            got = core.get_aval(t)
            if not core.typematch(got, expected):
                raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                                "corresponding shapes and dtypes. Expected "
                                f"{expected.str_short()} (tangent type of "
                                f"{core.get_aval(p).str_short()}) but got {got.str_short()}.")
            result_t.append(t)
        return list(primals_out) + result_t

    flat.__name__ = jvp_name
    return flat


def _custom_jvp_call_jvp(primals, tangents, *, call_jaxpr: ClosedJaxpr, jvp: Callable,
                         num_consts: int, symbolic_zeros: bool, name: str):
    if any(not ad.is_zero(t) for t in tangents[:num_consts]):
        if any(not ad.is_zero(t) for t in tangents[num_consts:]):
            raise CustomJVPException()
        # Only closed-over values carry tangents: the custom rule does not apply; the
        # function is differentiated as written (as JAX does through its closure).
        nonzeros = [not ad.is_zero(t) for t in tangents]
        jvp_closed, out_nz = ad.jvp_jaxpr(call_jaxpr, nonzeros, False)
        outs = core.eval_jaxpr(jvp_closed.jaxpr, jvp_closed.consts, *primals,
                               *[t for t in tangents if not ad.is_zero(t)])
        n = len(call_jaxpr.out_avals)
        it = iter(outs[n:])
        return outs[:n], [next(it) if nz else ad.Zero(a.to_tangent_aval())
                          for a, nz in zip(call_jaxpr.out_avals, out_nz)]
    arg_tangents = [ad.Zero(core.get_aval(p).to_tangent_aval()) if ad.is_zero(t) else t
                    for p, t in zip(primals[num_consts:], tangents[num_consts:])]
    outs = jvp(*primals[num_consts:], *arg_tangents)
    n = len(call_jaxpr.out_avals)
    return outs[:n], outs[n:]


def _custom_jvp_call_batch(axis_data, args, dims, *, call_jaxpr: ClosedJaxpr, jvp: Callable,
                           num_consts: int, symbolic_zeros: bool, name: str):
    args, in_batched = _batched_inputs(axis_data, args, dims)
    batched_jaxpr, _ = batching.batch_jaxpr(call_jaxpr, axis_data, in_batched, True)
    arg_batched = list(in_batched[num_consts:])
    batched_jvp = _batch_flat_fun(jvp, axis_data, arg_batched + arg_batched)
    outs = custom_jvp_call_p.bind(*args, call_jaxpr=batched_jaxpr, jvp=batched_jvp,
                                  num_consts=num_consts, symbolic_zeros=symbolic_zeros,
                                  name=name)
    return outs, [0] * len(outs)


def _custom_jvp_call_transpose(cts, *args, call_jaxpr: ClosedJaxpr, jvp: Callable,
                               num_consts: int, symbolic_zeros: bool, name: str):
    # A custom_jvp function applied to tangents (inside a tangent_solve or a linear map) is
    # linear in them: transpose its body as written, as JAX does by inlining it there.
    return ad.backward_pass(call_jaxpr.jaxpr, call_jaxpr.consts, list(args), list(cts))


custom_jvp_call_p = core.Primitive("custom_jvp_call")
custom_jvp_call_p.multiple_results = True
custom_jvp_call_p.def_impl(_call_jaxpr_impl)
custom_jvp_call_p.def_abstract_eval(_call_jaxpr_abstract_eval)
ad.defjvp_rule(custom_jvp_call_p, _custom_jvp_call_jvp)


def _custom_call_pp_params(params: dict) -> dict:
    # As JAX prints custom_jvp_call/custom_vjp_call: the name first, then the rest sorted, a
    # zero num_consts left out. jaxkit's custom_vjp has no symbolic-zeros mode, so its
    # equations show the value JAX shows for a custom_vjp defined without one.
    rest = {k: v for k, v in params.items() if k != "name" and (k != "num_consts" or v)}
    rest.setdefault("symbolic_zeros", False)
    return {"name": params["name"], **dict(sorted(rest.items()))}


core.defpp_params(custom_jvp_call_p, _custom_call_pp_params)
core.pp_display_only_names.add(custom_jvp_call_p)
ad.deftranspose(custom_jvp_call_p, _custom_jvp_call_transpose)
batching.defrule(custom_jvp_call_p, _custom_jvp_call_batch, named_axis=True)
mlir.register_lowering(custom_jvp_call_p, _call_jaxpr_lowering)


# --------------------------------------------------------------------------------------------
# custom_vjp
# --------------------------------------------------------------------------------------------


class custom_vjp(_CustomDerivativeFunction):
    """A function with a custom VJP: ``defvjp(fwd, bwd)``.

    ``fwd(*args) -> (out, residuals)``; ``bwd(*nondiff_args, residuals, out_cotangent)``
    returns a tuple with one cotangent per (differentiable) argument, None meaning zero.
    Forward-mode differentiation (``jvp``, ``jacfwd``) of such a function is an error."""

    _rule_attr = "fwd"
    _missing_rule = "No VJP defined for custom_vjp function {name} using defvjp."

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        super().__init__(fun, nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        """Set the forward rule (primal output and residuals) and the backward rule."""
        if symbolic_zeros:
            raise NotImplementedError("custom_vjp.defvjp(symbolic_zeros=True) is not "
                                      "supported by jaxkit")
        if optimize_remat:  # fwd runs as one remat_opt equation, which DCE can drop
            fwd = optimize_remat_of_custom_vjp_fwd(self.fun, fwd, self.nondiff_argnums)
        self.fwd = fwd
        self.bwd = bwd

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
                                _fun_name(self.fwd), out_tree_cell)
        flat_bwd = _flatten_bwd(bwd, in_tree, in_avals, out_tree_cell, res_tree_cell,
                                _fun_name(self.bwd))
        with core.set_current_trace(_primal_trace(core.current_trace(), primals)):
            outs = flat_fwd(*primals)
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
                                _fun_name(self.fwd))
        flat_bwd = _flatten_bwd(bwd, in_tree, in_avals, [out_tree], res_tree_cell,
                                _fun_name(self.bwd))
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
                 fun_name: str, fwd_name: str, out_tree_cell: list | None = None) -> Callable:
    """``fwd`` on flat values: ``flat(*args) -> [*primals_out, *residuals]``. ``out_tree``
    and ``out_avals`` (the primal function's) are checked when given; the output tree goes to
    ``out_tree_cell`` when one is given."""
    def flat(*args):
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
                 out_tree_cell: list, res_tree_cell: list, bwd_name: str) -> Callable:
    """``bwd`` on flat residuals and cotangents; the trees come in cells, known once the
    forward rule has run. Its cotangents are matched to the arguments as JAX does."""
    n_args = len(in_avals)

    def flat(*args):
        res_tree = res_tree_cell[0]
        n_res = res_tree.num_leaves
        res = tree_util.tree_unflatten(res_tree, args[:n_res])
        cts = tree_util.tree_unflatten(out_tree_cell[0], args[n_res:])
        out = bwd(res, cts)
        if isinstance(out, list) and len(out) == len(tree_util.treedef_children(in_tree)):
            out = tuple(out)
        result = []
        for path, aval, ct in _match_cotangents(out, in_tree):
            expected = aval.to_tangent_aval()
            if ct is None or expected.dtype == dtypes.float0 or ad.is_zero(ct):
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
    outs = fwd(*primals[num_consts:])
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
