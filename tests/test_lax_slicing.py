"""lax slicing and indexing primitives: slice, pad, dynamic_slice, dynamic_update_slice,
gather and the scatter family, against NumPy and the jax oracle, with their JVP, transpose and
batching rules."""
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
from jaxkit import core, lax
from jaxkit.interpreters import dispatch as _dispatch
from jaxkit.interpreters import ad

jax = pytest.importorskip("jax")


def f32(*shape):
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def _args(*makers):
    return lambda rng: [m(rng) for m in makers]


def _ints(high, *shape, dtype=np.int32):
    return lambda rng: rng.integers(0, high, shape).astype(dtype)


def _gdn(lax_mod, **kw):
    return lax_mod.GatherDimensionNumbers(**kw)


def _sdn(lax_mod, **kw):
    return lax_mod.ScatterDimensionNumbers(**kw)


# Rows: x[idx] along axis 0 of a (5, 3) array; a 2-D point gather; a gather with batching dims;
# out-of-bounds handling per mode.
ROW_GATHER = {"offset_dims": (1,), "collapsed_slice_dims": (0,), "start_index_map": (0,)}
POINT_GATHER = {"offset_dims": (), "collapsed_slice_dims": (0, 1), "start_index_map": (0, 1)}
BATCHED_GATHER = {"offset_dims": (1,), "collapsed_slice_dims": (1,), "start_index_map": (1,),
                      "operand_batching_dims": (0,), "start_indices_batching_dims": (0,)}
ROW_SCATTER = {"update_window_dims": (1,), "inserted_window_dims": (0,),
                   "scatter_dims_to_operand_dims": (0,)}
POINT_SCATTER = {"update_window_dims": (), "inserted_window_dims": (0, 1),
                     "scatter_dims_to_operand_dims": (0, 1)}
OOB_IDX = lambda rng: np.array([[0], [4], [7], [-2]], np.int32)
UNIQUE_IDX = lambda rng: rng.permutation(5)[:3, None].astype(np.int32)
DUP_IDX = lambda rng: np.array([[1], [3], [1]], np.int32)


def _np_rows(x, i):
    return x[i[:, 0]]


