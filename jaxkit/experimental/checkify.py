"""``jax.experimental.checkify``: run-time checks in jitted code, returned as values.

``checkify(f, errors)(*args)`` traces ``f`` to a jaxpr and evaluates it with an error state
threaded through: each ``check`` and, for the enabled automatic categories, each NaN-producing
float primitive (JAX's list of them), each division by zero and each out-of-bounds index
updates the state functionally. So it works under ``jit``, and ``f`` returns ``(error, out)``;
``error.get()`` is the message of the first check that failed (``None`` if none),
``error.throw()`` raises it.

The error value is a pytree: one "failed" flag and the formatting arguments per check site, and
the index of the site that failed first. Which sites exist, and their messages, are static.

Jitted calls inside ``f`` are checked through (their jaxprs are evaluated inline). The bodies
of ``cond``, ``while_loop``, ``scan``, ``pmap`` and ``checkpoint`` are checked too, as in JAX:
the construct is rebuilt with the body's error as extra outputs (branch outputs, loop carry,
per-device outputs), whose layout is found by tracing the body once beforehand. A loop keeps
the first failure of each site; a ``while_loop``'s predicate is checked before the loop and
after every step.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes, lax
from jaxkit import tree_util
from jaxkit import numpy as jnp
from jaxkit.core import ClosedJaxpr
from jaxkit.interpreters import batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.lax import parallel
from jaxkit.lax.cond import cond_p
from jaxkit.lax.loops import scan_p, while_p
from jaxkit.runtime.array import Array
from jaxkit.transforms.checkpoint import checkpoint_p
from jaxkit.transforms.pmap import bind_pmap, pmap_p

__all__ = ["DivisionByZeroError", "Error", "ErrorCategory", "FailedCheckError", "JaxException",
           "JaxRuntimeError", "NaNError", "OOBError", "all_checks", "automatic_checks", "check",
           "check_error", "checkify", "debug_check", "div_checks", "float_checks",
           "index_checks", "init_error", "nan_checks", "user_checks"]


class JaxRuntimeError(ValueError):
    """What ``Error.throw()`` and a failing ``check`` outside ``checkify`` raise (a
    ``ValueError``, as in JAX, so callers catching that see failed checks)."""


class JaxException:
    """Base of the error categories; a category is the set of exception classes it enables."""


class FailedCheckError(JaxException):
    """A user ``check`` whose predicate was False."""


class NaNError(JaxException):
    """A floating-point primitive produced a NaN."""


class OOBError(JaxException):
    """An index was out of bounds."""


class DivisionByZeroError(JaxException):
    """An integer division or remainder by zero."""


ErrorCategory = type[JaxException]
user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


# --------------------------------------------------------------------------------------------
# The error value
# --------------------------------------------------------------------------------------------


def _host(x: Any) -> Any:
    """A payload value as NumPy, but for key arrays, which have no NumPy form (chex passes the
    leaves it compares, keys included, as format arguments)."""
    return x if dtypes.issubdtype(getattr(x, "dtype", None), dtypes.prng_key) else np.asarray(x)


@dataclasses.dataclass(frozen=True)
class _Site:
    """One place that can fail: its category, message template and where it is."""

    category: type
    message: str
    location: str = ""

    def format(self, payload) -> str:
        args, kwargs = payload
        args = [_host(a) for a in args]
        kwargs = {k: _host(v) for k, v in kwargs.items()}
        text = self.message.format(*args, **kwargs) if (args or kwargs) else self.message
        return f"{text}{self.location}"


class Error:
    """The outcome of a checkified function: which check failed first, and its message.

    A pytree (``failed`` flags, payloads and ``code`` are leaves), so it can be returned from
    ``jit`` and passed through transformations."""

    def __init__(self, sites: tuple, failed: tuple, payloads: tuple, code):
        self._sites = sites
        self._failed = failed
        self._payloads = payloads
        self._code = code

    def _failing(self) -> list[tuple[int, tuple | None]]:
        """``(site, batch index)`` of each failure: one, or for an error batched by ``vmap``
        or ``pmap`` one per failing element (index None when unbatched)."""
        codes = np.asarray(self._code)
        if codes.ndim == 0:
            return [(int(codes), None)] if codes >= 0 else []
        return [(int(codes[tuple(i)]), tuple(int(k) for k in i))
                for i in np.argwhere(codes >= 0)]

    def _message(self, code: int, index: tuple | None) -> str:
        payload = self._payloads[code]
        if index is not None:
            payload = tree_util.tree_map(lambda a: np.asarray(a)[index], payload)
        return self._sites[code].format(payload)

    def get(self) -> str | None:
        """The message of the first failed check, or None when every check passed; for a
        batched error, a line per failing element naming its index (as JAX)."""
        failing = self._failing()
        if not failing:
            return None
        if failing[0][1] is None:
            return self._message(*failing[0])
        return "\n".join(f"at mapped index {', '.join(map(str, i))}: {self._message(c, i)}"
                         for c, i in failing)

    def get_exception(self) -> JaxException | None:
        failing = self._failing()
        return self._sites[failing[0][0]].category() if failing else None

    def throw(self) -> None:
        """Raise ``JaxRuntimeError`` with the message of the failed check, if any; a batched
        error raises that of one failing element (the last one, as JAX)."""
        failing = self._failing()
        if failing:
            raise JaxRuntimeError(self._message(*failing[-1]))

    def __str__(self):
        return f"Error({self.get()})"

    __repr__ = __str__

    def tree_flatten(self) -> tuple:
        """``(children, aux data)``, as the pytree registration flattens it."""
        return _error_flatten(self)

    @classmethod
    def tree_unflatten(cls, metadata: Any, data: Any) -> Error:
        return _error_unflatten(metadata, data)


def _error_flatten(err: Error):
    return (err._failed, err._payloads, err._code), err._sites


def _error_unflatten(sites, children):
    failed, payloads, code = children
    return Error(sites, tuple(failed), tuple(payloads), code)


tree_util.register_pytree_node(Error, _error_flatten, _error_unflatten)

# The error of no check at all (JAX's starting value when errors are combined by hand).
init_error = Error((), (), (), np.int32(-1))


@dataclasses.dataclass(frozen=True)
class _Layout:
    """The static part of an error built in a body: its sites and, per site, the tree and
    avals of its payload. Its flat form is ``[code, *failed flags, *payload leaves]``."""

    sites: tuple
    trees: tuple
    avals: tuple  # per site, the avals of its payload's leaves
    batch: tuple = ()  # leading axes of every value (see ``_ErrorState.batch``)

    def __add__(self, other: _Layout) -> _Layout:
        if self.batch != other.batch:  # branches of a cond with a pmap in one only
            raise NotImplementedError("checkify: a pmap inside only some branches of a cond")
        return _Layout(self.sites + other.sites, self.trees + other.trees,
                       self.avals + other.avals, self.batch)

    def split(self, flat: list) -> tuple[Any, list, list[list]]:
        """``(code, failed flags, payload leaves per site)`` of a flat error."""
        code, failed, rest = flat[0], list(flat[1:1 + len(self.sites)]), flat[1 + len(self.sites):]
        leaves = []
        for avals in self.avals:
            leaves.append(list(rest[:len(avals)]))
            rest = rest[len(avals):]
        return code, failed, leaves

    def empty(self) -> list:
        """The flat error where nothing failed."""
        return [jnp.full(self.batch, -1, np.int32), *[jnp.zeros(self.batch, bool)
                                                      for _ in self.sites],
                *[jnp.zeros(a.shape, a.dtype) for avals in self.avals for a in avals]]


class _ErrorState:
    """The error being built while a jaxpr is evaluated under ``checkify``."""

    def __init__(self, enabled: frozenset):
        self.enabled = enabled
        self.sites: list[_Site] = []
        self.failed: list = []
        self.payloads: list = []
        self.code = jnp.int32(-1)
        # The leading axes of an error batched by a ``pmap`` inside (one error per device):
        # every flag and payload then has them, so that each element reads as one error.
        self.batch: tuple = ()

    def _batched(self, x):
        shape = core.get_aval(x).shape
        return jnp.broadcast_to(x, self.batch + shape) if self.batch else x

    def add(self, site: _Site, failed, payload=((), {})) -> None:
        failed = self._batched(jnp.asarray(failed, dtype=bool))
        payload = tree_util.tree_map(self._batched, payload)
        self.code = jnp.where((self.code < 0) & failed, jnp.int32(len(self.sites)), self.code)
        self.sites.append(site)
        self.failed.append(failed)
        self.payloads.append(payload)

    def error(self) -> Error:
        return Error(tuple(self.sites), tuple(self.failed), tuple(self.payloads), self.code)

    def layout(self) -> _Layout:
        flat = [tree_util.tree_flatten(p) for p in self.payloads]
        return _Layout(tuple(self.sites), tuple(t for _, t in flat),
                       tuple(tuple(core.get_aval(x).strip_weak_type() for x in leaves)
                             for leaves, _ in flat), self.batch)

    def flat(self) -> list:
        """The state as values, in the order of ``self.layout()``: payload leaves lose weak
        types, so that a loop carries them unchanged."""
        leaves = [jnp.asarray(x, dtype=core.get_aval(x).dtype)
                  for p in self.payloads for x in tree_util.tree_leaves(p)]
        code = jnp.asarray(self._batched(self.code), dtype=np.int32)
        return [code, *self.failed, *leaves]

    def absorb(self, layout: _Layout, flat: list, batch: tuple = ()) -> None:
        """Append the sites of a construct's error (``flat``, laid out as ``layout``, with
        leading ``batch`` axes when it holds one error per device)."""
        if batch and not self.batch:
            self.batch = batch
            self.failed = [self._batched(f) for f in self.failed]
            self.payloads = [tree_util.tree_map(self._batched, p) for p in self.payloads]
            self.code = self._batched(self.code)
        code, failed, leaves = layout.split(flat)
        offset = len(self.sites)
        self.code = jnp.where((self.code < 0) & (code >= 0), code + offset, self.code)
        for site, tree, f, site_leaves in zip(layout.sites, layout.trees, failed, leaves):
            self.sites.append(site)
            self.failed.append(f)
            self.payloads.append(tree_util.tree_unflatten(tree, site_leaves))


def _first_of(layout: _Layout, earlier: list, later: list) -> list:
    """Two errors of one layout (from successive loop steps) as one: each site keeps its
    first failure, and the error its first failed site."""
    code0, failed0, leaves0 = layout.split(earlier)
    code1, failed1, leaves1 = layout.split(later)
    code = jnp.where(code0 >= 0, code0, code1)
    failed = [a | b for a, b in zip(failed0, failed1)]
    leaves = [jnp.where(f, a, b).astype(a.dtype)
              for f, xs, ys in zip(failed0, leaves0, leaves1) for a, b in zip(xs, ys)]
    return [code, *failed, *leaves]


def _padded(layouts: list[_Layout], i: int, flat: list) -> list:
    """The error ``flat`` of branch ``i`` laid out as all branches' layouts together."""
    code, failed, leaves = layouts[i].split(flat)
    before = sum(len(lay.sites) for lay in layouts[:i])
    code = jnp.where(code >= 0, code + before, code)
    out_failed, out_leaves = [], []
    for k, lay in enumerate(layouts):
        if k == i:
            out_failed += failed
            out_leaves += [x for xs in leaves for x in xs]
        else:
            empty = lay.empty()
            out_failed += empty[1:1 + len(lay.sites)]
            out_leaves += empty[1 + len(lay.sites):]
    return [code, *out_failed, *out_leaves]


