"""``jax.experimental.sparse.test_util``: helpers for testing sparse code: random BCOO/BCSR
arrays and dense arrays with zeros, the layouts a shape admits, and ``SparseTestCase``, a
``unittest.TestCase`` whose checks compare a sparse function with its dense counterpart (values,
``jit``, forward and reverse Jacobians, ``vmap``)."""
from __future__ import annotations

import functools
import itertools
import math
import unittest
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxkit import lax, tree_util
from jaxkit import numpy as jnp
from jaxkit.api import jacfwd, jacrev
from jaxkit.experimental.sparse._base import JAXSparse
from jaxkit._util import safe_zip, split_list
from jaxkit.experimental.sparse.api import todense
from jaxkit.experimental.sparse.bcoo import BCOO
from jaxkit.experimental.sparse.bcsr import BCSR
from jaxkit.experimental.sparse.transform import sparsify
from jaxkit.transforms.jit import jit
from jaxkit.transforms.vmap import vmap

__all__ = ["BatchedDotGeneralProperties", "MATMUL_TOL", "SparseLayout", "SparseTestCase",
           "is_sparse", "iter_bcsr_layouts", "iter_sparse_layouts", "iter_subsets", "rand_bcoo",
           "rand_bcsr", "rand_sparse", "safe_zip", "split_list"]

# Tolerances for products, whose rounding grows with the contracted size.
MATMUL_TOL = {np.float32: 1e-5, np.float64: 1e-10, np.complex64: 1e-5, np.complex128: 1e-10}

# Default comparison tolerance per dtype (as JAX's test cases use).
_DEFAULT_TOL = {np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6,
                np.dtype(np.float64): 1e-15, np.dtype(np.complex64): 1e-6,
                np.dtype(np.complex128): 1e-15}


def is_sparse(x) -> bool:
    """Whether ``x`` is a sparse array of any format."""
    return isinstance(x, JAXSparse)


class BatchedDotGeneralProperties(NamedTuple):
    """One batched ``dot_general`` test case."""

    lhs_shape: tuple[int, ...]
    rhs_shape: tuple[int, ...]
    n_batch: int
    n_dense: int
    dimension_numbers: Any


class SparseLayout(NamedTuple):
    """How many batch, dense and sparse dimensions an array has."""

    n_batch: int
    n_dense: int
    n_sparse: int


def _rand_default(rng: np.random.RandomState, scale: float = 3.0) -> Callable:
    """``(shape, dtype) -> ndarray`` of normal values times ``scale`` (complex values get an
    independent imaginary part; unsigned ones their absolute value)."""
    def make(shape, dtype):
        dtype = np.dtype(dtype)

        def draw():
            x = scale * rng.randn(*shape)
            return np.abs(x) if np.issubdtype(dtype, np.unsignedinteger) else x

        vals = draw() + 1j * draw() if np.issubdtype(dtype, np.complexfloating) else draw()
        return np.asarray(vals).astype(dtype)
    return make


def _tolerance(dtype, tol):
    if tol is not None:
        return tol
    return _DEFAULT_TOL.get(np.dtype(dtype), 0)


