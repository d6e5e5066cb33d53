"""Memory kinds (host offloading) against JAX 0.10.2 on the CPU: shardings that name a memory
space of their devices (``device``, ``pinned_host``, ``unpinned_host``), how they print and
compare, ``device_put`` into and out of host memory, and JAX's errors for unknown kinds. Each
record is an expression and what it gives under JAX 0.10.2 (recorded with the oracle)."""
import numpy as np
import pytest

import jaxkit as jax
import jaxkit.ad_checkpoint
import jaxkit.numpy as jnp
from jaxkit.lax import add_p, dot_general_p  # noqa: F401 (the policy records' expressions)
from jaxkit.transforms.checkpoint import name_p  # noqa: F401
from jaxkit.sharding import Mesh, NamedSharding, PartitionSpec as P, SingleDeviceSharding

d = jax.devices()[0]
mesh = Mesh(np.array(d).reshape(1, 1), ("x", "y"))
s_plain = NamedSharding(mesh, P("x", "y"))
s_dev = NamedSharding(mesh, P("x", "y"), memory_kind="device")
s_host = s_dev.with_memory_kind("pinned_host")
x = jnp.arange(8.0).reshape(2, 4)
put = jax.device_put
S = jax.memory.Space

# (expression, its str() or "ErrorClass: message" under JAX 0.10.2)
EAGER = [
    ('repr(s_dev)',
     "NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P('x', 'y'), memory_kind=device)"),
    ('repr(s_host)',
     "NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P('x', 'y'), memory_kind=pinned_host)"),
    ("repr(NamedSharding(mesh, P(), memory_kind='unpinned_host'))",
     "NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P(), memory_kind=unpinned_host)"),
    ("repr(NamedSharding(mesh, P('x')))",
     "NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P('x',), memory_kind=device)"),
    ('s_plain.memory_kind',
     'device'),
    ('(s_plain == s_dev, hash(s_plain) == hash(s_dev), s_host == s_dev)',
     '(True, True, False)'),
    ("s_host.with_memory_kind('device') == s_dev",
     'True'),
    ('repr(s_host.update(spec=P()))',
     "NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P(), memory_kind=pinned_host)"),
    ('repr(SingleDeviceSharding(d))',
     'SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)'),
    ("repr(SingleDeviceSharding(d, memory_kind='pinned_host'))",
     'SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=pinned_host)'),
    ("(SingleDeviceSharding(d) == SingleDeviceSharding(d, memory_kind='device'), SingleDeviceSharding(d) == SingleDeviceSharding(d, memory_kind='pinned_host'))",
     '(True, False)'),
    ("NamedSharding(mesh, P(), memory_kind='hbm')",
     'ValueError: Could not find memory addressable by device cpu. Device cpu can address the following memory kinds: device, pinned_host, unpinned_host. Got memory kind: hbm'),
    ("SingleDeviceSharding(d, memory_kind='foo')",
     'ValueError: Could not find memory addressable by device cpu. Device cpu can address the following memory kinds: device, pinned_host, unpinned_host. Got memory kind: foo'),
    ('repr(put(x, s_host).sharding)',
     "NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P('x', 'y'), memory_kind=pinned_host)"),
    ('put(x, s_host).sharding.memory_kind',
     'pinned_host'),
    ('str(put(x, s_host))',
     '[[0. 1. 2. 3.]\n [4. 5. 6. 7.]]'),
    ('str(put(x, s_host) + 1)',
     '[[1. 2. 3. 4.]\n [5. 6. 7. 8.]]'),
    ('put(put(x, s_host), s_dev).sharding.memory_kind',
     'device'),
    ('str(put(put(x, s_host), s_dev) * 2)',
     '[[ 0.  2.  4.  6.]\n [ 8. 10. 12. 14.]]'),
    ("repr(put(x, SingleDeviceSharding(d, memory_kind='unpinned_host')).sharding)",
     'SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=unpinned_host)'),
    ("repr(put(put(x, SingleDeviceSharding(d, memory_kind='pinned_host')), SingleDeviceSharding(d)).sharding)",
     'SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)'),
    ('repr(jax.device_get(put(x, s_host)))',
     'array([[0., 1., 2., 3.],\n       [4., 5., 6., 7.]], dtype=float32)'),
    ('put(x, s_host).sharding.is_equivalent_to(s_dev, 2), put(x, s_host).sharding.is_equivalent_to(s_host, 2)',
     '(False, True)'),
    ("repr(put(1.0, SingleDeviceSharding(d, memory_kind='pinned_host')))",
     'Array(1., dtype=float32, weak_type=True)'),
    # jax.memory.Space names a memory of the value's own device(s)
    ('repr(put(x, S.Host).sharding)',
     'SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=pinned_host)'),
    ('str(put(x, S.Host))',
     '[[0. 1. 2. 3.]\n [4. 5. 6. 7.]]'),
    ('repr(put(put(x, S.Host), S.Device).sharding)',
     'SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)'),
    ('repr(put(np.ones((2, 2), np.float32), S.Host).sharding)',
     'SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=pinned_host)'),
    ('[repr(S.Host), str(S.Device), S.Any.value, S.__name__, [m.name for m in S]]',
     "['MemorySpace.Host', 'MemorySpace.Device', 3, 'MemorySpace', ['Device', 'Host', 'Any']]"),
    ('str(jax.jit(lambda v: put(v, s_dev) + 1, out_shardings=s_dev)(put(x, s_host)))',
     '[[1. 2. 3. 4.]\n [5. 6. 7. 8.]]'),
]


