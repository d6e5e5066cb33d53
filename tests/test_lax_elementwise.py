"""Elementwise lax primitives, one table row per primitive (or per variant of a call); the table
and its input generators are in ``_elementwise_rows.py``.

Generic checks over every row: eager result against NumPy/SciPy (values and dtype), ``jit``
against eager, against the jax oracle (values, dtype and weak type), the primitive's name in
the jaxpr, its JVP rule against ``jax.jvp``, its batching rule against a loop over examples,
and, for linear primitives, its transpose rule against ``jax.vjp``. Then targeted checks:
shapes ((), (2, 3), rank 0 beside an array), weak types from Python scalars, abstract-eval
error messages, ties and zeros in derivatives, batching with unbatched or scalar operands.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import partial

import numpy as np
import pytest

import jaxkit
from jaxkit import core, lax
from jaxkit.interpreters import ad, batching

jax = pytest.importorskip("jax")

from _elementwise_rows import (  # noqa: E402 - after the importorskip above
    BOOL, CASES, F16, F32, NUMPY_CASES, PRIM_CASES, PRIM_ROWS, ROWS, Row,
    _args, _jit_fn, _tol, _weak, assert_close,
)

_AXIS = batching.AxisData(None, 0)  # a rule's axis_data; these rules do not read it


# --------------------------------------------------------------------------------------------
# Generic checks over every row
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("row,dtype", NUMPY_CASES)
def test_numpy(row: Row, dtype):
    args = _args(row, dtype)
    out = _jit_fn(row)(*args) if row.prim is None else row.fn(lax, *args)
    expected_dtype = (row.out_dtype or (lambda dt: dt))(dtype)
    assert out.dtype == expected_dtype
    ref = np.asarray(row.np_ref(*[a.astype(np.float32) if a.dtype == F16 else a
                                  for a in args]))
    assert_close(out, ref.astype(out.dtype) if out.dtype in (F16, BOOL) else ref,
                 _tol(row, dtype), check_dtype=False)


@pytest.mark.parametrize("row,dtype", PRIM_CASES)
def test_jit_matches_eager(row: Row, dtype):
    args = _args(row, dtype)
    assert_close(_jit_fn(row)(*args), row.fn(lax, *args), _tol(row, dtype))


@pytest.mark.parametrize("row,dtype", CASES)
def test_vs_jax(row: Row, dtype):
    args = _args(row, dtype)
    out = _jit_fn(row)(*args) if row.prim is None else row.fn(lax, *args)
    ref = row.fn(jax.lax, *args)
    assert_close(out, ref, _tol(row, dtype))
    assert _weak(out) == _weak(ref)


@pytest.mark.parametrize("row,dtype", PRIM_ROWS)
def test_jaxpr_names_primitive(row: Row, dtype):
    text = str(jaxkit.make_jaxpr(partial(row.fn, lax))(*_args(row, dtype)))
    assert re.search(rf"= {re.escape(row.prim)}[\[ ]", text), text
    # The jax oracle stages the same primitive name.
    jax_text = str(jax.make_jaxpr(partial(row.fn, jax.lax))(*_args(row, dtype)))
    assert re.search(rf"= {re.escape(row.prim)}[\[ ]", jax_text), jax_text


def _primitive_call(fn, args):
    """The last equation of the traced call: primitive, operands (evaluated), the argument
    position of each operand (None for literals and computed values), params."""
    closed = jaxkit.make_jaxpr(fn)(*args)
    jaxpr = closed.jaxpr
    env = dict(zip(jaxpr.constvars, closed.consts))
    env.update(zip(jaxpr.invars, args))

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    for e in jaxpr.eqns[:-1]:
        outs = e.primitive.bind(*map(read, e.invars), **e.params)
        env.update(zip(e.outvars, outs if e.primitive.multiple_results else [outs]))
    eqn = jaxpr.eqns[-1]
    positions = [jaxpr.invars.index(v) if isinstance(v, core.Var) and v in jaxpr.invars
                 else None for v in eqn.invars]
    return eqn.primitive, [read(v) for v in eqn.invars], positions, dict(eqn.params)


def _tangent(rng, x):
    x = np.asarray(x)
    t = rng.standard_normal(x.shape)
    if np.issubdtype(x.dtype, np.complexfloating):
        t = t + 1j * rng.standard_normal(x.shape)
    return t.astype(x.dtype)


def _check_jvp(row: Row, args, diff: Sequence[int]):
    """Apply the primitive's JVP rule with tangents on ``diff`` (argument positions) and
    compare with ``jax.jvp`` of the oracle call."""
    prim, operands, positions, params = _primitive_call(partial(row.fn, lax), args)
    rng = np.random.default_rng(1)
    tans = {i: _tangent(rng, args[i]) for i in diff}
    tangents = [tans[p] if p in tans else ad.Zero(core.get_aval(x).to_tangent_aval())
                for x, p in zip(operands, positions)]
    out, t_out = ad.jvp_rules[prim](operands, tangents, **params)

    def f(*d):
        full = list(args)
        for i, a in zip(diff, d):
            full[i] = a
        return row.fn(jax.lax, *full)

    ref, t_ref = jax.jvp(f, [args[i] for i in diff], [tans[i] for i in diff])
    assert_close(out, ref, row.tol)
    if t_ref.dtype == jax.dtypes.float0:  # an integer or boolean result: a symbolic zero
        assert type(t_out) is ad.Zero and t_out.aval.shape == t_ref.shape
        return
    assert_close(ad.instantiate_zeros(t_out), t_ref, 2e-5)


def _inexact_dtypes(row: Row):
    return [np.dtype(d) for d in row.dtypes if np.issubdtype(d, np.inexact)
            and np.dtype(d).itemsize > 2]


JVP_CASES = [pytest.param(row, dt, id=f"{row}-{dt.name}") for row in ROWS
             if row.grad and row.prim is not None for dt in _inexact_dtypes(row)]


@pytest.mark.parametrize("row,dtype", JVP_CASES)
def test_jvp_rule(row: Row, dtype):
    args = _args(row, dtype)
    diff = row.diff if row.diff is not None else [
        i for i, a in enumerate(args) if np.issubdtype(a.dtype, np.inexact)]
    _check_jvp(row, args, diff)


ZERO_JVP_ROWS = [pytest.param(row, id=str(row)) for row in ROWS if row.prim is not None and
                 row.name in ("sign", "floor", "round", "is_finite", "eq", "lt", "bitwise_and",
                              "shift_left", "population_count", "clz", "bitcast_f32_i32")]


@pytest.mark.parametrize("row", ZERO_JVP_ROWS)
def test_jvp_is_symbolic_zero(row: Row):
    args = _args(row, row.dtypes[0])
    prim, operands, _, params = _primitive_call(partial(row.fn, lax), args)
    tangents = [ad.Zero(core.get_aval(x).to_tangent_aval()) if not np.issubdtype(
        np.asarray(x).dtype, np.inexact) else np.ones_like(np.asarray(x)) for x in operands]
    out, t_out = ad.jvp_rules[prim](operands, tangents, **params)
    assert type(t_out) is ad.Zero
    assert t_out.aval.shape == out.shape


TRANSPOSE_CASES = [pytest.param(row, i, id=f"{row}-arg{i}") for row in ROWS for i in row.linear]


@pytest.mark.parametrize("row,pos", TRANSPOSE_CASES)
def test_transpose_rule(row: Row, pos: int):
    dtype = np.dtype(next(d for d in row.dtypes if np.issubdtype(d, np.inexact)))
    args = _args(row, dtype)
    prim, operands, positions, params = _primitive_call(partial(row.fn, lax), args)
    out = prim.bind(*operands, **params)
    ct = _tangent(np.random.default_rng(2), out)
    t_args = [ad.UndefinedPrimal(core.get_aval(x)) if p == pos else x
              for x, p in zip(operands, positions)]
    got = ad.transpose_rules[prim](ct, *t_args, **params)[positions.index(pos)]

    def f(a):
        full = list(args)
        full[pos] = a
        return row.fn(jax.lax, *full)

    (ref,) = jax.vjp(f, args[pos])[1](ct)
    assert_close(ad.instantiate_zeros(got), ref, 2e-5)


@pytest.mark.parametrize("row,dtype", PRIM_ROWS)
def test_batching_rule(row: Row, dtype):
    calls = [_primitive_call(partial(row.fn, lax), _args(row, dtype, seed)) for seed in range(3)]
    prim, first_ops, _, params = calls[0]
    n = len(first_ops)
    configs = [(0,) * n]
    if n > 1:  # one operand batched, the others shared (and the reverse)
        configs += [(0,) + (None,) * (n - 1), (None,) * (n - 1) + (0,)]
    if len(row.shape) == 1:  # batch axis after the data axis (of operands that have one)
        configs.append(tuple(1 if np.ndim(op) else 0 for op in first_ops))
    for dims in configs:
        if all(d is None for d in dims):
            continue
        batched = [first_ops[k] if d is None else
                   np.moveaxis(np.stack([np.asarray(c[1][k]) for c in calls]), 0, d)
                   for k, d in enumerate(dims)]
        expected = np.stack([np.asarray(prim.bind(*[c[1][k] if d is not None else first_ops[k]
                                                    for k, d in enumerate(dims)], **params))
                             for c in calls])
        out, out_dim = batching.batch_rules[prim](_AXIS, batched, list(dims), **params)
        assert_close(np.moveaxis(np.asarray(out), out_dim, 0), expected, _tol(row, dtype))


# --------------------------------------------------------------------------------------------
# Shapes: rank 0, rank 2, and a rank-0 operand beside an array
# --------------------------------------------------------------------------------------------

SHAPE_ROWS = [r for r in ROWS if r.name in ("add", "div", "max", "pow", "atan2", "sin", "abs",
                                            "eq", "select", "erf", "igamma")]


@pytest.mark.parametrize("shape", [(), (2, 3)], ids=["scalar", "2x3"])
@pytest.mark.parametrize("row", SHAPE_ROWS, ids=str)
def test_shapes(row: Row, shape):
    dtype = row.dtypes[0]
    args = _args(row, dtype, shape=shape)
    out = row.fn(lax, *args)
    assert out.shape == shape
    assert_close(out, row.fn(jax.lax, *args), _tol(row, dtype))


# The incomplete gamma functions compile slowly (while loops); their shape and weak-type rules
# are the generic ones, so igamma alone stands for them here.
_SLOW = ("igammac", "igamma_grad_a", "random_gamma_grad")
BINARY_ROWS = [r for r in ROWS if r.prim is not None and r.name not in (
    "select", "select_n_int", "select_n_scalar_which", "select_n_one_case", "clamp_arrays",
    *_SLOW) and len(_args(r, r.dtypes[0])) == 2 and r.shape == (3,)]


@pytest.mark.parametrize("row", BINARY_ROWS, ids=str)
def test_rank0_operand_beside_array(row: Row):
    dtype = row.dtypes[0]
    x, y = _args(row, dtype)
    for args in ([x[0], y], [x, y[0]]):
        out = row.fn(lax, *args)
        ref = row.fn(jax.lax, *args)
        assert out.shape == (3,)
        assert_close(out, ref, _tol(row, dtype))
        scalar_pos = 0 if np.ndim(args[0]) == 0 else 1
        if row.grad and np.issubdtype(args[scalar_pos].dtype, np.inexact) and \
                scalar_pos in (row.diff if row.diff is not None else (scalar_pos,)):
            # The tangent of the rank-0 operand alone must come out with the output's shape.
            _check_jvp(row, args, [scalar_pos])


# --------------------------------------------------------------------------------------------
# Weak types
# --------------------------------------------------------------------------------------------

WEAK_ROWS = [r for r in ROWS if r.prim is not None and F32 in [np.dtype(d) for d in r.dtypes]
             and all(a.dtype == F32 for a in _args(r, F32))
             and r.name not in ("clamp", "igamma", *_SLOW)]


@pytest.mark.parametrize("row", WEAK_ROWS, ids=str)
def test_weak_type_from_python_scalars(row: Row):
    args = _args(row, F32)
    scalars = [float(a.ravel()[0]) for a in args]
    out, ref = row.fn(lax, *scalars), row.fn(jax.lax, *scalars)
    assert out.dtype == ref.dtype
    assert _weak(out) == _weak(ref)
    if len(args) > 1:  # one strong operand makes the result strong
        mixed = [args[0][0]] + scalars[1:]
        out, ref = row.fn(lax, *mixed), row.fn(jax.lax, *mixed)
        assert _weak(out) == _weak(ref) is False


@pytest.mark.parametrize("call", [
    lambda lx: lx.lt(1, 2), lambda lx: lx.is_finite(1.0), lambda lx: lx.abs(1.0 + 2j),
    lambda lx: lx.pow(2.0, 3), lambda lx: lx.pow(np.float32(2.0), np.int32(3)),
    lambda lx: lx.integer_pow(2.0, 3), lambda lx: lx.population_count(3),
    lambda lx: lx.complex(1.0, 2.0), lambda lx: lx.conj(1.0), lambda lx: lx.select_n(True, 1.0,
                                                                                     2.0),
    lambda lx: lx.clamp(0.0, np.ones(3, np.float32), 2.0), lambda lx: lx.clamp(0.0, 1.0, 2.0),
    lambda lx: lx.bitcast_convert_type(1.0, np.int32), lambda lx: lx.reduce_precision(1.0, 5, 10),
    lambda lx: lx.round(1.5), lambda lx: lx.shift_left(1, 2), lambda lx: lx.bitwise_not(True),
    lambda lx: lx.real(1 + 2j),
])
def test_weak_type_rules(call):
    out, ref = call(lax), call(jax.lax)
    assert out.dtype == ref.dtype
    assert _weak(out) == _weak(ref)
    assert_close(out, ref, 1e-6)


# --------------------------------------------------------------------------------------------
# Errors from the abstract evaluation rules
# --------------------------------------------------------------------------------------------

f32_3 = np.ones(3, np.float32)
i32_3 = np.ones(3, np.int32)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: lax.sin(i32_3), TypeError, r"sin does not accept dtype int32"),
    (lambda: lax.exp(np.ones(3, bool)), TypeError, r"exp does not accept dtype bool"),
    (lambda: lax.floor(i32_3), TypeError, r"floor does not accept dtype int32"),
    (lambda: lax.add(f32_3, i32_3), TypeError, r"add requires arguments to have the same dtypes, got float32"),
    (lambda: lax.mul(f32_3, np.ones(4, np.float32)), TypeError, r"mul got incompatible shapes"),
    (lambda: lax.add(f32_3, np.ones((3, 1), np.float32)), TypeError,
     r"add: arrays must have the same number of dimensions, got \{1, 2\}"),
    (lambda: lax.add(np.ones((4, 2), np.float32), np.ones((1, 3), np.float32)), TypeError,
     r"add got incompatible shapes for broadcasting: \(4, 2\), \(1, 3\)"),
    (lambda: lax.rem(f32_3.astype(np.complex64), f32_3.astype(np.complex64)), TypeError,
     r"rem does not accept dtype complex64"),
    (lambda: lax.lt(f32_3.astype(np.complex64), f32_3.astype(np.complex64)), TypeError,
     r"lt does not accept dtype complex64"),
    (lambda: lax.bitwise_and(f32_3, f32_3), TypeError, r"and does not accept dtype float32"),
    (lambda: lax.shift_left(f32_3, f32_3), TypeError, r"shift_left does not accept dtype"),
    (lambda: lax.abs(np.ones(3, np.uint8)), TypeError, r"abs does not accept dtype uint8"),
    (lambda: lax.real(f32_3), TypeError, r"real does not accept dtype float32"),
    (lambda: lax.complex(f32_3.astype(np.float16), f32_3.astype(np.float16)), TypeError,
     r"complex does not accept dtype float16"),
    (lambda: lax.conj(i32_3), TypeError, r"conj does not accept dtype int32"),
    (lambda: lax.pow(f32_3, f32_3.astype(np.float16)), TypeError,
     r"the first argument to pow must have an inexact dtype.*float32 and float16"),
    (lambda: lax.pow(i32_3, i32_3), TypeError, r"pow does not accept dtype int32"),
    (lambda: lax.integer_pow(i32_3, -1), TypeError, r"Integers cannot be raised to negative"),
    (lambda: lax.is_finite(i32_3), TypeError, r"is_finite does not accept dtype int32"),
    (lambda: lax.round(i32_3), TypeError, r"round does not accept dtype int32"),
    (lambda: lax.select_n(np.ones(2, bool), f32_3, f32_3), TypeError,
     r"`which` must be scalar or have the same shape as cases"),
    (lambda: lax.select_n(True, f32_3, i32_3), TypeError,
     r"select requires arguments to have the same dtypes"),
    (lambda: lax.select_n(True, f32_3, f32_3, f32_3), TypeError,
     r"boolean `which` cannot have > 2 cases"),
    (lambda: lax.select_n(f32_3, f32_3, f32_3), TypeError, r"`which` must be boolean or integer"),
    (lambda: lax.select_n(True, f32_3, np.ones(2, np.float32)), TypeError,
     r"select cases must have the same shapes"),
    (lambda: lax.select_n(True), ValueError, r"at least one case"),
    (lambda: lax.clamp(np.ones(2, np.float32), f32_3, 1.0), TypeError,
     r"clamp requires min.shape == operand.shape"),
    (lambda: lax.clamp(np.int32(0), f32_3, np.int32(1)), TypeError,
     r"clamp requires arguments to have the same dtypes"),
    (lambda: lax.bitcast_convert_type(np.ones(3, np.uint8), np.int32), ValueError,
     r"Attempting to convert array of shape \(3,\)"),
    (lambda: lax.bitcast_convert_type(np.ones(3, bool), np.int8), TypeError,
     r"does not support bool or complex"),
    (lambda: lax.reduce_precision(f32_3, 0, 3), ValueError, r"exponent_bits must be positive"),
    (lambda: lax.erf(i32_3), TypeError, r"erf does not accept dtype int32"),
    (lambda: lax.igamma(f32_3, i32_3), TypeError, r"igamma does not accept dtype int32"),
    (lambda: lax.exp(f32_3, accuracy=1e-3), NotImplementedError, r"Accuracy 0.001 not supported"),
])
def test_abstract_eval_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_errors_also_raised_while_tracing():
    with pytest.raises(TypeError, match=r"sin does not accept dtype int32"):
        jaxkit.make_jaxpr(lax.sin)(i32_3)


# --------------------------------------------------------------------------------------------
# Targeted checks of rules
# --------------------------------------------------------------------------------------------


def test_jaxpr_params_and_literals():
    text = str(jaxkit.make_jaxpr(lambda x: lax.round(lax.mul(x, 2.0)))(f32_3))
    assert "round[rounding_method=0]" in text and "mul a 2.0:f32[]" in text
    text = str(jaxkit.make_jaxpr(lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN))(
        f32_3))
    assert "round[rounding_method=1]" in text
    assert "integer_pow[y=-1]" in str(jaxkit.make_jaxpr(lax.reciprocal)(f32_3))
    assert "conj[input_dtype=float32]" in str(jaxkit.make_jaxpr(lax.conj)(f32_3))
    assert "bitcast_convert_type[new_dtype=int32]" in str(
        jaxkit.make_jaxpr(lambda x: lax.bitcast_convert_type(x, np.int32))(f32_3))
    assert "pow a 2:i32[]" in str(jaxkit.make_jaxpr(lambda x: lax.pow(x, 2))(f32_3))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_split_tangent_at_ties(name):
    row = next(r for r in ROWS if r.name == name)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([1.0, 5.0, 0.0], np.float32)
    _check_jvp(row, [x, y], [0])
    _check_jvp(row, [x, y], [0, 1])
    _, t = ad.jvp_rules[getattr(lax, f"{name}_p")](
        [x, y], [np.ones(3, np.float32), ad.Zero(core.ShapedArray((3,), np.float32))])
    assert float(np.asarray(t)[0]) == 0.5  # a tie shares the tangent


def test_pow_jvp_at_zero_base_and_integer_exponents():
    x = np.array([0.0, 0.0, 2.0, 0.0], np.float32)
    y = np.array([0, 1, 2, 3], np.int32)
    row = next(r for r in ROWS if r.name == "pow_int_exponent")
    _check_jvp(row, [x, y], [0])
    yf = y.astype(np.float32)
    _check_jvp(next(r for r in ROWS if r.name == "pow"), [x + 1, yf], [0, 1])
    _check_jvp(next(r for r in ROWS if r.name == "pow"), [x, yf + 1], [1])


def test_abs_jvp_of_complex_zero_and_real_negative():
    row = next(r for r in ROWS if r.name == "abs")
    _check_jvp(row, [np.array([0, 3 + 4j, -1j], np.complex64)], [0])
    _check_jvp(row, [np.array([-2.0, 0.5, 3.0], np.float32)], [0])


def test_clamp_jvp_of_array_bounds_and_ties():
    row = next(r for r in ROWS if r.name == "clamp_arrays")
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0], np.float32)
    lo, hi = np.full(5, -1, np.float32), np.full(5, 1, np.float32)
    for diff in ([0], [1], [2], [0, 1, 2]):
        _check_jvp(row, [lo, x, hi], diff)


def test_clamp_jvp_of_scalar_bounds():
    # (jax's own rule fails on a scalar bound's tangent; the expected values are JAX's for
    # broadcast bounds: a bound's tangent passes where the bound is the result.)
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0], np.float32)
    lo, hi, g = np.float32(-1), np.float32(1), np.float32(3)
    zero = ad.Zero(core.ShapedArray((), np.float32))
    zero_x = ad.Zero(core.ShapedArray((5,), np.float32))
    jvp = ad.jvp_rules[lax.clamp_p]
    _, t = jvp([lo, x, hi], [g, zero_x, zero])
    np.testing.assert_array_equal(t, [3, 0, 0, 0, 0])
    _, t = jvp([lo, x, hi], [zero, zero_x, g])
    np.testing.assert_array_equal(t, [0, 0, 0, 0, 3])
    _, t = jvp([lo, x, hi], [g, np.ones(5, np.float32), g])
    np.testing.assert_array_equal(t, [3, 0, 1, 0, 3])


def test_rem_jvp_broadcast_and_divisor():
    row = next(r for r in ROWS if r.name == "rem")
    _check_jvp(row, [np.float32(5.5), np.array([2.0, -3.0, 1.5], np.float32)], [0, 1])


def test_select_n_batching_with_scalar_which_and_unbatched_cases():
    which = np.array([True, False, True])  # one per example
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    y = -x
    rule = partial(batching.batch_rules[lax.select_n_p], _AXIS)
    expected = np.stack([np.where(w, b, a) for w, a, b in zip(which, x, y)])
    out, d = rule([which, x, y], [0, 0, 0])
    np.testing.assert_array_equal(np.moveaxis(np.asarray(out), d, 0), expected)
    out, d = rule([which, x[0], y[0]], [0, None, None])  # shared cases, batched `which`
    expected = np.stack([np.where(w, y[0], x[0]) for w in which])
    np.testing.assert_array_equal(np.moveaxis(np.asarray(out), d, 0), expected)
    out, d = rule([np.bool_(True), x.T, y], [None, 1, 0])  # scalar `which`, cases disagree
    np.testing.assert_array_equal(np.moveaxis(np.asarray(out), d, 0), y)
    out, d = rule([which, np.float32(1), np.float32(2)], [0, None, None])  # all scalars
    np.testing.assert_array_equal(np.moveaxis(np.asarray(out), d, 0), np.where(which, 2, 1))


def test_clamp_batching_with_batched_bounds():
    rule = partial(batching.batch_rules[lax.clamp_p], _AXIS)
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    lo = np.array([-1.0, -2.0, 0.0], np.float32)  # a scalar bound per example
    out, d = rule([lo, x, np.float32(1.5)], [0, 0, None])
    expected = np.stack([np.clip(x[i], lo[i], 1.5) for i in range(3)])
    np.testing.assert_array_equal(np.moveaxis(np.asarray(out), d, 0), expected)
    out, d = rule([lo, x[0], np.float32(1.5)], [0, None, None])  # unbatched operand
    expected = np.stack([np.clip(x[0], lo[i], 1.5) for i in range(3)])
    np.testing.assert_array_equal(np.moveaxis(np.asarray(out), d, 0), expected)


def test_bitcast_batching_when_the_batch_axis_is_consumed():
    x = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)  # batch axis last
    rule = partial(batching.batch_rules[lax.bitcast_convert_type_p], _AXIS)
    out, d = rule([np.moveaxis(x, 0, 2)], [2], new_dtype=np.dtype(np.uint32))
    expected = np.stack([x[i].view(np.uint32)[..., 0] for i in range(2)])
    np.testing.assert_array_equal(np.moveaxis(np.asarray(out), d, 0), expected)


def test_div_and_rem_on_integers_truncate_toward_zero():
    x = np.array([7, -7, 7, -7], np.int32)
    y = np.array([2, 2, -2, -2], np.int32)
    np.testing.assert_array_equal(lax.div(x, y), [3, -3, -3, 3])
    np.testing.assert_array_equal(lax.rem(x, y), [1, -1, 1, -1])


def test_sign_and_compare_of_unsigned():
    x = np.array([0, 1, 200], np.uint8)
    np.testing.assert_array_equal(lax.sign(x), [0, 1, 1])
    np.testing.assert_array_equal(lax.lt(x, np.uint8(150)), [True, True, False])
    np.testing.assert_array_equal(lax.max(x, np.uint8(100)), [100, 100, 200])


def test_complex_sin_cos_handle_huge_imaginary_parts():
    z = np.array([0 + 100j, 1e-3 + 1e-3j, 2 - 3j], np.complex64)
    for name in ("sin", "cos"):
        out = getattr(lax, name)(z)
        np.testing.assert_allclose(out, getattr(jax.lax, name)(z), rtol=1e-6)
        assert not np.isnan(np.asarray(out)).any()


def test_lowerings_compose_in_one_program():
    """Lowering rules (CHLO ops among them) also compile as parts of a larger jit program."""
    x = np.linspace(0.2, 0.8, 3, dtype=np.float32)

    def f(lx, x):
        y = lx.add(lx.sin(x), lx.erf_inv(x))
        y = lx.select(lx.lt(y, 1.0), lx.tan(y), lx.lgamma(y))
        return lx.clamp(0.0, lx.nextafter(y, 2.0), 5.0)

    np.testing.assert_allclose(jaxkit.jit(partial(f, lax))(x),
                               jax.jit(partial(f, jax.lax))(x), rtol=1e-6)


def test_integer_pow_lowering_matches_repeated_multiplication():
    x = np.array([1.1, -0.7, 3.0], np.float32)
    for y in (1, 2, 3, 5, 8, -1, -3):
        np.testing.assert_array_equal(lax.integer_pow(x, y), jax.lax.integer_pow(x, y))
    assert math.isclose(float(lax.integer_pow(np.float32(2.0), 10)), 1024.0)
