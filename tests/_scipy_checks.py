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
    int_args: tuple[int, ...] = ()  # arguments kept as integers (static under jit and vmap)
    # float32 samples, where the float64 ones include points float32 cannot resolve (a pole
    # whose distance rounds to one ulp): None takes ``args``
    args32: Callable[[], tuple] | None = None
    # where JAX's derivative is a valid oracle (None: grad_points); where JAX has none, say why
    jax_grad_points: Callable[[], tuple] | None = None
    no_jax_grad: str = ""
    # why JAX's float64 program is not compiled for this record (pathologically slow): the
    # ``jax64`` check then takes SciPy as the float64 oracle (dtype float64, values at the
    # tighter of ``rtol`` and ``jax_rtol64``); JAX stays the oracle in float32 (``jax32``)
    jax64_slow: str = ""

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


def kinds_for(rec: Fn, kinds: tuple[str, ...]) -> list[str]:
    """The generic checks that apply to ``rec``: none of the derivative checks for a piecewise
    constant function, no comparison with JAX's derivative where JAX has none."""
    return [k for k in kinds
            if not (k.startswith("grad") and not rec.grad_args)
            and not (k == "grad_jax" and rec.no_jax_grad)]


def params(records: list[Fn], kinds: tuple[str, ...]) -> list:
    """``pytest.param(rec, kind)`` for every applicable pair, with ``name-kind`` ids."""
    return [pytest.param(rec, kind, id=f"{rec.name}-{kind}")
            for rec in records for kind in kinds_for(rec, kinds)]


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


def check_vs_jax(ours, theirs, rec: Fn, dtype, args=None):
    args = cast(rec, rec.args(), dtype) if args is None else args
    got, want = ours(*args, **rec.kwargs), theirs(*args, **rec.kwargs)
    rtol = rec.jax_rtol32 if dtype == np.float32 else rec.jax_rtol64
    for g, w in zip(leaves(got), leaves(want)):
        assert np.asarray(g).dtype == np.asarray(w).dtype, f"{rec.name}: dtype"
        # Ulp-level differences in values near 0 are scaled by the function's size.
        scale = np.nanmax(np.abs(np.where(np.isfinite(w), w, 0)), initial=1.0)
        assert_close(g, w, rtol, rtol * scale * 1e-3, f"{rec.name} vs jax {dtype.__name__}")


# jit vs eager, vmap vs a loop, float32: different XLA programs fuse and reorder differently
# (and eager ops see no constant folding), so they agree to a few ulps, not bit for bit.
SAME_PROGRAM_RTOL32 = 1e-5


def args32(rec: Fn) -> tuple:
    return cast(rec, (rec.args32 or rec.args)(), np.float32)


def with_static(rec: Fn, args: tuple, fun):
    """``fun`` of the array arguments only, the integer ones (static, like JAX's concrete
    ``d`` of multigammaln) bound in; and those array arguments."""
    dynamic = [i for i in range(len(args)) if i not in rec.int_args]

    def call(*dyn):
        full = list(args)
        for i, d in zip(dynamic, dyn):
            full[i] = d
        return fun(*full, **rec.kwargs)

    return call, [args[i] for i in dynamic]


def check_jit(ours, rec: Fn):
    args = args32(rec)
    eager = ours(*args, **rec.kwargs)
    call, dyn = with_static(rec, args, ours)
    jitted = jaxkit.jit(call)(*dyn)
    for e, j in zip(leaves(eager), leaves(jitted)):
        assert_close(j, e, SAME_PROGRAM_RTOL32, 1e-30, f"{rec.name} jit")


def check_vmap(ours, rec: Fn):
    args = list(args32(rec))
    static = {i: args[i] for i in rec.int_args}
    arrays = np.broadcast_arrays(*(a for i, a in enumerate(args) if i not in static))
    n = min(arrays[0].shape[0] if arrays[0].ndim else 1, 5)
    arrays = iter([np.atleast_1d(a)[:n] for a in arrays])
    args = tuple(static[i] if i in static else next(arrays) for i in range(len(args)))
    call, dyn = with_static(rec, args, ours)
    got = jaxkit.vmap(call)(*dyn)
    loop = [call(*(a[i] for a in dyn)) for i in range(n)]
    for k, g in enumerate(leaves(got)):
        want = np.stack([np.asarray(leaves(o)[k]) for o in loop])
        assert_close(g, want, SAME_PROGRAM_RTOL32, 1e-30, f"{rec.name} vmap")


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
    args = cast(rec, (rec.jax_grad_points or rec.grad_points or rec.args)(), np.float64)
    got = elementwise_grad(ours, rec, args, jaxkit)
    want = elementwise_grad(theirs, rec, args, jax)
    for g, w in zip(got, want):
        assert_close(g, w, 1e-9, 1e-12, f"{rec.name} grad vs jax")


def run_generic(kind: str, rec: Fn, ours, theirs, ref, check_grads) -> Any:
    if kind == "scipy":
        check_vs_scipy(ours, ref, rec)
    elif kind == "jax32":
        check_vs_jax(ours, theirs, rec, np.float32, args32(rec))
    elif kind == "jax64" and rec.jax64_slow:
        check_vs_scipy(ours, ref, dataclasses.replace(rec, rtol=min(rec.rtol, rec.jax_rtol64)))
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
