"""``float0`` values and the types of forward-mode results, against JAX itself.

float0 (the dtype of the tangents and cotangents of integers and booleans) holds no data:
JAX makes every float0 value on the host as a ``TypedNdArray`` of zeros (from ``grad`` with
``allow_int``, ``vjp``, ``jvp``, ``jnp.zeros(n, float0)``, ``device_put``, a jitted
function's float0 results), and a program takes a float0 argument as bool zeros. The
second table: JAX's jnp functions are jits, whose JVP runs as a program, so a tangent passed
through ``x + 1.0`` comes out an Array, where a lax primitive (``lax.add``) hands it on as
it is. The third: the same under ``vmap`` of a NumPy batch (``jnp.squeeze`` of an int64
vector is an int32 Array, an identity ``jnp.transpose``, which JAX does not jit, hands the
NumPy batch on). Each record runs on both sides; the results' types, reprs and dtypes must
agree."""
import jax
import jax.numpy as jjnp
import numpy as np
import pickle
import pytest

import jaxkit
import jaxkit.numpy as kjnp

SIDES = {"jax": (jax, jjnp), "jaxkit": (jaxkit, kjnp)}
F0 = np.zeros((2,), jax.dtypes.float0)

FLOAT0 = {
    "grad_allow_int": lambda J, jnp: J.grad(lambda x: x * 1.0, allow_int=True)(1),
    "vjp_int_input": lambda J, jnp: J.vjp(lambda x: x * 2, 1)[1](2),
    "vjp_int_to_float": lambda J, jnp: J.vjp(lambda x: x * 2.0, 1)[1](2.0),
    "jvp_int_output": lambda J, jnp: J.jvp(lambda x: x.astype(jnp.int32), (jnp.ones(2),),
                                           (jnp.ones(2),)),
    "jvp_int_tangent": lambda J, jnp: J.jvp(lambda x: x * 2, (jnp.arange(3),),
                                            (np.zeros((3,), J.dtypes.float0),)),
    "jvp_device_float0_tangent": lambda J, jnp: J.jvp(
        lambda x: x + 1, (2,), (jnp.zeros((), J.dtypes.float0),)),
    "linearize_int": lambda J, jnp: J.linearize(lambda x: x * 2, jnp.arange(3))[1](
        np.zeros((3,), J.dtypes.float0)),
    "jit_float0_args": lambda J, jnp: J.jit(lambda x: (x, x))(F0),
    "jit_ignores_float0_arg": lambda J, jnp: J.jit(lambda x, y: y * 2)(F0, 1.0),
    "jit_makes_float0": lambda J, jnp: J.jit(lambda y: jnp.zeros((3,), J.dtypes.float0))(1.0),
    "jit_grad_allow_int": lambda J, jnp: J.jit(J.grad(lambda x, y: x * y, argnums=(0, 1),
                                                      allow_int=True))(2.0, 3),
    "zeros": lambda J, jnp: jnp.zeros((2,), J.dtypes.float0),
    "ones": lambda J, jnp: jnp.ones((2,), J.dtypes.float0),
    "full": lambda J, jnp: jnp.full((2,), 0, J.dtypes.float0),
    "empty": lambda J, jnp: jnp.empty((2,), J.dtypes.float0),
    "zeros_like": lambda J, jnp: jnp.zeros_like(jnp.arange(3), dtype=J.dtypes.float0),
    "array_of_float0": lambda J, jnp: jnp.array(jnp.zeros((2,), J.dtypes.float0)),
    "asarray_numpy": lambda J, jnp: jnp.asarray(F0),
    "device_put": lambda J, jnp: J.device_put(F0),
    "str": lambda J, jnp: str(jnp.zeros((2,), J.dtypes.float0)),
    "aval": lambda J, jnp: jnp.zeros((2,), J.dtypes.float0).aval,
    "typeof": lambda J, jnp: J.typeof(jnp.zeros((2,), J.dtypes.float0)),
    "weak_type": lambda J, jnp: jnp.zeros((2,), J.dtypes.float0).weak_type,
    "not_a_jax_array": lambda J, jnp: isinstance(jnp.zeros((2,), J.dtypes.float0), J.Array),
    "to_numpy": lambda J, jnp: np.asarray(jnp.zeros((2,), J.dtypes.float0)),
    "jaxpr": lambda J, jnp: J.make_jaxpr(lambda x: x)(F0),
    "empty_shape": lambda J, jnp: jnp.zeros((0, 2), J.dtypes.float0),
}

