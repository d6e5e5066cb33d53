"""The lax op records: one record per primitive case (function over a lax module, argument
makers, NumPy reference, differentiable and linear arguments, batching dims), across the
structural, slicing/indexing, reduction and convolution families. ``test_lax_ops.py`` runs the
generic checks over all of them; the elementwise family has its own table
(``_elementwise_rows.py``)."""
import numpy as np
import pytest
from _lax_checks import Case

from jaxkit import lax

jax = pytest.importorskip("jax")


# ---- structural ----------------------------------------------------------------------------
def f32(*shape):
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def _args(*makers):
    return lambda rng: [m(rng) for m in makers]


STRUCTURAL = [
    Case("broadcast_in_dim", "broadcast_in_dim",
         lambda l, x: l.broadcast_in_dim(x, (2, 3, 4), (0, 2)), _args(f32(2, 1)),
         np_ref=lambda x: np.broadcast_to(x[:, None, :], (2, 3, 4)), diff=(0,), linear=(0,),
         batch=[(0,), (1,)]),
    Case("broadcast", "broadcast_in_dim", lambda l, x: l.broadcast(x, (2,)), _args(f32(3)),
         np_ref=lambda x: np.broadcast_to(x, (2, 3)), diff=(0,), linear=(0,)),
    Case("expand_dims", "broadcast_in_dim", lambda l, x: l.expand_dims(x, (0, -1)),
         _args(f32(2, 3)), np_ref=lambda x: x[None, :, :, None], diff=(0,), linear=(0,)),
    Case("reshape", "reshape", lambda l, x: l.reshape(x, (3, 2)), _args(f32(2, 3)),
         np_ref=lambda x: x.reshape(3, 2), diff=(0,), linear=(0,), batch=[(0,), (1,)]),
    Case("reshape_dimensions", "reshape", lambda l, x: l.reshape(x, (6, 4), (2, 0, 1)),
         _args(f32(2, 3, 4)), np_ref=lambda x: x.transpose(2, 0, 1).reshape(6, 4), diff=(0,),
         linear=(0,), batch=[(0,), (3,)]),
    Case("collapse", "reshape", lambda l, x: l.collapse(x, 1), _args(f32(2, 3, 4)),
         np_ref=lambda x: x.reshape(2, 12), diff=(0,), linear=(0,)),
    Case("transpose", "transpose", lambda l, x: l.transpose(x, (2, 0, 1)), _args(f32(2, 3, 4)),
         np_ref=lambda x: x.transpose(2, 0, 1), diff=(0,), linear=(0,), batch=[(0,), (2,)]),
    Case("squeeze", "squeeze", lambda l, x: l.squeeze(x, (0, -1)), _args(f32(1, 3, 1)),
         np_ref=lambda x: x[0, :, 0], diff=(0,), linear=(0,), batch=[(0,), (2,)]),
    Case("rev", "rev", lambda l, x: l.rev(x, (0, 2)), _args(f32(2, 3, 4)),
         np_ref=lambda x: x[::-1, :, ::-1], diff=(0,), linear=(0,), batch=[(0,), (1,)]),
    Case("concatenate", "concatenate",
         lambda l, x, y, z: l.concatenate([x, y, z], 1), _args(f32(2, 1), f32(2, 3), f32(2, 2)),
         np_ref=lambda x, y, z: np.concatenate([x, y, z], 1), diff=(0, 1, 2), linear=(0, 1, 2),
         batch=[(0, 0, 0), (None, 1, 0), (1, None, None)]),
    Case("split", "split", lambda l, x: l.split(x, (1, 0, 3), 1), _args(f32(2, 4)),
         np_ref=lambda x: np.split(x, [1, 1], 1), diff=(0,), linear=(0,),
         batch=[(0,), (1,)]),
    Case("convert_f32_i32", "convert_element_type",
         lambda l, x: l.convert_element_type(x, np.int32),
         _args(lambda rng: (rng.standard_normal((2, 3)) * 4).astype(np.float32)),
         np_ref=lambda x: x.astype(np.int32)),
    Case("convert_f32_f16", "convert_element_type",
         lambda l, x: l.convert_element_type(x, np.float16), _args(f32(2, 3)),
         np_ref=lambda x: x.astype(np.float16), diff=(0,), linear=(0,), rtol=1e-3),
    Case("convert_to_bool", "convert_element_type",
         lambda l, x: l.convert_element_type(x, np.bool_),
         _args(lambda rng: np.array([0.0, -0.0, 2.0, np.nan], np.float32)),
         np_ref=lambda x: x.astype(np.bool_)),
    Case("convert_complex_to_real", "convert_element_type",
         lambda l, x: l.convert_element_type(x, np.float32),
         _args(lambda rng: np.array([1 + 2j, -3j], np.complex64))),
    Case("reduce_sum_all", "reduce_sum", lambda l, x: l.reduce_sum(x, (1, 0)),
         _args(f32(2, 3)), np_ref=lambda x: x.sum(), diff=(0,), linear=(0,)),
    Case("broadcast_in_dim_unit", "broadcast_in_dim",
         lambda l, x: l.broadcast_in_dim(x, (4, 3), (0, 1)), _args(f32(1, 3)),
         np_ref=lambda x: np.broadcast_to(x, (4, 3)), diff=(0,), linear=(0,)),
]