# --------------------------------------------------------------------------------------------
# check: the user check primitive
# --------------------------------------------------------------------------------------------


def check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """Check that ``pred`` is True; otherwise fail with ``msg.format(*fmt_args, **fmt_kwargs)``.

    Under ``checkify`` the failure is returned as an ``Error``; evaluated eagerly outside it,
    a False predicate raises ``JaxRuntimeError``; traced outside it, this is an error (the check
    would have nowhere to go)."""
    if not isinstance(msg, str):
        raise TypeError(f"check: the message must be a string, got {type(msg).__name__}")
    pred = jnp.asarray(pred)
    if pred.dtype != np.dtype(bool):
        raise TypeError(f"check takes a scalar or array of booleans as its predicate, got "
                        f"{pred.dtype}")
    flat, tree = tree_util.tree_flatten((fmt_args, fmt_kwargs))
    for leaf in flat:
        if not isinstance(leaf, (Array, core.Tracer, np.ndarray, np.generic)):
            raise TypeError("Formatting arguments to checkify.check need to be PyTrees of "
                            f"arrays, but got {leaf!r} of type {type(leaf)}.")
    site = _Site(FailedCheckError, msg, " (`check` failed)")
    check_p.bind(pred, *map(jnp.asarray, flat), site=site, payload_tree=tree)


