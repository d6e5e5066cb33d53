"""lax.conv_general_dilated_patches / conv_general_dilated_local (compositions) and
lax.approx_max_k / approx_min_k (the approx_top_k primitive), against the JAX oracle and
NumPy: values (bit for bit where JAX is exact), layouts, dtypes, jit, gradients against
finite differences in float64, vmap against a Python loop, jaxpr text and error classes."""
import math

import ml_dtypes
import numpy as np
import pytest
from gradcheck import check_grads
from vmapcheck import check_vmap

import jaxkit
from jaxkit import lax
from jaxkit.api import jvp
from jaxkit.lax.approx_top_k import approx_top_k_output_size

jax = pytest.importorskip("jax")
from jax._src.lib import _jax as _jax_lib  # noqa: E402  (XLA's output-size function)

_rng = np.random.RandomState(0)


def _randn(*shape, dtype=np.float32):
    return _rng.randn(*shape).astype(dtype)


def _bits(x) -> np.ndarray:
    """An array's bytes as unsigned integers, so that NaN == NaN and -0.0 != 0.0."""
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype.kind == "f" or \
        x.dtype == ml_dtypes.bfloat16 else x


def _assert_identical(ours, theirs):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (
        (ours.shape, ours.dtype), (theirs.shape, theirs.dtype))
    np.testing.assert_array_equal(_bits(ours), _bits(theirs))


# --------------------------------------------------------------------------------------------
# conv_general_dilated_patches / conv_general_dilated_local
# --------------------------------------------------------------------------------------------

# (name, lhs shape, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation, layout)
PATCH_CASES = [
    ("2d_default_valid", (2, 3, 5, 6), (2, 3), (1, 1), "VALID", None, None, None),
    ("2d_nchw_same_strided", (2, 3, 5, 6), (2, 3), (2, 1), "SAME", None, None,
     ("NCHW", "OIHW", "NCHW")),
    ("2d_nhwc_same_atrous", (2, 5, 6, 3), (2, 3), (1, 2), "SAME", None, (2, 1),
     ("NHWC", "HWIO", "NHWC")),
    ("2d_nhwc_pairs_lhs_dilated", (2, 5, 6, 3), (3, 2), (1, 1), ((1, 0), (2, 1)), (2, 1), None,
     ("NHWC", "HWIO", "NHWC")),
    ("2d_mixed_layouts", (2, 5, 6, 3), (3, 2), (1, 1), ((1, 0), (2, 1)), (1, 2), (1, 2),
     ("NHWC", "OIHW", "CNHW")),
    ("2d_kernel_spatial_order_wh", (2, 5, 6, 3), (2, 3), (1, 1), "VALID", None, None,
     ("NHWC", "WIOH", "NHWC")),
    ("1d_same_lower", (3, 2, 7), (3,), (2,), "SAME_LOWER", None, None, None),
    ("1d_nwc_atrous", (2, 7, 3), (3,), (1,), ((1, 1),), None, (2,), ("NWC", "WIO", "NWC")),
    ("3d_default", (1, 2, 4, 5, 3), (2, 2, 3), (1, 2, 1), "VALID", None, None, None),
    ("3d_permuted", (1, 4, 5, 3, 2), (2, 3, 2), (1, 1, 2), "SAME", None, (1, 2, 1),
     ("NHWDC", "DHWIO", "NDHWC")),
]
_PATCH_IDS = [c[0] for c in PATCH_CASES]


def _patch_args(case):
    _, shape, fs, strides, padding, lhs_dil, rhs_dil, dn = case
    return _randn(*shape), fs, strides, padding, lhs_dil, rhs_dil, dn


def _local_kernel(x, fs, patches_shape, dn, out_features=4, dtype=np.float32):
    """A kernel for conv_general_dilated_local: O = out_features, I = the patch size, spatial
    = the output positions, laid out as dimension_numbers[1] says."""
    lhs_spec, rhs_spec, out_spec = lax.conv_dimension_numbers(np.shape(x), (1, 1) + tuple(fs),
                                                              dn)
    shape = [0] * np.ndim(x)
    shape[rhs_spec[0]] = out_features
    shape[rhs_spec[1]] = np.shape(x)[lhs_spec[1]] * math.prod(fs)
    for r, o in zip(rhs_spec[2:], out_spec[2:]):
        shape[r] = patches_shape[o]
    return _randn(*shape, dtype=dtype)


