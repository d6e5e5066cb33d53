"""``jax.experimental.checkify``: run-time checks in jitted code, returned as values.

``checkify(f, errors)(*args)`` traces ``f`` to a jaxpr and evaluates it with an error state
threaded through: each ``check`` and, for the enabled automatic categories, each NaN-producing
float primitive, integer division and out-of-bounds index updates the state functionally. So it
works under ``jit``, and ``f`` returns ``(error, out)``; ``error.get()`` is the message of the
first check that failed (``None`` if none), ``error.throw()`` raises it.

The error value is a pytree: one "failed" flag and the formatting arguments per check site, and
the index of the site that failed first. Which sites exist, and their messages, are static.

Jitted calls inside ``f`` are checked through (their jaxprs are evaluated inline). The bodies of
``cond``/``while_loop``/``scan`` are run as they are: a NaN that reaches the outputs of such a
construct is reported at the construct, and a ``check`` inside one raises
``NotImplementedError``.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxkit import core, dtypes, tree_util
from jaxkit import numpy as jnp
from jaxkit.interpreters import batching, mlir
from jaxkit.interpreters import partial_eval as pe
from jaxkit.runtime.array import Array

__all__ = ["DivisionByZeroError", "Error", "ErrorCategory", "FailedCheckError", "JaxException",
           "JaxRuntimeError", "NaNError", "OOBError", "all_checks", "automatic_checks", "check",
           "check_error", "checkify", "debug_check", "div_checks", "float_checks",
           "index_checks", "nan_checks", "user_checks"]


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


@dataclasses.dataclass(frozen=True)
class _Site:
    """One place that can fail: its category, message template and where it is."""

    category: type
    message: str
    location: str = ""

    def format(self, payload) -> str:
        args, kwargs = payload
        args = [np.asarray(a) for a in args]
        kwargs = {k: np.asarray(v) for k, v in kwargs.items()}
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

    def _first(self) -> tuple[int, tuple | None]:
        """The failed site's code and, for an error batched by ``vmap``, the batch index."""
        codes = np.asarray(self._code)
        if codes.ndim == 0:
            return int(codes), None
        failing = np.argwhere(codes >= 0)
        if len(failing) == 0:
            return -1, None
        index = tuple(int(i) for i in failing[0])
        return int(codes[index]), index

    def get(self) -> str | None:
        """The message of the first failed check, or None when every check passed."""
        code, index = self._first()
        if code < 0:
            return None
        payload = self._payloads[code]
        if index is None:
            return self._sites[code].format(payload)
        payload = tree_util.tree_map(lambda a: np.asarray(a)[index], payload)
        where = index[0] if len(index) == 1 else index
        return f"at mapped index {where}: {self._sites[code].format(payload)}"

    def get_exception(self) -> JaxException | None:
        code, _ = self._first()
        return None if code < 0 else self._sites[code].category()

    def throw(self) -> None:
        """Raise ``JaxRuntimeError`` with the message of the first failed check, if any."""
        msg = self.get()
        if msg is not None:
            raise JaxRuntimeError(msg)

    def __str__(self):
        return f"Error({self.get()})"

    __repr__ = __str__


def _error_flatten(err: Error):
    return (err._failed, err._payloads, err._code), err._sites


def _error_unflatten(sites, children):
    failed, payloads, code = children
    return Error(sites, tuple(failed), tuple(payloads), code)


tree_util.register_pytree_node(Error, _error_flatten, _error_unflatten)


class _ErrorState:
    """The error being built while a jaxpr is evaluated under ``checkify``."""

    def __init__(self, enabled: frozenset):
        self.enabled = enabled
        self.sites: list[_Site] = []
        self.failed: list = []
        self.payloads: list = []
        self.code = jnp.int32(-1)

    def add(self, site: _Site, failed, payload=((), {})) -> None:
        failed = jnp.asarray(failed, dtype=bool)
        self.code = jnp.where((self.code < 0) & failed, jnp.int32(len(self.sites)), self.code)
        self.sites.append(site)
        self.failed.append(failed)
        self.payloads.append(payload)

    def error(self) -> Error:
        return Error(tuple(self.sites), tuple(self.failed), tuple(self.payloads), self.code)


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
    pred, *payload = args
    pred_dim, *payload_dims = dims
    if pred_dim is not None:
        pred = jnp.all(pred, axis=pred_dim)
    payload = [jnp.take(p, 0, axis=d) if d is not None else p
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
_INT_DIVISIONS = frozenset({"div", "rem"})
_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call"})


def _contains_check(jaxpr: core.Jaxpr) -> bool:
    return any(e.primitive is check_p or any(_contains_check(j) for j in core.subjaxprs(e.params))
               for e in jaxpr.eqns)


def _nan_check(state: _ErrorState, eqn: core.JaxprEqn, outs) -> None:
    for out in outs:
        if dtypes.issubdtype(core.get_aval(out).dtype, np.inexact):
            state.add(_Site(NaNError, f"nan generated by primitive: {eqn.primitive.name}."),
                      jnp.any(jnp.isnan(out)))


def _div_check(state: _ErrorState, eqn: core.JaxprEqn, args) -> None:
    if eqn.primitive.name in _INT_DIVISIONS:
        divisor = args[1]
        if dtypes.issubdtype(core.get_aval(divisor).dtype, np.integer):
            state.add(_Site(DivisionByZeroError, "division by zero"), jnp.any(divisor == 0))


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
        if eqn.primitive.name in _CALLS and "jaxpr" in eqn.params:
            sub = eqn.params["jaxpr"]
            outs = _eval_checked(sub.jaxpr, sub.consts, ins, state)
        else:
            if any(_contains_check(j) for j in core.subjaxprs(eqn.params)):
                raise NotImplementedError(
                    f"checkify: a `check` inside '{eqn.primitive.name}' (a control-flow body) "
                    "is not functionalized by jaxkit; check the construct's outputs instead")
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