CASES = [
    Case("slice", "slice", lambda l, x: l.slice(x, (1, 0), (4, 3)), _args(f32(5, 3)),
         np_ref=lambda x: x[1:4, 0:3], diff=(0,), linear=(0,)),
    Case("slice_strided", "slice", lambda l, x: l.slice(x, (0, 1), (5, 3), (2, 1)),
         _args(f32(5, 3)), np_ref=lambda x: x[0:5:2, 1:3], diff=(0,), linear=(0,)),
    Case("slice_in_dim", "slice", lambda l, x: l.slice_in_dim(x, -3, None, 2, 0),
         _args(f32(5, 3)), np_ref=lambda x: x[-3::2], diff=(0,), linear=(0,)),
    Case("index_in_dim", "slice", lambda l, x: l.index_in_dim(x, -1, 1),
         _args(f32(5, 3)), np_ref=lambda x: x[:, -1:], diff=(0,), linear=(0,)),
    Case("index_in_dim_squeezed", "squeeze", lambda l, x: l.index_in_dim(x, 2, 0, False),
         _args(f32(5, 3)), np_ref=lambda x: x[2]),
    Case("pad", "pad", lambda l, x, v: l.pad(x, v, [(1, 2, 1), (-1, 0, 0)]),
         _args(f32(5, 3), lambda rng: np.float32(rng.standard_normal())), diff=(0, 1),
         linear=(0,), batch=[(0, None), (1, 0), (None, 0)]),
    Case("pad_int", "pad", lambda l, x: l.pad(x, np.int32(7), [(0, 1, 2), (2, -1, 0)]),
         _args(_ints(9, 5, 3)),
         np_ref=lambda x: np.pad(np.insert(x, np.repeat(np.arange(1, 5), 2), 7, axis=0),
                                 [(0, 1), (2, 0)], constant_values=7)[:, :4]),
    Case("dynamic_slice", "dynamic_slice", lambda l, x, i, j: l.dynamic_slice(x, (i, j), (2, 2)),
         _args(f32(5, 3), _ints(5), _ints(3)), diff=(0,), linear=(0,),
         batch=[(0, 0, 0), (None, 0, None), (1, None, None), (0, None, 0)]),
    Case("dynamic_slice_clamped", "dynamic_slice",
         lambda l, x: l.dynamic_slice(x, (4, 1), (3, 2)), _args(f32(5, 3)),
         np_ref=lambda x: x[2:5, 1:3]),
    Case("dynamic_slice_in_dim", "dynamic_slice",
         lambda l, x, i: l.dynamic_slice_in_dim(x, i, 2, 1), _args(f32(5, 3), _ints(3)),
         diff=(0,), linear=(0,)),
    Case("dynamic_index_in_dim", "dynamic_slice",
         lambda l, x, i: l.dynamic_index_in_dim(x, i, 0), _args(f32(5, 3), _ints(5)),
         diff=(0,)),
    Case("dynamic_update_slice", "dynamic_update_slice",
         lambda l, x, u, i, j: l.dynamic_update_slice(x, u, (i, j)),
         _args(f32(5, 3), f32(2, 2), _ints(6), _ints(3)), diff=(0, 1), linear=(0, 1),
         batch=[(0, 0, 0, 0), (None, 0, None, None), (0, None, None, None),
                (1, None, 0, None)]),
    Case("dynamic_update_index_in_dim", "dynamic_update_slice",
         lambda l, x, u, i: l.dynamic_update_index_in_dim(x, u, i, 0),
         _args(f32(5, 3), f32(1, 3), _ints(5)), diff=(0, 1), linear=(0, 1)),
    Case("gather_rows", "gather",
         lambda l, x, i: l.gather(x, i, _gdn(l, **ROW_GATHER), (1, 3)),
         _args(f32(5, 3), _ints(5, 4, 1)), np_ref=_np_rows, diff=(0,), linear=(0,),
         batch=[(0, 0), (None, 0), (1, None), (2, 1)]),
    Case("gather_points", "gather",
         lambda l, x, i: l.gather(x, i, _gdn(l, **POINT_GATHER), (1, 1),
                                  indices_are_sorted=False, unique_indices=False),
         _args(f32(5, 3), lambda rng: np.stack([rng.integers(0, 5, (2, 3)),
                                                rng.integers(0, 3, (2, 3))], -1)
               .astype(np.int32)),
         np_ref=lambda x, i: x[i[..., 0], i[..., 1]], diff=(0,), linear=(0,),
         batch=[(0, 0), (None, 1)]),
    Case("gather_window", "gather",
         lambda l, x, i: l.gather(x, i, _gdn(l, offset_dims=(1, 2), collapsed_slice_dims=(),
                                                start_index_map=(0,)), (2, 2)),
         _args(f32(5, 3), _ints(4, 3, 1)), diff=(0,), linear=(0,)),
    Case("gather_batching_dims", "gather",
         lambda l, x, i: l.gather(x, i, _gdn(l, **BATCHED_GATHER), (1, 1, 3)),
         _args(f32(2, 5, 3), _ints(5, 2, 1)), diff=(0,), linear=(0,),
         batch=[(0, 0), (None, 1)]),
    Case("gather_clip", "gather",
         lambda l, x, i: l.gather(x, i, _gdn(l, **ROW_GATHER), (1, 3), mode="clip"),
         _args(f32(5, 3), OOB_IDX), np_ref=lambda x, i: x[np.clip(i[:, 0], 0, 4)], diff=(0,),
         linear=(0,)),
    Case("gather_fill", "gather",
         lambda l, x, i: l.gather(x, i, _gdn(l, **ROW_GATHER), (1, 3), mode="fill",
                                  fill_value=-1.0),
         _args(f32(5, 3), OOB_IDX), diff=(0,), linear=(0,)),
    Case("gather_fill_default_int", "gather",
         lambda l, x, i: l.gather(x, i, _gdn(l, **ROW_GATHER), (1, 3),
                                  mode=l.GatherScatterMode.FILL_OR_DROP),
         _args(_ints(9, 5, 3), OOB_IDX)),
    Case("scatter_add_rows", "scatter-add",
         lambda l, x, i, u: l.scatter_add(x, i, u, _sdn(l, **ROW_SCATTER)),
         _args(f32(5, 3), DUP_IDX, f32(3, 3)), diff=(0, 2), linear=(0, 2),
         batch=[(0, None, 0), (None, 0, 1), (0, 0, 0), (1, None, None)]),
    Case("scatter_add_points", "scatter-add",
         lambda l, x, i, u: l.scatter_add(x, i, u, _sdn(l, **POINT_SCATTER), mode="clip"),
         _args(f32(5, 3), lambda rng: np.array([[0, 1], [4, 2], [9, 9], [0, 1]], np.int32),
               f32(4)), diff=(0, 2), linear=(0, 2), batch=[(0, None, 0), (None, None, 0)]),
    Case("scatter_add_drop", "scatter-add",
         lambda l, x, i, u: l.scatter_add(x, i, u, _sdn(l, **ROW_SCATTER), mode="drop"),
         _args(f32(5, 3), OOB_IDX, f32(4, 3)), diff=(0, 2), linear=(0, 2)),
    Case("scatter_sub", "scatter-sub",
         lambda l, x, i, u: l.scatter_sub(x, i, u, _sdn(l, **ROW_SCATTER)),
         _args(f32(5, 3), DUP_IDX, f32(3, 3)), diff=(0, 2), linear=(0, 2)),
    Case("scatter_mul", "scatter-mul",
         lambda l, x, i, u: l.scatter_mul(x, i, u, _sdn(l, **ROW_SCATTER), unique_indices=True),
         _args(f32(5, 3), UNIQUE_IDX, f32(3, 3)), diff=(0, 2), linear=(0,)),
    Case("scatter_min", "scatter-min",
         lambda l, x, i, u: l.scatter_min(x, i, u, _sdn(l, **ROW_SCATTER)),
         _args(f32(5, 3), DUP_IDX, f32(3, 3)), diff=(0, 2)),
    Case("scatter_max_ties", "scatter-max",
         lambda l, x, i, u: l.scatter_max(x, i, u, _sdn(l, **ROW_SCATTER)),
         _args(lambda rng: np.zeros((5, 3), np.float32), DUP_IDX,
               lambda rng: np.array([[1, 0, -1]] * 3, np.float32)), diff=(0, 2)),
    Case("scatter_unique", "scatter",
         lambda l, x, i, u: l.scatter(x, i, u, _sdn(l, **ROW_SCATTER), unique_indices=True),
         _args(f32(5, 3), UNIQUE_IDX, f32(3, 3)), diff=(0, 2), linear=(0, 2)),
    Case("scatter_collisions", "scatter",
         lambda l, x, i, u: l.scatter(x, i, u, _sdn(l, **ROW_SCATTER)),
         _args(f32(5, 3), lambda rng: np.array([[1], [3], [0]], np.int32), f32(3, 3)),
         diff=(0, 2), batch=[(0, None, 0), (None, 0, 0)]),
    Case("scatter_int_clip", "scatter",
         lambda l, x, i, u: l.scatter(x, i, u, _sdn(l, **ROW_SCATTER), mode="clip"),
         _args(_ints(9, 5, 3), OOB_IDX, _ints(9, 4, 3))),
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

def test_jaxpr_params_print_like_jax():
    x = np.zeros((5, 3), np.float32)
    i = np.zeros((4, 1), np.int32)
    ours = str(jaxkit.make_jaxpr(lambda x, i: lax.gather(
        x, i, lax.GatherDimensionNumbers(**ROW_GATHER), (1, 3)))(x, i))
    theirs = str(jax.make_jaxpr(lambda x, i: jax.lax.gather(
        x, i, jax.lax.GatherDimensionNumbers(**ROW_GATHER), (1, 3)))(x, i))
    assert ours == theirs
    ours = str(jaxkit.make_jaxpr(lambda x: lax.dynamic_slice(x, (1, 2), (2, 1)))(x))
    theirs = str(jax.make_jaxpr(lambda x: jax.lax.dynamic_slice(x, (1, 2), (2, 1)))(x))
    assert ours == theirs
    text = str(jaxkit.make_jaxpr(lambda x: lax.pad(x, 0.0, [(1, 2, 0), (0, 0, 1)]))(x))
    assert "pad[padding_config=((1, 2, 0), (0, 0, 1))] a 0.0:f32[]" in text
    text = str(jaxkit.make_jaxpr(lambda x, u: lax.scatter_add(
        x, i, u, lax.ScatterDimensionNumbers(**ROW_SCATTER), mode="clip"))(x, x[:4]))
    assert "scatter-add[" in text and "mode=GatherScatterMode.CLIP" in text


def test_pad_transpose_of_padding_value():
    # (jax.vjp with respect to the padding value alone fails in JAX 0.10, so compare the joint
    # transpose with respect to both operands.)
    x, v = np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(2)
    config = [(1, -1, 1), (2, 0, 0)]
    ct = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    t_x, t_v = ad.transpose_rules[lax.pad_p](
        ct, ad.UndefinedPrimal(core.get_aval(x)), ad.UndefinedPrimal(core.get_aval(v)),
        padding_config=tuple(config))
    r_x, r_v = jax.vjp(lambda x, v: jax.lax.pad(x, v, config), x, v)[1](ct)
    np.testing.assert_allclose(t_x, r_x, rtol=1e-6)
    np.testing.assert_allclose(t_v, r_v, rtol=1e-5)


def test_traced_negative_start_index_wraps():
    x = np.arange(10, dtype=np.float32)
    f = jaxkit.jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 3))
    np.testing.assert_array_equal(f(x, np.int32(-4)), x[6:9])
    np.testing.assert_array_equal(f(x, np.int32(9)), x[7:10])  # clamped


