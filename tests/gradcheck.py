"""Numerical gradient checks: jaxkit's ``jvp``/``vjp`` against central finite differences, to
any order, in forward and reverse mode. Shared by every test that differentiates something::

    from gradcheck import check_grads

    check_grads(f, (x, y), order=2)                       # fwd and rev, orders 1 and 2
    check_grads(f, (x,), order=1, modes=("rev",), atol=1e-2, rtol=1e-2, eps=1e-3)

What is checked (in one random direction per check, as ``jax.test_util.check_grads``):

* ``fwd``: ``jvp(f, args, t)`` returns ``f(*args)`` and a tangent equal to the central
  difference ``(f(args + eps t) - f(args - eps t)) / 2 eps``;
* ``rev``: ``vjp(f, *args)`` returns ``f(*args)`` and a pullback satisfying
  ``<J t, ct> == <t, vjp(ct)>`` (the numerical ``J t`` on the left);
* ``order=k``: the same checks applied to the derivative functions themselves (the JVP map
  ``(primals, tangents) -> (out, tangent_out)`` for fwd, ``args -> vjp(f, *args)(f(*args))``
  for rev), recursively, so ``order=2`` exercises the JVP of JVP rules and the JVP of
  transpose rules.

Arguments may be pytrees. Only inexact (float/complex) leaves are perturbed; integer and
boolean leaves stay fixed (they get ``float0`` tangents), and non-inexact outputs are not
compared. Tolerances and step sizes default per dtype (``default_tolerance``, ``default_eps``)
and may be given as a number or a ``{dtype: value}`` dict. A failure says which derivative
(e.g. "JVP of VJP"), which output leaf, and by how much the values differ.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import ml_dtypes
import numpy as np

from jaxkit import lax, tree_util
from jaxkit.api import jvp, vjp
from jaxkit.dtypes import float0

__all__ = ["check_grads", "check_jvp", "check_vjp", "default_eps", "default_tolerance",
           "numerical_jvp"]

# Per-dtype tolerance (used as both atol and rtol) and finite-difference step. The steps
# balance truncation error (~eps^2) against rounding error (~unit roundoff / eps).
default_tolerance: dict[np.dtype, float] = {
    np.dtype(ml_dtypes.bfloat16): 1e-1,
    np.dtype(np.float16): 5e-2,
    np.dtype(np.float32): 5e-3,
    np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 5e-3,
    np.dtype(np.complex128): 1e-5,
}
default_eps: dict[np.dtype, float] = {
    np.dtype(ml_dtypes.bfloat16): 1e-1,
    np.dtype(np.float16): 1e-2,
    np.dtype(np.float32): 1e-3,
    np.dtype(np.float64): 1e-6,
    np.dtype(np.complex64): 1e-3,
    np.dtype(np.complex128): 1e-6,
}

Tol = float | dict | None


def _dtype(x) -> np.dtype:
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    if isinstance(x, int):
        return np.dtype(np.int32)
    if isinstance(x, float):
        return np.dtype(np.float32)
    if isinstance(x, complex):
        return np.dtype(np.complex64)
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def _inexact(x) -> bool:
    return np.issubdtype(_dtype(x), np.inexact) and _dtype(x) != float0


def _lookup(table: dict, value: Tol, dtype: np.dtype) -> float:
    if value is not None and not isinstance(value, dict):
        return float(value)
    merged = dict(table)
    if isinstance(value, dict):
        merged.update({np.dtype(k): v for k, v in value.items()})
    return merged.get(np.dtype(dtype), merged[np.dtype(np.float32)])


def _widest_inexact(tree) -> np.dtype:
    dts = [_dtype(x) for x in tree_util.tree_leaves(tree) if _inexact(x)]
    return max(dts, key=lambda d: (d.itemsize, d.kind == "c")) if dts else np.dtype(np.float32)


# --------------------------------------------------------------------------------------------
# NumPy arithmetic on pytrees (the reference never goes through jaxkit's AD)
# --------------------------------------------------------------------------------------------


def _rand_like(rng: np.random.RandomState, x):
    if not _inexact(x):
        return np.zeros(np.shape(x), float0)
    dt = _dtype(x)
    r = rng.standard_normal(np.shape(x))
    if np.issubdtype(dt, np.complexfloating):
        r = r + 1j * rng.standard_normal(np.shape(x))
    out = np.asarray(r).astype(dt)
    return out.item() if isinstance(x, (float, complex)) else out


def _axpy(a: float, t, x):
    """``x + a t`` in x's dtype (Python scalars stay Python scalars); fixed leaves unchanged."""
    if not _inexact(x):
        return x
    out = (np.asarray(x, np.complex128 if np.iscomplexobj(x) else np.float64)
           + a * np.asarray(t)).astype(_dtype(x))
    return out.item() if isinstance(x, (float, complex)) else out


