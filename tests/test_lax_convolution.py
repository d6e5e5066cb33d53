"""lax.conv_general_dilated and its conveniences, against NumPy and the jax oracle, with the
JVP, transpose (both operands) and batching rules."""
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


def _args(*makers):
    return lambda rng: [m(rng) for m in makers]


def _np_conv1d_same(x, w):
    """NCW/OIW cross-correlation with 'SAME' padding, stride 1."""
    k = w.shape[-1]
    lo = (k - 1) // 2
    xp = np.pad(x, [(0, 0), (0, 0), (lo, k - 1 - lo)])
    n = x.shape[-1]
    return np.einsum("bcnk,ock->bon", np.stack([xp[..., i:i + k] for i in range(n)], 2), w)


BATCH = [(0, 0), (None, 0), (0, None), (1, 2)]
CASES = [
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
    Case("conv_int_preferred", "conv_general_dilated",
         lambda l, x, w: l.conv(x, w, (1,), "VALID", preferred_element_type=np.int32),
         _args(lambda rng: rng.integers(-3, 4, (1, 2, 5)).astype(np.int8),
               lambda rng: rng.integers(-3, 4, (2, 2, 2)).astype(np.int8))),
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


@pytest.mark.parametrize("case", [c for c in CASES if c.batch], ids=str)
def test_batching(case):
    check_batching(case, size=2)


def test_dimension_numbers_and_padding_helpers():
    dn = lax.conv_dimension_numbers((1, 5, 5, 2), (3, 3, 2, 4), ("NHWC", "HWIO", "NHWC"))
    assert dn == jax.lax.conv_dimension_numbers((1, 5, 5, 2), (3, 3, 2, 4),
                                                ("NHWC", "HWIO", "NHWC"))
    assert lax.padtype_to_pads((7, 8), (3, 2), (2, 3), "SAME") == \
        jax.lax.padtype_to_pads((7, 8), (3, 2), (2, 3), "SAME")


def test_jaxpr_params_print_like_jax():
    x, w = np.zeros((1, 2, 6), np.float32), np.zeros((3, 2, 3), np.float32)
    ours = jaxkit.make_jaxpr(lambda x, w: lax.conv(x, w, (1,), "SAME"))(x, w).jaxpr.eqns[0]
    theirs = jax.make_jaxpr(lambda x, w: jax.lax.conv(x, w, (1,), "SAME"))(x, w).jaxpr.eqns[0]
    assert ours.primitive.name == theirs.primitive.name == "conv_general_dilated"
    shared = set(ours.params) & set(theirs.params)
    assert len(shared) == 9
    assert {k: str(ours.params[k]) for k in shared} == {k: str(theirs.params[k]) for k in shared}


ERRORS = [
    (lambda: lax.conv(np.zeros((1, 3, 5)), np.zeros((2, 2, 3)), (1,), "SAME"), ValueError,
     r"must equal the rhs input feature dimension size, but 3 // 1 != 2"),
    (lambda: lax.conv(np.zeros((1, 3, 5)), np.zeros((2, 3, 3, 1)), (1,), "SAME"), TypeError,
     "convolution requires lhs and rhs ndim to be equal"),
    (lambda: lax.conv_general_dilated(np.zeros((1, 4, 5)), np.zeros((3, 2, 3)), (1,), "SAME",
                                      feature_group_count=2), ValueError,
     "rhs output feature dimension size must be a multiple of feature_group_count"),
    (lambda: lax.conv_general_dilated(np.zeros((1, 3, 5)), np.zeros((2, 3, 3)), (1,), "FULL"),
     RuntimeError, "Unrecognized padding type"),
    (lambda: lax.conv_general_dilated(np.zeros((1, 3, 5)), np.zeros((2, 3, 3)), (1,), "SAME",
                                      (2,)), ValueError,
     "String padding is not implemented for transposed convolution"),
    (lambda: lax.conv_general_dilated(np.zeros((1, 3, 5)), np.zeros((2, 3, 3)), (1,),
                                      [(-6, 0)]), ValueError,
     "Negative padding is larger than the size of the corresponding dimension"),
    (lambda: lax.conv_general_dilated(np.zeros((1, 3, 5), np.float32),
                                      np.zeros((2, 3, 3), np.int32), (1,), "SAME"), TypeError,
     "requires arguments to have the same dtypes, got float32, int32"),
]


@pytest.mark.parametrize("fn,exc,msg", ERRORS)
def test_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn()
