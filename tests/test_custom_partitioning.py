"""``jax.experimental.custom_partitioning`` on jaxkit over 8 CPU devices (an extra backend in
this process), against the JAX oracle run on 8 CPU devices in a subprocess: the lowered
``CustomSPMDPartitioning`` call with its Shardy rule, the shapes and shardings ``partition``
is called with, the collectives in the partitioned program, the results' shardings and values
(also checked against NumPy). The unpartitioned fallback, the sharding-rule notation and the
errors are compared with the oracle in this process."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as jnp
from _custom_partitioning_cases import run_cases
from jaxkit import lax
from jaxkit.experimental import custom_partitioning as cp
from jaxkit.experimental import custom_partitioning_sharding_rule as rules
from jaxkit.interpreters import mlir
from jaxkit.runtime import multi_device
from jaxkit.sharding import AxisType, NamedSharding, PartitionSpec as P

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices
CASES = ["rows", "rule_callable", "matmul_psum", "batching_gather", "static_two_results",
         "compound_factor", "undecoded"]


@pytest.fixture(scope="module")
def ours():
    return run_cases(jaxkit, jnp, lax, cp, DEVICES)


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the JAX oracle is not installed")
    dest = tmp_path_factory.mktemp("custom_partitioning") / "jax.json"
    here = pathlib.Path(__file__).parent
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(here),
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    proc = subprocess.run([sys.executable, str(here / "_custom_partitioning_cases.py"),
                           str(dest)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(dest.read_text())


@pytest.mark.parametrize("case", CASES)
def test_partitioned_call_matches_jax(ours, theirs, case):
    mine, jax_ = ours[case], theirs[case]
    # jaxkit's call target has a name of its own: XLA keeps one partitioner per name, and JAX
    # registers its own for "CustomSPMDPartitioning" when both libraries share a process.
    assert [line.replace("@JaxkitCustomSPMDPartitioning", "@CustomSPMDPartitioning")
            for line in mine["custom_call"]] == jax_["custom_call"]
    assert all("@JaxkitCustomSPMDPartitioning(" in line for line in mine["custom_call"])
    assert mine["partition_calls"] == jax_["partition_calls"]
    assert mine["collectives"] == jax_["collectives"]
    assert mine["shardings"] == jax_["shardings"]
    np.testing.assert_allclose(np.asarray(mine["values"], dtype=object).tolist(),
                               jax_["values"], rtol=1e-5)


def test_partitioned_values_match_numpy(ours):
    x = np.arange(32.0, dtype=np.float32).reshape(8, 4) / 7
    rows = np.sin(x) + x.sum(-1, keepdims=True)
    a = np.arange(128.0, dtype=np.float32).reshape(8, 16) / 100
    b = np.arange(64.0, dtype=np.float32).reshape(16, 4) / 50
    c = np.arange(128.0, dtype=np.float32).reshape(2, 4, 16) / 10
    d = np.arange(64.0, dtype=np.float32).reshape(16, 4)
    expected = {"rows": [rows], "rule_callable": [rows], "matmul_psum": [a @ b],
                "batching_gather": [np.cumsum(c, -1)],
                "static_two_results": [x * 3, x + 1], "compound_factor": [d.reshape(8, 2, 4)],
                "undecoded": [np.sin(x)]}
    for case, values in expected.items():
        for got, want in zip(ours[case]["values"], values):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# ---- the unpartitioned fallback ------------------------------------------------------------
def _rows():
    def partition(mesh, arg_shapes, result_shape):
        raise AssertionError("partition is not called when nothing is partitioned")

    f = cp.custom_partitioning(lambda x: jnp.sin(x) + x.sum(axis=-1, keepdims=True))
    f.def_partition(partition, sharding_rule="i j -> i j")
    return f


X = np.arange(32.0, dtype=np.float32).reshape(8, 4) / 7
ROWS = np.sin(X) + X.sum(-1, keepdims=True)


def test_eager_and_single_device_jit_run_the_function():
    f = _rows()
    np.testing.assert_allclose(f(X), ROWS, rtol=1e-5)
    np.testing.assert_allclose(jaxkit.jit(f)(X), ROWS, rtol=1e-5)
    assert "CustomSPMDPartitioning" not in jaxkit.jit(f).lower(X).as_text()
    jaxpr = jaxkit.make_jaxpr(f)(X)
    assert [e.primitive for e in jaxpr.eqns] == [cp.custom_partitioning_p]
    # Without def_partition JAX fails with a bare AttributeError; jaxkit runs the function
    # wherever nothing is partitioned (a partitioned call is refused, below).
    np.testing.assert_allclose(cp.custom_partitioning(jnp.sin)(X), np.sin(X), rtol=1e-6)


def test_inside_a_shard_map_manual_over_every_axis_runs_the_function():
    mesh = jaxkit.make_mesh((8,), ("x",), devices=DEVICES, axis_types=(AxisType.Auto,))
    g = jaxkit.jit(jaxkit.shard_map(_rows(), mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    x = jaxkit.device_put(X, NamedSharding(mesh, P("x")))
    assert "CustomSPMDPartitioning" not in g.lower(x).as_text()
    np.testing.assert_allclose(g(x), ROWS, rtol=1e-5)


def test_without_def_partition_a_partitioned_call_is_refused():
    mesh = jaxkit.make_mesh((8,), ("x",), devices=DEVICES, axis_types=(AxisType.Auto,))
    f = cp.custom_partitioning(jnp.sin)
    with pytest.raises(ValueError, match="def_partition was not called"):
        jaxkit.jit(f).lower(jaxkit.device_put(X, NamedSharding(mesh, P("x"))))


def test_a_mismatched_lower_fn_is_reported():
    mesh = jaxkit.make_mesh((8,), ("x",), devices=DEVICES, axis_types=(AxisType.Auto,))
    f = cp.custom_partitioning(jnp.sin)
    f.def_partition(lambda mesh, args, res: (mesh, lambda x: x[:, :2], args[0].sharding,
                                             (args[0].sharding,)), sharding_rule="i j -> i j")
    x = jaxkit.device_put(X, NamedSharding(mesh, P("x")))
    with pytest.raises(Exception, match="Mismatch in result shapes"):
        jaxkit.jit(f)(x)


# ---- against the oracle in this process ----------------------------------------------------
jax = pytest.importorskip("jax")
jcp = pytest.importorskip("jax.experimental.custom_partitioning")
jrules = pytest.importorskip("jax._src.custom_partitioning_sharding_rule")


def _outcome(fn):
    try:
        return "ok", str(fn())
    except Exception as e:  # noqa: BLE001  (the error is what is compared)
        return type(e).__name__, str(e)


@pytest.mark.parametrize("rule, sizes", [
    ("i j -> i j", {}), ("... i j, ... j k -> ... i k", {}), ("(i j) k -> i j k", {}),
    ("i (j k) -> i", {"j": 2, "k": 3}), ("a b c -> ", {}), ("->", {}), (" -> i", {}),
    ("i, j -> (i j)", {}), ("...1 i, ...2 j -> i j", {}),
    ("i j -> i", {"reduction_factors": ("j",), "need_replication_factors": ("i",)}),
    ("((i j)) -> i", {}), ("i) -> i", {}), ("(i) -> i", {}), ("1a -> a", {}), ("a-b -> a", {}),
    ("a.b -> a", {}), ("a ... -> a", {}), ("i j k", {}), ("_a -> _a", {}), ("a (b c -> a", {}),
    ("i (j k) -> i j k", {"j": 2}), ("i j -> i", {"z": 2}), ("i -> i", {"i": 2.0}),
    ("i j -> i", {"reduction_factors": ("j", "j")}),
    ("i j -> i", {"reduction_factors": ("j",), "permutation_factors": ("j",)}),
    ("i j -> i", {"need_replication_factors": ["j"]}), ("… -> i", {}),
])
def test_rule_notation_matches_jax(rule, sizes):
    assert _outcome(lambda: rules.str_to_sdy_sharding_rule(rule, **sizes)) == _outcome(
        lambda: jrules.str_to_sdy_sharding_rule(rule, **sizes))


@pytest.mark.parametrize("rule, operands, results, sizes", [
    ("i j -> i j", [(8, 4)], [(8, 4)], {}),
    ("... i j, ... j k -> ... i k", [(2, 3, 8, 4), (2, 3, 4, 5)], [(2, 3, 8, 5)], {}),
    ("(i j) k -> i j k", [(16, 4)], [(8, 2, 4)], {}),
    ("i (j k) -> i k", [(8, 6)], [(8, 3)], {"j": 2}),
    ("i (j k) -> i k", [(8, 6)], [(8, 4)], {"j": 2}),
    ("i j -> i j", [(8, 4)], [(8, 4), (1,)], {}), ("i j -> i j", [(8,)], [(8, 4)], {}),
    ("i j -> i", [(8, 4)], [(4,)], {"reduction_factors": ("j",)}),
    ("... i -> ... i", [(3, 8)], [(4, 8)], {}), ("... i -> ... i", [(3, 8)], [(2, 3, 8)], {}),
    ("i -> i", [(8,)], [(4,)], {}), ("... -> ...", [()], [()], {}),
    ("...0 i, ...1 j -> ...0 i", [(2, 8), (3, 3, 4)], [(2, 8)], {}),
])
def test_rule_attributes_match_jax(rule, operands, results, sizes):
    with mlir.make_ir_context(), mlir.ir.Location.unknown():
        f32 = mlir.ir.F32Type.get()
        ops = [mlir.ir.RankedTensorType.get(list(s), f32) for s in operands]
        res = [mlir.ir.RankedTensorType.get(list(s), f32) for s in results]
        assert _outcome(lambda: rules.sdy_sharding_rule_to_mlir(
            rules.str_to_sdy_sharding_rule(rule, **sizes), ops, res)) == _outcome(
            lambda: jrules.sdy_sharding_rule_to_mlir(
                jrules.str_to_sdy_sharding_rule(rule, **sizes), ops, res))


@pytest.mark.parametrize("build", [
    lambda M: M.SdyShardingRule((M.ArrayMapping(M.BATCHING, M.CompoundFactor("b", "c"), "d"),),
                                (M.ArrayMapping(M.BATCHING, "b", "c", "d"),)),
    lambda M: M.CompoundFactor("a"), lambda M: M.CompoundFactor("a", 1),
    lambda M: M.CompoundFactor("a", M.BATCHING), lambda M: M.ArrayMapping("a", M.BATCHING),
    lambda M: M.ArrayMapping(3), lambda M: M.ArrayMapping("a1", "b_2"),
    lambda M: M.SdyShardingRule((M.ArrayMapping("a"),), (M.ArrayMapping("a"),), b=2),
    lambda M: M.SdyShardingRule((M.ArrayMapping(M.CompoundFactor("a", "b")),),
                                (M.ArrayMapping("a"),)),
    lambda M: M.SdyShardingRule((M.ArrayMapping("a"),), (M.ArrayMapping("a"),),
                                reduction_factors=["a"]),
])
def test_rule_objects_match_jax(build):
    assert _outcome(lambda: build(cp)) == _outcome(lambda: build(jcp))
    assert cp.BATCHING == jcp.BATCHING


@pytest.mark.parametrize("use", [
    lambda M: M.custom_partitioning(lambda x: x).def_partition(None, sharding_rule="i -> i",
                                                                 foo=2),
    lambda M: M.custom_partitioning(lambda x: x).def_partition(
        None, sharding_rule=lambda *a: "i -> i", reduction_factors=("i",)),
    lambda M: M.custom_partitioning(lambda x: x).def_partition(None, sharding_rule="i -> j"),
])
def test_def_partition_errors_match_jax(use):
    assert _outcome(lambda: use(cp)) == _outcome(lambda: use(jcp))


@pytest.mark.parametrize("use", [
    # GSPMD callbacks without a Shardy rule
    lambda M, J: _with(M.custom_partitioning(lambda x: x), infer_sharding_from_operands=print)(
        np.ones(3, np.float32)),
    # keyword arguments that cannot become positions
    lambda M, J: M.custom_partitioning(lambda **kw: kw["x"])(x=np.ones(3)),
    # a tracer in a static position
    lambda M, J: J.jit(lambda v: M.custom_partitioning(lambda a, k: a, static_argnums=(1,))(
        v, v))(np.ones(3)),
    # defaults fill the positions
    lambda M, J: _with(M.custom_partitioning(lambda x, y=2.0: x * y), sharding_rule="i -> i")(
        np.ones(3, np.float32)).tolist(),
])
def test_call_errors_and_keywords_match_jax(use):
    ours, theirs = _outcome(lambda: use(cp, jaxkit)), _outcome(lambda: use(jcp, jax))
    assert ours[0] == theirs[0]
    # JAX's messages join sentences without spaces and may add a link to its docs
    assert theirs[1].replace(" ", "").startswith(ours[1].replace(" ", ""))


def _with(f, **callbacks):
    f.def_partition(lambda *a: None, **callbacks)
    return f


@pytest.mark.parametrize("transform", [
    lambda J, f: J.vmap(f)(np.ones((2, 3), np.float32)),
    lambda J, f: J.grad(lambda x: f(x).sum())(np.ones(3, np.float32)),
])
def test_no_batching_or_differentiation_rules_as_in_jax(transform):
    # JAX defines neither for custom_partitioning_p; both raise NotImplementedError
    for J, M in ((jaxkit, cp), (jax, jcp)):
        f = M.custom_partitioning(J.numpy.sin)
        f.def_partition(None, sharding_rule="i -> i")
        with pytest.raises(NotImplementedError, match="custom_partitioning"):
            transform(J, f)


def test_only_def_attributes_are_forwarded_to_the_function_as_in_jax():
    for J, M in ((jaxkit, cp), (jax, jcp)):
        inner = J.custom_jvp(J.numpy.sin)
        f = M.custom_partitioning(inner)
        assert f.defjvp == inner.defjvp
        with pytest.raises(AttributeError):
            f.__wrapped_name__  # noqa: B018