def debug_check(pred, msg: str, *fmt_args, **fmt_kwargs) -> None:
    """As ``check`` under ``checkify``; elsewhere it is dropped."""
    if isinstance(core.current_trace(), core.EvalTrace) or _under_checkify:
        check(pred, msg, *fmt_args, **fmt_kwargs)


def _check_impl(pred, *payload, site, payload_tree):
    if not bool(np.all(np.asarray(pred))):
        args, kwargs = tree_util.tree_unflatten(payload_tree, payload)
        raise JaxRuntimeError(site.format((args, kwargs)))
    return []


def _check_abstract_eval(*avals, site, payload_tree):
    if _under_checkify:  # recorded, then made functional by ``checkify``'s evaluator
        return []
    raise ValueError(
        "Cannot abstractly evaluate a checkify.check which was not functionalized. This "
        "probably means you tried to stage (jit/scan/pmap/...) a `check` without functionalizing "
        "it through `checkify.checkify`.")


def _check_batch(axis_data, args, dims, *, site, payload_tree):
    # One check of all elements; its message formats the first failing element's arguments.
    pred, *payload = args
    pred_dim, *payload_dims = dims
    first = 0
    if pred_dim is not None:
        pred = jnp.moveaxis(pred, pred_dim, 0)
        ok = jnp.all(pred.reshape(pred.shape[0], -1), axis=1)
        first = jnp.argmax(~ok)
        pred = jnp.all(ok)
    payload = [jnp.take(p, first, axis=d) if d is not None else p
               for p, d in zip(payload, payload_dims)]
    return check_p.bind(pred, *payload, site=site, payload_tree=payload_tree), []



