"""Indexing (``x[idx]``) and indexed updates (``x.at[idx].op(v)``) against NumPy and the JAX
oracle, eagerly and under jit, plus ``take``/``take_along_axis``/``put``/``place`` and errors."""
from __future__ import annotations

import numpy as np
import pytest
from _numpy_checks import assert_same, check, jax, jjnp, rng_array

import jaxkit
import jaxkit.numpy as jnp
from jaxkit.errors import NonConcreteBooleanIndexError

X = rng_array((4, 5, 6), np.float32)
I = np.array([0, 2, -1])
J = np.array([[1], [3]])
MASK0 = X[:, 0, 0] > 0
MASK2 = X[..., 0] > 0

# Index expressions, written as functions of (module, scalar-index) so that the same
# expression can be built with jaxkit and with JAX (traced scalars included).
INDEXES = {
    "int": lambda m, s: 0,
    "neg int": lambda m, s: -1,
    "two ints": lambda m, s: (1, 2),
    "three ints": lambda m, s: (1, 2, 3),
    "colon": lambda m, s: slice(None),
    "slice": lambda m, s: slice(1, 3),
    "reverse": lambda m, s: slice(None, None, -1),
    "step": lambda m, s: slice(None, None, 2),
    "neg step": lambda m, s: slice(3, 0, -2),
    "ellipsis": lambda m, s: Ellipsis,
    "ellipsis int": lambda m, s: (Ellipsis, 1),
    "newaxis": lambda m, s: (None, 1),
    "newaxes": lambda m, s: (1, None, Ellipsis, None),
    "mixed slices": lambda m, s: (slice(1, None), slice(None, None, -2), 0),
    "array": lambda m, s: I,
    "two arrays": lambda m, s: (I, I),
    "slice array": lambda m, s: (slice(None), I),
    "split arrays": lambda m, s: (I, slice(None), I),
    "broadcast arrays": lambda m, s: (J, I),
    "ellipsis array": lambda m, s: (Ellipsis, I),
    "int array": lambda m, s: (0, I),
    "array int": lambda m, s: (I, 0),
    "int slice array": lambda m, s: (1, slice(None), I),
    "array newaxis array": lambda m, s: (I, None, I),
    "mask": lambda m, s: MASK2,
    "mask first axis": lambda m, s: (MASK0,),
    "mask inner axis": lambda m, s: (slice(None), X[0, :, 0] > 0),
    "scalar True": lambda m, s: (True,),
    "scalar False": lambda m, s: (False,),
    "arrays around ellipsis": lambda m, s: (np.array([1, 0]), Ellipsis, np.array([2, 3])),
    "out of bounds int": lambda m, s: 10,
    "out of bounds neg": lambda m, s: (-10,),
    "numpy int": lambda m, s: (np.int32(2),),
    "list": lambda m, s: (slice(None), [0, 1]),
    "nested list": lambda m, s: ([[0, 1], [2, 3]],),
    "empty array": lambda m, s: (np.array([], np.int32),),
    "slice past end": lambda m, s: (slice(1, 100),),
    "slice before start": lambda m, s: (slice(-100, 2),),
    "array scalar": lambda m, s: (s,),
    "array scalar middle": lambda m, s: (slice(None), s, 1),
    "jax array": lambda m, s: m.asarray(I),
}
_HAS_MASK = {"mask", "mask first axis", "mask inner axis"}


def _idx(name: str, module) -> object:
    return INDEXES[name](module, module.asarray(2))


@pytest.mark.parametrize("name", list(INDEXES))
def test_getitem(name):
    want = jjnp.asarray(X)[_idx(name, jjnp)]
    got = jnp.asarray(X)[_idx(name, jnp)]
    assert_same(got, want, what=name)
    np_idx = INDEXES[name](np, np.int32(2))
    np.testing.assert_array_equal(np.asarray(got), X[np_idx] if name not in (
        "out of bounds int", "out of bounds neg") else np.asarray(want))
    if name not in _HAS_MASK:
        got_jit = jaxkit.jit(lambda a: a[_idx(name, jnp)])(jnp.asarray(X))
        assert_same(got_jit, want, what=name + " under jit")


