"""lax.conv_general_dilated and its conveniences, against NumPy and the jax oracle, with the
JVP, transpose (both operands) and batching rules beyond the generic checks of ``test_lax_ops.py``
over the records in ``_lax_records.py``."""
import numpy as np
import pytest

import jaxkit
from jaxkit import lax

jax = pytest.importorskip("jax")

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
    assert list(ours.params) == list(theirs.params)  # JAX's keys, in JAX's order
    assert {k: str(v) for k, v in ours.params.items()} == \
        {k: str(v) for k, v in theirs.params.items()}


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
