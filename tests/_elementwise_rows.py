"""The table of elementwise lax primitives that ``test_lax_elementwise.py`` checks: one row per
primitive (or per variant of a call) with its NumPy/SciPy reference, input generators, dtypes
and tolerances, plus the helpers that turn rows into test cases."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import pytest
import scipy.special as sps

import jaxkit
from jaxkit import lax


F16, F32, C64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.complex64)
I32, U8, U32, BOOL = np.dtype(np.int32), np.dtype(np.uint8), np.dtype(np.uint32), np.dtype(bool)


# --------------------------------------------------------------------------------------------
# Input generators: gen(rng, dtype, shape) -> list of NumPy arguments
# --------------------------------------------------------------------------------------------


def _values(rng, dtype, shape, lo, hi):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        lo = 0 if np.issubdtype(dtype, np.unsignedinteger) else lo
        return rng.integers(lo, hi + 1, shape).astype(dtype)
    x = rng.uniform(lo, hi, shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.uniform(lo, hi, shape)
    return np.asarray(x).astype(dtype)


def uniform(lo: float, hi: float, n: int = 1) -> Callable:
    """``n`` arguments of the row's dtype, uniform in [lo, hi] (both parts for complex)."""
    return lambda rng, dtype, shape: [_values(rng, dtype, shape, lo, hi) for _ in range(n)]


def args_of(*makers) -> Callable:
    """One argument per maker; a maker is ``(lo, hi)`` (row dtype) or ``(lo, hi, dtype)``,
    or a callable ``(rng, dtype, shape) -> array``."""

    def gen(rng, dtype, shape):
        out = []
        for m in makers:
            if callable(m):
                out.append(m(rng, dtype, shape))
            else:
                lo, hi, *dt = m
                out.append(_values(rng, dt[0] if dt else dtype, shape, lo, hi))
        return out

    return gen


def nonzero(rng, dtype, shape):
    """Values away from zero (divisors): magnitude in [1, 4], random sign."""
    mag = _values(rng, dtype, shape, 1, 4)
    if np.issubdtype(np.dtype(dtype), np.unsignedinteger):
        return mag
    return (mag * rng.choice([-1, 1], shape).astype(dtype)).astype(dtype)


def fixed(*values) -> Callable:
    """Fixed values (ties, infinities): the row's shape is ignored."""
    return lambda rng, dtype, shape: [np.asarray(v, dtype) for v in values]


def value(v, dtype=None) -> Callable:
    """A maker for ``args_of``: a fixed value (of the row's dtype unless given)."""
    return lambda rng, row_dtype, shape: np.asarray(v, row_dtype if dtype is None else dtype)


def gridded(rng, dtype, shape):
    """Small integers (as the row's dtype) so that comparisons see equal elements."""
    return _values(rng, I32, shape, -2, 2).astype(dtype)


def shift_amounts(rng, dtype, shape):
    return rng.integers(0, np.iinfo(dtype).bits, shape).astype(dtype)


# --------------------------------------------------------------------------------------------
# NumPy references that NumPy lacks under the lax name
# --------------------------------------------------------------------------------------------


def _trunc_div(x, y):
    if np.issubdtype(x.dtype, np.integer):
        q = np.abs(x.astype(np.int64)) // np.abs(y.astype(np.int64))
        return (np.sign(x) * np.sign(y) * q).astype(x.dtype)
    return x / y


