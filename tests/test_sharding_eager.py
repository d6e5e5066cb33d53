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
