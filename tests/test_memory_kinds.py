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


# Memory spaces inside traced code: the helpers the records below use. ``ah`` lives in host
# memory; ``layer`` is scanned under checkpoint policies that offload its residual.
to_host = lambda v: put(v, s_host)  # noqa: E731
to_space = lambda v: put(v * 2, S.Host)  # noqa: E731
round_trip = lambda v: put(put(v, s_host), s_dev) + 1  # noqa: E731
w_grad = lambda w, v: jnp.sum(put(w, s_dev) * v)  # noqa: E731


def mem_lines(f, *a):
    t = jax.jit(f).lower(*a).as_text()
    return [ln.strip() for ln in t.splitlines() if "memory_kind" in ln or "annotate_device" in ln]


def placed(out):
    return (out.sharding.memory_kind, np.asarray(out).tolist())


def layer(c, w):
    c = jax.ad_checkpoint.checkpoint_name(c, "x")
    return jnp.sin(c @ w), None


off = cp.save_and_offload_only_these_names(
    names_which_can_be_saved=[], names_which_can_be_offloaded=["x"], offload_src="device",
    offload_dst="pinned_host")


def scanned(w, c, policy):
    return jnp.sum(jax.lax.scan(jax.checkpoint(layer, policy=policy), c, w)[0])


ws = jnp.ones((3, 4, 4), jnp.float32) * 0.5
c0 = jnp.eye(4, dtype=jnp.float32)


def eqn_lines(f, *a):
    """How many values are typed in host memory, and how many copies go there and back (the
    residuals' order differs from JAX's, so the text itself is not compared)."""
    t = str(jax.make_jaxpr(f)(*a))
    return [t.count(k) for k in ("f32<host>", "(MemorySpace.Host,)", "(MemorySpace.Device,)")]


g_off = jax.grad(lambda w, c: scanned(w, c, off))
g_dot = jax.grad(lambda w, c: scanned(w, c, dot))
g_none = jax.grad(lambda w, c: scanned(w, c, cp.nothing_saveable))