@pytest.mark.parametrize("case", PATCH_CASES, ids=_PATCH_IDS)
def test_patches_and_local_match_jax(case):
    x, fs, strides, padding, lhs_dil, rhs_dil, dn = _patch_args(case)
    ours = lax.conv_general_dilated_patches(x, fs, strides, padding, lhs_dil, rhs_dil, dn)
    theirs = jax.lax.conv_general_dilated_patches(x, fs, strides, padding, lhs_dil, rhs_dil, dn)
    _assert_identical(ours, theirs)  # one-hot kernels: exact, so the layouts must agree
    w = _local_kernel(x, fs, ours.shape, dn)
    ours = lax.conv_general_dilated_local(x, w, strides, padding, fs, lhs_dil, rhs_dil, dn,
                                          precision="highest")
    theirs = jax.lax.conv_general_dilated_local(x, w, strides, padding, fs, lhs_dil, rhs_dil,
                                                dn, precision="highest")
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_patches_with_conv_dimension_numbers_object():
    # A ConvDimensionNumbers whose kernel spatial axes are not in increasing order: the
    # filter_shape is read along the kernel array's axes, as JAX reads it.
    x = _randn(2, 3, 5, 6)
    ours = lax.conv_general_dilated_patches(x, (2, 3), (1, 1), "VALID", dimension_numbers=
                                            lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 3, 2),
                                                                     (0, 1, 2, 3)))
    theirs = jax.lax.conv_general_dilated_patches(
        x, (2, 3), (1, 1), "VALID",
        dimension_numbers=jax.lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 3, 2),
                                                       (0, 1, 2, 3)))
    _assert_identical(ours, theirs)


def test_patches_convolution_params_match_jax():
    # The kernel is exact, so a precision applies to the input only: (precision, DEFAULT).
    x = np.zeros((1, 4, 5, 3), np.float32)
    args = ((2, 2), (1, 2), ((1, 0), (0, 1)), (2, 1), None, ("NHWC", "HWIO", "NHWC"))

    def conv_eqn(make_jaxpr, lax_mod):
        jaxpr = make_jaxpr(lambda x: lax_mod.conv_general_dilated_patches(
            x, *args, precision=lax_mod.Precision.HIGHEST))(x).jaxpr
        return next(e for e in jaxpr.eqns if e.primitive.name == "conv_general_dilated")

    ours, theirs = conv_eqn(jaxkit.make_jaxpr, lax), conv_eqn(jax.make_jaxpr, jax.lax)
    assert list(ours.params) == list(theirs.params)  # JAX's keys, in JAX's order
    assert {k: str(v) for k, v in ours.params.items()} == \
        {k: str(v) for k, v in theirs.params.items()}


def _im2col_nchw(x, fh, fw):
    """NumPy reference for VALID, unit strides, NCHW: feature c * fh * fw + i * fw + j holds
    x[n, c, h + i, w + j]."""
    n, c, h, w = x.shape
    out = np.empty((n, c * fh * fw, h - fh + 1, w - fw + 1), x.dtype)
    for ci in range(c):
        for i in range(fh):
            for j in range(fw):
                out[:, (ci * fh + i) * fw + j] = x[:, ci, i:i + h - fh + 1, j:j + w - fw + 1]
    return out


def test_patches_match_numpy_im2col_and_local_matches_einsum():
    x = _randn(2, 3, 5, 6)
    patches = lax.conv_general_dilated_patches(x, (2, 3), (1, 1), "VALID")
    np.testing.assert_array_equal(np.asarray(patches), _im2col_nchw(x, 2, 3))
    w = _randn(4, 18, 4, 4)  # (O, I = patch, output H, output W)
    out = lax.conv_general_dilated_local(x, w, (1, 1), "VALID", (2, 3), precision="highest")
    np.testing.assert_allclose(np.asarray(out),
                               np.einsum("npyx,opyx->noyx", _im2col_nchw(x, 2, 3), w),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,preferred", [(np.float16, None), (ml_dtypes.bfloat16, None),
                                             (np.int32, None), (np.float16, np.float32)])
def test_patches_dtypes_match_jax(dtype, preferred):
    x = (_randn(2, 5, 6, 3) * 4).astype(dtype)
    args = ((2, 2), (1, 1), "SAME", None, None, ("NHWC", "HWIO", "NHWC"))
    ours = lax.conv_general_dilated_patches(x, *args, preferred_element_type=preferred)
    theirs = jax.lax.conv_general_dilated_patches(x, *args, preferred_element_type=preferred)
    _assert_identical(ours, theirs)


