"""User-defined derivatives: ``custom_jvp`` (JAX's API), the machinery it shares with
``custom_vjp`` (``custom_vjp.py``), and ``closure_convert`` (re-exported from
``closure_convert.py``).

``custom_jvp_call`` is a primitive that carries the jaxpr of the primal function
(``call_jaxpr``) and ``jvp``, a flat Python callable running the user's rule (traced only
when a JVP is actually taken). Its JVP rule calls ``jvp``; every other rule treats it as a
call of ``call_jaxpr``.

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

from jaxkit import core, dtypes
from jaxkit import tree_util
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import ad, batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.literals import canonicalize_value
from jaxkit.runtime.array import Array
from jaxkit.transforms.closure_convert import closure_convert
from jaxkit.transforms.argnums import infer_argnums_and_argnames

__all__ = ["SymbolicZero", "closure_convert", "custom_jvp"]


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



def _long(aval) -> str:
    """A type as JAX's messages write it (``float32[3]``)."""
    return aval.str_short(short_dtypes=False)

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

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        nums = set(nondiff_argnums)
        if nondiff_argnames:  # named ones are the positions the signature gives them
            nums |= infer_argnums_and_argnames(fun, None, nondiff_argnames)[0]
        self.nondiff_argnums = tuple(sorted(nums))
        self._n_positional = _positional_count(fun)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        name = _fun_name(self.fun)
        if getattr(self, self._rule_attr) is None:
            raise AttributeError(self._missing_rule.format(name=name))
        args = _resolve_kwargs(self.fun, args, kwargs, self._n_positional)
        if core.current_trace() is core.eval_trace:
            # As JAX's bind: the differentiated arguments as a primitive takes them, so an
            # input handed back is typed (``TypedFloat(1.0, dtype=float32)``), as JAX's
            return self.fun(*[a if type(a) is Array or i in self.nondiff_argnums
                              else tree_util.tree_map(canonicalize_value, a)
                              for i, a in enumerate(args)])
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

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()):
        super().__init__(fun, nondiff_argnums, nondiff_argnames)
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
                                f"{_long(expected)} (tangent type of "
                                f"{_long(core.get_aval(p))}) but got {_long(got)}.")
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
