"""lax reductions, cumulative reductions, sorting and dot_general: against NumPy and the jax
oracle, with their JVP, transpose and batching rules beyond the generic checks of ``test_lax_ops.py``
over the records in ``_lax_records.py``."""
import numpy as np
import pytest
from _lax_records import _add2

import jaxkit
from jaxkit import lax

jax = pytest.importorskip("jax")


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
    dims = (((1,), (1,)), ((), ()))
    ours = str(jaxkit.make_jaxpr(lambda a: lax.dot_general(a, a, dims))(a))
    theirs = str(jax.make_jaxpr(lambda a: jax.lax.dot_general(a, a, dims))(a))
    assert ours == theirs
    assert "dot_general[dimension_numbers=(([1], [1]), ([], []))] a a" in ours


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
