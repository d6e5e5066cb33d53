"""Eager lax primitives on arrays laid out over several devices run as one partitioned
program, as JAX's (each eager primitive is a jitted call there): the result keeps a layout
XLA propagates, never gathered onto one device. Golden layouts and values from JAX 0.10.2 on
8 CPU devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``)."""
import numpy as np
import pytest

import jaxkit as jax
from jaxkit import lax
from jaxkit.runtime import multi_device
from jaxkit.avals import ShardingTypeError
from jaxkit.sharding import AxisType, NamedSharding
from jaxkit.sharding import PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices
A = np.arange(32, dtype=np.float32).reshape(8, 4)

# (call on the laid-out array, JAX 0.10.2's result spec or error class, the value's sum)
CASES = {
    "add": (lambda a: lax.add(a, a), P("x", "y"), 992.0),
    "sin": (lambda a: lax.sin(a), P("x", "y"), -0.12398743629455566),
    "exp_times_scalar": (lambda a: lax.mul(lax.exp(a * 0.01), 2.0), P("x", "y"),
                         75.04905700683594),
    "reduce_sum": (lambda a: lax.reduce_sum(a, (0,)), P("y"), 496.0),
    "reduce_max": (lambda a: lax.reduce_max(a, (1,)), P("x"), 136.0),
}
# Over an Explicit mesh a contraction of split dimensions needs an out_sharding (JAX's
# ShardingTypeError); over an Auto one XLA chooses.
EXPLICIT = {**CASES, "dot_general": (
    lambda a: lax.dot_general(a, a, (((1,), (1,)), ((), ()))), ShardingTypeError, None)}
AUTO = {**CASES,
        "dot_general": (lambda a: lax.dot_general(a, a, (((1,), (1,)), ((), ()))), P("x"),
                        61824.0),
        "grad": (lambda a: jax.grad(lambda x: (lax.sin(x) * x).sum())(a), P("x", "y"),
                 2.4982032775878906)}
RECORDS = [("Explicit", k) for k in EXPLICIT] + [("Auto", k) for k in AUTO]


@pytest.fixture(scope="module")
def laid_out():
    def make(axis_type):
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(getattr(AxisType, axis_type),) * 2,
                             devices=DEVICES)
        return jax.device_put(A, NamedSharding(mesh, P("x", "y")))
    return {t: make(t) for t in ("Explicit", "Auto")}


@pytest.mark.parametrize("axis_type,name", RECORDS, ids=[f"{t}-{k}" for t, k in RECORDS])
def test_eager_primitive_keeps_the_layout(laid_out, axis_type, name):
    fn, spec, total = (EXPLICIT if axis_type == "Explicit" else AUTO)[name]
    a = laid_out[axis_type]
    if isinstance(spec, type):
        with pytest.raises(spec):
            fn(a)
        return
    out = fn(a)
    assert isinstance(out.sharding, NamedSharding) and out.sharding.spec == spec
    assert out.sharding.mesh.devices.tolist() == a.sharding.mesh.devices.tolist()
    np.testing.assert_allclose(float(np.asarray(out).sum()), total, rtol=1e-5)


