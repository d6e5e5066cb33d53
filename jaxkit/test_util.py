"""``jax.test_util``: check a function's derivatives against finite differences."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jaxkit import tree_util
from jaxkit.api import jvp, vjp

__all__ = ["check_grads", "check_jvp", "check_vjp"]

_EPS = 1e-4


def _default_tol(dtype) -> float:
    dt = np.dtype(dtype)
    if dt in (np.float64, np.complex128):
        return 1e-5
    if dt in (np.float32, np.complex64):
        return 2e-2
    return 1e-1


def _tol(given, leaves) -> float:
    if given is not None:
        return given
    return max([_default_tol(np.asarray(x).dtype) for x in leaves] or [1e-5])


def _rand_like(rng: np.random.RandomState, x):
    x = np.asarray(x)
    out = np.asarray(rng.randn(*x.shape))
    if np.iscomplexobj(x):
        out = out + 1j * np.asarray(rng.randn(*x.shape))
    return out.astype(x.dtype) if np.issubdtype(x.dtype, np.inexact) else out


def _add(xs, ys, scale=1.0):
    def add(x, y):
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.inexact):
            return x
        return (x + scale * np.asarray(y, x.dtype)).astype(x.dtype)
    return tree_util.tree_map(add, xs, ys)


def _inner(xs, ys) -> complex:
    return sum(np.vdot(np.asarray(y), np.asarray(x)) for x, y in
               zip(tree_util.tree_leaves(xs), tree_util.tree_leaves(ys)))


def _check_close(got, expected, atol, rtol, what: str) -> None:
    for g, e in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(expected)):
        g = np.asarray(g, np.complex128 if np.iscomplexobj(g) else np.float64)
        e = np.asarray(e, np.complex128 if np.iscomplexobj(e) else np.float64)
        np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, err_msg=what)


def numerical_jvp(f: Callable, primals: Sequence, tangents: Sequence, eps: float = _EPS):
    """Central difference ``(f(x + eps t) - f(x - eps t)) / 2 eps``."""
    plus = f(*_add(primals, tangents, eps))
    minus = f(*_add(primals, tangents, -eps))
    return tree_util.tree_map(
        lambda a, b: (np.asarray(a, np.float64 if not np.iscomplexobj(a) else np.complex128)
                      - np.asarray(b)) / (2 * eps), plus, minus)


def check_jvp(f: Callable, f_jvp: Callable, args: Sequence, atol=None, rtol=None,
              eps: float = _EPS, err_msg: str = "") -> None:
    """``f_jvp(args, tangents)`` against ``f`` and its finite differences."""
    rng = np.random.RandomState(0)
    tangent = tree_util.tree_map(lambda x: _rand_like(rng, x), tuple(args))
    v_out, t_out = f_jvp(tuple(args), tangent)
    leaves = tree_util.tree_leaves(args)
    atol, rtol = _tol(atol, leaves), _tol(rtol, leaves)
    _check_close(v_out, f(*args), atol, rtol, f"{err_msg} primal")
    _check_close(t_out, numerical_jvp(f, args, tangent, eps), atol, rtol,
                 f"{err_msg} tangent")


def check_vjp(f: Callable, f_vjp: Callable, args: Sequence, atol=None, rtol=None,
              eps: float = _EPS, err_msg: str = "") -> None:
    """``f_vjp(*args) -> (out, vjp_fun)`` checked by the inner products
    ``<t, vjp(c)> == <jvp(t), c>`` with finite-difference JVPs."""
    rng = np.random.RandomState(0)
    v_out, vjp_fun = f_vjp(*args)
    leaves = tree_util.tree_leaves(args)
    atol, rtol = _tol(atol, leaves), _tol(rtol, leaves)
    _check_close(v_out, f(*args), atol, rtol, f"{err_msg} primal")
    tangent = tree_util.tree_map(lambda x: _rand_like(rng, x), tuple(args))
    tangent_out = numerical_jvp(f, args, tangent, eps)
    cotangent = tree_util.tree_map(lambda x: _rand_like(rng, x), v_out)
    cotangent_out = vjp_fun(cotangent)
    ip = _inner(tangent, cotangent_out)
    ip_expected = _inner(tangent_out, cotangent)
    _check_close(ip, ip_expected, atol, rtol, f"{err_msg} VJP inner product")


def check_grads(f: Callable, args: Sequence, order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol=None, rtol=None, eps: float = _EPS) -> None:
    """Check the derivatives of ``f`` at ``args`` up to ``order`` in forward ("fwd") and/or
    reverse ("rev") mode, and their compositions, against finite differences. Raises
    ``AssertionError`` on a mismatch."""
    args = tuple(args)
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"Unrecognized mode: {mode}")

    def check(fun: Callable, k: int, err: str) -> None:
        if "fwd" in modes:
            check_jvp(fun, lambda p, t: jvp(fun, p, t), args, atol, rtol, eps, err + " fwd")
            if k > 1:
                t_fixed = _fixed_tangent(args)
                check(lambda *a: jvp(fun, a, t_fixed)[1], k - 1, err + " fwd")
        if "rev" in modes:
            check_vjp(fun, lambda *a: vjp(fun, *a), args, atol, rtol, eps, err + " rev")
            if k > 1:
                c_fixed = _fixed_cotangent(fun(*args))

                def vjp_of(*a):
                    return vjp(fun, *a)[1](c_fixed)
                check(vjp_of, k - 1, err + " rev")

    check(f, order, f"order {order}")


def _fixed_tangent(args: Any):
    rng = np.random.RandomState(1)
    return tree_util.tree_map(lambda x: _rand_like(rng, x), tuple(args))


def _fixed_cotangent(out: Any):
    rng = np.random.RandomState(2)
    return tree_util.tree_map(lambda x: _rand_like(rng, x), out)


