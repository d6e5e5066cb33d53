"""jaxkit.numpy array creation and shape manipulation against the JAX oracle (values, shape,
dtype, weak type) and NumPy, plus JAX's error messages."""
from __future__ import annotations

import numpy as np
import pytest
from _numpy_checks import W, check, rng_array

import jaxkit
import jaxkit.numpy as jnp

F32 = rng_array((3, 4), np.float32)
F3 = rng_array((2, 3, 4), np.float32, seed=1)
I32 = rng_array((3, 4), np.int32, seed=2)
V4 = rng_array((4,), np.float32, seed=3)

# (name, args, kwargs): creation functions.
CREATION = [
    ("zeros", ((2, 3),), {}), ("zeros", (3,), {"dtype": np.int8}), ("ones", ((2,),), {}),
    ("empty", (2,), {}), ("full", ((2, 2), 1.5), {}), ("full", ((2,), 1), {}),
    ("full", ((3, 4), V4), {}), ("full", (3, 2), {"dtype": np.float16}),
    ("zeros_like", (F32,), {}), ("ones_like", (W(1.0),), {}), ("full_like", (I32, 2.5), {}),
    ("full_like", (F32, 1), {"shape": (5,)}), ("empty_like", (I32,), {}),
    ("arange", (5,), {}), ("arange", (5.0,), {}), ("arange", (1, 10, 2), {}),
    ("arange", (0, 1, 0.1), {}), ("arange", (3,), {"dtype": np.float16}),
    ("arange", (-2.5, 3), {}), ("arange", (10, 2, -3), {}),
    ("linspace", (0, 1, 7), {}), ("linspace", (0, 10, 5), {"endpoint": False}),
    ("linspace", (0, 10, 5), {"retstep": True}), ("linspace", (V4, 2.0, 3), {"axis": -1}),
    ("linspace", (0, 10, 4), {"dtype": np.int32}), ("linspace", (2, 3, 1), {}),
    ("linspace", (2, 3, 0), {}), ("logspace", (0, 2, 5), {}),
    ("logspace", (0, 2, 4), {"base": 2}), ("geomspace", (1, 16, 5), {}),
    ("geomspace", (-1, -1000, 4), {}), ("eye", (3,), {}), ("eye", (3, 4, 1), {}),
    ("eye", (4,), {"k": -2, "dtype": np.int32}), ("identity", (2,), {}), ("tri", (3, 4, -1), {}),
    ("tril", (F32,), {}), ("triu", (F32, 1), {}), ("tril", (F3, -1), {}),
    ("array", ([1, 2, 3],), {}), ("array", ([1.0, 2],), {}), ("array", (1.0,), {}),
    ("array", ([[1, 2], [3, 4]],), {"dtype": np.float32}), ("asarray", (1,), {}),
    ("array", (True,), {}), ("array", ([F32, F32],), {}), ("array", (F32,), {"ndmin": 4}),
    ("asarray", ([W(1.0), W(2.0)],), {}), ("array", ([],), {}), ("array", (np.float64(2),), {}),
    ("asarray", (np.arange(3, dtype=np.int64),), {}), ("asarray", (F32,), {"dtype": np.int16}),
    ("meshgrid", (V4, V4[:2]), {}), ("meshgrid", (V4, V4[:2], V4[:3]), {"indexing": "ij"}),
    ("meshgrid", (V4, V4[:3]), {"sparse": True}), ("indices", ((2, 3),), {}),
    ("indices", ((2, 3),), {"sparse": True}), ("diag", (V4,), {}), ("diag", (V4, 1), {}),
    ("diag", (F32, -1), {}), ("diagflat", (F32[:2, :2], 1), {}), ("diagonal", (F3, 1, 1, 2), {}),
    ("trace", (F32, 1), {}), ("trace", (F3,), {"axis1": 1, "axis2": 2}),
]