# Eager results with no operand laid out, under ``jax.set_mesh``: JAX 0.10.2 runs them over
# the context mesh, committed and replicated; over an Explicit mesh the spec has one entry per
# dimension, over an Auto one it is ``P()``; host data converted by jnp.array is ``P()``;
# ``device_put`` without a sharding stays on one device, uncommitted. (call, JAX's spec over
# the Explicit mesh, over the Auto one (None: a SingleDeviceSharding), jax.typeof over each,
# the value's sum)
X0 = np.arange(8.0, dtype=np.float32)
MADE = {
    "zeros": (lambda: jax.numpy.zeros(8), "P(None,)", "P()", "float32[8]", 0.0),
    "ones": (lambda: jax.numpy.ones((2, 4)), "P(None, None)", "P()", "float32[2,4]", 8.0),
    "full": (lambda: jax.numpy.full((4,), 2.0), "P(None,)", "P()", "~float32[4]", 8.0),
    "arange": (lambda: jax.numpy.arange(8), "P(None,)", "P()", "int32[8]", 28.0),
    "array": (lambda: jax.numpy.array([1.0, 2.0]), "P()", "P()", "float32[2]", 3.0),
    "asarray": (lambda: jax.numpy.asarray(X0), "P()", "P()", "float32[8]", 28.0),
    "eye": (lambda: jax.numpy.eye(3), "P(None, None)", "P()", "float32[3,3]", 3.0),
    "normal": (lambda: jax.random.normal(jax.random.key(0), (4,)), "P(None,)", "P()",
               "float32[4]", 3.135694980621338),
    "key": (lambda: jax.random.key(0), "P()", "P()", "key<fry>[]", None),
    "jit_no_args": (lambda: jax.jit(lambda: jax.numpy.ones(3))(), "P(None,)", "P()",
                    "float32[3]", 3.0),
    "jit_numpy": (lambda: jax.jit(lambda a: a * 2)(X0), "P(None,)", "P()", "float32[8]", 56.0),
    "jnp_add_numpy": (lambda: jax.numpy.add(X0, 1.0), "P(None,)", "P()", "float32[8]", 36.0),
    "lax_add_numpy": (lambda: lax.add(X0, X0), "P(None,)", "P()", "float32[8]", 56.0),
    "device_put": (lambda: jax.device_put(X0), None, None, "float32[8]", 28.0),
    "device_put_plus_1": (lambda: jax.device_put(X0) + 1, "P(None,)", "P()", "float32[8]",
                          36.0),
    "grad_numpy": (lambda: jax.grad(lambda a: (a * a).sum())(X0), "P(None,)", "P()",
                   "float32[8]", 56.0),
    "sum_of_made": (lambda: jax.numpy.ones((8, 4)).sum(0), "P(None,)", "P()", "float32[4]",
                    32.0),
    "asarray_of_laid_out": (lambda: jax.numpy.asarray(jax.device_put(X0, P("y"))), "P('y',)",
                            "P('y',)", ("float32[8@y]", "float32[8]"), 28.0),
    # Host data straight into a primitive whose rule keeps its operand's type (sin, sort,
    # reshape, reduce_sum...): JAX's result type carries no mesh, P() over either mesh...
    "lax_sin_numpy": (lambda: lax.sin(X0), "P()", "P()", "float32[8]", 0.5537326335906982),
    "atleast_1d_numpy": (lambda: jax.numpy.atleast_1d(X0), "P()", "P()", "float32[8]", 28.0),
    "ravel_numpy": (lambda: jax.numpy.ravel(X0.reshape(2, 4)), "P()", "P()", "float32[8]", 28.0),
    "sort_numpy": (lambda: jax.numpy.sort(X0), "P()", "P()", "float32[8]", 28.0),
    "cumsum_numpy": (lambda: jax.numpy.cumsum(X0), "P()", "P()", "float32[8]", 84.0),
    "sum_numpy": (lambda: jax.numpy.sum(X0.reshape(2, 4), 0), "P()", "P()", "float32[4]", 28.0),
    # ... while the functions JAX converts their operands in first (ensure_arraylike) type
    # their results over the mesh.
    "transpose_numpy": (lambda: jax.numpy.transpose(X0.reshape(2, 4)), "P(None, None)", "P()",
                        "float32[4,2]", 28.0),
    "mean_numpy": (lambda: jax.numpy.mean(X0.reshape(2, 4), 0), "P(None,)", "P()", "float32[4]",
                   14.0),
    "einsum_numpy": (lambda: jax.numpy.einsum("ij,kj", X0.reshape(2, 4), X0.reshape(2, 4)),
                     "P(None, None)", "P()", "float32[2,2]", 216.0),
    "array_scalar": (lambda: jax.numpy.array(1.0), "P()", "P()", "~float32[]", 1.0),
    # cond's result is typed as its first branch's: the identity of host data carries no
    # mesh (the index, converted first, is laid out but is not the result)
    "cond_numpy": (lambda: lax.cond(True, lambda a: a + 1, lambda a: a, X0), "P()", "P()",
                   "float32[8]", 36.0),
    "switch_numpy": (lambda: lax.switch(1, [lambda a: a, lambda a: a + 1], X0), "P()", "P()",
                     "float32[8]", 36.0),
    "cond_of_made": (lambda: lax.cond(True, lambda a: a + 1, lambda a: a,
                                      jax.numpy.ones(4)), "P(None,)", "P()", "float32[4]", 8.0),
    # Raw key data is spelled for its own rank; wrap_key_data of NumPy data stays put.
    "PRNGKey": (lambda: jax.random.PRNGKey(0), "P(None,)", "P()", "uint32[2]", 0.0),
    "key_data": (lambda: jax.random.key_data(jax.random.key(0)), "P(None,)", "P()",
                 "uint32[2]", 0.0),
    "split_raw": (lambda: jax.random.split(jax.random.PRNGKey(0)), "P(None, None)", "P()",
                  "uint32[2,2]", 8759052547.0),
    "wrap_key_data": (lambda: jax.random.wrap_key_data(np.zeros(2, np.uint32)), None, None,
                      "key<fry>[]", None),
}
MADE_RECORDS = [(t, k) for t in ("Explicit", "Auto") for k in MADE]


