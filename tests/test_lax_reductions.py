"""lax reductions, cumulative reductions, sorting and dot_general: against NumPy and the jax
oracle, with their JVP, transpose and batching rules."""
import numpy as np
import pytest
from _lax_checks import (
    Case,
    check_batching,
    check_jit,
    check_jvp,
    check_numpy,
    check_transpose,
    check_vs_jax,
)

import jaxkit
from jaxkit import lax

jax = pytest.importorskip("jax")


def f32(*shape):
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def ties(*shape):
    """Floats with many repeated values (ties for max/min/sort/argmax)."""
    return lambda rng: rng.integers(-2, 3, shape).astype(np.float32)


def ints(*shape, dtype=np.int32):
    return lambda rng: rng.integers(-3, 8, shape).astype(dtype)


def bools(*shape):
    return lambda rng: rng.integers(0, 2, shape).astype(np.bool_)


def _args(*makers):
    return lambda rng: [m(rng) for m in makers]


def with_nans(rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    x[0, 1] = x[2, 3] = np.nan
    x[1, 2] = -0.0
    return [x]


def _add2(a, b):
    return lax.add(a[0], b[0]), lax.mul(a[1], b[1])


def _jax_add2(a, b):
    return jax.lax.add(a[0], b[0]), jax.lax.mul(a[1], b[1])


def _argmax_pair(a, b):
    pick = lax.gt(a[0], b[0])
    return lax.select_n(pick, b[0], a[0]), lax.select_n(pick, b[1], a[1])


def _jax_argmax_pair(a, b):
    pick = jax.lax.gt(a[0], b[0])
    return jax.lax.select_n(pick, b[0], a[0]), jax.lax.select_n(pick, b[1], a[1])


CASES = [
    Case("reduce_sum", "reduce_sum", lambda l, x: l.reduce_sum(x, (0, 2)), _args(f32(3, 4, 2)),
         np_ref=lambda x: x.sum((0, 2)), diff=(0,), linear=(0,), batch=[(0,), (2,)]),
    Case("reduce_max_ties", "reduce_max", lambda l, x: l.reduce_max(x, (1,)), _args(ties(3, 5)),
         np_ref=lambda x: x.max(1), diff=(0,), batch=[(0,), (1,)]),
    Case("reduce_min", "reduce_min", lambda l, x: l.reduce_min(x, (0, 1)), _args(ties(3, 5)),
         np_ref=lambda x: x.min((0, 1)), diff=(0,)),
    Case("reduce_max_int", "reduce_max", lambda l, x: l.reduce_max(x, (0,)), _args(ints(3, 5)),
         np_ref=lambda x: x.max(0)),
    Case("reduce_prod", "reduce_prod", lambda l, x: l.reduce_prod(x, (1,)), _args(f32(3, 5)),
         np_ref=lambda x: x.prod(1), diff=(0,), rtol=1e-4),
    Case("reduce_prod_zeros", "reduce_prod", lambda l, x: l.reduce_prod(x, (0, 1)),
         _args(lambda rng: np.array([[0, 2, 3], [1, 0, -1]], np.float32)),
         np_ref=lambda x: x.prod(), diff=(0,)),
    Case("reduce_and", "reduce_and", lambda l, x: l.reduce_and(x, (1,)), _args(bools(3, 4)),
         np_ref=lambda x: x.all(1)),
    Case("reduce_or", "reduce_or", lambda l, x: l.reduce_or(x, (0,)), _args(bools(3, 4)),
         np_ref=lambda x: x.any(0)),
    Case("reduce_xor_int", "reduce_xor", lambda l, x: l.reduce_xor(x, (1,)), _args(ints(3, 4)),
         np_ref=lambda x: np.bitwise_xor.reduce(x, 1)),
    Case("argmax", "argmax", lambda l, x: l.argmax(x, 1, np.int32), _args(ties(4, 5)),
         np_ref=lambda x: np.argmax(x, 1), batch=[(0,), (1,)]),
    Case("argmin_axis0", "argmin", lambda l, x: l.argmin(x, 0, np.int32), _args(ties(4, 5)),
         np_ref=lambda x: np.argmin(x, 0)),
    Case("argmax_nan", "argmax", lambda l, x: l.argmax(x, 1, np.int32), with_nans,
         np_ref=lambda x: np.argmax(x, 1)),
    Case("argmin_int", "argmin", lambda l, x: l.argmin(x, 1, np.int32), _args(ints(4, 5)),
         np_ref=lambda x: np.argmin(x, 1)),
    Case("reduce_general", "reduce",
         lambda l, x, y: l.reduce((x, y), (np.float32(0), np.float32(1)), _add2, (1,)),
         _args(f32(3, 4), f32(3, 4)), np_ref=lambda x, y: (x.sum(1), y.prod(1)),
         jax_fn=lambda l, x, y: l.reduce((x, y), (np.float32(0), np.float32(1)), _jax_add2,
                                         (1,)), rtol=1e-4, diff=(0, 1)),
    Case("reduce_general_odd", "reduce",
         lambda l, x, y: l.reduce((x, y), (np.float32(-np.inf), np.float32(0)), _argmax_pair,
                                  (0, 2)), _args(ties(5, 2, 3), f32(5, 2, 3)), diff=(0, 1),
         jax_fn=lambda l, x, y: l.reduce((x, y), (np.float32(-np.inf), np.float32(0)),
                                         _jax_argmax_pair, (0, 2))),
    Case("reduce_monoid", "reduce_max", lambda l, x: l.reduce(x, -np.inf, l.max, (0,)),
         _args(f32(3, 4)), np_ref=lambda x: x.max(0)),
    Case("cumsum", "cumsum", lambda l, x: l.cumsum(x, 1), _args(f32(3, 5)),
         np_ref=lambda x: np.cumsum(x, 1), diff=(0,), linear=(0,), batch=[(0,), (2,)]),
    Case("cumsum_reverse", "cumsum", lambda l, x: l.cumsum(x, 0, reverse=True),
         _args(f32(3, 5)), np_ref=lambda x: np.cumsum(x[::-1], 0)[::-1], diff=(0,),
         linear=(0,)),
    Case("cumsum_int", "cumsum", lambda l, x: l.cumsum(x, 0), _args(ints(5)),
         np_ref=lambda x: np.cumsum(x).astype(np.int32)),
    Case("cumprod", "cumprod", lambda l, x: l.cumprod(x, 1), _args(f32(3, 5)),
         np_ref=lambda x: np.cumprod(x, 1), diff=(0,), rtol=1e-4),
    Case("cummax_ties", "cummax", lambda l, x: l.cummax(x, 1), _args(ties(3, 6)),
         np_ref=lambda x: np.maximum.accumulate(x, 1), diff=(0,)),
    Case("cummin_reverse", "cummin", lambda l, x: l.cummin(x, 1, reverse=True),
         _args(ties(3, 6)), np_ref=lambda x: np.minimum.accumulate(x[:, ::-1], 1)[:, ::-1],
         diff=(0,)),
    Case("cumlogsumexp", "cumlogsumexp", lambda l, x: l.cumlogsumexp(x, 1), _args(f32(3, 5)),
         np_ref=lambda x: np.logaddexp.accumulate(x, 1), diff=(0,), rtol=1e-4),
    Case("sort", "sort", lambda l, x: l.sort(x, 1), with_nans,
         np_ref=lambda x: np.sort(x, 1), diff=(0,), batch=[(0,), (1,)]),
    Case("sort_axis0_unstable", "sort", lambda l, x: l.sort(x, 0, is_stable=False),
         _args(f32(4, 3)), np_ref=lambda x: np.sort(x, 0), diff=(0,)),
    Case("sort_two_keys", "sort", lambda l, x, y, z: l.sort((x, y, z), 0, num_keys=2),
         _args(ints(6), ints(6), f32(6)),
         np_ref=lambda x, y, z: [a[np.lexsort((y, x))] for a in (x, y, z)], diff=(2,),
         batch=[(0, 0, 0), (None, 0, 0), (0, None, None)]),
    Case("sort_key_val", "sort", lambda l, k, v: l.sort_key_val(k, v),
         _args(ints(3, 5), f32(3, 5)),
         np_ref=lambda k, v: (np.sort(k, 1, kind="stable"),
                              np.take_along_axis(v, np.argsort(k, 1, kind="stable"), 1)),
         diff=(1,)),
    Case("top_k", "top_k", lambda l, x: l.top_k(x, 3), _args(ties(2, 6)),
         np_ref=lambda x: (-np.sort(-x, 1, kind="stable")[:, :3],
                           np.argsort(-x, 1, kind="stable")[:, :3]), diff=(0,),
         batch=[(0,), (1,)]),
    Case("top_k_axis0", "top_k", lambda l, x: l.top_k(x, 2, axis=0), _args(f32(4, 3)),
         diff=(0,)),
    Case("dot_matmul", "dot_general", lambda l, a, b: l.dot(a, b), _args(f32(3, 4), f32(4, 2)),
         np_ref=lambda a, b: a @ b, diff=(0, 1), linear=(0, 1), rtol=1e-4,
         batch=[(0, 0), (None, 1), (2, None)]),
    Case("dot_vec", "dot_general", lambda l, a, b: l.dot(a, b), _args(f32(4), f32(4, 2)),
         np_ref=lambda a, b: a @ b, diff=(0, 1), linear=(0, 1), rtol=1e-4),
    Case("dot_general_batched", "dot_general",
         lambda l, a, b: l.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
         _args(f32(2, 3, 4), f32(2, 4, 5)), np_ref=lambda a, b: np.einsum("bij,bjk->bik", a, b),
         diff=(0, 1), linear=(0, 1), rtol=1e-4, batch=[(0, 0), (1, None), (None, 2)]),
    Case("dot_general_mixed_axes", "dot_general",
         lambda l, a, b: l.dot_general(a, b, (((0, 2), (2, 0)), ((1,), (1,))),
                                       precision=l.Precision.HIGHEST),
         _args(f32(3, 2, 4), f32(4, 2, 3)), np_ref=lambda a, b: np.einsum("ibk,kbi->b", a, b),
         diff=(0, 1), linear=(0, 1), rtol=1e-4),
    Case("dot_general_outer", "dot_general",
         lambda l, a, b: l.dot_general(a, b, (((), ()), ((), ()))), _args(f32(3), f32(2)),
         np_ref=np.outer, diff=(0, 1), linear=(0, 1)),
    Case("dot_int8_preferred", "dot_general",
         lambda l, a, b: l.dot(a, b, preferred_element_type=np.int32),
         _args(ints(3, 4, dtype=np.int8), ints(4, 2, dtype=np.int8)),
         np_ref=lambda a, b: a.astype(np.int32) @ b.astype(np.int32)),
    Case("dot_mixed_dtypes", "dot_general", lambda l, a, b: l.dot(a, b),
         _args(ints(3, 4), f32(4, 2)), np_ref=lambda a, b: a @ b, rtol=1e-4),
]

_ids = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_vs_jax(case):
    check_vs_jax(case, jax.lax)


@pytest.mark.parametrize("case", [c for c in CASES if c.np_ref], ids=str)
def test_vs_numpy(case):
    check_numpy(case)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_jit(case):
    check_jit(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.diff], ids=str)