@pytest.mark.parametrize("case", PATCH_CASES[:6:2] + PATCH_CASES[6:8], ids=_PATCH_IDS[:6:2] +
                         _PATCH_IDS[6:8])
def test_patches_and_local_jit_match_eager(case):
    x, fs, strides, padding, lhs_dil, rhs_dil, dn = _patch_args(case)

    def patches(x):
        return lax.conv_general_dilated_patches(x, fs, strides, padding, lhs_dil, rhs_dil, dn)

    eager = patches(x)
    _assert_identical(jaxkit.jit(patches)(x), eager)
    w = _local_kernel(x, fs, eager.shape, dn)

    def local(x, w):
        return lax.conv_general_dilated_local(x, w, strides, padding, fs, lhs_dil, rhs_dil, dn,
                                              precision="highest")

    np.testing.assert_allclose(np.asarray(jaxkit.jit(local)(x, w)), np.asarray(local(x, w)),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", [PATCH_CASES[i] for i in (1, 3, 4, 6)],
                         ids=[_PATCH_IDS[i] for i in (1, 3, 4, 6)])
def test_patches_and_local_gradients(case, x64):
    x, fs, strides, padding, lhs_dil, rhs_dil, dn = _patch_args(case)
    x = x.astype(np.float64)

    def patches(x):
        return lax.conv_general_dilated_patches(x, fs, strides, padding, lhs_dil, rhs_dil, dn)

    check_grads(patches, (x,), order=2)
    w = _local_kernel(x, fs, patches(x).shape, dn, dtype=np.float64)

    def local(x, w):
        return lax.conv_general_dilated_local(x, w, strides, padding, fs, lhs_dil, rhs_dil, dn)

    check_grads(local, (x, w), order=2)


def test_patches_gradient_matches_jax():
    x = _randn(2, 5, 6, 3)
    dn = ("NHWC", "HWIO", "NHWC")

    def f(lax_mod):
        return lambda x: lax_mod.conv_general_dilated_patches(x, (2, 3), (2, 1), "SAME",
                                                              None, (1, 2), dn).sum()

    np.testing.assert_allclose(np.asarray(jaxkit.grad(f(lax))(x)),
                               np.asarray(jax.grad(f(jax.lax))(x)))


@pytest.mark.parametrize("case", [PATCH_CASES[i] for i in (0, 2, 6, 8)],
                         ids=[_PATCH_IDS[i] for i in (0, 2, 6, 8)])
def test_patches_and_local_vmap_match_loop(case):
    x, fs, strides, padding, lhs_dil, rhs_dil, dn = _patch_args(case)

    def patches(x):
        return lax.conv_general_dilated_patches(x, fs, strides, padding, lhs_dil, rhs_dil, dn)

    out_shape = patches(x).shape
    xs = np.stack([x, 2 * x, -x], axis=1)
    check_vmap(patches, (xs,), in_axes=1)
    ws = np.stack([_local_kernel(x, fs, out_shape, dn) for _ in range(3)])

    def local(x, w):
        return lax.conv_general_dilated_local(x, w, strides, padding, fs, lhs_dil, rhs_dil, dn,
                                              precision="highest")

    check_vmap(local, (xs, ws), in_axes=(1, 0), rtol=1e-5, atol=1e-5)
    check_vmap(local, (x, ws), in_axes=(None, 0), rtol=1e-5, atol=1e-5)
    check_vmap(local, (np.moveaxis(xs, 1, -1), ws[0]), in_axes=(-1, None), out_axes=-1,
               rtol=1e-5, atol=1e-5)