@pytest.mark.parametrize("name", [n for n in INDEXES if n not in ("empty array",)])
@pytest.mark.parametrize("method", ["set", "add", "multiply", "min", "max", "subtract",
                                    "divide", "power", "get"])
def test_at_updates(name, method):
    args = () if method == "get" else (1.5,)
    want = getattr(jjnp.asarray(X).at[_idx(name, jjnp)], method)(*args)
    got = getattr(jnp.asarray(X).at[_idx(name, jnp)], method)(*args)
    assert_same(got, want, rtol=1e-5, what=f"{name}.{method}")


@pytest.mark.parametrize("name", [n for n in INDEXES if n not in ("empty array",)])
def test_at_apply(name):
    # Through lax.scatter_apply (func applied once per occurrence of an index), as in JAX.
    want = jjnp.asarray(X).at[_idx(name, jjnp)].apply(lambda v: v * 2 + 1)
    got = jnp.asarray(X).at[_idx(name, jnp)].apply(lambda v: v * 2 + 1)
    assert_same(got, want, what=f"{name}.apply")


@pytest.mark.parametrize("name", ["int", "slice", "reverse", "array", "broadcast arrays",
                                  "split arrays", "mask", "newaxes", "neg step"])
def test_at_set_array_values_and_jit(name):
    shape = jjnp.asarray(X)[_idx(name, jjnp)].shape
    vals = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    want = jjnp.asarray(X).at[_idx(name, jjnp)].set(vals)
    got = jnp.asarray(X).at[_idx(name, jnp)].set(vals)
    assert_same(got, want, what=name)
    if name not in _HAS_MASK:
        got_jit = jaxkit.jit(lambda a, v: a.at[_idx(name, jnp)].add(v))(jnp.asarray(X), vals)
        assert_same(got_jit, jjnp.asarray(X).at[_idx(name, jjnp)].add(vals), what=name)


def test_at_repeated_indices_accumulate():
    idx = np.array([0, 1, 0, 0])
    for method in ("add", "multiply", "min", "max"):
        want = getattr(jjnp.arange(5.0).at[idx], method)(np.array([1., 2., 3., 4.], np.float32))
        got = getattr(jnp.arange(5.0).at[idx], method)(np.array([1., 2., 3., 4.], np.float32))
        assert_same(got, want, what=method)


def test_at_modes_fill_value_and_dtypes():
    x = np.arange(5, dtype=np.int32)
    oob = np.array([1, 7])
    assert_same(jnp.asarray(x).at[oob].get(mode="fill", fill_value=-1),
                jjnp.asarray(x).at[oob].get(mode="fill", fill_value=-1))
    assert_same(jnp.asarray(x).at[oob].get(mode="clip"), jjnp.asarray(x).at[oob].get(mode="clip"))
    assert_same(jnp.asarray(x).at[oob].set(9, mode="drop"),
                jjnp.asarray(x).at[oob].set(9, mode="drop"))
    assert_same(jnp.asarray(x).at[oob].add(9, mode="clip"),
                jjnp.asarray(x).at[oob].add(9, mode="clip"))
    # The value is converted to the dtype (and weak type) of the array.
    assert_same(jnp.asarray(x).at[1].set(2.7), jjnp.asarray(x).at[1].set(2.7))
    assert_same(jnp.asarray(1.0).at[()].add(2), jjnp.asarray(1.0).at[()].add(2))
    assert_same(jnp.asarray(x).at[1:3].apply(lambda v: v * 3),
                jjnp.asarray(x).at[1:3].apply(lambda v: v * 3))
    assert_same(jnp.asarray(x).at[np.array([0, 2])].set(np.array([7, 8]),
                                                        unique_indices=True,
                                                        indices_are_sorted=True),
                jjnp.asarray(x).at[np.array([0, 2])].set(np.array([7, 8])))


def test_traced_indices_in_jit():
    f = jaxkit.jit(lambda a, i, j: (a[i], a[i, j], a.at[i].set(0.0), a[i, :, j]))
    got = f(jnp.asarray(X), 3, -2)
    xj = jjnp.asarray(X)
    want = (xj[3], xj[3, -2], xj.at[3].set(0.0), xj[3, :, -2])
    assert_same(got, want)
    arr_idx = jaxkit.jit(lambda a, i: a[i])(jnp.asarray(X), jnp.asarray(I))
    assert_same(arr_idx, jjnp.asarray(X)[I])


