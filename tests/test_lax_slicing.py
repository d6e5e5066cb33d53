"""lax slicing and indexing primitives: slice, pad, dynamic_slice, dynamic_update_slice,
gather and the scatter family, against NumPy and the jax oracle, with their JVP, transpose and
batching rules beyond the generic checks of ``test_lax_ops.py``
over the records in ``_lax_records.py``."""
import numpy as np
import pytest
from _lax_records import ROW_GATHER, ROW_SCATTER

import jaxkit
from jaxkit import core, lax
from jaxkit.interpreters import dispatch as _dispatch
from jaxkit.interpreters import ad

jax = pytest.importorskip("jax")


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
    before = _dispatch.programs.compiles
    rows = [lax.index_in_dim(x, k) for k in range(1, 4)]
    assert _dispatch.programs.compiles == before
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
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        jaxkit.jvp(lambda u: lax.scatter_mul(x, i, u, dn), (u,), (u,))