class _NotCompared:
    """Stands for a non-inexact output leaf, which has no derivative to compare."""

    def __repr__(self):
        return "<not compared>"


NOT_COMPARED = _NotCompared()


def numerical_jvp(f: Callable, primals: Sequence, tangents: Sequence, eps: float):
    """The central difference ``(f(p + eps t) - f(p - eps t)) / (2 eps)`` on each inexact
    output leaf (computed in float64/complex128); other leaves become ``NOT_COMPARED``."""
    plus = f(*tree_util.tree_map(partial(_axpy, eps), tangents, primals))
    minus = f(*tree_util.tree_map(partial(_axpy, -eps), tangents, primals))

    def diff(p, m):
        if not _inexact(p):
            return NOT_COMPARED
        p, m = np.asarray(p), np.asarray(m)
        wide = np.complex128 if np.iscomplexobj(p) else np.float64
        with np.errstate(invalid="ignore"):
            d = np.where(p == m, 0, p.astype(wide) - m.astype(wide))
        return d / (2 * eps)

    return tree_util.tree_map(diff, plus, minus)


def _conj(x):
    return np.conj(x) if _inexact(x) and np.iscomplexobj(x) else x


def _inner(xs, ys) -> float:
    """``Re <xs, ys>`` (conjugating ``xs``) over the inexact leaves."""
    total = 0.0
    for x, y in zip(tree_util.tree_leaves(xs), tree_util.tree_leaves(ys)):
        if x is NOT_COMPARED or y is NOT_COMPARED or not _inexact(x) or not _inexact(y):
            continue
        x = np.asarray(x, np.complex128).ravel()
        y = np.asarray(y, np.complex128).ravel()
        total += float(np.real(np.vdot(x, y)))
    return total


def _assert_close(got, expected, atol: Tol, rtol: Tol, what: str) -> None:
    g_leaves, g_tree = tree_util.tree_flatten(got)
    e_leaves, e_tree = tree_util.tree_flatten(expected)
    assert g_tree == e_tree, f"{what}: structure {g_tree} differs from the reference's {e_tree}"
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(got)[0]]
    for path, g, e in zip(paths, g_leaves, e_leaves):
        if e is NOT_COMPARED or not _inexact(g):
            continue
        dt = _dtype(g)
        a, r = _lookup(default_tolerance, atol, dt), _lookup(default_tolerance, rtol, dt)
        g_arr, e_arr = np.asarray(g), np.asarray(e)
        assert g_arr.shape == e_arr.shape, \
            f"{what}{path}: shape {g_arr.shape} differs from the reference's {e_arr.shape}"
        np.testing.assert_allclose(
            g_arr.astype(e_arr.dtype), e_arr, atol=a, rtol=r, equal_nan=True,
            err_msg=f"{what}{path} (dtype {dt.name}, atol={a}, rtol={r})")


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------


def check_jvp(f: Callable, args: Sequence, *, atol: Tol = None, rtol: Tol = None,
              eps: Tol = None, err_msg: str = "JVP", seed: int = 0) -> None:
    """``jvp(f, args, t)`` against ``f(*args)`` and the central difference along ``t``."""
    args = tuple(args)
    rng = np.random.RandomState(seed)
    tangents = tree_util.tree_map(partial(_rand_like, rng), args)
    out, t_out = jvp(f, args, tangents)
    _assert_close(out, f(*args), atol, rtol, f"{err_msg}: primal output")
    step = _lookup(default_eps, eps, _widest_inexact(args))
    _assert_close(t_out, numerical_jvp(f, args, tangents, step), atol, rtol,
                  f"{err_msg}: tangent output")