check_p = core.Primitive("check")
check_p.multiple_results = True
check_p.def_impl(_check_impl)
check_p.def_abstract_eval(_check_abstract_eval)
batching.defrule(check_p, _check_batch)


def _check_lowering(ctx, *args, **params):
    raise ValueError("checkify.check cannot be compiled without functionalizing it first: "
                     "wrap the function in `checkify.checkify` (then `jit` it).")


mlir.register_lowering(check_p, _check_lowering)


# --------------------------------------------------------------------------------------------
# checkify: evaluate a jaxpr with an error state
# --------------------------------------------------------------------------------------------

_under_checkify = False
_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call"})
# JAX's primitives that can produce a NaN (by name; those jaxkit has are checked). Others only
# move values (a NaN they output was there before).
_NAN_PRIMITIVES = frozenset({
    "acos", "acosh", "add", "asin", "asinh", "atan2", "atan", "atanh", "bessel_i0e",
    "bessel_i1e", "cbrt", "conv_general_dilated", "cos", "cosh", "cumlogsumexp", "cummax",
    "cummin", "cumprod", "cumsum", "digamma", "div", "dot_general", "erf_inv", "erf", "erfc",
    "exp", "expm1", "fft", "igamma_grad_a", "igamma", "igammac", "integer_pow", "lgamma",
    "custom_linear_solve", "log1p", "log", "logistic", "mul", "pad", "pow", "psum", "reduce",
    "reduce_prod", "reduce_sum", "reduce_window", "reduce_window_sum",
    "regularized_incomplete_beta", "rem", "rng_uniform", "rsqrt", "sin", "sinh", "sqrt", "sub",
    "tan", "tanh", "scatter", "scatter-add", "scatter_add", "scatter_mul", "scatter_min",
    "scatter_max"})


def _contains_check(jaxpr: core.Jaxpr) -> bool:
    return any(e.primitive is check_p or any(_contains_check(j) for j in core.subjaxprs(e.params))
               for e in jaxpr.eqns)