SHAPE = [
    ("reshape", (F32, (4, 3)), {}), ("reshape", (F32, (-1,)), {}),
    ("reshape", (F32, (2, -1)), {"order": "F"}), ("ravel", (F3,), {}),
    ("ravel", (F32,), {"order": "F"}), ("transpose", (F3,), {}),
    ("transpose", (F3, (1, 0, 2)), {}), ("permute_dims", (F3, (2, 0, 1)), {}),
    ("matrix_transpose", (F3,), {}), ("moveaxis", (F3, 0, -1), {}),
    ("moveaxis", (F3, (0, 1), (2, 0)), {}), ("swapaxes", (F3, 0, 2), {}),
    ("rollaxis", (F3, 2), {}), ("expand_dims", (F32, (0, 3)), {}),
    ("squeeze", (F32[None, :, None],), {}), ("squeeze", (F32[None],), {"axis": 0}),
    ("atleast_1d", (1.0,), {}), ("atleast_2d", (V4,), {}), ("atleast_3d", (F32,), {}),
    ("atleast_3d", (V4,), {}), ("atleast_1d", (V4, 2.0), {}),
    ("stack", ([F32, F32],), {"axis": 1}), ("stack", ([F32, I32],), {}), ("stack", (F3,), {}),
    ("hstack", ([V4, V4],), {}), ("vstack", ([V4, V4],), {}), ("dstack", ([F32, F32],), {}),
    ("column_stack", ([V4, V4],), {}), ("concatenate", ([F32, I32],), {"axis": 0}),
    ("concatenate", ([F32, F3[0]],), {"axis": None}), ("concatenate", (F3,), {"axis": 1}),
    ("concat", ([F32, F32],), {"axis": 1}), ("append", (F32, V4), {}),
    ("append", (F32, F32), {"axis": 1}), ("split", (F32, 2), {"axis": 1}),
    ("split", (F32, [1, 3]), {"axis": 1}), ("array_split", (F32, 3), {"axis": 1}),
    ("hsplit", (F32, 2), {}), ("vsplit", (F32, 3), {}), ("dsplit", (F3, [1]), {}),
    ("tile", (V4, 3), {}), ("tile", (F32, (2, 1, 2)), {}), ("repeat", (F32, 2), {}),
    ("repeat", (F32, 2), {"axis": 1}), ("repeat", (F32, np.array([1, 0, 2])), {"axis": 0}),
    ("repeat", (F32, np.array([1, 0, 2])), {"axis": 0, "total_repeat_length": 3}),
    ("repeat", (3.0, 4), {}), ("flip", (F3,), {}), ("flip", (F3, (0, 2)), {}),
    ("fliplr", (F32,), {}), ("flipud", (F32,), {}), ("rot90", (F32,), {}),
    ("rot90", (F3, 3, (1, 2)), {}), ("rot90", (F32, 2), {}), ("roll", (F32, 1), {}),
    ("roll", (F32, -2), {"axis": 1}), ("roll", (F3, (1, 2)), {"axis": (0, 2)}),
    ("delete", (F32, 1), {"axis": 1}), ("delete", (F32, np.array([0, 2])), {"axis": 1}),
    ("delete", (F32, slice(0, 3, 2)), {}), ("insert", (F32, 1, 5.0), {"axis": 1}),
    ("insert", (V4, np.array([1, 3]), np.array([9., 8.], np.float32)), {}),
    ("insert", (F32, 2, V4[:3]), {"axis": 1}), ("resize", (F32, (5, 3)), {}),
    ("trim_zeros", (np.array([0, 0, 1, 2, 0], np.float32),), {}),
    ("trim_zeros", (np.pad(F32, 1), "f"), {}), ("trim_zeros", (np.pad(F32, 1), "b", -1), {}),
    ("trim_zeros", (np.pad(I32, ((0, 2), (1, 0))),), {"axis": (1, 0)}),
    ("trim_zeros", (np.zeros((2, 3), np.float32),), {"axis": 1}),
    ("unstack", (F32,), {"axis": 1}), ("block", ([[F32, F32], [F32, F32]],), {}),
    ("broadcast_to", (V4, (3, 4)), {}), ("broadcast_to", (2.0, (2,)), {}),
    ("broadcast_arrays", (F32, V4), {}), ("pad", (F32, 1), {}),
    ("pad", (F32, ((1, 2), (0, 1))), {"constant_values": 7.0}),
    ("pad", (F32, ((1, 2), (0, 1))), {"constant_values": ((1.0, 2.0), (3.0, 4.0))}),
    ("pad", (I32, 2), {"mode": "mean"}),
    ("pad", (F32, ((2, 5), (1, 3))), {"mode": "reflect", "reflect_type": "odd"}),
    ("pad", (F32, (1, 2)), {"mode": "linear_ramp", "end_values": (5, -5)}),
    ("pad", (F32, 2), {"mode": "maximum", "stat_length": 2}),
]