# ---- slicing -------------------------------------------------------------------------------
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


SLICING = [
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
         # out of bounds on both sides but no two rows clipped onto one: which colliding
         # update wins is unspecified (XLA's GPU scatter differs from its CPU loop)
         _args(_ints(9, 5, 3), lambda rng: np.array([[1], [7], [2], [-2]], np.int32),
               _ints(9, 4, 3))),
    Case("scatter_apply_rows", "scatter",
         lambda l, x, i: l.scatter_apply(x, i, l.sin, _sdn(l, **ROW_SCATTER), update_shape=(3, 3)),
         _args(f32(5, 3), DUP_IDX), batch=[(0, None, None), (None, 0, None), (1, 0, None)]),
    Case("scatter_apply_points_clip", "scatter",
         lambda l, x, i: l.scatter_apply(x, i, lambda v: v * 2 - 1, _sdn(l, **POINT_SCATTER),
                                         update_shape=(4,), mode="clip"),
         _args(_ints(9, 5, 3), lambda rng: np.array([[0, 1], [4, 2], [9, 9], [0, 1]], np.int32)),
         batch=[(0, None, None), (None, 0, None), (0, 0, 0)]),
]


# ---- reductions ----------------------------------------------------------------------------
def ties(*shape):
    """Floats with many repeated values (ties for max/min/sort/argmax)."""
    return lambda rng: rng.integers(-2, 3, shape).astype(np.float32)


def ints(*shape, dtype=np.int32):
    return lambda rng: rng.integers(-3, 8, shape).astype(dtype)


def bools(*shape):
    return lambda rng: rng.integers(0, 2, shape).astype(np.bool_)




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