def _nan_check(state: _ErrorState, eqn: core.JaxprEqn, outs) -> None:
    floats = [o for o in outs if jnp.issubdtype(core.get_aval(o).dtype, np.inexact)]
    if floats and eqn.primitive.name in _NAN_PRIMITIVES:
        any_nan = functools.reduce(jnp.logical_or, [jnp.any(jnp.isnan(o)) for o in floats])
        state.add(_Site(NaNError, f"nan generated by primitive: {eqn.primitive.name}."),
                  any_nan)


def _div_check(state: _ErrorState, eqn: core.JaxprEqn, args) -> None:
    # As JAX: any ``div`` (integer or floating) by zero; ``rem`` is not checked.
    if eqn.primitive.name == "div":
        state.add(_Site(DivisionByZeroError, "division by zero"), jnp.any(args[1] == 0))


def _index_check(state: _ErrorState, eqn: core.JaxprEqn, args) -> None:
    name = eqn.primitive.name
    if name in ("dynamic_slice", "dynamic_update_slice"):
        operand = args[0]
        shape = core.get_aval(operand).shape
        if name == "dynamic_slice":
            sizes, starts = eqn.params["slice_sizes"], args[1:]
        else:
            sizes, starts = core.get_aval(args[1]).shape, args[2:]
        for axis, (start, size) in enumerate(zip(starts, sizes)):
            _add_oob(state, shape, axis, start, shape[axis] - size)
    elif name in ("gather", "scatter", "scatter-add", "scatter_add", "scatter_mul",
                  "scatter_min", "scatter_max"):
        operand, indices = args[0], args[1]
        shape = core.get_aval(operand).shape
        dn = eqn.params["dimension_numbers"]
        if name == "gather":
            index_map, sizes = dn.start_index_map, eqn.params["slice_sizes"]
        else:
            index_map = dn.scatter_dims_to_operand_dims
            window = [d for d in range(len(shape)) if d not in dn.inserted_window_dims
                      and d not in dn.operand_batching_dims]
            update_shape = core.get_aval(args[2]).shape
            sizes = [1] * len(shape)
            for d, u in zip(window, dn.update_window_dims):
                sizes[d] = update_shape[u]
        for k, axis in enumerate(index_map):
            _add_oob(state, shape, axis, indices[..., k], shape[axis] - sizes[axis])


def _add_oob(state: _ErrorState, shape, axis: int, index, limit: int) -> None:
    bad = (index < 0) | (index > limit)
    first_bad = jnp.max(jnp.where(bad, index, jnp.iinfo(np.int32).min).astype(np.int32))
    msg = (f"out-of-bounds indexing for array of shape {tuple(shape)}: index {{0}} is out of "
           f"bounds for axis {axis} with size {shape[axis]}. ")
    state.add(_Site(OOBError, msg), jnp.any(bad), ((first_bad,), {}))