def _run(expr: str) -> str:
    try:
        return str(eval(expr))
    except Exception as e:  # the error is part of the recorded output
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("expr, expected", EAGER, ids=[e for e, _ in EAGER])
def test_eager_memory_kinds_as_jax(expr, expected):
    assert _run(expr) == expected


def test_buffer_lies_in_the_memory_space_it_names():
    """The buffer itself is in host memory (jaxlib checks the sharding's kind against the
    buffer's when the array is made), and its value survives the round trip."""
    host = put(x, s_host)
    shard = host.addressable_shards[0].data
    assert shard.sharding.memory_kind == "pinned_host"
    back = put(host, SingleDeviceSharding(d))
    assert back.sharding.memory_kind == "device"
    np.testing.assert_array_equal(np.asarray(back), np.arange(8.0).reshape(2, 4))


# jit with memory kinds in in_shardings/out_shardings: (name, function, jit's arguments, the
# argument (in device or host memory)), then per name what JAX 0.10.2 gives: the lines of the
# lowered text that carry memory kinds, the results' memory kinds and values.
ad, ah = put(x, s_dev), put(x, s_host)
JITS = [("ident_to_dev", lambda x: x, {"out_shardings": s_dev}, ah),
        ("ident_to_host", lambda x: x, {"out_shardings": s_host}, ad),
        ("double_host_host", lambda x: x * 2, {"in_shardings": s_host, "out_shardings": s_host},
         ah),
        ("plus_one_dev", lambda x: x + 1, {}, ad),
        ("two_outs", lambda x: (x, x + 1), {"out_shardings": (s_host, None)}, ad)]
JIT_EXPECTED = {
    'ident_to_dev': (
        ['func.func public @main(%arg0: tensor<2x4xf32> {mhlo.memory_kind = "pinned_host", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<2x4xf32> {jax.result_info = "result", mhlo.memory_kind = "device", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {', '%0 = stablehlo.custom_call @annotate_device_placement(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>'],
        ['device'],
        [[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]]),
    'ident_to_host': (
        ['func.func public @main(%arg0: tensor<2x4xf32> {mhlo.memory_kind = "device", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<2x4xf32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {', '%0 = stablehlo.custom_call @annotate_device_placement(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>'],
        ['pinned_host'],
        [[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]]),
    'double_host_host': (
        ['func.func public @main(%arg0: tensor<2x4xf32> {mhlo.memory_kind = "pinned_host", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<2x4xf32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {', '%2 = stablehlo.custom_call @annotate_device_placement(%1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>'],
        ['pinned_host'],
        [[[0.0, 2.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0]]]),
    'plus_one_dev': (
        [],
        ['device'],
        [[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]]),
    'two_outs': (
        ['func.func public @main(%arg0: tensor<2x4xf32> {mhlo.memory_kind = "device", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<2x4xf32> {jax.result_info = "result[0]", mhlo.memory_kind = "pinned_host", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, tensor<2x4xf32> {jax.result_info = "result[1]", mhlo.memory_kind = "device"}) {', '%2 = stablehlo.custom_call @annotate_device_placement(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<2x4xf32>) -> tensor<2x4xf32>'],
        ['pinned_host', 'device'],
        [[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]], [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]]),
}


@pytest.mark.parametrize("name, f, kw, arg", JITS, ids=[j[0] for j in JITS])
def test_jit_memory_kinds_as_jax(name, f, kw, arg):
    fragments, kinds, values = JIT_EXPECTED[name]
    j = jax.jit(f, **kw)
    text = j.lower(arg).as_text()
    assert [ln.strip() for ln in text.splitlines()
            if "memory_kind" in ln or "annotate_device" in ln] == fragments
    out = j(arg)
    outs = out if isinstance(out, tuple) else (out,)
    assert [o.sharding.memory_kind for o in outs] == kinds
    assert [np.asarray(o).tolist() for o in outs] == values


