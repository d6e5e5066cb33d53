"""Sorting, searching, nonzero/where with ``size=``, unique and set operations against the
JAX oracle and NumPy, including the errors raised under jit without ``size=``."""
from __future__ import annotations

import numpy as np
import pytest
from _numpy_checks import check, rng_array

import jaxkit
import jaxkit.numpy as jnp

F32 = rng_array((3, 4), np.float32)
I32 = rng_array((3, 4), np.int32, seed=1)
DUP = np.array([[3, 1, 2, 1], [2, 2, 0, 3], [1, 3, 3, 0]], np.int32)
V4 = np.sort(rng_array((4,), np.float32, seed=2))
NAN = np.array([3.0, np.nan, 1.0, 2.0, np.nan, 1.0], np.float32)
C64 = rng_array((6,), np.complex64, seed=3)

ROWS = [
    ("sort", (F32,), {}), ("sort", (F32,), {"axis": 0}), ("sort", (F32,), {"axis": None}),
    ("sort", (DUP,), {"descending": True}), ("sort", (NAN,), {}), ("sort", (C64,), {}),
    ("argsort", (DUP,), {}), ("argsort", (DUP,), {"axis": 0, "descending": True}),
    ("argsort", (F32,), {"axis": None}), ("argsort", (NAN,), {}),
    ("argsort", (DUP,), {"stable": False}), ("argsort", (DUP,), {"dtype": np.int8}),
    ("argsort", (F32,), {"axis": 0, "descending": True, "dtype": np.float32}),
    ("lexsort", ((DUP[0], DUP[1]),), {}), ("lexsort", (DUP,), {}),
    ("partition", (F32, 2), {}), ("partition", (DUP, 1), {"axis": 0}),
    ("argpartition", (DUP, 1), {"axis": 0}), ("argpartition", (F32, 3), {}),
    ("sort_complex", (C64,), {}),
    ("searchsorted", (V4, F32), {}), ("searchsorted", (V4, F32), {"side": "right"}),
    ("searchsorted", (np.arange(5, dtype=np.int32), 3), {}),
    ("searchsorted", (np.array([1, 2, 2, 2, 5], np.int32), DUP), {"side": "right"}),
    ("searchsorted", (np.array([1.0, 2.0, np.nan], np.float32), NAN), {}),
    ("searchsorted", (V4[::-1].copy(), F32), {"sorter": np.array([3, 2, 1, 0])}),
    ("digitize", (F32, V4), {}), ("digitize", (F32, V4[::-1].copy(), True), {}),
    ("nonzero", (DUP,), {}), ("nonzero", (DUP,), {"size": 10, "fill_value": -1}),
    ("nonzero", (DUP,), {"size": 3}), ("flatnonzero", (DUP,), {}), ("argwhere", (DUP,), {}),
    ("argwhere", (DUP,), {"size": 3}), ("argwhere", (np.float32(1.0),), {}),
    ("where", (DUP,), {}), ("where", (DUP,), {"size": 2}), ("extract", (DUP > 1, F32), {}),
    ("extract", (DUP > 1, F32), {"size": 9}),
    ("compress", (np.array([True, False, True]), F32), {"axis": 0}),
    ("compress", (np.array([1, 0, 1, 1]), F32), {"axis": 1, "size": 4, "fill_value": 9.0}),
    ("bincount", (DUP[0],), {}), ("bincount", (DUP[0], F32[0]), {"length": 5}),
    ("bincount", (DUP[0],), {"minlength": 6}),
    ("select", ([F32 > 0, F32 < -1], [F32, I32], 9), {}),
    ("unique", (DUP,), {}),
    ("unique", (DUP,), {"return_index": True, "return_inverse": True, "return_counts": True}),
    ("unique", (DUP,), {"size": 8, "fill_value": -5}), ("unique", (DUP,), {"axis": 0}),
    ("unique", (DUP,), {"axis": 1, "return_counts": True}), ("unique", (F32,), {"size": 3}),
    ("unique", (NAN,), {}), ("unique", (NAN,), {"equal_nan": False}),
    ("unique", (DUP,), {"size": 3, "return_counts": True, "return_index": True}),
    ("unique_counts", (DUP,), {}), ("unique_inverse", (DUP,), {}), ("unique_all", (DUP,), {}),
    ("unique_values", (DUP,), {}),
    ("union1d", (DUP[0], DUP[1]), {}), ("intersect1d", (DUP[0], DUP[1]), {}),
    ("intersect1d", (DUP[0], DUP[2]), {"return_indices": True}),
    ("setdiff1d", (DUP[0], DUP[1]), {}), ("setdiff1d", (DUP[0], DUP[1]), {"size": 4}),
    ("setxor1d", (DUP[0], DUP[1]), {}), ("isin", (DUP, DUP[0]), {}),
    ("isin", (DUP, DUP[0]), {"invert": True}),
]


