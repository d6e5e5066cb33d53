"""jaxkit.numpy reductions, cumulative reductions and order statistics against the JAX oracle
(values, dtype, weak type) and NumPy, with axis / keepdims / where / initial / dtype."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from _numpy_checks import W, check, jax, rng_array

import jaxkit
import jaxkit.numpy as jnp

F32 = rng_array((3, 4), np.float32)
F3 = rng_array((2, 3, 4), np.float32, seed=1)
I32 = rng_array((3, 4), np.int32, seed=2)
I8 = rng_array((3, 4), np.int8, seed=3)
U8 = rng_array((3, 4), np.uint8, seed=4, low=0, high=9)
B = rng_array((3, 4), bool, seed=5)
F16 = rng_array((3, 4), np.float16, seed=6)
C64 = rng_array((3, 4), np.complex64, seed=7)
NAN = F32.copy()
NAN[0, 1] = np.nan
NAN[2, :] = np.nan

REDUCTIONS = ["sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std", "ptp", "all",
              "any", "count_nonzero"]
ARG_REDUCTIONS = ["argmax", "argmin"]
NAN_REDUCTIONS = ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd",
                  "nanargmax", "nanargmin", "nanmedian"]
CUMULATIVE = ["cumsum", "cumprod", "nancumsum", "nancumprod"]

_DTYPE_INPUTS = {"f32": F32, "i32": I32, "i8": I8, "u8": U8, "bool": B, "f16": F16,
                 "c64": C64}


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dt", list(_DTYPE_INPUTS))
def test_reduction_dtypes(name, dt):
    if dt == "bool" and name == "ptp":
        with pytest.raises(TypeError):
            jnp.ptp(jnp.asarray(B))
        return
    check(name, _DTYPE_INPUTS[dt], rtol=2e-3 if dt == "f16" else 2e-5, jit=(dt == "f32"))


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_axes_keepdims(name):
    check(name, F3, kw={"axis": 1}, rtol=2e-5)
    check(name, F3, kw={"axis": (0, 2), "keepdims": True}, rtol=2e-5, jit=True)
    check(name, F3, kw={"axis": -1, "keepdims": True}, rtol=2e-5)
    check(name, W(2.0), rtol=2e-5)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "all", "any", "var",
                                  "std"])
def test_reduction_where(name):
    kw = {"where": B}
    if name in ("max", "min"):
        kw["initial"] = 0.0
    check(name, F32, kw=kw, rtol=2e-5, jit=True)


def test_reduction_initial_and_dtype():
    check("sum", F32, kw={"initial": 2.0})
    check("prod", I32, kw={"initial": 3, "axis": 0})
    check("max", F32, kw={"initial": 10.0, "axis": 1})
    check("sum", F32, kw={"dtype": np.int32})
    check("sum", I8, kw={"dtype": np.int8})
    check("mean", I32, kw={"dtype": np.float16}, rtol=1e-3)
    check("sum", I8, kw={"promote_integers": False})
    check("var", F32, kw={"ddof": 1, "axis": 0})
    check("std", F32, kw={"correction": 1})
    check("var", C64, rtol=1e-5)


@pytest.mark.parametrize("name", ARG_REDUCTIONS)
def test_arg_reductions(name):
    check(name, F32, jit=True)
    check(name, I32, kw={"axis": 0})
    check(name, F3, kw={"axis": 2, "keepdims": True})
    check(name, B, kw={"axis": 1})


@pytest.mark.parametrize("name", NAN_REDUCTIONS)
def test_nan_reductions(name):
    check(name, NAN, rtol=2e-5)
    check(name, NAN, kw={"axis": 1}, rtol=2e-5, jit=True)
    check(name, I32, kw={"axis": 0}, rtol=2e-5)


@pytest.mark.parametrize("name", CUMULATIVE)
def test_cumulative(name):
    check(name, F32, rtol=2e-5, jit=True)
    check(name, NAN if name.startswith("nan") else F32, kw={"axis": 1}, rtol=2e-5)
    check(name, I8, kw={"axis": 0})
    check(name, B, kw={"axis": 1})
    check(name, I32, kw={"axis": 0, "dtype": np.float32})


def test_cumulative_array_api():
    check("cumulative_sum", F32, kw={"axis": 1, "include_initial": True})
    check("cumulative_sum", I8, kw={"axis": 0})
    check("cumulative_prod", F32[0], kw={"include_initial": True})
    with pytest.raises(ValueError, match="axis was not set"):
        jnp.cumulative_sum(jnp.asarray(F32))


def test_average():
    w = rng_array((4,), np.float32, seed=9, low=0.1, high=1)
    check("average", F32)
    check("average", F32, kw={"axis": 1, "weights": w}, rtol=2e-5)
    check("average", F32, kw={"axis": 1, "weights": w, "returned": True}, rtol=2e-5)
    check("average", I32, kw={"axis": 0, "keepdims": True})
    with pytest.raises(ValueError, match="Axis must be specified"):
        jnp.average(jnp.asarray(F32), weights=jnp.asarray(w))


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile_methods(method):
    q = np.array([0.1, 0.5, 0.9], np.float32)
    check("quantile", F32, q, kw={"axis": 1, "method": method}, rtol=2e-5)
    check("quantile", F32, 0.3, kw={"method": method}, rtol=2e-5)


def test_quantile_family():
    q = np.array([0.25, 0.75], np.float32)
    check("quantile", F3, q, kw={"axis": (0, 2), "keepdims": True}, rtol=2e-5)
    check("quantile", I32, 0.5, rtol=2e-5)
    check("quantile", NAN, 0.5, kw={"axis": 1})
    check("nanquantile", NAN, q, kw={"axis": 1}, rtol=2e-5)
    check("percentile", F32, 40, kw={"axis": 0}, rtol=2e-5, jit=True)
    check("nanpercentile", NAN, q * 100, rtol=2e-5)
    check("median", F3, kw={"axis": 1, "keepdims": True}, rtol=2e-5)
    check("median", F32, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(jnp.median(jnp.asarray(F3), axis=(0, 2))),
                               np.median(F3, axis=(0, 2)), rtol=1e-6)


def test_reductions_match_numpy():
    for name in ("sum", "prod", "max", "min", "mean", "var", "std", "ptp", "argmax", "argmin",
                 "cumsum", "cumprod", "nansum", "nanmean", "nanmax", "median"):
        x = NAN if name.startswith("nan") else F3
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy: all-NaN slices
            want = getattr(np, name)(x, axis=1)
        got = getattr(jnp, name)(jnp.asarray(x), axis=1)
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=1e-6)


def test_reduction_errors():
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        jnp.sum(jnp.asarray(F32), axis=2)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        jnp.max(jnp.zeros((0, 3)), axis=0)
    with pytest.raises(ValueError, match="where mask one has to specify 'initial'"):
        jnp.max(jnp.asarray(F32), where=jnp.asarray(B))
    with pytest.raises(ValueError, match="where must be None or a boolean array"):
        jnp.sum(jnp.asarray(F32), where=jnp.asarray(I32))
    with pytest.raises(ValueError, match="attempt to get argmax of an empty sequence"):
        jnp.argmax(jnp.zeros((0,)))
    with pytest.raises(NotImplementedError, match="'out' argument"):
        jnp.sum(jnp.asarray(F32), out=np.zeros(()))
    with pytest.raises(jaxkit.ConcretizationTypeError):
        jaxkit.jit(lambda x, a: jnp.sum(x, axis=a))(jnp.asarray(F32), 0)


def test_lax_reduce_max_min_complex_are_lexicographic_like_jax():
    x = np.array([[1 + 2j, 1 + 3j, 0 + 9j], [2 - 1j, 2 - 2j, -1 + 0j]], np.complex64)
    for name in ("reduce_max", "reduce_min"):
        for axes in ((0,), (1,), (0, 1)):
            got = getattr(jaxkit.lax, name)(x, axes)
            want = getattr(jax.lax, name)(x, axes)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        t = np.ones_like(x)
        got = jaxkit.jvp(lambda a, n=name: getattr(jaxkit.lax, n)(a, (1,)), (x,), (t,))
        want = jax.jvp(lambda a, n=name: getattr(jax.lax, n)(a, (1,)), (x,), (t,))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        got = jaxkit.vmap(lambda a, n=name: getattr(jaxkit.lax, n)(a, (0,)), in_axes=1)(x)
        np.testing.assert_array_equal(np.asarray(got),
                                      np.asarray(getattr(jax.lax, name)(x, (0,))))
