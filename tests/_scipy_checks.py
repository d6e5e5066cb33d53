"""Shared pieces of the ``jaxkit.scipy`` tests: the float64 fixture, a record type for
elementwise function tables, and the generic checks every record goes through.

A ``Fn`` record names the function (same name in ``jaxkit.scipy.<module>``, ``jax.scipy`` and,
unless ``ref`` says otherwise, ``scipy``), gives its argument samples (whole domain, tails
included), which arguments to differentiate, and tolerances. The checks: values against SciPy
in float64, values against JAX in float32 and float64, ``jit`` against eager, ``vmap`` against a
Python loop, and derivatives against finite differences in float64 (and against JAX's).
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import jaxkit

jax = pytest.importorskip("jax")


@dataclasses.dataclass
class Fn:
    name: str                       # attribute of the module (dotted for stats: "norm.pdf")
    args: Callable[[], tuple]       # float64 NumPy samples, broadcastable
    ref: Callable | None = None     # SciPy reference; None: scipy.<module>.<name>
    grad_args: tuple[int, ...] = (0,)  # arguments differentiated (empty: none)
    grad_points: Callable[[], tuple] | None = None  # where to check derivatives (default args)
    grad_order: int = 1
    rtol: float = 1e-10             # float64 vs SciPy
    atol: float = 0.0
    jax_rtol32: float = 2e-6        # vs JAX, float32
    jax_rtol64: float = 1e-12       # vs JAX, float64
    grad_tol: float = 1e-5
    kwargs: dict = dataclasses.field(default_factory=dict)
    float32: bool = True            # also check float32 against JAX
    int_args: tuple[int, ...] = ()  # arguments kept as integers

    def __repr__(self):
        return self.name


def resolve(module, name: str):
    obj = module
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def modules(sub: str):
    return (importlib.import_module(f"jaxkit.scipy.{sub}"),
            importlib.import_module(f"jax.scipy.{sub}"),
            importlib.import_module(f"scipy.{sub}"))


def enable_x64():
    """The body of each test module's ``x64`` fixture: float64 on in jaxkit and JAX."""
    jaxkit.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_x64", True)
    yield
    jaxkit.config.update("jax_enable_x64", False)
    jax.config.update("jax_enable_x64", False)


def cast(rec: Fn, args: tuple, dtype) -> tuple:
    return tuple(np.asarray(a) if i in rec.int_args else np.asarray(a, dtype)
                 for i, a in enumerate(args))


def assert_close(got, want, rtol, atol=0.0, label=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{label}: shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=label)


def leaves(x) -> list:
    return list(x) if isinstance(x, tuple) else [x]


def check_vs_scipy(ours, ref, rec: Fn):
    args = cast(rec, rec.args(), np.float64)
    got = ours(*args, **rec.kwargs)
    want = ref(*args, **rec.kwargs)
    for g, w in zip(leaves(got), leaves(want)):
        assert np.asarray(g).dtype == np.float64 or np.iscomplexobj(g)
        assert_close(g, w, rec.rtol, rec.atol, f"{rec.name} vs scipy")


def check_vs_jax(ours, theirs, rec: Fn, dtype):
    args = cast(rec, rec.args(), dtype)
    got, want = ours(*args, **rec.kwargs), theirs(*args, **rec.kwargs)
    rtol = rec.jax_rtol32 if dtype == np.float32 else rec.jax_rtol64
    for g, w in zip(leaves(got), leaves(want)):
        assert np.asarray(g).dtype == np.asarray(w).dtype, f"{rec.name}: dtype"
        # Ulp-level differences in values near 0 are scaled by the function's size.
        scale = np.nanmax(np.abs(np.where(np.isfinite(w), w, 0)), initial=1.0)
        assert_close(g, w, rtol, rtol * scale * 1e-3, f"{rec.name} vs jax {dtype.__name__}")


def check_jit(ours, rec: Fn):
    args = cast(rec, rec.args(), np.float32)
    eager = ours(*args, **rec.kwargs)
    jitted = jaxkit.jit(lambda *a: ours(*a, **rec.kwargs))(*args)
    for e, j in zip(leaves(eager), leaves(jitted)):
        assert_close(j, e, 1e-6, 1e-30, f"{rec.name} jit")


def check_vmap(ours, rec: Fn):
    args = np.broadcast_arrays(*cast(rec, rec.args(), np.float32))
    n = min(args[0].shape[0] if args[0].ndim else 1, 5)
    args = [np.atleast_1d(a)[:n] for a in args]
    got = jaxkit.vmap(lambda *a: ours(*a, **rec.kwargs))(*args)
    loop = [ours(*(a[i] for a in args), **rec.kwargs) for i in range(n)]
    for k, g in enumerate(leaves(got)):
        want = np.stack([np.asarray(leaves(o)[k]) for o in loop])
        assert_close(g, want, 1e-6, 1e-30, f"{rec.name} vmap")


def grad_inputs(rec: Fn) -> tuple:
    return cast(rec, (rec.grad_points or rec.args)(), np.float64)


def check_grads_fd(ours, rec: Fn, check_grads):
    args = grad_inputs(rec)

    def f(*diff):
        full = list(args)
        for i, d in zip(rec.grad_args, diff):
            full[i] = d
        out = ours(*full, **rec.kwargs)
        return out[0] if isinstance(out, tuple) else out

    check_grads(f, tuple(args[i] for i in rec.grad_args), order=rec.grad_order,
                modes=("fwd", "rev"), atol=rec.grad_tol, rtol=rec.grad_tol)


def elementwise_grad(fun, rec: Fn, args, grad_mod) -> list:
    """Gradients of ``sum(fun(*args))`` in each of ``rec.grad_args`` through ``grad_mod``."""
    def total(*diff):
        full = list(args)
        for i, d in zip(rec.grad_args, diff):
            full[i] = d
        out = fun(*full, **rec.kwargs)
        out = out[0] if isinstance(out, tuple) else out
        return out.sum()

    return list(grad_mod.grad(total, argnums=tuple(range(len(rec.grad_args))))(
        *(args[i] for i in rec.grad_args)))


def check_grads_vs_jax(ours, theirs, rec: Fn):
    args = grad_inputs(rec)
    got = elementwise_grad(ours, rec, args, jaxkit)
    want = elementwise_grad(theirs, rec, args, jax)
    for g, w in zip(got, want):
        assert_close(g, w, 1e-9, 1e-12, f"{rec.name} grad vs jax")


def run_generic(kind: str, rec: Fn, ours, theirs, ref, check_grads) -> Any:
    if kind == "scipy":
        check_vs_scipy(ours, ref, rec)
    elif kind == "jax32":
        check_vs_jax(ours, theirs, rec, np.float32)
    elif kind == "jax64":
        check_vs_jax(ours, theirs, rec, np.float64)
    elif kind == "jit":
        check_jit(ours, rec)
    elif kind == "vmap":
        check_vmap(ours, rec)
    elif kind == "grad_fd":
        check_grads_fd(ours, rec, check_grads)
    elif kind == "grad_jax":
        check_grads_vs_jax(ours, theirs, rec)
    else:
        raise ValueError(kind)


KINDS64 = ("scipy", "jax64", "grad_fd", "grad_jax")
KINDS32 = ("jax32", "jit", "vmap")
