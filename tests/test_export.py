"""jaxkit.export against the JAX oracle: Exported fields, calls (eager, jit, grad through the
serialized VJP), bytes into a fresh process, safety checks, and symbolic shapes as JAX prints
them."""
import collections
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import export

jax = pytest.importorskip("jax")
jexport = pytest.importorskip("jax.export")

Point = collections.namedtuple("Point", "x y")
export.register_namedtuple_serialization(Point, serialized_name="test_export.Point")

# (name, function of (jax, jnp), argument arrays)
CASES = [
    ("sin_mul_dict", lambda j, np_: lambda x, y: (np_.sin(x) * y, {"a": x.sum()}),
     (np.linspace(0, 1, 3, dtype=np.float32), np.arange(3, dtype=np.float32))),
    ("matmul_tanh", lambda j, np_: lambda a, b: np_.tanh(a @ b),
     (np.arange(6, dtype=np.float32).reshape(2, 3) / 6, np.ones((3, 4), np.float32))),
    ("list_out", lambda j, np_: lambda x: [x * 2, np_.exp(x), x.mean()],
     (np.linspace(-1, 1, 5, dtype=np.float32),)),
    ("inv", lambda j, np_: lambda a: np_.linalg.inv(a),  # LAPACK custom calls (stable ABI)
     (np.array([[2.0, 1.0], [0.5, 3.0]], np.float32),)),
    ("int_args", lambda j, np_: lambda i, x: x * i.astype(np_.float32),
     (np.arange(4, dtype=np.int32), np.full(4, 1.5, np.float32))),
]
IDS = [c[0] for c in CASES]


def _both(case):
    _, make, args = case
    return (jaxkit.jit(make(jaxkit, jnp)), jax.jit(make(jax, jax.numpy)), args)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_exported_fields_match_jax(case):
    kf, jf, args = _both(case)
    k, j = export.export(kf)(*args), jexport.export(jf)(*args)
    assert str(k) == str(j)
    assert str(k.in_tree) == str(j.in_tree) and str(k.out_tree) == str(j.out_tree)
    assert list(map(str, k.in_avals)) == list(map(str, j.in_avals))
    assert list(map(str, k.out_avals)) == list(map(str, j.out_avals))
    assert (k.in_shardings_hlo, k.out_shardings_hlo) == (j.in_shardings_hlo, j.out_shardings_hlo)
    assert (k.nr_devices, k.platforms) == (j.nr_devices, j.platforms)
    assert k.calling_convention_version == j.calling_convention_version
    assert k.module_kept_var_idx == j.module_kept_var_idx
    mesh = jax.sharding.Mesh(jax.devices()[:1], "x")
    assert k.in_shardings_jax(mesh) == j.in_shardings_jax(mesh)
    assert k.out_shardings_jax(mesh) == j.out_shardings_jax(mesh)
    assert (k.ordered_effects, k.unordered_effects, k.uses_global_constants) == (
        j.ordered_effects, j.unordered_effects, j.uses_global_constants)
    assert k.mlir_module_serialized.startswith(b"ML\xefR")  # a StableHLO portable artifact
    assert "func.func public @main" in k.mlir_module()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_call_eager_jit_and_after_round_trip(case):
    kf, jf, args = _both(case)
    want = jexport.export(jf)(*args).call(*args)
    exp = export.export(kf)(*args)
    back = export.deserialize(exp.serialize())
    for got in (exp.call(*args), jaxkit.jit(exp.call)(*args), back.call(*args)):
        jaxkit.tree_util.tree_map(
            lambda g, w: np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6,
                                                    atol=1e-6), got, want)
        assert jaxkit.tree_util.tree_structure(got) == exp.out_tree


def test_exported_from_shape_dtype_structs():
    spec = jaxkit.ShapeDtypeStruct((2, 3), np.float32)
    exp = export.export(jaxkit.jit(lambda x: x.T))(spec)
    assert str(exp.in_avals) == "(ShapedArray(float32[2,3]),)"
    assert str(exp.out_avals) == "(ShapedArray(float32[3,2]),)"