# Calls that must fail, written once for both modules: each gives the same error class.
PATCH_ERRORS = [
    ("filter_rank", lambda m: m.conv_general_dilated_patches(
        np.zeros((1, 2, 5, 5), np.float32), (3,), (1, 1), "VALID")),
    ("layout_length", lambda m: m.conv_general_dilated_patches(
        np.zeros((1, 2, 5, 5), np.float32), (3, 3), (1, 1), "VALID",
        dimension_numbers=("NCH", "OIH", "NCH"))),
    ("bad_padding", lambda m: m.conv_general_dilated_patches(
        np.zeros((1, 2, 5, 5), np.float32), (3, 3), (1, 1), "FULL")),
    ("strides_rank", lambda m: m.conv_general_dilated_patches(
        np.zeros((1, 2, 5, 5), np.float32), (3, 3), (1,), "VALID")),
    ("local_kernel_shape", lambda m: m.conv_general_dilated_local(
        np.zeros((1, 2, 5, 5), np.float32), np.zeros((4, 17, 3, 3), np.float32), (1, 1),
        "VALID", (3, 3))),
    ("local_bad_precision", lambda m: m.conv_general_dilated_local(
        np.zeros((1, 2, 5, 5), np.float32), np.zeros((4, 18, 3, 3), np.float32), (1, 1),
        "VALID", (3, 3), precision="sloppy")),
]


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (the class is what is compared)
        return type(e)
    return None


# --------------------------------------------------------------------------------------------
# approx_max_k / approx_min_k
# --------------------------------------------------------------------------------------------

_NAN = np.float32(np.nan)
_SPECIALS = np.array([3, 1, _NAN, 5, 5, -np.inf, 2, 0.0, -0.0, -_NAN, np.inf, 1], np.float32)

# (name, operand, k, keyword arguments); each runs as max-k and min-k.
TOPK_CASES = [
    ("ties_nan_inf_signed_zero", _SPECIALS, 4, {}),
    ("ties_nan_all", _SPECIALS, 12, {}),
    ("unaggregated_small", _SPECIALS, 2, {"aggregate_to_topk": False}),
    ("signed_zeros", np.array([0.0, -0.0, 0.0, -0.0, 1.0], np.float32), 3, {}),
    ("2d_last", _randn(3, 7), 3, {}),
    ("2d_first", _randn(7, 3), 2, {"reduction_dimension": 0}),
    ("2d_negative_dim", _randn(7, 3), 2, {"reduction_dimension": -2}),
    ("3d_middle", _randn(2, 9, 3), 4, {"reduction_dimension": 1, "recall_target": 0.5}),
    ("k_equals_size", _randn(4, 5), 5, {}),
    ("override", _randn(3, 50), 4, {"reduction_input_size_override": 1000}),
    ("unaggregated_rank2", _randn(3, 2000), 3, {"aggregate_to_topk": False}),
    ("unaggregated_rank2_dim0", _randn(700, 2), 10,
     {"aggregate_to_topk": False, "reduction_dimension": 0, "recall_target": 0.9}),
    ("unaggregated_k1", _randn(2, 300), 1, {"aggregate_to_topk": False}),
    ("unaggregated_recall_1", _randn(2, 300), 5,
     {"aggregate_to_topk": False, "recall_target": 1.0}),
    ("unaggregated_override", _randn(2, 300), 5,
     {"aggregate_to_topk": False, "reduction_input_size_override": 100000}),
    ("unaggregated_rank1", _randn(3000), 8, {"aggregate_to_topk": False}),
    ("float16", _randn(4, 9, dtype=np.float16), 3, {}),
    ("bfloat16", _randn(4, 9, dtype=ml_dtypes.bfloat16), 3, {"reduction_dimension": 0}),
    ("empty_batch", np.zeros((0, 5), np.float32), 2, {}),
]
_TOPK_IDS = [c[0] for c in TOPK_CASES]
_WHICH = [("max", lax.approx_max_k, jax.lax.approx_max_k),
          ("min", lax.approx_min_k, jax.lax.approx_min_k)]


@pytest.mark.parametrize("which", _WHICH, ids=[w[0] for w in _WHICH])
@pytest.mark.parametrize("case", TOPK_CASES, ids=_TOPK_IDS)
def test_approx_top_k_matches_jax_exactly(case, which):
    _, x, k, kw = case
    _, ours_fn, theirs_fn = which
    ours, theirs = ours_fn(x, k, **kw), theirs_fn(x, k, **kw)
    assert isinstance(ours, list) and isinstance(theirs, list)
    for o, t in zip(ours, theirs):
        _assert_identical(o, t)
    for o, t in zip(jaxkit.jit(lambda x: ours_fn(x, k, **kw))(x), ours):
        _assert_identical(o, t)


def test_approx_top_k_float64_matches_jax(x64):
    x = _randn(5, 40, dtype=np.float64)
    for ours_fn, theirs_fn in ((lax.approx_max_k, jax.lax.approx_max_k),
                               (lax.approx_min_k, jax.lax.approx_min_k)):
        for o, t in zip(ours_fn(x, 6), theirs_fn(x, 6)):
            _assert_identical(o, t)