def test_jvp(case):
    check_jvp(case, jax)


@pytest.mark.parametrize("case", [c for c in CASES if c.linear], ids=str)
def test_transpose(case):
    check_transpose(case, jax)


@pytest.mark.parametrize("case", [c for c in CASES if c.batch or c.diff], ids=str)
def test_batching(case):
    check_batching(case)


# ---- printing ---------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda l, x: l.reduce_max(x, (1,)),
    lambda l, x: l.argmax(x, 0, np.int32),
    lambda l, x: l.cumsum(x, 1, reverse=True),
    lambda l, x: l.sort(x, 0),
    lambda l, x: l.top_k(x, 2),
    lambda l, x: l.cumlogsumexp(x),
], ids=["reduce_max", "argmax", "cumsum", "sort", "top_k", "cumlogsumexp"])
def test_jaxpr_prints_like_jax(fn):
    x = np.zeros((3, 4), np.float32)
    ours = str(jaxkit.make_jaxpr(lambda x: fn(lax, x))(x))
    theirs = str(jax.make_jaxpr(lambda x: fn(jax.lax, x))(x))
    assert ours == theirs


def test_dot_general_jaxpr_params():
    a = np.zeros((2, 3), np.float32)
    text = str(jaxkit.make_jaxpr(lambda a: lax.dot_general(a, a, (((1,), (1,)), ((), ()))))(a))
    assert "dot_general[" in text and "dimension_numbers=(((1,), (1,)), ((), ()))" in text
    assert "f32[2,2] = dot_general" in text