class SparseTestCase(unittest.TestCase):
    """``unittest.TestCase`` with the checks JAX's sparse tests use; ``self.rng()`` is a NumPy
    ``RandomState`` seeded by the test's name."""

    def setUp(self):
        super().setUp()
        self._rng = np.random.RandomState(zlib.adler32(self._testMethodName.encode()))

    def rng(self) -> np.random.RandomState:
        return self._rng

    def assertAllClose(self, actual, desired, *, check_dtypes=True, atol=None, rtol=None,
                       canonicalize_dtypes=True, err_msg=""):
        """Nested sequences/dicts of arrays are close elementwise (and of the same dtypes)."""
        if isinstance(actual, dict):
            self.assertIsInstance(desired, dict)
            self.assertEqual(set(actual), set(desired))
            for key in actual:
                self.assertAllClose(actual[key], desired[key], check_dtypes=check_dtypes,
                                    atol=atol, rtol=rtol, err_msg=err_msg)
        elif isinstance(actual, (list, tuple)):
            self.assertIsInstance(desired, (list, tuple))
            self.assertEqual(len(actual), len(desired))
            for a, d in zip(actual, desired):
                self.assertAllClose(a, d, check_dtypes=check_dtypes, atol=atol, rtol=rtol,
                                    err_msg=err_msg)
        else:
            a, d = np.asarray(actual), np.asarray(desired)
            if check_dtypes:
                self.assertEqual(a.dtype, d.dtype, err_msg)
            dtype = np.promote_types(a.dtype, d.dtype)
            np.testing.assert_allclose(a, d, atol=_tolerance(dtype, atol),
                                       rtol=_tolerance(dtype, rtol), err_msg=err_msg)

    def assertSparseArraysEquivalent(self, x, y, *, check_dtypes=True, atol=None, rtol=None,
                                     canonicalize_dtypes=True, err_msg=""):
        """Same tree structure (format, shape, flags) and close buffers."""
        x_bufs, x_tree = tree_util.tree_flatten(x)
        y_bufs, y_tree = tree_util.tree_flatten(y)
        self.assertEqual(x_tree, y_tree)
        self.assertAllClose(x_bufs, y_bufs, check_dtypes=check_dtypes, atol=atol, rtol=rtol,
                            err_msg=err_msg)

    def _CheckAgainstDense(self, dense_op, sparse_op, args_maker, check_jit=True,
                           check_dtypes=True, tol=None, atol=None, rtol=None,
                           canonicalize_dtypes=True):
        """``sparse_op`` on sparse arguments equals ``dense_op`` on their dense forms; under
        ``jit`` it gives the same sparse result."""
        sparse_args = args_maker()
        dense_args = tree_util.tree_map(todense, sparse_args, is_leaf=is_sparse)
        expected = dense_op(*dense_args)
        sparse_ans = sparse_op(*sparse_args)
        actual = tree_util.tree_map(todense, sparse_ans, is_leaf=is_sparse)
        self.assertAllClose(expected, actual, check_dtypes=check_dtypes, atol=atol or tol,
                            rtol=rtol or tol)
        if check_jit:
            self.assertSparseArraysEquivalent(sparse_ans, jit(sparse_op)(*sparse_args),
                                              atol=atol or tol, rtol=rtol or tol)

    def _CheckGradsSparse(self, dense_fun, sparse_fun, args_maker, *, argnums=None,
                          modes=("fwd", "rev"), atol=None, rtol=None):
        """Jacobians with respect to every buffer (or the first buffer of each of ``argnums``)
        agree between the dense and the sparse function."""
        if any(mode not in ("fwd", "rev") for mode in modes):
            raise ValueError(f"modes must be 'fwd' and/or 'rev', got {modes}")
        args = args_maker()
        args_flat, tree = tree_util.tree_flatten(args)
        num_bufs = [len(tree_util.tree_flatten(arg)[0]) for arg in args]
        argnums_flat = np.cumsum([0, *num_bufs[:-1]]).tolist()
        if argnums is not None:
            argnums_flat = [argnums_flat[n] for n in argnums]

        def dense_flat(*flat):
            dense = tree_util.tree_map(todense, tree_util.tree_unflatten(tree, flat),
                                       is_leaf=is_sparse)
            return dense_fun(*dense)

        def sparse_flat(*flat):
            out = sparse_fun(*tree_util.tree_unflatten(tree, flat))
            return tree_util.tree_map(todense, out, is_leaf=is_sparse)

        for mode, jac in (("rev", jacrev), ("fwd", jacfwd)):
            if mode in modes:
                self.assertAllClose(jac(dense_flat, argnums=argnums_flat)(*args_flat),
                                    jac(sparse_flat, argnums=argnums_flat)(*args_flat),
                                    atol=atol, rtol=rtol)

    def _random_bdims(self, *args: int) -> list[int]:
        return [self.rng().randint(0, arg + 1) for arg in args]

    def _CheckBatchingSparse(self, dense_fun, sparse_fun, args_maker, *, batch_size=3,
                             bdims=None, check_jit=False, check_dtypes=True, tol=None,
                             atol=None, rtol=None, canonicalize_dtypes=True):
        """``vmap`` of the sparse function over ``batch_size`` stacked argument sets equals
        ``vmap`` of the dense one (sparse arguments are stacked along a batch dimension)."""
        if bdims is None:
            bdims = self._random_bdims(*(arg.n_batch if is_sparse(arg) else arg.ndim
                                         for arg in args_maker()))

        def concat(args, bdim):
            return sparsify(functools.partial(lax.concatenate, dimension=bdim))(args)

        def expand(arg, bdim):
            return sparsify(functools.partial(lax.expand_dims, dimensions=[bdim]))(arg)

        def batched_args_maker():
            args = list(zip(*(args_maker() for _ in range(batch_size))))
            return [arg[0] if bdim is None else concat([expand(x, bdim) for x in arg], bdim)
                    for arg, bdim in safe_zip(args, bdims)]

        self._CheckAgainstDense(vmap(dense_fun, bdims), vmap(sparse_fun, bdims),
                                batched_args_maker, check_dtypes=check_dtypes, tol=tol,
                                atol=atol, rtol=rtol, check_jit=check_jit)