@pytest.mark.parametrize("shape,dim", [((20,), -1), ((4, 11), 1), ((9, 3), 0)])
def test_approx_top_k_matches_numpy_on_distinct_values(shape, dim):
    x = _rng.permutation(math.prod(shape)).reshape(shape).astype(np.float32)
    k = 3
    values, indices = lax.approx_max_k(x, k, reduction_dimension=dim)
    order = np.take(np.argsort(-x, axis=dim), np.arange(k), axis=dim)
    np.testing.assert_array_equal(np.asarray(indices), order)
    np.testing.assert_array_equal(np.asarray(values), np.take_along_axis(x, order, axis=dim))
    values, indices = lax.approx_min_k(x, k, reduction_dimension=dim)
    order = np.take(np.argsort(x, axis=dim), np.arange(k), axis=dim)
    np.testing.assert_array_equal(np.asarray(indices), order)
    assert np.asarray(indices).dtype == np.int32


def test_weak_type_is_kept_like_jax():
    ours = lax.approx_max_k(lax.full((4,), 2.0), 2)[0]
    theirs = jax.lax.approx_max_k(jax.lax.full((4,), 2.0), 2)[0]
    assert core_weak(ours) == theirs.weak_type is True


def core_weak(x) -> bool:
    return jaxkit.core.get_aval(x).weak_type


@pytest.mark.parametrize("input_size", [5, 128, 129, 700, 1024, 1025, 3000, 100000])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("k,recall", [(1, 0.95), (2, 0.95), (10, 0.95), (10, 0.5),
                                      (100, 0.99), (5, 1.0), (3, 0.9999999)])
def test_output_size_matches_xla(input_size, rank, k, recall):
    for override in (-1, input_size, 10 ** 7):
        for aggregate in (True, False):
            args = (input_size, rank, k, recall, aggregate, override)
            assert approx_top_k_output_size(*args) == \
                tuple(_jax_lib.approx_top_k_reduction_output_size(*args)), args


@pytest.mark.parametrize("args", [(3000, 2, 10, 1.5, False, -1), (3000, 2, 10, 0.0, False, -1),
                                  (3000, 1, 10, -0.5, False, -1),
                                  (3000, 2, 10, 0.95, False, 100),
                                  (3000, 2, 1, 0.95, False, 0)])
def test_output_size_errors_match_xla(args):
    with pytest.raises(jax.errors.JaxRuntimeError, match="INVALID_ARGUMENT"):
        _jax_lib.approx_top_k_reduction_output_size(*args)
    with pytest.raises(jax.errors.JaxRuntimeError, match="INVALID_ARGUMENT"):
        approx_top_k_output_size(*args)


JAXPR_CASES = [
    (lambda m: lambda x: m.approx_max_k(x, 3), (2, 10)),
    (lambda m: lambda x: m.approx_min_k(x, np.int64(2), reduction_dimension=0, recall_target=0.9,
                                        aggregate_to_topk=False), (2, 10)),
    (lambda m: lambda x: m.approx_max_k(x, 2, -2, 0.5, 100, True), (5, 3)),
]


@pytest.mark.parametrize("make,shape", JAXPR_CASES)
def test_jaxpr_text_matches_jax(make, shape):
    x = np.zeros(shape, np.float32)
    assert str(jaxkit.make_jaxpr(make(lax))(x)) == str(jax.make_jaxpr(make(jax.lax))(x))


@pytest.mark.parametrize("which", _WHICH, ids=[w[0] for w in _WHICH])
@pytest.mark.parametrize("kw", [{}, {"reduction_dimension": 0},
                                {"aggregate_to_topk": False}], ids=["last", "dim0", "unagg"])
def test_approx_top_k_gradients(which, kw, x64):
    _, fn, _ = which
    x = _rng.permutation(15).reshape(3, 5).astype(np.float64) / 7  # distinct: no ties

    def values(x):
        return fn(x, 2, **kw)[0]

    check_grads(values, (x,), order=2)