def check_vjp(f: Callable, args: Sequence, *, atol: Tol = None, rtol: Tol = None,
              eps: Tol = None, err_msg: str = "VJP", seed: int = 0) -> None:
    """``vjp(f, *args)`` against ``f(*args)``, and ``<J t, ct> == <t, vjp(ct)>`` with ``J t``
    computed by central differences (conjugating cotangents of complex values as JAX does)."""
    args = tuple(args)
    rng = np.random.RandomState(seed)
    out, pullback = vjp(f, *args)
    _assert_close(out, f(*args), atol, rtol, f"{err_msg}: primal output")
    tangents = tree_util.tree_map(partial(_rand_like, rng), args)
    cts = tree_util.tree_map(partial(_rand_like, rng), out)
    step = _lookup(default_eps, eps, _widest_inexact(args))
    jt = numerical_jvp(f, args, tangents, step)
    # JAX's convention for complex values: the pullback of conj(ct), conjugated, pairs with
    # the tangent as <t, conj(vjp(conj(ct)))> = <J t, ct> (real parts of the inner products).
    cts_in = tree_util.tree_map(_conj, pullback(tree_util.tree_map(_conj, cts)))
    expected = _inner(jt, cts)
    got = _inner(tangents, cts_in)
    dt = _widest_inexact(out)
    a, r = _lookup(default_tolerance, atol, dt), _lookup(default_tolerance, rtol, dt)
    # The inner products sum many terms: scale the absolute tolerance by their magnitude.
    def magnitude(tree):
        return tree_util.tree_map(lambda x: np.abs(x) if _inexact(x) else x, tree)

    scale = max(1.0, _inner(magnitude(tangents), magnitude(cts_in)))
    assert abs(got - expected) <= a * scale + r * abs(expected), (
        f"{err_msg}: <t, vjp(ct)> = {got!r} but <J t, ct> = {expected!r} by finite "
        f"differences (difference {abs(got - expected):.3g}, atol={a}*{scale:.3g}, "
        f"rtol={r})")


def check_grads(f: Callable, args: Sequence, order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: Tol = None, rtol: Tol = None, eps: Tol = None) -> None:
    """Check the derivatives of ``f`` at ``args`` up to ``order`` in the given ``modes``
    (``"fwd"``: jvp, ``"rev"``: vjp) against finite differences. Raises AssertionError."""
    for m in modes:
        if m not in ("fwd", "rev"):
            raise ValueError(f"unknown mode {m!r}: use 'fwd' and/or 'rev'")
    kw = {"atol": atol, "rtol": rtol, "eps": eps}

    def check(fun: Callable, fun_args: tuple, k: int, prefix: str) -> None:
        if "fwd" in modes:
            msg = f"JVP of {prefix}" if prefix else "JVP"
            check_jvp(fun, fun_args, err_msg=msg, **kw)
            if k > 1:
                tangents = tree_util.tree_map(
                    lambda x: x if _inexact(x) else np.zeros(np.shape(x), float0), fun_args)
                check(_jvp_map(fun), (fun_args, tangents), k - 1, msg)
        if "rev" in modes:
            msg = f"VJP of {prefix}" if prefix else "VJP"
            check_vjp(fun, fun_args, err_msg=msg, **kw)
            if k > 1:
                check(_vjp_map(fun), fun_args, k - 1, msg)

    check(f, tuple(args), order, "")


def _jvp_map(f: Callable) -> Callable:
    """``(primals, tangents) -> (f(*primals), J tangents)``: linear in the tangents, so its
    own derivatives exercise the JVP rules' derivatives."""
    return lambda primals, tangents: jvp(f, tuple(primals), tuple(tangents))


def _vjp_map(f: Callable) -> Callable:
    """``args -> vjp(f, *args)(f(*args))`` (the cotangent depends on the point too, as in
    JAX's check_grads), so its derivatives exercise the JVP of transpose rules."""
    def f_vjp(*args):
        out, pullback = vjp(f, *args)
        return pullback(tree_util.tree_map(_conj_ct, out))
    return f_vjp


def _conj_ct(x) -> Any:
    """The cotangent used by ``_vjp_map`` for an output leaf: the output itself (conjugated
    if complex); ``float0`` zeros for non-inexact outputs."""
    if not _inexact(x):
        return np.zeros(np.shape(x), float0)
    return lax.conj(x) if np.issubdtype(_dtype(x), np.complexfloating) else x