PAD_MODES = ["edge", "wrap", "reflect", "symmetric", "maximum", "minimum", "mean", "median",
             "linear_ramp", "empty"]

_JIT_OK = {"zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "eye", "tril",
           "triu", "diag", "trace", "reshape", "transpose", "moveaxis", "stack", "concatenate",
           "split", "tile", "flip", "rot90", "roll", "pad", "broadcast_to", "linspace",
           "squeeze", "expand_dims", "atleast_3d", "diagonal", "meshgrid", "append"}


def _ids(rows):
    return [f"{n}-{i}" for i, (n, _, _) in enumerate(rows)]


@pytest.mark.parametrize("name,args,kw", CREATION, ids=_ids(CREATION))
def test_creation(name, args, kw):
    check(name, *args, kw=kw, rtol=2e-6, jit=name in _JIT_OK and not any(
        isinstance(a, (tuple, int, float)) for a in args[:1]) and name != "linspace")


@pytest.mark.parametrize("name,args,kw", SHAPE, ids=_ids(SHAPE))
def test_shape_functions(name, args, kw):
    check(name, *args, kw=kw, rtol=2e-6, jit=name in _JIT_OK and isinstance(args[0],
                                                                              np.ndarray))


@pytest.mark.parametrize("mode", PAD_MODES)
def test_pad_modes_match_numpy_and_jax(mode):
    pw = ((2, 5), (1, 3))
    got = check("pad", F32, pw, kw={"mode": mode}, rtol=2e-6)
    if mode != "empty":
        np.testing.assert_allclose(np.asarray(got), np.pad(F32, pw, mode=mode), rtol=2e-6)


def test_shape_functions_match_numpy():
    pairs = [("reshape", (F32, (2, 6))), ("transpose", (F3, (2, 0, 1))), ("tile", (F32, 2)),
             ("repeat", (F32, 3, 1)), ("roll", (F3, 5)), ("rot90", (F32, 1)),
             ("insert", (V4, 2, 7.0)), ("delete", (V4, 1)), ("resize", (V4, 7))]
    for name, args in pairs:
        want = getattr(np, name)(*args)
        got = getattr(jnp, name)(*[jnp.asarray(a) if isinstance(a, np.ndarray) else a
                                   for a in args])
        np.testing.assert_allclose(np.asarray(got), want, err_msg=name)


def test_array_of_tracers_and_asarray_identity():
    x = jnp.asarray(F32)
    assert jnp.asarray(x) is x
    out = jaxkit.jit(lambda a, b: jnp.array([a, b, 1.0]))(jnp.asarray(2.0), jnp.asarray(3.0))
    np.testing.assert_array_equal(np.asarray(out), [2.0, 3.0, 1.0])
    assert out.dtype == np.float32 and not out.weak_type


def test_array_dtypes_and_weak_types():
    cases = [(1, {}), (1.0, {}), (1j, {}), (True, {}), ([1, 2], {}), (np.float64(1), {}),
             (np.arange(3), {}), (1, {"dtype": np.float32}), ([1.5, 2], {"dtype": np.int32})]
    for obj, kw in cases:
        check("array", obj, kw=kw)
        check("asarray", obj, kw=kw)


def test_creation_errors():
    with pytest.raises(TypeError, match=r"Did you accidentally write `jax.numpy.zeros\(2, 3\)`"):
        jnp.zeros(2, 3)
    with pytest.raises(ValueError, match="None is not a valid value for jnp.array"):
        jnp.array([1, None])
    with pytest.raises(ValueError, match="Number of samples, -1, must be non-negative"):
        jnp.linspace(0, 1, -1)
    with pytest.raises(jaxkit.ConcretizationTypeError):
        jaxkit.jit(lambda n: jnp.arange(n))(3)
    with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values of "
                                        "integer type"):
        jaxkit.jit(lambda n: jnp.zeros((n, 2)))(3)