@pytest.mark.parametrize("which", _WHICH, ids=[w[0] for w in _WHICH])
def test_approx_top_k_jvp_matches_jax(which):
    _, ours_fn, theirs_fn = which
    x, t = _randn(3, 6), _randn(3, 6)
    ours = jvp(lambda x: tuple(ours_fn(x, 2)), (x,), (t,))
    theirs = jax.jvp(lambda x: tuple(theirs_fn(x, 2)), (x,), (t,))
    for o, e in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        _assert_identical(o, e)
    assert np.asarray(ours[1][1]).dtype == jaxkit.dtypes.float0


@pytest.mark.parametrize("which", _WHICH, ids=[w[0] for w in _WHICH])
@pytest.mark.parametrize("in_axes,dim", [(0, -1), (1, -1), (2, 0), (-1, 1), (0, -2)])
def test_approx_top_k_vmap_matches_loop(which, in_axes, dim):
    _, fn, _ = which
    xs = _randn(4, 5, 6)
    check_vmap(lambda x: tuple(fn(x, 2, reduction_dimension=dim)), (xs,), in_axes=in_axes)
    check_vmap(lambda x: tuple(fn(x, 2, reduction_dimension=dim)), (xs,), in_axes=in_axes,
               out_axes=-1, jit=True)


def test_approx_top_k_vmap_unaggregated_matches_jax():
    # Batching a rank-1 operand makes it rank 2, and the TPU tiling (so the unaggregated
    # output size) follows the rank: 256 per example, not the loop's 3000. JAX does the same.
    xs = _randn(2, 3000)
    ours = jaxkit.vmap(lambda x: lax.approx_max_k(x, 8, aggregate_to_topk=False))(xs)
    theirs = jax.vmap(lambda x: jax.lax.approx_max_k(x, 8, aggregate_to_topk=False))(xs)
    for o, t in zip(ours, theirs):
        _assert_identical(o, t)
    assert np.shape(ours[0]) == (2, 256)


# Calls that must fail; each gives the error class JAX gives.
TOPK_ERRORS = [
    ("k_zero", lambda m: m.approx_max_k(np.zeros((2, 10), np.float32), 0)),
    ("k_negative", lambda m: m.approx_min_k(np.zeros((2, 10), np.float32), -1)),
    ("k_too_large", lambda m: m.approx_max_k(np.zeros((2, 10), np.float32), 11)),
    ("k_too_large_dim0", lambda m: m.approx_max_k(np.zeros((2, 10), np.float32), 3,
                                                  reduction_dimension=0)),
    ("empty_dimension", lambda m: m.approx_max_k(np.zeros((5, 0), np.float32), 1)),
    ("rank0", lambda m: m.approx_max_k(np.float32(1.0), 1)),
    ("integer", lambda m: m.approx_max_k(np.zeros((2, 10), np.int32), 3)),
    ("complex", lambda m: m.approx_min_k(np.zeros((2, 10), np.complex64), 3)),
    ("dimension_too_large", lambda m: m.approx_max_k(np.zeros((2, 10), np.float32), 1,
                                                     reduction_dimension=2)),
    ("dimension_too_small", lambda m: m.approx_max_k(np.zeros((2, 10), np.float32), 1,
                                                     reduction_dimension=-3)),
    ("recall_above_1", lambda m: m.approx_max_k(np.zeros((2, 10), np.float32), 3,
                                                recall_target=1.5)),
    ("recall_zero", lambda m: m.approx_min_k(np.zeros((2, 10), np.float32), 3,
                                             recall_target=0.0)),
    ("override_too_small", lambda m: m.approx_max_k(np.zeros((2, 10), np.float32), 3,
                                                    reduction_input_size_override=5)),
    ("override_zero", lambda m: m.approx_max_k(np.zeros((2, 10), np.float32), 3,
                                               reduction_input_size_override=0)),
    ("unaggregated_override_too_small", lambda m: m.approx_max_k(
        np.zeros((2, 3000), np.float32), 3, reduction_input_size_override=100,
        aggregate_to_topk=False)),
    ("unaggregated_recall_out_of_range", lambda m: m.approx_max_k(
        np.zeros((2, 3000), np.float32), 3, recall_target=1.5, aggregate_to_topk=False)),
]


@pytest.mark.parametrize("call", [c[1] for c in PATCH_ERRORS + TOPK_ERRORS],
                         ids=[c[0] for c in PATCH_ERRORS + TOPK_ERRORS])
def test_errors_match_jax(call):
    theirs = _raised(lambda: call(jax.lax))
    assert theirs is not None
    ours = _raised(lambda: call(lax))
    assert ours is not None and issubclass(ours, theirs), (ours, theirs)
