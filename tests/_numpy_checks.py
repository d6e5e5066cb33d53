"""Helpers of the ``jaxkit.numpy`` tests: run a function on jaxkit and on the JAX oracle with
the same inputs and compare values, shapes, dtypes and weak types (and ``jit`` vs eager)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp

jax = pytest.importorskip("jax")
jjnp = jax.numpy


class W:
    """A weakly typed scalar array input (``jnp.asarray(v)`` of a Python scalar)."""

    def __init__(self, v):
        self.v = v

    def __repr__(self):
        return f"W({self.v!r})"


def to_kit(x: Any) -> Any:
    if isinstance(x, W):
        return jnp.asarray(x.v)
    if isinstance(x, np.ndarray):
        return jnp.asarray(x)
    if isinstance(x, list):
        return [to_kit(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_kit(v) for v in x)
    return x


def to_jax(x: Any) -> Any:
    if isinstance(x, W):
        return jjnp.asarray(x.v)
    if isinstance(x, np.ndarray):
        return jjnp.asarray(x)
    if isinstance(x, list):
        return [to_jax(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_jax(v) for v in x)
    return x


def _leaves(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


def assert_same(got: Any, want: Any, rtol: float = 1e-5, atol: float = 1e-6,
                check_weak: bool = True, what: str = "") -> None:
    """Same structure, shapes, dtypes, weak types and (close) values."""
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w), f"{what}: {len(g)} outputs, expected {len(w)}"
    for a, b in zip(g, w):
        if isinstance(b, (bool, int, float, complex, np.generic)) and not hasattr(b, "aval"):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)
            continue
        assert isinstance(a, jaxkit.Array), f"{what}: got {type(a)}, expected a jaxkit Array"
        assert a.shape == b.shape, f"{what}: shape {a.shape}, expected {b.shape}"
        assert a.dtype == b.dtype, f"{what}: dtype {a.dtype}, expected {b.dtype}"
        if check_weak:
            assert a.weak_type == b.weak_type, \
                f"{what}: weak_type {a.weak_type}, expected {b.weak_type}"
        av, bv = np.asarray(a), np.asarray(b)
        if av.dtype.kind in "biu" or av.dtype == bool:
            np.testing.assert_array_equal(av, bv, err_msg=what)
        else:
            np.testing.assert_allclose(av.astype(np.complex128 if av.dtype.kind == "c"
                                                 else np.float64),
                                       bv.astype(np.complex128 if bv.dtype.kind == "c"
                                                 else np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def check(name: str, *args: Any, kw: dict | None = None, rtol: float = 1e-5, atol: float = 1e-6,
          jit: bool = False, kit_fn: Any = None, jax_fn: Any = None,
          check_weak: bool = True) -> Any:
    """Compare ``jnp.<name>(*args, **kw)`` with JAX's; optionally also under ``jit``."""
    kw = kw or {}
    kit_fn = kit_fn or getattr(jnp, name)
    jax_fn = jax_fn or getattr(jjnp, name)
    want = jax_fn(*to_jax(args), **kw)
    got = kit_fn(*to_kit(args), **kw)
    what = f"{name}{args!r}"
    assert_same(got, want, rtol, atol, check_weak, what)
    if jit:
        # Arrays are traced; Python scalars, shapes and the like stay static (closed over).
        traced = [i for i, a in enumerate(args) if isinstance(a, (np.ndarray, W))]
        kit_args = to_kit(args)

        def fun(*dyn):
            full = list(kit_args)
            for i, d in zip(traced, dyn):
                full[i] = d
            return kit_fn(*full, **kw)

        got_jit = jaxkit.jit(fun)(*[kit_args[i] for i in traced])
        assert_same(got_jit, want, rtol, atol, check_weak, what + " under jit")
    return got


def rng_array(shape: tuple[int, ...], dtype: Any, seed: int = 0, low: float = -3,
              high: float = 3) -> np.ndarray:
    """Deterministic test data of ``dtype`` in ``[low, high)`` (booleans: random bits)."""
    r = np.random.RandomState(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return r.rand(*shape) > 0.5
    if dt.kind in "iu":
        lo = max(int(low), int(np.iinfo(dt).min))
        return r.randint(lo, int(high) + 1, size=shape).astype(dt)
    if dt.kind == "c":
        return (r.uniform(low, high, shape) + 1j * r.uniform(low, high, shape)).astype(dt)
    return r.uniform(low, high, shape).astype(dt)