REDUCTIONS = [
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
    # windowed reductions (pooling)
    Case("reduce_window_sum", "reduce_window_sum",
         lambda l, x: l.reduce_window(x, 0.0, l.add, (2, 2), (2, 2), "VALID"),
         _args(f32(4, 6)), np_ref=lambda x: x.reshape(2, 2, 3, 2).sum((1, 3)), diff=(0,),
         linear=(0,), batch=[(0,), (2,)]),
    Case("reduce_window_sum_dilated", "reduce_window_sum",
         lambda l, x: l.reduce_window(x, 0.0, l.add, (2, 3), (1, 2), ((1, 0), (-1, 2)),
                                      (2, 1), (1, 2)),
         _args(f32(4, 7)), diff=(0,), linear=(0,), batch=[(0,), (1,)]),
    Case("reduce_window_max_same", "reduce_window_max",
         lambda l, x: l.reduce_window(x, -np.inf, l.max, (3, 3), (2, 1), "SAME"),
         _args(f32(5, 6)), diff=(0,), batch=[(0,), (2,)]),
    Case("reduce_window_max_ties", "reduce_window_max",
         lambda l, x: l.reduce_window(x, -np.inf, l.max, (2, 2), (2, 2), "VALID"),
         _args(ties(4, 6)), np_ref=lambda x: x.reshape(2, 2, 3, 2).max((1, 3))),
    Case("reduce_window_min_padded", "reduce_window_min",
         lambda l, x: l.reduce_window(x, np.inf, l.min, (2, 2), (1, 2), ((1, 1), (0, 1))),
         _args(f32(4, 5)), diff=(0,), batch=[(0,), (1,)]),
    Case("reduce_window_general", "reduce_window",
         lambda l, x, y: l.reduce_window((x, y), (-np.inf, 0.0),
                                         lambda a, b: (l.max(a[0], b[0]), l.add(a[1], b[1])),
                                         (2, 2), (1, 1), "VALID"),
         _args(f32(3, 4), f32(3, 4)), batch=[(0, 0, None, None), (1, None, None, None)]),
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


# ---- convolution ---------------------------------------------------------------------------
def _np_conv1d_same(x, w):
    """NCW/OIW cross-correlation with 'SAME' padding, stride 1."""
    k = w.shape[-1]
    lo = (k - 1) // 2
    xp = np.pad(x, [(0, 0), (0, 0), (lo, k - 1 - lo)])
    n = x.shape[-1]
    return np.einsum("bcnk,ock->bon", np.stack([xp[..., i:i + k] for i in range(n)], 2), w)


BATCH = [(0, 0), (None, 0), (0, None), (1, 2)]
CONVOLUTION = [
    Case("conv1d_same", "conv_general_dilated",
         lambda l, x, w: l.conv(x, w, (1,), "SAME"), _args(f32(2, 3, 9), f32(4, 3, 3)),
         np_ref=_np_conv1d_same, diff=(0, 1), linear=(0, 1), rtol=1e-4, batch=BATCH),
    Case("conv1d_strided_same_lower", "conv_general_dilated",
         lambda l, x, w: l.conv_general_dilated(x, w, (2,), "SAME_LOWER"),
         _args(f32(2, 3, 9), f32(4, 3, 4)), diff=(0, 1), linear=(0, 1), rtol=1e-4),
    Case("conv2d_groups_dilated", "conv_general_dilated",
         lambda l, x, w: l.conv_general_dilated(x, w, (1, 2), ((1, 0), (2, 1)),
                                                rhs_dilation=(2, 1), feature_group_count=2),
         _args(f32(2, 4, 7, 6), f32(6, 2, 3, 2)), diff=(0, 1), linear=(0, 1), rtol=1e-4,
         batch=BATCH),
    Case("conv2d_nhwc_lhs_dilation", "conv_general_dilated",
         lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), ((1, 1), (0, 2)), (2, 1),
                                                dimension_numbers=("NHWC", "HWIO", "NHWC")),
         _args(f32(2, 5, 5, 4), f32(3, 3, 4, 6)), diff=(0, 1), linear=(0, 1), rtol=1e-4,
         batch=BATCH),
    Case("conv1d_batch_groups", "conv_general_dilated",
         lambda l, x, w: l.conv_general_dilated(x, w, (1,), "VALID", batch_group_count=2),
         _args(f32(4, 3, 8), f32(6, 3, 3)), diff=(0, 1), linear=(0, 1), rtol=1e-4,
         batch=BATCH),
    Case("conv_transpose", "conv_general_dilated",
         lambda l, x, w: l.conv_transpose(x, w, (2, 2), "SAME"),
         _args(f32(1, 5, 5, 2), f32(3, 3, 2, 4)), diff=(0, 1), linear=(0, 1), rtol=1e-4),
    Case("conv_transpose_kernel", "conv_general_dilated",
         lambda l, x, w: l.conv_transpose(x, w, (2,), "VALID", transpose_kernel=True),
         _args(f32(1, 5, 2), f32(3, 4, 2)), rtol=1e-4),
    Case("conv_complex", "conv_general_dilated",
         lambda l, x, w: l.conv(x, w, (1,), "SAME"),
         _args(lambda rng: (rng.standard_normal((1, 2, 6))
                            + 1j * rng.standard_normal((1, 2, 6))).astype(np.complex64),
               lambda rng: (rng.standard_normal((3, 2, 3))
                            + 1j * rng.standard_normal((3, 2, 3))).astype(np.complex64)),
         rtol=1e-4),
    # XLA's GPU compiler has no integer convolution (cuDNN: "Unimplemented"), for JAX too
    Case("conv_int_preferred", "conv_general_dilated",
         lambda l, x, w: l.conv(x, w, (1,), "VALID", preferred_element_type=np.int32),
         _args(lambda rng: rng.integers(-3, 4, (1, 2, 5)).astype(np.int8),
               lambda rng: rng.integers(-3, 4, (2, 2, 2)).astype(np.int8)),
         platforms=("cpu",)),
]