@pytest.mark.parametrize("name,args,kw", ROWS, ids=[f"{n}-{i}" for i, (n, _, _) in
                                                    enumerate(ROWS)])
def test_matches_jax(name, args, kw):
    check(name, *args, kw=kw, jit=("size" in kw or name in ("sort", "argsort", "searchsorted",
                                                            "partition", "digitize"))
          and all(isinstance(a, np.ndarray) for a in args))


def test_matches_numpy():
    np.testing.assert_array_equal(np.asarray(jnp.sort(jnp.asarray(NAN))), np.sort(NAN))
    np.testing.assert_array_equal(np.asarray(jnp.argsort(jnp.asarray(DUP), axis=0)),
                                  np.argsort(DUP, axis=0, kind="stable"))
    np.testing.assert_array_equal(np.asarray(jnp.searchsorted(jnp.asarray(V4), F32)),
                                  np.searchsorted(V4, F32))
    for got, want in zip(jnp.unique(jnp.asarray(DUP), return_index=True, return_inverse=True,
                                    return_counts=True),
                         np.unique(DUP, return_index=True, return_inverse=True,
                                   return_counts=True)):
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(jnp.lexsort((DUP[0], DUP[1]))),
                                  np.lexsort((DUP[0], DUP[1])))
    part = np.asarray(jnp.partition(jnp.asarray(F32), 2))
    np.testing.assert_array_equal(part[:, 2], np.sort(F32, axis=1)[:, 2])
    assert np.all(part[:, :2] <= part[:, 2:3]) and np.all(part[:, 3:] >= part[:, 2:3])


def test_data_dependent_shapes_need_size_under_jit():
    x = jnp.asarray(DUP)
    for fn in (jnp.nonzero, jnp.unique, jnp.argwhere, jnp.flatnonzero,
               lambda a: jnp.where(a)):
        with pytest.raises(jaxkit.ConcretizationTypeError):
            jaxkit.jit(fn)(x)
    out = jaxkit.jit(lambda a: jnp.unique(a, size=5, fill_value=0))(x)
    np.testing.assert_array_equal(np.asarray(out), [0, 1, 2, 3, 0])


def test_sorting_errors():
    with pytest.raises(ValueError, match="'order' argument to sort is not supported"):
        jnp.sort(jnp.asarray(F32), order="x")
    with pytest.raises(ValueError, match="a should be 1-dimensional"):
        jnp.searchsorted(jnp.asarray(F32), 1.0)
    with pytest.raises(ValueError, match="invalid argument side='middle', expected 'left' or 'right'"):
        jnp.searchsorted(jnp.asarray(V4), 1.0, side="middle")
    with pytest.raises(ValueError, match="Calling nonzero on 0d arrays is not allowed"):
        jnp.nonzero(jnp.asarray(1.0))
    with pytest.raises(ValueError, match="Either both or neither of the x and y arguments"):
        jnp.where(jnp.asarray(DUP), 1)
    with pytest.raises(TypeError, match="'kind' argument to argsort is not supported"):
        jnp.argsort(jnp.asarray(F32), kind="stable")
    with pytest.raises(TypeError, match="'order' argument to argsort is not supported"):
        jnp.argsort(jnp.asarray(F32), order="x")
    with pytest.raises(TypeError, match="iota does not accept dtype bool"):
        jnp.argsort(jnp.asarray(F32), dtype=bool)
    with pytest.raises(TypeError, match="bincount must have an integer type"):
        jnp.bincount(jnp.asarray(V4))


@pytest.mark.parametrize("bins", [V4, V4[::-1].copy(), np.zeros(0, np.float32)],
                         ids=["increasing", "decreasing", "empty"])
def test_digitize_is_int32_under_x64(bins):
    """searchsorted's indices are int32 with or without x64, and so is digitize (as JAX)."""
    with jaxkit.enable_x64(True):
        got = jnp.digitize(jnp.asarray(F32, jnp.float64), jnp.asarray(bins, jnp.float64))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), np.digitize(F32, bins))