@pytest.mark.parametrize("mode", [None, "fill", "clip", "wrap"])
def test_take(mode):
    idx = np.array([[0, 4], [-1, 7]])
    kw = {"mode": mode} if mode else {}
    check("take", X, idx, kw={**kw, "axis": 1}, jit=True)
    check("take", X, idx, kw=kw)
    check("take", X, np.array(2), kw={**kw, "axis": -1})
    check("take", X, idx, kw={**kw, "axis": 0, "fill_value": 0.5} if mode in (None, "fill")
          else {**kw, "axis": 0})


def test_take_along_axis_and_put_along_axis():
    idx = np.argsort(X, axis=1)
    check("take_along_axis", X, idx, 1, jit=True)
    check("take_along_axis", X, idx[:, :2], 1)
    check("take_along_axis", X, np.argmax(X, axis=-1)[..., None], -1)
    check("take_along_axis", X[0, 0], np.array([5, 0, -1]), None)
    check("take_along_axis", X, np.ones((1, 2, 1), np.int32), 1)
    # wrap_negative_indices: -1 counts from the end, or is out of bounds (NaN when filling).
    neg = np.array([5, 0, -1], np.int8)
    for kw in ({"wrap_negative_indices": False}, {"wrap_negative_indices": True},
               {"mode": "promise_in_bounds", "wrap_negative_indices": True},
               {"mode": "clip", "wrap_negative_indices": False}):
        check("take_along_axis", X[0, 0], neg, None, kw=kw, jit=True)
    want = jjnp.put_along_axis(jjnp.asarray(X), idx[:, :1], 0.0, axis=1, inplace=False)
    got = jnp.put_along_axis(jnp.asarray(X), idx[:, :1], 0.0, axis=1, inplace=False)
    assert_same(got, want)


def test_put_and_place():
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    for mode in (None, "clip", "wrap"):
        want = jjnp.put(jjnp.asarray(x), np.array([1, 12, -3]), np.array([7., 8.]), mode=mode,
                        inplace=False)
        got = jnp.put(jnp.asarray(x), np.array([1, 12, -3]), np.array([7., 8.]), mode=mode,
                      inplace=False)
        assert_same(got, want, what=f"put mode={mode}")
    mask = x % 3 == 0
    assert_same(jnp.place(jnp.asarray(x), mask, np.array([-1., -2.]), inplace=False),
                jjnp.place(jjnp.asarray(x), mask, np.array([-1., -2.]), inplace=False))
    with pytest.raises(ValueError, match="cannot modify arrays in-place"):
        jnp.put(jnp.asarray(x), 0, 1.0)


def _error(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e).splitlines()[0]
    return None


@pytest.mark.parametrize("expr", ["a[1.0]", "a[:, :, :, :]", "a[..., ...]", "a[[0, [1]]]",
                                  "a['a']", "a[np.array([1.5])]", "a[[np.array([0, 1])]]",
                                  "a[mask[:2]]"])
def test_index_errors_match_jax(expr):
    mask = MASK0
    got = _error(lambda: eval(expr, {"a": jnp.asarray(X), "np": np, "mask": mask}))
    want = _error(lambda: eval(expr, {"a": jjnp.asarray(X), "np": np, "mask": mask}))
    assert want is not None and got == want


def test_boolean_index_under_jit_raises():
    with pytest.raises(NonConcreteBooleanIndexError,
                       match=r"Array boolean indices must be concrete; got bool\[4,5,6\]"):
        jaxkit.jit(lambda a: a[a > 0])(jnp.asarray(X))
    with pytest.raises(IndexError):
        jaxkit.jit(lambda a: a.at[a > 0].set(0.0))(jnp.asarray(X))
    with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
        jax.jit(lambda a: a[a > 0])(jjnp.asarray(X))
    out = jaxkit.jit(lambda a: jnp.where(a > 0, a, 0.0))(jnp.asarray(X))
    np.testing.assert_array_equal(np.asarray(out), np.where(X > 0, X, 0))


def test_setitem_is_an_error():
    x = jnp.asarray(X)
    with pytest.raises(TypeError, match=r"immutable.*x = x.at\[idx\].set\(y\)"):
        x[0] = 1.0
