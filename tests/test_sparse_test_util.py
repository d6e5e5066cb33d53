"""``jaxkit.experimental.sparse.test_util`` against JAX's: the random generators give the same
arrays for the same NumPy seed, the layout iterators the same sequences, and the
``SparseTestCase`` checks pass for correct sparse functions and fail for wrong ones."""
from __future__ import annotations

import numpy as np
import pytest

import jaxkit.numpy as kjnp
from jaxkit.experimental import sparse as ksparse
from jaxkit.experimental.sparse import test_util as ktu

jax = pytest.importorskip("jax")
from jax.experimental.sparse import test_util as jtu  # noqa: E402


@pytest.mark.parametrize("maker,shape,kw", [
    ("rand_bcoo", (3, 4), {}),
    ("rand_bcoo", (2, 3, 4), dict(n_batch=1, nse=3)),
    ("rand_bcoo", (3, 4, 2), dict(n_dense=1, nse=0.25)),
    ("rand_bcsr", (3, 4), {}),
    ("rand_bcsr", (2, 3, 4), dict(n_batch=1, nse=4)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.int32])
def test_random_sparse_arrays_match_jax(maker, shape, kw, dtype):
    k = getattr(ktu, maker)(np.random.RandomState(5), **kw)(shape, dtype)
    j = getattr(jtu, maker)(np.random.RandomState(5), **kw)(shape, dtype)
    assert repr(k) == repr(j)
    for a, b in zip(k._bufs, j._bufs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.parametrize("kw", [{}, dict(nse=3), dict(nse=0.2, post=lambda x: x * 2)])
def test_rand_sparse_matches_jax(kw):
    k = ktu.rand_sparse(np.random.RandomState(1), **kw)((4, 5), np.float32)
    j = jtu.rand_sparse(np.random.RandomState(1), **kw)((4, 5), np.float32)
    np.testing.assert_array_equal(k, j)


@pytest.mark.parametrize("fn,args", [
    ("iter_subsets", ([1, 2, 3],)),
    ("iter_sparse_layouts", ((2, 3, 4),)),
    ("iter_sparse_layouts", ((2, 3, 4), 1)),
    ("iter_bcsr_layouts", ((2, 3, 4, 5),)),
    ("iter_bcsr_layouts", ((3, 4),)),
])
def test_iterators_match_jax(fn, args):
    assert list(getattr(ktu, fn)(*args)) == list(getattr(jtu, fn)(*args))


def test_constants_tuples_and_errors_match_jax():
    assert ktu.MATMUL_TOL == jtu.MATMUL_TOL
    assert ktu.SparseLayout._fields == jtu.SparseLayout._fields
    assert ktu.BatchedDotGeneralProperties._fields == jtu.BatchedDotGeneralProperties._fields
    assert ktu.is_sparse(ksparse.BCOO.fromdense(np.eye(2))) and not ktu.is_sparse(np.eye(2))
    assert ktu.split_list([1, 2, 3], [1]) == [[1], [2, 3]]
    for tu in (ktu, jtu):
        with pytest.raises(ValueError, match="must have 2 sparse dimensions"):
            tu.rand_bcsr(np.random.RandomState(0))((2, 3, 4), np.float32)


class _Case(ktu.SparseTestCase):
    __test__ = False  # a harness for the checks below, not a test of its own

    def runTest(self):  # unittest needs a test method to build an instance
        pass


def _case():
    case = _Case()
    case.setUp()
    return case


def _dot_args(case):
    rng = case.rng()
    return lambda: [ktu.rand_bcoo(rng)((3, 4), np.float32),
                    kjnp.asarray(rng.randn(4, 2).astype(np.float32))]


def test_sparse_test_case_checks_pass_for_a_correct_sparse_function():
    case = _case()
    sparse_fun = lambda m, v: m @ v  # noqa: E731
    dense_fun = lambda m, v: m @ v  # noqa: E731
    case._CheckAgainstDense(dense_fun, sparse_fun, _dot_args(case), tol=1e-5)
    case._CheckGradsSparse(dense_fun, sparse_fun, _dot_args(case), atol=1e-5, rtol=1e-5)
    case._CheckBatchingSparse(dense_fun, sparse_fun, _dot_args(case), bdims=(0, None),
                              tol=1e-5)
    m = ktu.rand_bcoo(case.rng())((3, 4), np.float32)
    case.assertSparseArraysEquivalent(m, m)


def test_sparse_test_case_checks_fail_for_a_wrong_sparse_function():
    case = _case()
    wrong = lambda m, v: 2 * (m @ v)  # noqa: E731
    dense_fun = lambda m, v: m @ v  # noqa: E731
    with pytest.raises(AssertionError):
        case._CheckAgainstDense(dense_fun, wrong, _dot_args(case))
    with pytest.raises(AssertionError):
        case._CheckGradsSparse(dense_fun, wrong, _dot_args(case), modes=("rev",))
    a = ktu.rand_bcoo(np.random.RandomState(0))((3, 4), np.float32)
    b = ktu.rand_bcoo(np.random.RandomState(1))((3, 4), np.float32)
    with pytest.raises(AssertionError):
        case.assertSparseArraysEquivalent(a, b)
    with pytest.raises(AssertionError):  # same values, different format
        case.assertSparseArraysEquivalent(a, ksparse.BCSR.from_bcoo(a.sort_indices()))