# ---- stacking, integer and staging primitives ----------------------------------------------
def ints(lo, hi, shape, dtype):
    return lambda rng: rng.integers(lo, hi, shape, dtype=np.int64).astype(dtype)


_BIG = np.iinfo(np.int32)
_COPY_SEMANTICS = (lax.ArrayCopySemantics.REUSE_INPUT,)

STACKING_AND_STAGING = [
    Case("stack", "stack", lambda l, x, y: l.stack([x, y], 1), _args(f32(2, 3), f32(2, 3)),
         np_ref=lambda x, y: np.stack([x, y], 1), diff=(0, 1), linear=(0, 1),
         batch=[(0, 0), (None, 1), (1, None)]),
    Case("stack_last", "stack", lambda l, x: l.stack([x], -1), _args(f32(3)),
         np_ref=lambda x: x[:, None], diff=(0,), linear=(0,)),
    Case("unstack", "unstack", lambda l, x: l.unstack(x, 1), _args(f32(2, 3, 4)),
         np_ref=lambda x: [x[:, i] for i in range(3)], diff=(0,), linear=(0,),
         batch=[(0,), (1,), (2,), (3,)]),
    Case("tile", "tile", lambda l, x: l.tile(x, (2, 1, 3)), _args(f32(2, 3, 1)),
         np_ref=lambda x: np.tile(x, (2, 1, 3)), diff=(0,), linear=(0,), batch=[(0,), (2,)]),
    Case("tile_zero_reps", "tile", lambda l, x: l.tile(x, (0, 2)), _args(f32(2, 3)),
         np_ref=lambda x: np.tile(x, (0, 2))),
    *[Case(f"mulhi_{np.dtype(dt).name}", "mulhi", lambda l, x, y: l.mulhi(x, y),
           _args(ints(lo, hi, (7,), dt), ints(lo, hi, (7,), dt)),
           np_ref=lambda x, y, dt=dt: ((x.astype(object) * y.astype(object))
                                       >> np.iinfo(dt).bits).astype(dt),
           batch=[(0, 0), (None, 0)])
      for dt, lo, hi in [(np.int32, _BIG.min, _BIG.max), (np.uint32, 0, 2**32),
                         (np.int8, -128, 128), (np.uint16, 0, 2**16)]],
    Case("optimization_barrier", "optimization_barrier",
         lambda l, x, y: l.optimization_barrier((x, y)), _args(f32(2, 3), f32(2, 3)),
         np_ref=lambda x, y: (x, y), diff=(0, 1), batch=[(0, 0), (None, 1)]),
    *[Case(name, name, lambda l, x, y, name=name: getattr(l, f"{name}_p").bind(x, y),
           _args(lambda rng: np.array([np.nan, 0.0, -0.0, 1.0, -np.inf, 2.0], np.float32),
                 lambda rng: np.array([np.nan, -0.0, 0.0, np.nan, -np.inf, 1.0], np.float32)),
           batch=[(0, 0), (None, 0)])
      for name in ("eq_to", "le_to", "lt_to")],
    Case("device_put", "device_put",
         lambda l, x: l.device_put_p.bind(x, devices=(None,), srcs=(None,),
                                          copy_semantics=_COPY_SEMANTICS)[0],
         _args(f32(2, 3)), np_ref=lambda x: x, diff=(0,), linear=(0,), batch=[(0,), (1,)]),
    Case("rng_bit_generator", "rng_bit_generator",
         lambda l, k: l.rng_bit_generator(k, (2, 3)),
         _args(lambda rng: np.array([1, 2, 3, 4], np.uint32))),
    Case("rng_bit_generator_philox_u8", "rng_bit_generator",
         lambda l, k: l.rng_bit_generator(k, (5,), np.uint8, l.RandomAlgorithm.RNG_PHILOX),
         _args(lambda rng: np.array([9, 8, 7, 6], np.uint32))),
]