def _rand_sparse(shape: Sequence[int], dtype, *, rng: np.random.RandomState,
                 rand_method: Callable, nse: int | float, n_batch: int, n_dense: int,
                 sparse_format: str) -> BCOO | BCSR:
    if sparse_format not in ("bcoo", "bcsr"):
        raise ValueError(f"Sparse format {sparse_format} not supported.")
    n_sparse = len(shape) - n_batch - n_dense
    if n_sparse < 0 or n_batch < 0 or n_dense < 0:
        raise ValueError(f"Invalid parameters: shape={shape} n_batch={n_batch} "
                         f"n_sparse={n_sparse}")
    if sparse_format == "bcsr" and n_sparse != 2:
        raise ValueError(f"bcsr array must have 2 sparse dimensions; {n_sparse} is given.")
    batch_shape, sparse_shape, dense_shape = split_list(shape, [n_batch, n_sparse])
    if 0 <= nse < 1:  # a fraction of the sparse positions
        nse = int(np.ceil(nse * math.prod(sparse_shape)))
    nse = int(nse)
    data = jnp.array(rand_method(rng)((*batch_shape, nse, *dense_shape), dtype))
    if sparse_format == "bcoo":
        indices = rng.randint(0, sparse_shape, size=(*batch_shape, nse, n_sparse),
                              dtype=np.int32)
        return BCOO((data, jnp.array(indices)), shape=tuple(shape))
    indices = rng.randint(0, sparse_shape[1], size=(*batch_shape, nse), dtype=np.int32)
    indptr = np.sort(rng.randint(0, nse + 1, size=(*batch_shape, sparse_shape[0] + 1),
                                 dtype=np.int32), axis=-1)
    indptr[..., 0] = 0
    return BCSR((data, jnp.array(indices), jnp.array(indptr)), shape=tuple(shape))


def rand_bcoo(rng: np.random.RandomState, rand_method: Callable = _rand_default,
              nse: int | float = 0.5, n_batch: int = 0, n_dense: int = 0) -> Callable:
    """``(shape, dtype) -> BCOO`` with random data and random (possibly repeated) indices;
    ``nse`` below 1 is a fraction of the sparse positions."""
    return functools.partial(_rand_sparse, rng=rng, rand_method=rand_method, nse=nse,
                             n_batch=n_batch, n_dense=n_dense, sparse_format="bcoo")


def rand_bcsr(rng: np.random.RandomState, rand_method: Callable = _rand_default,
              nse: int | float = 0.5, n_batch: int = 0, n_dense: int = 0) -> Callable:
    """``(shape, dtype) -> BCSR`` with random data, columns and sorted row pointers."""
    return functools.partial(_rand_sparse, rng=rng, rand_method=rand_method, nse=nse,
                             n_batch=n_batch, n_dense=n_dense, sparse_format="bcsr")


def iter_subsets(s: Sequence) -> Iterable[tuple]:
    """Every subset of ``s``, by increasing size."""
    return itertools.chain.from_iterable(itertools.combinations(s, n)
                                         for n in range(len(s) + 1))


def iter_sparse_layouts(shape: Sequence[int], min_n_batch: int = 0) -> Iterator[SparseLayout]:
    """Every (n_batch, n_dense, n_sparse) split of ``shape`` with ``n_batch >= min_n_batch``."""
    for n_batch in range(min_n_batch, len(shape) + 1):
        for n_dense in range(len(shape) + 1 - n_batch):
            yield SparseLayout(n_batch=n_batch, n_sparse=len(shape) - n_batch - n_dense,
                               n_dense=n_dense)


def iter_bcsr_layouts(shape: Sequence[int], min_n_batch: int = 0) -> Iterator[SparseLayout]:
    """Every BCSR layout (two sparse dimensions) of ``shape``."""
    for n_batch in range(min_n_batch, len(shape) - 1):
        yield SparseLayout(n_batch=n_batch, n_sparse=2, n_dense=len(shape) - 2 - n_batch)


def rand_sparse(rng: np.random.RandomState, nse: int | float = 0.5,
                post: Callable = lambda x: x, rand_method: Callable = _rand_default) -> Callable:
    """``(shape, dtype, nse=nse) -> ndarray``: a random dense array with all but ``nse``
    elements (a fraction if below 1) set to zero, passed through ``post``."""
    def make(shape, dtype, nse=nse):
        size = math.prod(shape)
        if 0 <= nse < 1:
            nse = nse * size
        nse = min(size, int(nse))
        M = rand_method(rng)(shape, dtype)
        M.flat[rng.choice(size, size - nse, replace=False)] = 0
        return post(M)
    return make