def _round_afz(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _unsigned(x):
    return x.view(np.dtype(f"uint{x.dtype.itemsize * 8}"))


def _signed(x):
    return x.view(np.dtype(f"int{x.dtype.itemsize * 8}"))


def _clz(x):
    bits = x.dtype.itemsize * 8
    return np.array([bits - int(v).bit_length() for v in _unsigned(x).ravel()],
                    x.dtype).reshape(x.shape)


def _complex_sign(x):
    return np.where(x == 0, 0, x / np.where(x == 0, 1, np.abs(x)))


def _choose(which, *cases):
    return np.choose(which.astype(int), cases)


def _i0e(x):
    return sps.i0e(x.astype(np.float64))


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    name: str  # test id (usually the lax function)
    prim: str | None  # primitive bound by the call (None: a function of several primitives)
    fn: Callable  # fn(lax_module, *args)
    np_ref: Callable | None  # NumPy/SciPy reference on the same arguments
    gen: Callable  # gen(rng, dtype, shape) -> arguments
    dtypes: Sequence  # dtypes the generator is called with
    tol: float = 1e-6  # relative and absolute tolerance (float32; 16-bit floats use 2e-3)
    out_dtype: Callable | None = None  # expected result dtype from the row dtype
    shape: tuple = (3,)
    grad: bool = True  # check the JVP rule (inexact dtypes)
    linear: Sequence[int] = ()  # argument positions to check the transpose rule for
    diff: Sequence[int] | None = None  # positions to differentiate (default: inexact ones)

    def __str__(self):
        return self.name


def _lax_fn(name: str, **kw) -> Callable:
    return lambda lx, *args: getattr(lx, name)(*args, **kw)


def _same(name: str, np_ref, gen, dtypes, **kw) -> Row:
    return Row(name, name, _lax_fn(name), np_ref, gen, dtypes, **kw)


def _bool_out(dt):
    return BOOL


def _real_out(dt):
    return np.finfo(dt).dtype if np.issubdtype(dt, np.complexfloating) else dt


def _complex_out(dt):
    return C64


def _int_gen(lo, hi):
    return uniform(lo, hi, 2)


ROWS = [
    # arithmetic
    _same("add", np.add, uniform(-3, 3, 2), [F32, I32, C64], linear=(0, 1)),
    _same("sub", np.subtract, uniform(-3, 3, 2), [F32, I32, C64], linear=(0, 1)),
    _same("mul", np.multiply, uniform(-3, 3, 2), [F32, I32, C64], linear=(0, 1)),
    _same("div", _trunc_div, args_of((-9, 9), nonzero), [F32, I32, C64], linear=(0,)),
    _same("rem", np.fmod, args_of((-9, 9), nonzero), [F32, I32]),
    _same("neg", np.negative, uniform(-3, 3), [F32, I32, C64], linear=(0,)),
    _same("max", np.maximum, uniform(-3, 3, 2), [F32, I32, BOOL, C64]),
    _same("min", np.minimum, uniform(-3, 3, 2), [F32, U8]),
    _same("pow", np.power, args_of((0.2, 3), (-2, 2)), [F32, C64], tol=2e-6),
    Row("pow_int_exponent", "pow", _lax_fn("pow"),
        lambda x, y: np.power(x, y.astype(x.dtype)), args_of((0.2, 3), (-3, 3, I32)), [F32]),
    Row("integer_pow3", "integer_pow", lambda lx, x: lx.integer_pow(x, 3),
        lambda x: x ** 3, uniform(-3, 3), [F32, I32, C64]),
    Row("integer_pow_neg2", "integer_pow", lambda lx, x: lx.integer_pow(x, -2),
        lambda x: x ** -2.0, uniform(0.5, 3), [F32]),
    Row("integer_pow0", "integer_pow", lambda lx, x: lx.integer_pow(x, 0),
        lambda x: np.ones_like(x), uniform(-3, 3), [F32]),
    Row("reciprocal", "integer_pow", _lax_fn("reciprocal"), np.reciprocal, uniform(0.5, 3),
        [F32]),
    _same("square", np.square, uniform(-3, 3), [F32, I32, C64]),
    _same("abs", np.abs, uniform(-3, 3), [F32, I32, C64], out_dtype=_real_out),
    _same("sign", lambda x: _complex_sign(x) if np.iscomplexobj(x) else np.sign(x),
          uniform(-3, 3), [F32, I32, U32, C64]),
    _same("floor", np.floor, uniform(-3, 3), [F32, F16]),
    _same("ceil", np.ceil, uniform(-3, 3), [F32, F16]),
    Row("round", "round", _lax_fn("round"), _round_afz,
        fixed([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6]), [F32, F16]),
    Row("round_even", "round", lambda lx, x: lx.round(x, lx.RoundingMethod.TO_NEAREST_EVEN),
        np.round, fixed([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6]), [F32]),
    _same("is_finite", np.isfinite, fixed([1.0, -np.inf, np.inf, np.nan, 0.0]), [F32, F16],
          out_dtype=_bool_out),
    _same("nextafter", np.nextafter, args_of((-3, 3), (-3, 3)), [F32], grad=False),
    # comparisons
    _same("eq", np.equal, args_of(gridded, gridded), [F32, I32, BOOL, C64],
          out_dtype=_bool_out),
    _same("ne", np.not_equal, args_of(gridded, gridded), [F32, U8], out_dtype=_bool_out),
    _same("lt", np.less, args_of(gridded, gridded), [F32, I32, U8], out_dtype=_bool_out),
    _same("le", np.less_equal, args_of(gridded, gridded), [F32, U32], out_dtype=_bool_out),
    _same("gt", np.greater, args_of(gridded, gridded), [F32, I32], out_dtype=_bool_out),
    _same("ge", np.greater_equal, args_of(gridded, gridded), [F32, BOOL], out_dtype=_bool_out),
    # bitwise
    Row("bitwise_and", "and", _lax_fn("bitwise_and"), np.bitwise_and, _int_gen(-99, 99),
        [I32, U8, BOOL]),
    Row("bitwise_or", "or", _lax_fn("bitwise_or"), np.bitwise_or, _int_gen(-99, 99),
        [I32, BOOL]),
    Row("bitwise_xor", "xor", _lax_fn("bitwise_xor"), np.bitwise_xor, _int_gen(-99, 99),
        [U8, BOOL]),
    Row("bitwise_not", "not", _lax_fn("bitwise_not"), np.invert, uniform(-99, 99),
        [I32, BOOL]),
    _same("shift_left", np.left_shift, args_of((-99, 99), shift_amounts), [I32, U8]),
    _same("shift_right_logical",
          lambda x, y: _signed(_unsigned(x) >> _unsigned(y)).astype(x.dtype)
          if np.issubdtype(x.dtype, np.signedinteger) else x >> y,
          args_of((-99, 99), shift_amounts), [I32, U8]),
    _same("shift_right_arithmetic",
          lambda x, y: np.right_shift(_signed(x), _signed(y)).view(x.dtype),
          args_of((-99, 99), shift_amounts), [I32, U8]),
    _same("population_count", np.bitwise_count, uniform(-999, 999), [I32, U8],
          out_dtype=None),
    _same("clz", _clz, uniform(-999, 999), [I32, U8]),
    # complex parts
    _same("real", np.real, uniform(-3, 3), [C64], out_dtype=_real_out, linear=(0,)),
    _same("imag", np.imag, uniform(-3, 3), [C64], out_dtype=_real_out, linear=(0,)),
    _same("complex", lambda x, y: x + 1j * y, uniform(-3, 3, 2), [F32], out_dtype=_complex_out,
          linear=(0, 1)),
    _same("conj", np.conj, uniform(-3, 3), [C64, F32], out_dtype=_complex_out, linear=(0,)),
    # selection, clamping, bit casts
    Row("select", "select_n", _lax_fn("select"), np.where,
        args_of((0, 1, BOOL), (-3, 3), (-3, 3)), [F32, I32], linear=(1, 2)),
    Row("select_n_int", "select_n", _lax_fn("select_n"), _choose,
        args_of((0, 2, I32), (-3, 3), (-3, 3), (-3, 3)), [F32], linear=(1, 3)),
    Row("select_n_scalar_which", "select_n", _lax_fn("select_n"),
        lambda w, *cs: cs[int(w)], args_of(value(True, BOOL), (-3, 3), (-3, 3)), [F32, C64]),
    Row("select_n_one_case", "select_n", lambda lx, w, x: lx.select_n(w, x),
        lambda w, x: x, args_of((0, 0, I32), (-3, 3)), [F32]),
    Row("clamp", "clamp", lambda lx, x: lx.clamp(x.dtype.type(-1), x, x.dtype.type(1)),
        lambda x: np.clip(x, -1, 1), uniform(-3, 3), [F32, I32]),
    Row("clamp_arrays", "clamp", _lax_fn("clamp"), lambda lo, x, hi: np.clip(x, lo, hi),
        args_of((-2, 0), (-3, 3), (0, 2)), [F32]),
    Row("bitcast_f32_i32", "bitcast_convert_type",
        lambda lx, x: lx.bitcast_convert_type(x, np.int32), lambda x: x.view(np.int32),
        uniform(-3, 3), [F32], out_dtype=lambda dt: I32),
    Row("bitcast_u32_f32", "bitcast_convert_type",
        lambda lx, x: lx.bitcast_convert_type(x, np.float32), lambda x: x.view(np.float32),
        uniform(0, 2 ** 30), [U32], out_dtype=lambda dt: F32),
    Row("bitcast_narrow", "bitcast_convert_type",
        lambda lx, x: lx.bitcast_convert_type(x, np.uint8),
        lambda x: x.view(np.uint8).reshape(x.shape + (4,)), uniform(-3, 3), [F32],
        out_dtype=lambda dt: U8),
    Row("bitcast_widen", "bitcast_convert_type",
        lambda lx, x: lx.bitcast_convert_type(x, np.uint32),
        lambda x: x.view(np.uint32).reshape(x.shape[:-1]), uniform(0, 255), [U8],
        out_dtype=lambda dt: U32, shape=(3, 4)),
    Row("reduce_precision", "reduce_precision", lambda lx, x: lx.reduce_precision(x, 5, 10),
        lambda x: x.astype(np.float16).astype(x.dtype), uniform(-30, 30), [F32], linear=(0,)),
    Row("copy", "copy", lambda lx, x: lx.copy_p.bind(x), lambda x: x, uniform(-3, 3),
        [F32, I32], linear=(0,)),
    # exponentials, logarithms, trigonometry, roots
    _same("exp", np.exp, uniform(-3, 3), [F32, F16, C64], tol=2e-6),
    _same("exp2", np.exp2, uniform(-3, 3), [F32, C64], tol=2e-6),
    _same("log", np.log, uniform(0.1, 5), [F32, C64], tol=2e-6),
    _same("log1p", np.log1p, uniform(-0.9, 3), [F32, C64], tol=2e-6),
    _same("expm1", np.expm1, uniform(-3, 3), [F32, C64], tol=2e-6),
    _same("tanh", np.tanh, uniform(-3, 3), [F32, F16, C64], tol=2e-6),
    _same("logistic", lambda x: 1 / (1 + np.exp(-x.astype(np.complex128 if np.iscomplexobj(x)
                                                          else np.float64))),
          uniform(-4, 4), [F32, C64], tol=2e-6),
    _same("sin", np.sin, uniform(-3, 3), [F32, F16, C64], tol=2e-6),
    _same("cos", np.cos, uniform(-3, 3), [F32, C64], tol=2e-6),
    _same("tan", np.tan, uniform(-1.2, 1.2), [F32, C64], tol=5e-6),
    _same("asin", np.arcsin, uniform(-0.9, 0.9), [F32, C64], tol=2e-6),
    _same("acos", np.arccos, uniform(-0.9, 0.9), [F32, C64], tol=2e-6),
    _same("atan", np.arctan, uniform(-3, 3), [F32, C64], tol=2e-6),
    _same("atan2", np.arctan2, uniform(-3, 3, 2), [F32], tol=2e-6),
    _same("sinh", np.sinh, uniform(-3, 3), [F32, C64], tol=2e-6),
    _same("cosh", np.cosh, uniform(-3, 3), [F32, C64], tol=2e-6),
    _same("asinh", np.arcsinh, uniform(-3, 3), [F32, C64], tol=2e-6),
    _same("acosh", np.arccosh, uniform(1.1, 4), [F32, C64], tol=2e-6),
    _same("atanh", np.arctanh, uniform(-0.9, 0.9), [F32, C64], tol=2e-6),
    _same("sqrt", np.sqrt, uniform(0.1, 5), [F32, F16, C64], tol=2e-6),
    _same("rsqrt", lambda x: 1 / np.sqrt(x.astype(np.complex128 if np.iscomplexobj(x)
                                                  else np.float64)),
          uniform(0.1, 5), [F32, C64], tol=2e-6),
    _same("cbrt", np.cbrt, uniform(-5, 5), [F32], tol=2e-6),
    # special functions
    _same("erf", sps.erf, uniform(-3, 3), [F32, F16], tol=2e-6),
    _same("erfc", sps.erfc, uniform(-3, 3), [F32], tol=2e-6),
    _same("erf_inv", sps.erfinv, uniform(-0.95, 0.95), [F32], tol=5e-6),
    _same("lgamma", sps.gammaln, uniform(0.1, 6), [F32], tol=5e-6),
    _same("digamma", sps.digamma, uniform(0.5, 6), [F32], tol=5e-6),
    _same("polygamma", sps.polygamma, args_of(value([1.0, 2.0, 3.0]), (0.5, 4)), [F32],
          tol=1e-5, diff=(1,)),  # not differentiable in the order m (as in JAX)
    _same("zeta", sps.zeta, args_of((1.5, 4), (0.5, 3)), [F32], tol=1e-5, grad=False),
    _same("bessel_i0e", _i0e, uniform(-12, 12), [F32, F16], tol=5e-6),
    _same("bessel_i1e", sps.i1e, uniform(-12, 12), [F32], tol=5e-6),
    _same("igamma", sps.gammainc, args_of((0.5, 5), (0.1, 8)), [F32], tol=1e-5),
    _same("igammac", sps.gammaincc, args_of((0.5, 5), (0.1, 8)), [F32], tol=1e-5),
    _same("igamma_grad_a", None, args_of((0.5, 5), (0.1, 8)), [F32], grad=False),
    # a and b have no derivative (JAX raises); the JVP row differentiates in x only
    Row("betainc", "regularized_incomplete_beta", _lax_fn("betainc"), sps.betainc,
        args_of((0.5, 5), (0.5, 5), (0.05, 0.95)), [F32], tol=1e-5, grad=False),
    Row("random_gamma_grad", None, _lax_fn("random_gamma_grad"), None,
        args_of((0.5, 5), (0.1, 8)), [F32], grad=False),
]


def _cases(keep=lambda row: True, all_dtypes=True):
    return [pytest.param(row, np.dtype(dt), id=f"{row}-{np.dtype(dt).name}" if all_dtypes
                         else str(row))
            for row in ROWS if keep(row) for dt in (row.dtypes if all_dtypes else row.dtypes[:1])]


CASES = _cases()
NUMPY_CASES = _cases(lambda row: row.np_ref is not None)  # the others are checked vs jax
PRIM_CASES = _cases(lambda row: row.prim is not None)
PRIM_ROWS = _cases(lambda row: row.prim is not None, all_dtypes=False)


def _args(row: Row, dtype, seed: int = 0, shape=None):
    return row.gen(np.random.default_rng(seed), dtype, row.shape if shape is None else shape)


def _tol(row: Row, dtype) -> float:
    return 2e-3 if np.dtype(dtype).itemsize == 2 and np.issubdtype(dtype, np.floating) \
        else row.tol


def _jit_fn(row: Row) -> Callable:
    """The row's call under ``jit`` (a whole function such as random_gamma_grad compiles
    once instead of op by op)."""
    return jaxkit.jit(partial(row.fn, lax))


def assert_close(x, ref, tol, check_dtype=True):
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    if check_dtype:
        assert x.dtype == ref.dtype, (x.dtype, ref.dtype)
    if x.dtype == BOOL or np.issubdtype(x.dtype, np.integer):
        np.testing.assert_array_equal(x, ref)
    else:
        np.testing.assert_allclose(x, ref, rtol=tol, atol=tol, equal_nan=True)


def _weak(x) -> bool:
    aval = getattr(x, "aval", None)
    return bool(aval.weak_type if aval is not None else x.weak_type)