def test_reduce_general_jaxpr_has_computation():
    x = np.zeros((3, 4), np.float32)
    text = str(jaxkit.make_jaxpr(lambda x: lax.reduce(
        (x, x), (np.float32(0), np.float32(1)), _add2, (0,)))(x))
    assert "= reduce[" in text and "dimensions=(0,)" in text and "add" in text


# ---- errors -----------------------------------------------------------------------------

ERRORS = [
    (lambda: lax.dot_general(np.zeros((3, 4)), np.zeros((5, 2)), (((1,), (0,)), ((), ()))),
     TypeError, r"contracting dimensions to have the same shape, got \(4,\) and \(5,\)"),
    (lambda: lax.dot_general(np.zeros((2, 3, 4)), np.zeros((3, 4, 5)),
                             (((2,), (1,)), ((0,), (0,)))),
     TypeError, r"batch dimensions to have the same shape, got \(2,\) and \(3,\)"),
    (lambda: lax.dot_general(np.zeros((3, 4)), np.zeros((4, 2)), (((2,), (0,)), ((), ()))),
     TypeError, "lhs dimension numbers to be nonnegative and less than the number of axes"),
    (lambda: lax.dot(np.zeros((2, 3, 4)), np.zeros((4, 2))), ValueError,
     "dimension_numbers must be specified"),
    (lambda: lax.dot(np.zeros((3,), np.int32), np.zeros((3,), np.int32),
                     preferred_element_type=np.int8), TypeError, "must not be narrower"),
    (lambda: lax.dot(np.zeros(3), np.zeros(3), precision="fast"), ValueError,
     "Precision argument must be one of"),
    (lambda: lax.reduce_max(np.zeros((3, 4), np.float32), (2,)), ValueError,
     r"reduction axes \(2,\) contains out-of-bounds indices for float32\[3,4\]"),
    (lambda: lax.cumsum(np.zeros((3, 4)), -1), ValueError, "do not allow negative axes"),
    (lambda: lax.reduce_and(np.zeros((3, 4), np.float32), (1,)), TypeError,
     "logical reduction requires operand dtype bool or int, got float32"),
    (lambda: lax.argmax(np.zeros((0, 4)), 0, np.int32), ValueError,
     "argmin and argmax require non-empty reduced dimension"),
    (lambda: lax.argmax(np.zeros((2, 4)), 0, np.float32), TypeError,
     "index_dtype must be an integer type"),
    (lambda: lax.sort((np.zeros(3), np.zeros(4))), TypeError,
     r"Arguments to sort must have equal shapes, got: \(3,\) \(4,\)"),
    (lambda: lax.sort(np.zeros(3), num_keys=2), ValueError, "must equal 1 for a single operand"),
    (lambda: lax.top_k(np.zeros((2, 3)), 4), ValueError,
     "k argument to top_k must be no larger than size along axis"),
    (lambda: lax.cumsum(np.zeros(3, np.bool_)), TypeError, "cumsum does not accept dtype bool"),
    (lambda: lax.reduce(np.zeros(3, np.float32), (np.float32(0), np.float32(0)), lambda a, b: a,
                        (0,)), ValueError, "Operands must have the same tree structure"),
]


@pytest.mark.parametrize("fn,exc,msg", ERRORS)
def test_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn()


def test_reduce_general_jvp_of_init_values_is_not_silently_wrong():
    from jaxkit.interpreters import ad
    x = np.ones((3, 4), np.float32)
    closed = jaxkit.make_jaxpr(lambda x: lax.reduce(
        (x, x), (np.float32(0), np.float32(1)), _add2, (0,)))(x)
    eqn = closed.jaxpr.eqns[-1]
    with pytest.raises(NotImplementedError, match="non-zero tangents for initial values"):
        ad.jvp_rules[lax.reduce_p]([x, x, np.float32(0), np.float32(1)],
                                        [x, x, np.float32(1), np.float32(0)], **eqn.params)