def test_shape_errors_match_jax():
    x = jnp.ones(6)
    with pytest.raises(TypeError, match=r"cannot reshape array of shape \(6,\) \(size 6\) into "
                                        r"shape \(4, 2\) \(size 8\)"):
        jnp.reshape(x, (4, 2))
    with pytest.raises(TypeError, match="because the product of specified axis sizes"):
        x.reshape(-1, 4)
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: "
                                         r"shapes=\[\(3,\), \(4,\)\]"):
        jnp.broadcast_shapes((3,), (4,))
    with pytest.raises(ValueError, match=r"Incompatible types for broadcasting: input "
                                         r"type=float32\[3\] and requested type=float32\[4\]"):
        jnp.broadcast_to(jnp.ones(3), (4,))
    with pytest.raises(TypeError, match="Cannot concatenate arrays with different numbers of "
                                        "dimensions"):
        jnp.concatenate([jnp.ones(2), jnp.ones((2, 2))])
    with pytest.raises(ValueError, match="Zero-dimensional arrays cannot be concatenated"):
        jnp.concatenate([jnp.ones(()), jnp.ones(())])
    with pytest.raises(ValueError, match="array split does not result in an equal division"):
        jnp.split(jnp.ones(5), 2)
    with pytest.raises(ValueError, match="cannot select an axis to squeeze out"):
        jnp.squeeze(jnp.ones((2, 3)), 0)
    with pytest.raises(ValueError, match="Need at least one array to stack"):
        jnp.stack([])
    with pytest.raises(ValueError, match="All input arrays must have the same shape"):
        jnp.stack([jnp.ones(2), jnp.ones(3)])
    with pytest.raises(jaxkit.ConcretizationTypeError):
        jaxkit.jit(lambda a: jnp.repeat(a, a))(jnp.arange(3))
    with pytest.raises(ValueError, match=r"repeated axis: \(0, 0\)"):
        jnp.trim_zeros(jnp.ones((2, 2)), axis=(0, -2))
    with pytest.raises(ValueError, match="axis 2 is out of bounds for array of dimension 2"):
        jnp.trim_zeros(jnp.ones((2, 2)), axis=2)


def test_repeat_traced_with_total_length():
    f = jaxkit.jit(lambda a, r: jnp.repeat(a, r, total_repeat_length=4))
    out = f(jnp.asarray(np.array([1., 2., 3.], np.float32)), jnp.asarray(np.array([2, 0, 2])))
    np.testing.assert_array_equal(np.asarray(out), [1., 1., 3., 3.])


def test_roll_traced_shift():
    out = jaxkit.jit(lambda a, s: jnp.roll(a, s, axis=0))(jnp.asarray(V4), 3)
    np.testing.assert_array_equal(np.asarray(out), np.roll(V4, 3))


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 0, 4), ()])
def test_stack_every_axis_matches_numpy(shape):
    # stack is one concatenate and one reshape (plus a transpose for the last axis)
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    for axis in range(-len(shape) - 1, len(shape) + 1):
        got = jnp.stack([jnp.asarray(a) for a in arrs], axis=axis)
        want = np.stack(arrs, axis=axis)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", [
    lambda j: j.numpy.reshape(np.ones(4), (2, 2)),
    lambda j: j.numpy.reshape(np.float64(1), (1,)),
    lambda j: j.numpy.reshape(np.arange(6, dtype=np.int64), (3, -1), order="F"),
    lambda j: j.numpy.reshape(1.0, (1,)),
    lambda j: j.numpy.reshape(j.numpy.ones(4), (2, 2)),
    lambda j: j.numpy.reshape(np.ones((3, 2, 4), bool), (-1, -1)),
    lambda j: j.numpy.reshape(np.ones(6), (4, -1)),
    lambda j: j.numpy.reshape(j.numpy.ones(6), (-1, -1)),
    lambda j: j.jit(lambda x: j.numpy.reshape(np.ones(4), (2, 2)) + x)(1.),
], ids=["ndarray", "numpy scalar", "order F", "python scalar", "array", "two unknowns numpy",
        "misfit numpy", "two unknowns array", "numpy constant under jit"])
def test_reshape_of_numpy_values_as_jax(case):
    """As JAX's, jnp.reshape hands a NumPy value to NumPy's own reshape: the result is a NumPy
    array of its dtype (float64 stays), errors are NumPy's; JAX arrays get JAX's."""
    jax = pytest.importorskip("jax")

    def outcome(lib):
        try:
            out = case(lib)
        except Exception as e:  # noqa: BLE001  (class and text are compared)
            return type(e).__name__, str(e)
        return type(out).__module__.split(".")[0], repr(out)
    assert outcome(jaxkit) == outcome(jax)