@pytest.fixture(scope="module")
def context_meshes():
    made_before = jax.numpy.ones(8)  # uncommitted, before any mesh is set
    return made_before, {t: jax.make_mesh((2, 4), ("x", "y"), devices=DEVICES,
                                          axis_types=(getattr(AxisType, t),) * 2)
                         for t in ("Explicit", "Auto")}


@pytest.mark.parametrize("axis_type,name", MADE_RECORDS,
                         ids=[f"{t}-{k}" for t, k in MADE_RECORDS])
def test_eager_result_under_set_mesh(context_meshes, axis_type, name):
    fn, explicit_spec, auto_spec, typ, total = MADE[name]
    mesh = context_meshes[1][axis_type]
    spec = explicit_spec if axis_type == "Explicit" else auto_spec
    typ = typ if isinstance(typ, str) else typ[axis_type == "Auto"]
    with jax.set_mesh(mesh):
        out = fn()
    assert str(jax.typeof(out)) == typ
    if spec is None:
        assert type(out.sharding).__name__ == "SingleDeviceSharding" and not out.committed
    else:
        assert isinstance(out.sharding, NamedSharding) and str(out.sharding.spec) == spec
        assert out.sharding.mesh == mesh and out.committed
    if total is not None:
        np.testing.assert_allclose(float(np.asarray(out).sum()), total, rtol=1e-6)


def test_set_mesh_lays_out_results_of_arrays_made_before(context_meshes):
    """An uncommitted array made before ``set_mesh`` meets the mesh in the next eager op; the
    legacy ``with mesh:`` lays nothing out (JAX 0.10.2)."""
    made_before, meshes = context_meshes
    for axis_type, spec in (("Explicit", "P(None,)"), ("Auto", "P()")):
        with jax.set_mesh(meshes[axis_type]):
            out = made_before + 1
            assert str(out.sharding.spec) == spec and out.sharding.mesh == meshes[axis_type]
            assert jax.numpy.asarray(made_before) is made_before  # no computation: unchanged
        with meshes[axis_type]:
            assert type(jax.numpy.zeros(8).sharding).__name__ == "SingleDeviceSharding"
    assert type((made_before + 1).sharding).__name__ == "SingleDeviceSharding"