# (expression, its str() or "ErrorClass: message" under JAX 0.10.2): jaxprs, the lowered
# text's memory kinds, where results land and their values (also under grad, whose transpose
# of a device_put moves the cotangent back to host memory), the operand check, and
# checkpoint offloading (XLA's temporary memory as JAX's: offloading saves the same bytes).
TRACED = [
    ('str(jax.make_jaxpr(to_host)(x))', "{ lambda ; a:f32[2,4]. let\n    b:f32<host>[2,4] = device_put[\n      copy_semantics=(ArrayCopySemantics.REUSE_INPUT,)\n      devices=(NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P('x', 'y'), memory_kind=pinned_host),)\n      srcs=(None,)\n    ] a\n  in (b,) }"),
    ('str(jax.make_jaxpr(to_space)(x))', '{ lambda ; a:f32[2,4]. let\n    b:f32[2,4] = mul a 2.0:f32[]\n    c:f32<host>[2,4] = device_put[\n      copy_semantics=(ArrayCopySemantics.REUSE_INPUT,)\n      devices=(MemorySpace.Host,)\n      srcs=(None,)\n    ] b\n  in (c,) }'),
    ('str(jax.make_jaxpr(round_trip)(x))', "{ lambda ; a:f32[2,4]. let\n    b:f32<host>[2,4] = device_put[\n      copy_semantics=(ArrayCopySemantics.REUSE_INPUT,)\n      devices=(NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P('x', 'y'), memory_kind=pinned_host),)\n      srcs=(None,)\n    ] a\n    c:f32[2,4] = device_put[\n      copy_semantics=(ArrayCopySemantics.REUSE_INPUT,)\n      devices=(NamedSharding(mesh=Mesh('x': 1, 'y': 1, axis_types=(Auto, Auto)), spec=P('x', 'y'), memory_kind=device),)\n      srcs=(None,)\n    ] b\n    d:f32[2,4] = add c 1.0:f32[]\n  in (d,) }"),
    ('str(jax.make_jaxpr(lambda v: v + 1)(ah))', '{ lambda ; a:f32<host>[2,4]. let b:f32<host>[2,4] = add a 1.0:f32[] in (b,) }'),
    ('mem_lines(to_host, x)', '[\'func.func public @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {\']'),
    ('mem_lines(to_space, x)', '[\'func.func public @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {\']'),
    ('mem_lines(round_trip, x)', '[\'func.func public @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32> {jax.result_info = "result", mhlo.memory_kind = "device"}) {\']'),
    ('mem_lines(lambda v: v + 1, ah)', '[\'func.func public @main(%arg0: tensor<2x4xf32> {mhlo.memory_kind = "pinned_host", sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<2x4xf32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {\']'),
    ('placed(jax.jit(to_host)(x))', "('pinned_host', [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]])"),
    ('placed(jax.jit(to_space)(x))', "('pinned_host', [[0.0, 2.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0]])"),
    ('placed(jax.jit(round_trip)(x))', "('device', [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])"),
    ('placed(jax.jit(lambda v: v + 1)(ah))', "('pinned_host', [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])"),
    ('placed(jax.jit(jax.grad(w_grad))(ah, x))', "('pinned_host', [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]])"),
    ('placed(jax.grad(w_grad)(ah, x))', "('pinned_host', [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]])"),
    ("str(jax.make_jaxpr(jax.grad(w_grad))(ah, x)).count('f32<host>')", '2'),
    ('repr(ah.aval)', 'ShapedArray(float32<host>[2,4])'),
    ('str(ah.aval), ah.aval.memory_space', "('float32<host>[2,4]', MemorySpace.Host)"),
    ('ah + put(x, s_dev)', 'ValueError: memory_space of all inputs passed to `add` must be the same. Got one operand with type: float32<host>[2,4] and another operand with type: float32[2,4]'),
    ('jnp.allclose(ah, put(x, s_dev))', 'ValueError: memory_space of all inputs passed to `and` must be the same. Got one operand with type: bool<host>[2,4] and another operand with type: bool[2,4]'),
    ('placed(ah * 2)', "('pinned_host', [[0.0, 2.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0]])"),
    ('eqn_lines(g_off, ws, c0)', '[4, 1, 1]'),
    ('eqn_lines(g_dot, ws, c0)', '[4, 1, 1]'),
    ('np.asarray(jax.jit(g_off)(ws, c0)).round(4).tolist()', '[[[-0.13349999487400055, -0.13349999487400055, -0.13349999487400055, -0.13349999487400055], [-0.13349999487400055, -0.13349999487400055, -0.13349999487400055, -0.13349999487400055], [-0.13349999487400055, -0.13349999487400055, -0.13349999487400055, -0.13349999487400055], [-0.13349999487400055, -0.13349999487400055, -0.13349999487400055, -0.13349999487400055]], [[-0.14589999616146088, -0.14589999616146088, -0.14589999616146088, -0.14589999616146088], [-0.14589999616146088, -0.14589999616146088, -0.14589999616146088, -0.14589999616146088], [-0.14589999616146088, -0.14589999616146088, -0.14589999616146088, -0.14589999616146088], [-0.14589999616146088, -0.14589999616146088, -0.14589999616146088, -0.14589999616146088]], [[-0.2168000042438507, -0.2168000042438507, -0.2168000042438507, -0.2168000042438507], [-0.2168000042438507, -0.2168000042438507, -0.2168000042438507, -0.2168000042438507], [-0.2168000042438507, -0.2168000042438507, -0.2168000042438507, -0.2168000042438507], [-0.2168000042438507, -0.2168000042438507, -0.2168000042438507, -0.2168000042438507]]]'),
    ('np.allclose(g_dot(ws, c0), g_none(ws, c0), rtol=1e-6), np.allclose(jax.jit(g_off)(ws, c0), g_none(ws, c0), rtol=1e-6)', '(True, True)'),
    ('[jax.jit(g).lower(ws, c0).compile().memory_analysis().temp_size_in_bytes for g in (g_off, g_dot, g_none)]', '[644, 900, 644]'),
]


@pytest.mark.parametrize("expr, expected", TRACED, ids=[e for e, _ in TRACED])
def test_memory_spaces_in_traced_code_as_jax(expr, expected):
    assert _run(expr) == expected