def test_eager_slices_share_one_program():
    x = jaxkit.device_put(np.arange(12, dtype=np.float32).reshape(4, 3))
    lax.index_in_dim(x, 0)
    before = _dispatch.compile_stats["eager_compiles"]
    rows = [lax.index_in_dim(x, k) for k in range(1, 4)]
    assert _dispatch.compile_stats["eager_compiles"] == before
    np.testing.assert_array_equal(np.concatenate(rows), np.asarray(x)[1:])


# ---- errors -----------------------------------------------------------------------------

ERRORS = [
    (lambda: lax.slice(np.zeros((3, 4)), (0, 0), (4, 4)), TypeError,
     (r"limit_indices must be less than or equal to operand shape, got limit_indices \(4, 4\) "
     r"for operand shape \(3, 4\)")),
    (lambda: lax.slice(np.zeros((3, 4)), (0,), (1,)), TypeError,
     r"start_indices must have length equal to the number of dimensions"),
    (lambda: lax.pad(np.zeros(3, np.float32), np.float32(0), [(0, 0, -1)]), ValueError,
     "interior padding in padding_config must be nonnegative"),
    (lambda: lax.pad(np.zeros(3, np.float32), np.int32(0), [(0, 0, 0)]), TypeError,
     "pad operand and padding_value must be same dtype: got float32 and int32"),
    (lambda: lax.dynamic_slice(np.zeros((3, 4)), (0, 0), (4, 1)), TypeError,
     r"got slice_sizes \(4, 1\) for operand shape \(3, 4\)"),
    (lambda: lax.dynamic_slice(np.zeros((3, 4)), (0,), (1, 1)), ValueError,
     "Length of slice indices must match number of operand dimensions"),
    (lambda: lax.dynamic_update_slice(np.zeros((3, 4)), np.zeros((4, 1)), (0, 0)), TypeError,
     (r"update shape must be smaller than operand shape, got update shape \(4, 1\) for operand "
     r"shape \(3, 4\)")),
    (lambda: lax.gather(np.zeros((5, 3)), np.zeros((4, 2), np.int32),
                        lax.GatherDimensionNumbers(**ROW_GATHER), (1, 3)), TypeError,
     ("Gather op has 1 elements in start_index_map and the bound of dimension "
     "index_vector_dim=1 of indices is 2")),
    (lambda: lax.gather(np.zeros((5, 3)), np.zeros((4, 1), np.float32),
                        lax.GatherDimensionNumbers(**ROW_GATHER), (1, 3)), ValueError,
     "indices must have an integer type"),
    (lambda: lax.gather(np.zeros((5, 3)), np.zeros((4, 1), np.int32),
                        lax.GatherDimensionNumbers(**ROW_GATHER), (2, 3)), TypeError,
     "Gather op can only collapse slice dims with bound 1, but bound is 2"),
    (lambda: lax.scatter_add(np.zeros((5, 3), np.float32), np.zeros((4, 1), np.int32),
                             np.zeros((3, 3), np.float32),
                             lax.ScatterDimensionNumbers(**ROW_SCATTER)), TypeError,
     ("Bounds of the scatter dimensions of updates must be the same as the bounds of the "
     "corresponding dimensions of scatter indices. For scatter dimension 0, updates bound is "
     "3, indices bound is 4.")),
    (lambda: lax.scatter(np.zeros((5, 3), np.float32), np.zeros((4, 1), np.int32),
                         np.zeros((4, 3), np.int32),
                         lax.ScatterDimensionNumbers(**ROW_SCATTER)), TypeError,
     "lax.scatter requires arguments to have the same dtypes, got float32, int32"),
    (lambda: lax.index_in_dim(np.zeros((5, 3)), 5), IndexError,
     "index 5 is out of bounds for axis 0 with size 5"),
    (lambda: lax.gather(np.zeros((5, 3)), np.zeros((4, 1), np.int32),
                        lax.GatherDimensionNumbers(**ROW_GATHER), (1, 3), mode="nearest"),
     ValueError, 'Unknown gather mode "nearest"'),
]


@pytest.mark.parametrize("fn,exc,msg", ERRORS)
def test_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn()


def test_scatter_mul_grad_requires_unique_indices():
    x, u = np.ones((5, 3), np.float32), np.ones((3, 3), np.float32)
    i = np.array([[1], [1], [2]], np.int32)
    dn = lax.ScatterDimensionNumbers(**ROW_SCATTER)
    zero = lambda a: ad.Zero(core.get_aval(a).to_tangent_aval())
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        ad.jvp_rules[lax.scatter_mul_p](
            [x, i, u], [zero(x), zero(i), u], dimension_numbers=dn, indices_are_sorted=False,
            unique_indices=False, mode=lax.GatherScatterMode.FILL_OR_DROP)