def _eval_checked(jaxpr: core.Jaxpr, consts, args, state: _ErrorState) -> list:
    env: dict = {}

    def read(v):
        return v.val if type(v) is core.Literal else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        if eqn.primitive is check_p:
            if FailedCheckError in state.enabled:
                pred, *payload = ins
                site, tree = eqn.params["site"], eqn.params["payload_tree"]
                state.add(site, ~jnp.all(pred), tree_util.tree_unflatten(tree, payload))
            continue
        rule = _construct_rules.get(eqn.primitive)
        if eqn.primitive.name in _CALLS and "jaxpr" in eqn.params:
            sub = eqn.params["jaxpr"]
            outs = _eval_checked(sub.jaxpr, sub.consts, ins, state)
        elif rule is not None:
            outs = rule(state, eqn, ins)
        else:
            if any(_contains_check(j) for j in core.subjaxprs(eqn.params)):
                raise NotImplementedError(
                    f"checkify: a `check` inside '{eqn.primitive.name}' is not functionalized "
                    "by jaxkit (it checks the bodies of cond, while_loop, scan, pmap and "
                    "checkpoint); check the primitive's outputs instead")
            if DivisionByZeroError in state.enabled:
                _div_check(state, eqn, ins)
            if OOBError in state.enabled:
                _index_check(state, eqn, ins)
            outs = eqn.primitive.bind(*ins, **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
            if NaNError in state.enabled:
                _nan_check(state, eqn, outs)
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


# --------------------------------------------------------------------------------------------
# Bodies of constructs: rebuilt with their error as extra outputs
# --------------------------------------------------------------------------------------------


def _layout_of(body: Callable[..., _ErrorState], in_avals) -> _Layout:
    """The layout of the error ``body`` (taking values of ``in_avals``) builds, found by
    tracing it once."""
    found = []

    def traced(*args):
        found.append(body(*args).layout())
        return []

    pe.trace_to_jaxpr(traced, list(in_avals))
    return found[0]


def _checked_cond(state: _ErrorState, eqn: core.JaxprEqn, ins: list) -> list:
    index, *ops = ins
    branches = eqn.params["branches"]

    def run(branch: ClosedJaxpr, args) -> tuple[list, _ErrorState]:
        sub = _ErrorState(state.enabled)
        return _eval_checked(branch.jaxpr, branch.consts, args, sub), sub

    layouts = [_layout_of(lambda *a, b=b: run(b, a)[1], b.in_avals) for b in branches]

    def branch_fun(i: int) -> Callable:
        def fun(*args):
            outs, sub = run(branches[i], args)
            return _padded(layouts, i, sub.flat()), outs
        return fun

    err, outs = lax.switch(index, [branch_fun(i) for i in range(len(branches))], *ops)
    state.absorb(functools.reduce(_Layout.__add__, layouts), err)
    return outs


def _checked_while(state: _ErrorState, eqn: core.JaxprEqn, ins: list) -> list:
    p = eqn.params
    cond_j, body_j = p["cond_jaxpr"], p["body_jaxpr"]
    cconsts, rest = ins[:p["cond_nconsts"]], ins[p["cond_nconsts"]:]
    bconsts, init = rest[:p["body_nconsts"]], rest[p["body_nconsts"]:]

    def test(carry, sub: _ErrorState):
        return _eval_checked(cond_j.jaxpr, cond_j.consts, [*cconsts, *carry], sub)[0]

    def step(carry) -> tuple[list, _ErrorState]:
        # A step, then the checks of the predicate on its result (as JAX: the next test).
        sub = _ErrorState(state.enabled)
        new = _eval_checked(body_j.jaxpr, body_j.consts, [*bconsts, *carry], sub)
        test(new, sub)
        return new, sub

    if cond_j.out_avals[0].shape:
        raise ValueError("Checkify does not support batched while-loops "
                         "(checkify-of-vmap-of-while). \nHint: if possible, move the vmap to "
                         "the outer level to get vmap-of-checkify-of-while.")
    test(init, state)  # the first test of the predicate
    layout = _layout_of(lambda *c: step(c)[1], body_j.in_avals[p["body_nconsts"]:])

    def body_fun(c):
        err, carry = c
        new, sub = step(carry)
        return _first_of(layout, err, sub.flat()), new

    err, outs = lax.while_loop(lambda c: test(c[1], _ErrorState(frozenset())), body_fun,
                               (layout.empty(), list(init)))
    state.absorb(layout, err)
    return outs


def _checked_scan(state: _ErrorState, eqn: core.JaxprEqn, ins: list) -> list:
    p = eqn.params
    body, n_consts, n_carry = p["jaxpr"], p["num_consts"], p["num_carry"]
    consts, init, xs = ins[:n_consts], ins[n_consts:n_consts + n_carry], ins[n_consts + n_carry:]

    def step(carry, x) -> tuple[list, list, _ErrorState]:
        sub = _ErrorState(state.enabled)
        outs = _eval_checked(body.jaxpr, body.consts, [*consts, *carry, *x], sub)
        return outs[:n_carry], outs[n_carry:], sub

    in_avals = body.in_avals[n_consts:]
    layout = _layout_of(lambda *a: step(a[:n_carry], a[n_carry:])[2], in_avals)

    def scan_body(c, x):
        err, carry = c
        new, ys, sub = step(carry, x)
        return (_first_of(layout, err, sub.flat()), new), ys

    (err, carry), ys = lax.scan(scan_body, (layout.empty(), list(init)), list(xs),
                                length=p["length"], reverse=p["reverse"], unroll=p["unroll"])
    state.absorb(layout, err)
    return [*carry, *ys]


def _checked_body(state: _ErrorState, closed: ClosedJaxpr) -> tuple[ClosedJaxpr, _Layout]:
    """``closed`` with its error as leading outputs (``[*error, *outs]``)."""
    layout_box = []

    def fun(*args):
        sub = _ErrorState(state.enabled)
        outs = _eval_checked(closed.jaxpr, closed.consts, args, sub)
        layout_box.append(sub.layout())
        return [*sub.flat(), *outs]

    jaxpr, consts = pe.trace_to_jaxpr(fun, closed.in_avals)
    return ClosedJaxpr(jaxpr, consts), layout_box[0]


def _checked_pmap(state: _ErrorState, eqn: core.JaxprEqn, ins: list) -> list:
    params = {k: v for k, v in eqn.params.items()
              if k not in ("jaxpr", "in_axes", "out_axes", "donated_invars")}
    with parallel.extend_axis_env(params["axis_name"], params["global_axis_size"]):
        body, layout = _checked_body(state, eqn.params["jaxpr"])
    n_err = len(body.out_avals) - len(eqn.params["out_axes"])
    outs = bind_pmap(body, ins, eqn.params["in_axes"],
                     [0] * n_err + list(eqn.params["out_axes"]), params)
    # One error per device, stacked along the mapped axis (``get`` names the index).
    state.absorb(layout, outs[:n_err], core.get_aval(outs[0]).shape[:1])
    return outs[n_err:]


def _checked_checkpoint(state: _ErrorState, eqn: core.JaxprEqn, ins: list) -> list:
    body, layout = _checked_body(state, eqn.params["jaxpr"])
    consts = list(body.consts)
    body = ClosedJaxpr(pe.convert_constvars_jaxpr(body.jaxpr), [])
    cse = eqn.params["prevent_cse"]
    if isinstance(cse, tuple):  # the body's new constants are not kept apart
        cse = (False,) * len(consts) + cse
    outs = checkpoint_p.bind(*consts, *ins, **dict(eqn.params, jaxpr=body, prevent_cse=cse))
    n_err = len(outs) - len(eqn.outvars)
    state.absorb(layout, outs[:n_err])
    return outs[n_err:]


_construct_rules: dict[core.Primitive, Callable] = {
    cond_p: _checked_cond, while_p: _checked_while, scan_p: _checked_scan,
    pmap_p: _checked_pmap, checkpoint_p: _checked_checkpoint,
}


def checkify(f: Callable, errors: frozenset = user_checks) -> Callable[..., tuple[Error, Any]]:
    """``checkify(f, errors)(*args)`` returns ``(error, f(*args))`` with the checks of the
    categories in ``errors`` (default: ``user_checks``) made functional (see the module)."""
    errors = frozenset(errors)
    unknown = [e for e in errors if not (isinstance(e, type) and issubclass(e, JaxException))]
    if unknown:
        raise TypeError(f"checkify: errors must be a set of checkify error categories "
                        f"(user_checks, nan_checks, ...), got {unknown}")

    @functools.wraps(f)
    def checked(*args, **kwargs):
        global _under_checkify
        flat, in_tree = tree_util.tree_flatten((args, kwargs))
        previous, _under_checkify = _under_checkify, True
        try:
            jaxpr, consts, out_tree = pe.trace_tree_to_jaxpr(
                lambda ak: f(*ak[0], **ak[1]), in_tree, [core.get_aval(x) for x in flat],
                pe.debug_info("checkify", f, ()))
        finally:
            _under_checkify = previous
        state = _ErrorState(errors)
        outs = _eval_checked(jaxpr, consts, flat, state)
        return state.error(), tree_util.tree_unflatten(out_tree, outs)

    return checked


def check_error(error: Error) -> None:
    """Raise if ``error`` holds a failure: eagerly now, or, when traced (inside ``checkify``),
    as checks that the enclosing ``checkify`` returns."""
    if not isinstance(error, Error):
        raise TypeError(f"check_error takes a checkify.Error, got {type(error).__name__}")
    if isinstance(core.current_trace(), core.EvalTrace):
        error.throw()
        return
    for i, (site, failed, payload) in enumerate(zip(error._sites, error._failed,
                                                  error._payloads)):
        first = error._code == i
        flat, tree = tree_util.tree_flatten(payload)
        check_p.bind(~(failed & first), *flat, site=site, payload_tree=tree)