# ---- elementwise broadcasting: size-1 dimensions of equal-rank operands (f32[4,1] with
# f32[1,3] is f32[4,3]), as JAX's lax broadcasts them; gradients sum back over them ---------
def pos32(*shape):
    return lambda rng: rng.uniform(0.5, 2.0, shape).astype(np.float32)


def i32(*shape):
    return lambda rng: rng.integers(-8, 8, shape).astype(np.int32)


SIZE1 = [(0, 0), (None, 0), (0, None), (1, 2)]
BROADCASTING = [
    Case("add_size1", "add", lambda l, x, y: l.add(x, y), _args(f32(4, 1), f32(1, 3)),
         np_ref=np.add, diff=(0, 1), linear=(0, 1), batch=SIZE1),
    Case("sub_size1", "sub", lambda l, x, y: l.sub(x, y), _args(f32(1, 3), f32(4, 3)),
         np_ref=np.subtract, diff=(0, 1), linear=(0, 1), batch=SIZE1),
    Case("mul_size1", "mul", lambda l, x, y: l.mul(x, y), _args(f32(2, 1, 3), f32(1, 4, 1)),
         np_ref=np.multiply, diff=(0, 1), linear=(0,), batch=SIZE1),
    Case("div_size1", "div", lambda l, x, y: l.div(x, y), _args(f32(4, 1), pos32(4, 3)),
         np_ref=np.divide, diff=(0, 1), linear=(0,), batch=SIZE1),
    Case("max_size1", "max", lambda l, x, y: l.max(x, y), _args(f32(4, 1), f32(1, 3)),
         np_ref=np.maximum, diff=(0, 1), batch=SIZE1),
    Case("pow_size1", "pow", lambda l, x, y: l.pow(x, y), _args(pos32(1, 3), f32(4, 1)),
         np_ref=np.power, diff=(0, 1), batch=SIZE1, rtol=1e-4),
    Case("atan2_size1", "atan2", lambda l, x, y: l.atan2(x, y), _args(f32(4, 1), f32(1, 3)),
         np_ref=np.arctan2, diff=(0, 1), batch=SIZE1),
    Case("lt_size1", "lt", lambda l, x, y: l.lt(x, y), _args(f32(4, 1), f32(1, 3)),
         np_ref=np.less, batch=SIZE1),
    Case("and_size1", "and", lambda l, x, y: l.bitwise_and(x, y), _args(i32(1, 3), i32(4, 1)),
         np_ref=np.bitwise_and, batch=SIZE1),
    Case("add_size0_size1", "add", lambda l, x, y: l.add(x, y), _args(f32(0, 1), f32(1, 3)),
         np_ref=np.add, diff=(0, 1), linear=(0, 1)),
]

RECORDS = (STRUCTURAL + SLICING + REDUCTIONS + CONVOLUTION + STACKING_AND_STAGING
           + BROADCASTING)