JIT_TANGENTS = {
    "add_python_scalar": lambda J, jnp: J.jvp(lambda x: x + 1.0, (2.0,), (3.0,)),
    "identity": lambda J, jnp: J.jvp(lambda x: x, (2.0,), (3.0,)),
    "constant_output": lambda J, jnp: J.jvp(lambda x: 2.0, (2.0,), (3.0,)),
    "lax_add_passes_tangent": lambda J, jnp: J.jvp(lambda x: J.lax.add(x, 1.0), (2.0,), (3.0,)),
    "numpy_scalar_tangent": lambda J, jnp: J.jvp(lambda x: x + 1, (np.float32(2.0),),
                                                 (np.float32(3.0),)),
    "numpy_array_tangent": lambda J, jnp: J.jvp(lambda x: x + 1, (np.ones(2, np.float32),),
                                                (np.ones(2, np.float32),)),
    "mixed_outputs": lambda J, jnp: J.jvp(lambda x: (x, x + 1.0, 3), (2.0,), (3.0,)),
    "linearize_add": lambda J, jnp: J.linearize(lambda x: x + 2.0, 2.0)[1](3.0),
    "vjp_add": lambda J, jnp: J.vjp(lambda x: x + 2.0, 2.0)[1](3.0),
    "jvp_of_jit": lambda J, jnp: J.jvp(J.jit(lambda x: x + 1.0), (2.0,), (3.0,)),
    "nested_jvp": lambda J, jnp: J.jvp(lambda x: J.jvp(lambda y: y + 1.0, (x,), (3.0,)),
                                       (2.0,), (1.0,)),
}

I64 = np.arange(12, dtype=np.int64).reshape(3, 2, 2)
F64 = np.linspace(0.0, 1.0, 12).reshape(3, 2, 2)
_BATCHED = {
    "squeeze": lambda J, jnp: jnp.squeeze, "squeeze_none": lambda J, jnp: lambda a: jnp.squeeze(a, ()),
    "transpose": lambda J, jnp: lambda a: jnp.transpose(a, (0, 1)),
    "reshape_same": lambda J, jnp: lambda a: jnp.reshape(a, a.shape),
    "astype_same": lambda J, jnp: lambda a: jnp.astype(a, a.dtype),
    "method_reshape": lambda J, jnp: lambda a: a.reshape(a.shape),
    "method_T": lambda J, jnp: lambda a: a.T, "moveaxis": lambda J, jnp: lambda a: jnp.moveaxis(a, 0, 0),
    "expand_dims_none": lambda J, jnp: lambda a: jnp.expand_dims(a, ()),
    "ravel": lambda J, jnp: jnp.ravel, "broadcast_to_same": lambda J, jnp: lambda a: jnp.broadcast_to(a, a.shape),
    "broadcast_arrays": lambda J, jnp: lambda a: jnp.broadcast_arrays(a, a),
    "asarray": lambda J, jnp: jnp.asarray, "array": lambda J, jnp: jnp.array,
    "identity": lambda J, jnp: lambda a: a, "getitem_all": lambda J, jnp: lambda a: a[...],
    "lax_squeeze_none": lambda J, jnp: lambda a: J.lax.squeeze(a, ()),
    "where": lambda J, jnp: lambda a: jnp.where(True, a, a), "add": lambda J, jnp: lambda a: a + 1,
}
BATCHED = {f"{name}_{x.dtype}": (lambda f, x: lambda J, jnp: J.vmap(f(J, jnp))(x))(f, x)
           for name, f in _BATCHED.items() for x in (I64, F64)}
BATCHED["jvp_broadcast_arrays"] = lambda J, jnp: J.jvp(lambda x: jnp.broadcast_arrays(x)[0],
                                                       (np.ones(3),), (np.ones(3),))
BATCHED["jvp_transpose"] = lambda J, jnp: J.jvp(lambda x: jnp.transpose(x), (np.ones(3),),
                                                (np.ones(3),))


def _described(value):
    """Each leaf's type name, repr and (where it has one) dtype and weak type."""
    def leaf(x):
        return (type(x).__name__, repr(x), str(getattr(x, "dtype", None)),
                getattr(x, "weak_type", None))
    return jax.tree.map(leaf, value, is_leaf=lambda x: isinstance(x, np.ndarray))


def _run(record, side):
    J, jnp = SIDES[side]
    try:
        return _described(record(J, jnp))
    except Exception as e:  # noqa: BLE001 - the class and message are compared
        return type(e).__name__, str(e)


@pytest.mark.parametrize("name", FLOAT0)
def test_float0_values_as_in_jax(name):
    assert _run(FLOAT0[name], "jaxkit") == _run(FLOAT0[name], "jax")


@pytest.mark.parametrize("name", JIT_TANGENTS)
def test_forward_mode_result_types_as_in_jax(name):
    assert _run(JIT_TANGENTS[name], "jaxkit") == _run(JIT_TANGENTS[name], "jax")


def test_float0_host_value_round_trips():
    x = jaxkit.grad(lambda x: x * 1.0, allow_int=True)(1)
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is type(x) and y.aval == x.aval and repr(y) == repr(x)
    view = kjnp.zeros((3,), jaxkit.dtypes.float0)[1:]
    assert view.aval.shape == (2,) and repr(view) == repr(jjnp.zeros((3,), jax.dtypes.float0)[1:])


def test_float0_arithmetic_is_refused_as_in_jax():
    a = _run(lambda J, jnp: jnp.add(jnp.zeros((2,), J.dtypes.float0), 1), "jaxkit")
    b = _run(lambda J, jnp: jnp.add(jnp.zeros((2,), J.dtypes.float0), 1), "jax")
    assert a[0] == b[0] and "float0" in a[1]


@pytest.mark.parametrize("name", BATCHED)
def test_batched_result_types_as_in_jax(name):
    assert _run(BATCHED[name], "jaxkit") == _run(BATCHED[name], "jax")
