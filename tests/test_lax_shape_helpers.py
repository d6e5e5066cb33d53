"""``jax.lax``'s shape and dtype helpers (``broadcast_shapes``, ``broadcast_to_rank``,
``broadcast_like``, the conv shape tuples, ``dtype``, ``shape_as_value``, ``index_take``)
against the JAX oracle, one record per call."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit.lax as klax
import jaxkit.numpy as knp

jax = pytest.importorskip("jax")
import jax.lax as jlax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402

SRC = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
DNUMS = [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NCHW")]


def _conv_args(dn, pad):
    lhs = (1, 8, 9, 3) if dn[0] == "NHWC" else (1, 3, 8, 9)
    rhs = (3, 2, 3, 4) if dn[1] == "HWIO" else (4, 3, 3, 2)
    return lhs, rhs, (2, 1), pad, dn


# (name, call(lax, numpy) -> value): the same call against both libraries
RECORDS = [
    ("broadcast_shapes", lambda L, N: L.broadcast_shapes((2, 1), (3,), (1, 1))),
    ("broadcast_to_rank", lambda L, N: L.broadcast_to_rank(N.ones(3), 3)),
    ("broadcast_to_rank_noop", lambda L, N: L.broadcast_to_rank(N.ones((2, 3)), 1)),
    ("broadcast_like", lambda L, N: L.broadcast_like(N.arange(3.0), N.zeros((2, 3)))),
    ("conv_shape_tuple", lambda L, N: L.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (1, 1),
                                                         [(1, 1), (1, 1)])),
    ("conv_shape_tuple_same", lambda L, N: L.conv_shape_tuple((2, 3, 9, 7), (4, 3, 2, 3),
                                                              (2, 3), "SAME")),
    *[(f"conv_general_shape_tuple-{''.join(dn)}-{pad}",
       lambda L, N, dn=dn, pad=pad: L.conv_general_shape_tuple(*_conv_args(dn, pad)))
      for dn in DNUMS for pad in ("SAME", "VALID", ((1, 2), (0, 1)))],
    *[(f"conv_transpose_shape_tuple-{''.join(dn)}-{pad}",
       lambda L, N, dn=dn, pad=pad: L.conv_transpose_shape_tuple(*_conv_args(dn, pad)))
      for dn in DNUMS for pad in ("SAME", "VALID", ((1, 2), (0, 1)))],
    ("dtype_float", lambda L, N: L.dtype(1.0)),
    ("dtype_int64", lambda L, N: L.dtype(np.int64(1))),
    ("dtype_bfloat16", lambda L, N: L.dtype(N.ones(2, N.bfloat16))),
    ("shape_as_value", lambda L, N: L.shape_as_value((2, 3))),
    ("index_take", lambda L, N: L.index_take(N.asarray(SRC), (N.array([0, 2]), N.array([1, 3])),
                                             (1, 2))),
    ("index_take_one_axis", lambda L, N: L.index_take(N.asarray(SRC), (N.array([1, 0]),), (0,))),
]


@pytest.mark.parametrize("name,call", RECORDS, ids=[r[0] for r in RECORDS])
def test_matches_jax(name, call):
    ours, theirs = call(klax, knp), call(jlax, jjnp)
    if isinstance(theirs, (tuple, np.dtype)):
        assert ours == theirs
        return
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting"):
        klax.broadcast_shapes((2,), (3,))
    with pytest.raises(ValueError, match="at least one shape"):
        klax.broadcast_shapes()
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        klax.broadcast_like(knp.ones(4), knp.ones((2, 3)))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        klax.broadcast_like(knp.ones((2, 1, 3)), knp.ones(3))
    with pytest.raises(ValueError, match="one index array per axis"):
        klax.index_take(SRC, (np.array([0]),), (0, 1))