def test_jit_result_is_compiled_into_host_memory():
    """XLA's executable itself returns the result in host memory (its layout's memory space
    S(5)), as JAX's: the label is not only on the Python side."""
    compiled = jax.jit(lambda x: x * 3, out_shardings=s_host).lower(ad).compile()
    assert "->f32[2,4]{1,0:S(5)}" in compiled.as_text()


@pytest.mark.parametrize("target", [s_host, S.Host, SingleDeviceSharding(d, memory_kind="pinned_host")],
                         ids=["NamedSharding", "Space.Host", "SingleDeviceSharding"])
def test_staged_move_to_host_is_refused_not_ignored(target):
    """JAX types the result of this move ``f32<host>[...]``; jaxkit's abstract values have no
    memory space, so rather than leave the value in device memory it says so."""
    with pytest.raises(NotImplementedError, match="device_put to memory kind 'pinned_host'"):
        jax.jit(lambda v: put(v, target))(x)


# Checkpoint policies that offload residuals to host memory, and the one combining two policies:
# what they answer (JAX 0.10.2's answers; its Saveable/Recompute print with their address).
cp = jax.checkpoint_policies
pol = cp.save_and_offload_only_these_names(
    names_which_can_be_saved=["y"], names_which_can_be_offloaded=["x"], offload_src="device",
    offload_dst="pinned_host")
dot = cp.offload_dot_with_no_batch_dims("device", "pinned_host")
both = cp.save_from_both_policies(cp.save_only_these_names("a"), cp.dots_saveable)


def f(x):
    a = jax.ad_checkpoint.checkpoint_name(jnp.sin(x), "a")
    return jnp.sum(jnp.cos(a @ x))


POLICIES = [
    ("repr(pol(name_p, name='x'))",
     "Offloadable(src='device', dst='pinned_host')"),
    ("type(pol(name_p, name='y')).__name__",
     'SaveableType'),
    ("type(pol(name_p, name='z')).__name__",
     'RecomputeType'),
    ('type(pol(add_p)).__name__',
     'RecomputeType'),
    ('repr(dot(dot_general_p, dimension_numbers=(((1,), (0,)), ((), ()))))',
     "Offloadable(src='device', dst='pinned_host')"),
    ('type(dot(dot_general_p, dimension_numbers=(((2,), (1,)), ((0,), (0,))))).__name__',
     'RecomputeType'),
    ('type(dot(add_p)).__name__',
     'RecomputeType'),
    ("cp.save_and_offload_only_these_names(names_which_can_be_saved=['x'], names_which_can_be_offloaded=['x'], offload_src='device', offload_dst='pinned_host')",
     "ValueError: The names should be exclusive and should not intersect in `names_which_can_be_saved` and `names_which_can_be_offloaded`. Got names_which_can_be_saved={'x'}, names_which_can_be_offloaded={'x'} and the intersection={'x'}"),
    ("both(name_p, name='a'), both(name_p, name='b'), both(dot_general_p, dimension_numbers=(((1,), (0,)), ((), ())))",
     '(True, False, True)'),
    ("cp.save_from_both_policies(pol, cp.dots_saveable)(name_p, name='x')",
     "ValueError: The return value of the policies should be a boolean. Got: Offloadable(src='device', dst='pinned_host') and False. Please write a custom policy function directly, rather than using this helper function."),
    # JAX 0.10.2's gradient: [[-1.0302834510803223, 0.0], [0.0, -1.0302834510803223]]
    ("np.allclose(jax.grad(jax.checkpoint(f, policy=both))(np.eye(2, dtype=np.float32)), "
     "[[-1.0302834510803223, 0.0], [0.0, -1.0302834510803223]], rtol=1e-6)",
     'True'),
]


@pytest.mark.parametrize("expr, expected", POLICIES, ids=[e for e, _ in POLICIES])
def test_offloading_policies_as_jax(expr, expected):
    assert _run(expr) == expected


def test_offloaded_residual_is_refused_clearly():
    """An offloaded residual would be typed ``f32<host>[...]``; jaxkit's abstract values have
    no memory space, so checkpoint says it cannot rather than keep it on the device."""
    g = jax.checkpoint(lambda v: jnp.sum(jnp.sin(v) @ v), policy=dot)
    with pytest.raises(NotImplementedError, match="offloading residuals"):
        jax.grad(g)(np.eye(2, dtype=np.float32))