def test_make_jaxpr_of_call_matches_jax():
    args = (np.ones(3, np.float32), np.ones(3, np.float32))
    kf, jf, _ = _both(CASES[0])
    k = export.export(kf)(*args)
    j = jexport.export(jf)(*args)
    assert str(jaxkit.make_jaxpr(k.call)(*args)) == str(jax.make_jaxpr(j.call)(*args))


@pytest.mark.parametrize("case", CASES[:3], ids=IDS[:3])
def test_grad_through_serialized_vjp(case):
    kf, jf, args = _both(case)

    def loss(lib, call):
        def f(*xs):
            leaves = lib.tree_util.tree_leaves(call(*xs))
            return sum((leaf ** 2).sum() for leaf in leaves)
        return f

    exp = export.deserialize(export.export(kf)(*args).serialize(vjp_order=1))
    assert exp.has_vjp()
    argnums = tuple(range(len(args)))
    got = jaxkit.grad(loss(jaxkit, exp.call), argnums=argnums)(*args)
    want = jax.grad(loss(jax, jexport.export(jf)(*args).call), argnums=argnums)(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    jitted = jaxkit.jit(jaxkit.grad(loss(jaxkit, exp.call), argnums=argnums))(*args)
    for g, w in zip(jitted, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def test_second_order_needs_vjp_order_2():
    f = jaxkit.jit(lambda x: jnp.sin(x) * x)
    x = np.float32(0.7)
    exp = export.export(f)(x)
    two = export.deserialize(exp.serialize(vjp_order=2))
    got = jaxkit.grad(jaxkit.grad(two.call))(x)
    want = jax.grad(jax.grad(lambda x: jax.numpy.sin(x) * x))(x)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    one = export.deserialize(exp.serialize(vjp_order=1))
    jaxkit.grad(one.call)(x)
    with pytest.raises(ValueError, match="No VJP is available"):
        jaxkit.grad(jaxkit.grad(one.call))(x)


def test_grad_without_serialized_vjp_raises():
    exp = export.export(jaxkit.jit(jnp.sin))(np.float32(1.0))
    assert exp.has_vjp()
    back = export.deserialize(exp.serialize())
    assert not back.has_vjp()
    with pytest.raises(ValueError, match="No VJP is available for sin.*vjp_order"):
        jaxkit.grad(back.call)(np.float32(1.0))


def test_round_trip_into_a_fresh_process(tmp_path):
    exp = export.export(jaxkit.jit(lambda p, s: {"out": Point(p.x * s, jnp.cos(p.y))}))(
        Point(np.arange(3, dtype=np.float32), np.float32(0.5)), 2.0)
    path = tmp_path / "exported.bin"
    path.write_bytes(exp.serialize(vjp_order=1))
    script = textwrap.dedent(f"""
        import collections, sys
        import numpy as np
        import jaxkit
        from jaxkit import export
        Point = collections.namedtuple("Point", "x y")
        export.register_namedtuple_serialization(Point, serialized_name="test_export.Point")
        exp = export.deserialize(open({str(path)!r}, "rb").read())
        p = Point(np.arange(3, dtype=np.float32), np.float32(0.5))
        out = exp.call(p, 2.0)["out"]
        print(exp.fun_name, exp.in_tree, np.asarray(out.x).tolist(), float(out.y))
        g = jaxkit.grad(lambda s: exp.call(p, s)["out"].x.sum())(2.0)
        print(float(g), "jax" in sys.modules)
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(jaxkit.__file__)))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0] == ("<lambda> PyTreeDef(((CustomNode(namedtuple[Point], [*, *]), *), {})) "
                        "[0.0, 2.0, 4.0] "
                        f"{float(np.cos(np.float32(0.5)))}")
    assert lines[1] == "3.0 False"


def test_unregistered_namedtuple_cannot_be_serialized():
    Other = collections.namedtuple("Other", "a")
    exp = export.export(jaxkit.jit(lambda o: o.a))(Other(np.float32(1)))
    with pytest.raises(ValueError, match="unregistered type.*register_namedtuple"):
        exp.serialize()


def test_custom_pytree_node_serialization():
    class Box:
        def __init__(self, v, tag):
            self.v, self.tag = v, tag

    jaxkit.tree_util.register_pytree_node(Box, lambda b: ((b.v,), b.tag),
                                          lambda tag, ch: Box(ch[0], tag))
    export.register_pytree_node_serialization(
        Box, serialized_name="test_export.Box", serialize_auxdata=lambda t: t.encode(),
        deserialize_auxdata=lambda b: b.decode())
    exp = export.export(jaxkit.jit(lambda b: Box(b.v + 1, b.tag)))(Box(np.float32(1), "t"))
    back = export.deserialize(exp.serialize())
    out = back.call(Box(np.float32(2), "t"))
    assert isinstance(out, Box) and out.tag == "t" and float(out.v) == 3.0


def test_call_errors_match_jax():
    kexp = export.export(jaxkit.jit(lambda x: x * 2))(np.ones((3, 2), np.float32))
    jexp = jexport.export(jax.jit(lambda x: x * 2))(np.ones((3, 2), np.float32))
    for bad in [(np.ones((3, 4), np.float32),), (np.ones((3, 2), np.int32),),
                (np.ones(3, np.float32),)]:
        with pytest.raises(ValueError) as want:
            jexp.call(*bad)
        with pytest.raises(ValueError) as got:
            kexp.call(*bad)
        assert str(got.value) == str(want.value)
    with pytest.raises(ValueError, match="same pytree structure as when the function"):
        kexp.call(np.ones((3, 2), np.float32), 1)
    with pytest.raises(ValueError, match="must be the result of `jit`"):
        export.export(lambda x: x)
    with pytest.raises(NotImplementedError, match="batching rule for 'call_exported'"):
        jaxkit.vmap(kexp.call)(np.ones((2, 3, 2), np.float32))


def _cos(m):
    return m.jit(m.lax.cos)


def _inv_plus_platform_dependent(m):
    return m.jit(lambda x: m.numpy.linalg.inv(x) + m.lax.platform_dependent(
        x, cpu=m.numpy.sin, cuda=m.numpy.cos))


def _jit_and_grad(m, exp):
    return [float(m.jit(lambda v: exp.call(v) * 2)(1.0)), float(m.grad(exp.call)(1.0))]


# Export for other platforms than this one and for several at once (JAX's export tutorial):
# (name, function of (jax module, export module) giving what is compared)
PLATFORM_CASES = {
    "other_platform_call_refused": lambda m, e: e.export(_cos(m), platforms=["tpu"])(1.0).call(
        1.0),
    "other_platform_check_disabled": lambda m, e: repr(e.export(
        _cos(m), platforms=["tpu"], disabled_checks=[e.DisabledSafetyCheck.platform()])(
            1.0).call(1.0)),
    "several_platforms_call": lambda m, e: repr(e.export(
        _cos(m), platforms=["tpu", "cpu", "cuda"])(1.0).call(1.0)),
    "several_platforms_fields": lambda m, e: [
        (x.platforms, x.uses_global_constants, list(map(str, x.in_avals)))
        for x in [e.export(_cos(m), platforms=["tpu", "cpu", "cuda"])(1.0)]],
    "several_platforms_size": lambda m, e: len(e.export(
        m.jit(lambda x: m.lax.fori_loop(0, 9, lambda i, c: m.numpy.cos(c), x)),
        platforms=["cpu", "tpu", "cuda"])(1.0).mlir_module_serialized) - len(e.export(
            m.jit(lambda x: m.lax.fori_loop(0, 9, lambda i, c: m.numpy.cos(c), x)))(
            1.0).mlir_module_serialized) < 200,
    "several_platforms_linalg": lambda m, e: np.asarray(e.export(
        _inv_plus_platform_dependent(m), platforms=["cuda", "cpu"])(np.eye(2, dtype=np.float32))
        .call(2 * np.eye(2, dtype=np.float32))).tolist(),
    "several_platforms_under_jit_and_grad": lambda m, e: _jit_and_grad(
        m, e.export(_cos(m), platforms=["cuda", "cpu"])(1.0)),
    "unknown_platform_names": lambda m, e: [  # (any name: the common lowering rules)
        (x.platforms, float(x.call(1.0))) for x in
        [e.export(_cos(m), platforms=["cpu", "foo"])(1.0)]],
    "module_text": lambda m, e: e.export(_inv_plus_platform_dependent(m), platforms=[
        "cpu", "cuda"])(np.eye(2, dtype=np.float32)).mlir_module().count('"_platform_index"'),
}


@pytest.mark.parametrize("case", PLATFORM_CASES)
def test_export_for_other_and_several_platforms(case):
    def run(m, e):
        try:
            return PLATFORM_CASES[case](m, e)
        except Exception as err:  # noqa: BLE001  (the class and text are what is compared)
            return f"{type(err).__name__}: {err}"
    assert run(jaxkit, export) == run(jax, jexport)


def test_several_platforms_roundtrip_serialization():
    exp = export.export(_inv_plus_platform_dependent(jaxkit), platforms=["cuda", "cpu"])(
        np.eye(2, dtype=np.float32))
    back = export.deserialize(exp.serialize())
    assert back.platforms == ("cuda", "cpu")
    np.testing.assert_allclose(back.call(np.eye(2, dtype=np.float32)),
                               exp.call(np.eye(2, dtype=np.float32)))


def test_unsupported_features_raise_clearly():
    f = jaxkit.jit(lambda x: x)
    spec = jaxkit.ShapeDtypeStruct(export.symbolic_shape("b"), np.float32)
    with pytest.raises(NotImplementedError, match="shape polymorphism"):
        export.export(f)(spec)


def test_custom_call_safety_check():
    f = jaxkit.jit(lambda x: jaxkit.pure_callback(np.sin, x, x))
    x = np.ones(2, np.float32)
    with pytest.raises(ValueError, match="Cannot serialize code with custom calls whose "
                                         "targets have no compatibility guarantees"):
        export.export(f)(x)
    check = export.DisabledSafetyCheck.custom_call("xla_ffi_python_cpu_callback")
    assert export.export(f, disabled_checks=[check])(x).disabled_safety_checks == (check,)


def test_disabled_safety_check_and_constants_match_jax():
    for name in ("platform",):
        assert str(getattr(export.DisabledSafetyCheck, name)()) == str(
            getattr(jexport.DisabledSafetyCheck, name)())
    k, j = export.DisabledSafetyCheck.custom_call("t"), jexport.DisabledSafetyCheck.custom_call("t")
    assert (str(k), repr(k), k.is_custom_call()) == (str(j), repr(j), j.is_custom_call())
    assert export.DisabledSafetyCheck.platform().is_custom_call() is None
    assert k == export.DisabledSafetyCheck.custom_call("t") and hash(k) == hash(
        export.DisabledSafetyCheck.custom_call("t"))
    assert export.default_export_platform() == jexport.default_export_platform()
    assert export.minimum_supported_calling_convention_version == \
        jexport.minimum_supported_calling_convention_version
    assert export.maximum_supported_calling_convention_version == \
        jexport.maximum_supported_calling_convention_version
    assert sorted(export.__all__) == sorted(jexport.__all__)


def test_deserialize_rejects_foreign_bytes():
    with pytest.raises(ValueError, match="not an Exported serialized by jaxkit"):
        export.deserialize(b"\x10\x00\x00\x00not ours")


SHAPES = ["b, 2*a+1", "(b, 4)", "a*b + 3, b - 1, 2*a*b - a", "b", "3, a", "a+b, b+a", "a*a",
          "mod(a, 2), floordiv(b, 3)", "max(a, b)", "-a + 5", "a, ", "", "(b)",
          "c*b*a + a^3 - 7", "min(a, 4) + max(b, a), a - a", "3*4, a_1 + x2", "a + 1 -1"]


@pytest.mark.parametrize("spec", SHAPES)
def test_symbolic_shape_prints_as_jax(spec):
    k, j = export.symbolic_shape(spec), jexport.symbolic_shape(spec)
    assert str(k) == str(j)
    assert [export.is_symbolic_dim(d) for d in k] == [jexport.is_symbolic_dim(d) for d in j]


@pytest.mark.parametrize("spec", ["a, 2a", "a b", "a,,b", "b*(a+1)", "..., 4"])
def test_symbolic_shape_syntax_errors_as_jax(spec):
    with pytest.raises(ValueError) as want:
        jexport.symbolic_shape(spec)
    with pytest.raises(ValueError) as got:
        export.symbolic_shape(spec)
    assert str(got.value) == str(want.value)


def test_symbolic_arithmetic_and_args_specs():
    ka, kb = export.symbolic_shape("a, b")
    ja, jb = jexport.symbolic_shape("a, b")
    for op in (lambda a, b: a + b, lambda a, b: 2 * a + b - 1, lambda a, b: a * b - b * a,
               lambda a, b: 3 - a, lambda a, b: a * a * b):
        assert str(op(ka, kb)) == str(op(ja, jb))
    assert (ka == ka, ka == kb, ka == 1) == (ja == ja, ja == jb, ja == 1)
    args = [np.zeros((2, 3)), np.zeros((2, 3), np.int32)]
    for specs in ("b, _", ["b, c", "b, ..."]):
        assert str(export.symbolic_args_specs(args, specs)) == str(
            jexport.symbolic_args_specs(args, specs))
    assert not export.is_symbolic_dim(3) and not export.is_symbolic_dim(np.int32(3))
    assert "created at" in str(export.SymbolicScope())


def test_grad_with_integer_inputs_and_outputs():
    kf = jaxkit.jit(lambda i, x: (x * i.astype(jnp.float32), i * 2))
    jf = jax.jit(lambda i, x: (x * i.astype(jax.numpy.float32), i * 2))
    args = (np.arange(4, dtype=np.int32), np.full(4, 1.5, np.float32))
    exp = export.deserialize(export.export(kf)(*args).serialize(vjp_order=1))
    jexp = jexport.export(jf)(*args)
    # float0 cotangents cross the exported VJP as bool zeros (XLA has no empty element type)
    assert [str(a) for a in exp.vjp().in_avals[:3]] == [str(a) for a in jexp.vjp().in_avals[:3]]
    got = jaxkit.grad(lambda i, x: exp.call(i, x)[0].sum(), argnums=(0, 1), allow_int=True)(
        *args)
    want = jax.grad(lambda i, x: jexp.call(i, x)[0].sum(), argnums=(0, 1), allow_int=True)(
        *args)
    assert got[0].dtype == want[0].dtype and got[0].shape == want[0].shape
    np.testing.assert_allclose(got[1], want[1])


def test_export_of_a_function_calling_exports():
    x = np.linspace(0, 1, 3, dtype=np.float32)
    inner = export.export(jaxkit.jit(lambda x: jnp.sin(x) + 1))(x)
    outer = export.export(jaxkit.jit(lambda x: inner.call(inner.call(x)) * 2))(x)
    back = export.deserialize(outer.serialize(vjp_order=1))
    np.testing.assert_allclose(back.call(x), 2 * (np.sin(np.sin(x) + 1) + 1), rtol=1e-6)
    assert back.mlir_module().count("func.func private") == 2  # each call inlined once
    got = jaxkit.jit(jaxkit.grad(lambda x: back.call(x).sum()))(x)
    np.testing.assert_allclose(got, 2 * np.cos(np.sin(x) + 1) * np.cos(x), rtol=1e-5)