def test_eager_grad_over_an_explicit_mesh_needs_set_mesh(laid_out):
    """JAX's ValueError (JAX names the seed cotangent f32[], whose type carries the mesh
    there; jaxkit's scalar types carry none, so the first typed value is named)."""
    with pytest.raises(ValueError, match=r"^Length of device assignment 1 is not equal to the "
                       r"size of the mesh 8 of aval f32\[.*\]\(\{Explicit: \('x', 'y'\)\}\)\. "
                       r"Please enter your `jit` into a mesh context via `jax.set_mesh`\.(\n|$)"):
        jax.grad(lambda x: (x * x).sum())(laid_out["Explicit"])


# jnp.*_like of a duck-typed array (a ShapeDtypeStruct, Flax's hijax Variables) lays the result
# out as its sharding says, as JAX 0.10.2 (Optax's state of a Flax param keeps its layout):
# (call on the struct, JAX's spec (None: a SingleDeviceSharding), type over Explicit, the sum)
LIKE = {
    "zeros_like": (lambda s: jax.numpy.zeros_like(s), "P('x', 'y')", "float32[8@x,4@y]", 0.0),
    "ones_like_int": (lambda s: jax.numpy.ones_like(s, dtype=np.int32), "P('x', 'y')",
                      "int32[8@x,4@y]", 32.0),
    "full_like_other_shape": (lambda s: jax.numpy.full_like(s, 2.0, shape=(3,)), None,
                              "float32[3]", 6.0),
}
LIKE_RECORDS = [(t, k) for t in ("Explicit", "Auto") for k in LIKE]


@pytest.mark.parametrize("axis_type,name", LIKE_RECORDS,
                         ids=[f"{t}-{k}" for t, k in LIKE_RECORDS])
def test_like_of_a_duck_typed_array_keeps_its_layout(context_meshes, axis_type, name):
    fn, spec, typ, total = LIKE[name]
    mesh = context_meshes[1][axis_type]
    struct = jax.ShapeDtypeStruct((8, 4), np.float32, sharding=NamedSharding(mesh, P("x", "y")))
    out = fn(struct)
    if spec is None:
        assert type(out.sharding).__name__ == "SingleDeviceSharding"
    else:
        assert str(out.sharding.spec) == spec and out.sharding.mesh == mesh
    assert str(jax.typeof(out)) == (typ if axis_type == "Explicit" else typ.replace("@x", "")
                                    .replace("@y", ""))
    assert float(np.asarray(out).sum()) == total


# An operand committed to one device meets a computation under ``jax.set_mesh``, which runs
# over the mesh's devices: JAX 0.10.2's ValueError, naming the first such argument.
OFF_MESH = "with device ids [0] on platform CPU and jit's context mesh with device ids " \
    "[0, 1, 2, 3, 4, 5, 6, 7] on platform CPU"
COMMITTED = {
    "add": (lambda a, b: a + 1.0, "argument x of add with shape float32[]"),
    "sin": (lambda a, b: jax.numpy.sin(a), "argument x of sin with shape float32[]"),
    "jit": (lambda a, b: jax.jit(lambda u: u * 2)(a),
            "argument u of <lambda>.<locals>.<lambda> with shape float32[]"),
    "two_devices": (lambda a, b: a + b, "argument x of add with shape float32[]"),
}


def test_committed_operand_under_set_mesh_is_refused(context_meshes):
    one, two = (jax.device_put(np.float32(1.0), d) for d in DEVICES[:2])
    with jax.set_mesh(context_meshes[1]["Explicit"]):
        for name, (fn, named) in COMMITTED.items():
            with pytest.raises(ValueError) as info:
                fn(one, two)
            assert str(info.value) == ("Received incompatible devices for jitted computation. "
                                       f"Got {named} and {OFF_MESH}"), name
        assert jax.numpy.asarray(one) is one  # no computation: nothing to refuse
        assert str(jax.device_put(one, P()).sharding.spec) == "P()"
    assert float(one + 1.0) == 2.0 and one.committed  # the mesh left: placed as before
