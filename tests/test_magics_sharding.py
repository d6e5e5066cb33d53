"""The ``sharding`` panel of ``%%jit``, driven through a real IPython ``InteractiveShell``.

Each case is run twice: in jaxkit (on an extra 8-device CPU backend, through ``%%jit``) and in
JAX 0.10.2 on 8 CPU devices in a subprocess. The panel's output specs, device blocks and the
collectives it reads from the optimised HLO must equal what JAX's own compiled program has
(the collectives of JAX's HLO are read with the same parser), and the values must agree.
"""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")
from _shell import magic_shell  # noqa: E402

from jaxkit.magics import reports, sharding_panel  # noqa: E402
from jaxkit.runtime import multi_device  # noqa: E402

DEVICES = multi_device.add_cpu_backend("spmd8", 8).devices

PRELUDE = """
import numpy as np
AxisType, NamedSharding, P = (jax.sharding.AxisType, jax.sharding.NamedSharding,
                              jax.sharding.PartitionSpec)
mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto), **MESH_KW)
def put(value, *spec):
    return jax.device_put(np.asarray(value, np.float32), NamedSharding(mesh, P(*spec)))
x = put(np.arange(32.0).reshape(8, 4), "x", "y")
w = put(np.linspace(-1, 1, 24).reshape(4, 6), "y")
v = put(np.arange(16.0), "x")
"""

# name -> (cell defining f, the call); the same text runs in jaxkit and in JAX.
CASES = {
    "matmul_then_sum": ("def f(x, w):\n    return jnp.sum(x @ w, axis=0)", "f(x, w)"),
    "gather_to_replicated": (
        "def f(v):\n    return jax.lax.with_sharding_constraint(v * 2, NamedSharding(mesh, P()))",
        "f(v)"),
    "ppermute_ring": (
        "def f(v):\n    ring = [(i, (i + 1) % 4) for i in range(4)]\n"
        "    return jax.shard_map(lambda b: jax.lax.ppermute(b, 'x', ring), mesh=mesh,\n"
        "                         in_specs=P('x'), out_specs=P('x'))(v)", "f(v)"),
    "all_to_all": (
        "def f(x):\n    return jax.shard_map(lambda b: jax.lax.all_to_all(b, 'x', 1, 0, "
        "tiled=True),\n                         mesh=mesh, in_specs=P('x'), "
        "out_specs=P('x'))(x)", "f(x)"),
    "psum_scatter": (
        "def f(x):\n    return jax.shard_map(lambda b: jax.lax.psum_scatter(b, 'y', "
        "tiled=True),\n                         mesh=mesh, in_specs=P(None, 'y'), "
        "out_specs=P('y'))(x)", "f(x)"),
    "elementwise_no_collective": ("def f(x):\n    return jnp.sin(x) * 2", "f(x)"),
}

JAX_DRIVER = """
import json, sys
import numpy as np
import jax, jax.numpy as jnp
MESH_KW = {}
prelude, cases = sys.argv[1], json.loads(sys.argv[2])
ns = dict(jax=jax, jnp=jnp, MESH_KW=MESH_KW)
exec(prelude, ns)
def blocks(a):
    cells = {}
    for d, idx in a.sharding.devices_indices_map(a.shape).items():
        starts = [s.start or 0 for s in idx]
        key = (0, starts[0]) if a.ndim == 1 else (starts[0], starts[1])
        cells.setdefault(key, []).append(d.id)
    rows = sorted({r for r, _ in cells}); cols = sorted({c for _, c in cells})
    return [[rows.index(r), cols.index(c), sorted(ids)] for (r, c), ids in sorted(cells.items())]
out = {}
for name, (cell, call) in cases.items():
    exec(cell, ns)
    args = eval("(" + call[2:-1] + ",)", ns)
    jitted = jax.jit(ns["f"])
    res = jitted(*args)
    out[name] = {"hlo": jitted.lower(*args).compile().as_text(),
                 "out_spec": str(res.sharding.spec), "out_blocks": blocks(res),
                 "in_blocks": [blocks(a) for a in args], "value": np.asarray(res).tolist()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def jax_runs():
    """What JAX 0.10.2 compiles and returns for every case on 8 CPU devices."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("the JAX oracle is not installed")
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    proc = subprocess.run([sys.executable, "-c", JAX_DRIVER, PRELUDE, json.dumps(CASES)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def ip():
    return magic_shell("import jaxkit as jax\nimport jaxkit.numpy as jnp\n" + PRELUDE,
                       MESH_KW={"devices": DEVICES})


def jit_cell(ip, cell: str, call: str, options: str = "") -> reports.JitReport:
    result = ip.run_cell(f"%%jit -o -q --no-timeit {options}\n{cell}\n{call}",
                         store_history=False)
    result.raise_error()
    return result.result


def as_lists(blocks) -> list:
    return [[r, c, list(ids)] for r, c, ids in blocks]


def kinds(collectives) -> list[str]:
    return sorted(c.kind for c in collectives)


@pytest.mark.parametrize("name", list(CASES))
def test_panel_matches_jax_program(ip, jax_runs, name):
    cell, call = CASES[name]
    report = jit_cell(ip, cell, call)
    want = jax_runs[name]
    panel = report.sharding
    assert panel is not None
    outs = [p for p in panel.placements if p.role == "out"]
    ins = [p for p in panel.placements if p.role == "in"]
    assert [p.spec for p in outs] == [want["out_spec"]]
    assert as_lists(outs[0].blocks) == want["out_blocks"]
    assert [as_lists(p.blocks) for p in ins] == want["in_blocks"]
    assert kinds(panel.collectives) == kinds(sharding_panel.collectives_from_hlo(want["hlo"]))
    assert panel.meshes == ["Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto))"]
    np.testing.assert_allclose(np.asarray(ip.user_ns["f"](*[
        ip.user_ns[a] for a in call[2:-1].split(", ")])), np.asarray(want["value"]),
        rtol=1e-6)


def test_panel_text_and_html(ip):
    report = jit_cell(ip, *CASES["matmul_then_sum"])
    assert report.summary_lines()[-5:] == [
        "  sharding on Mesh('x': 4, 'y': 2, axis_types=(Auto, Auto))",
        "    in  x        f32[8,4]  P('x', 'y')",
        "    in  w        f32[4,6]  P('y',)",
        "    out (value)  f32[6]    P()",
        "  collectives: all-reduce x2"]
    html = report._repr_html_()
    assert "<summary><b>sharding</b></summary>" in html
    assert html.count("class='jaxkit-sharding-grid'") == 3
    assert "collectives XLA inserted: all-reduce &times;2" in html
    assert "jit(f)/dot_general" in html and "jit(f)/reduce_sum" in html
    # The placement panel names the layout instead of failing on a many-device array.
    assert ("[0]", "f32[8,4]", "8 devices, P('x', 'y')") in report.inputs


def test_panel_says_when_there_is_no_collective(ip):
    report = jit_cell(ip, *CASES["elementwise_no_collective"])
    assert report.sharding.collectives == []
    assert "collectives XLA inserted: none" in report._repr_html_()
    assert report.summary_lines()[-1] == "  collectives: none"


def test_no_panel_for_one_device_programs(ip):
    report = jit_cell(ip, "def g(a):\n    return jnp.cos(a) + 1", "g(jnp.arange(4.0))")
    assert report.sharding is None
    assert "sharding" not in report._repr_html_()
    assert not any("sharding" in line for line in report.summary_lines())


def test_panels_option_hides_and_shows_it(ip):
    hidden = jit_cell(ip, *CASES["matmul_then_sum"], options="--panels graph,jaxpr")
    assert "jaxkit-sharding-grid" not in hidden._repr_html_()
    assert not any("sharding on" in line for line in hidden.summary_lines())
    only = jit_cell(ip, *CASES["matmul_then_sum"], options="--panels sharding")
    assert "jaxkit-sharding-grid" in only._repr_html_()
    assert "<summary><b>graph</b>" not in only._repr_html_()


def test_rank_three_values_are_listed_without_a_grid(ip):
    ip.run_cell("cube = put(np.ones((8, 2, 2)), 'x')", store_history=False).raise_error()
    report = jit_cell(ip, "def h(c):\n    return c + 1", "h(cube)")
    placement = report.sharding.placements[0]
    assert (placement.spec, placement.blocks) == ("P('x',)", ())
    assert "drawn for rank 1 and 2 only" in report._repr_html_()


# Optimised HLO lines as XLA prints them, with the asynchronous forms GPUs get: a ``-start``
# counts once, its ``-done`` not at all.
HLO_LINES = [
    ("  %all-gather-start = (f32[4]{0}, f32[16]{0}) all-gather-start(f32[4]{0} %p), "
     "channel_id=1, replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true",
     ("all-gather", "replica_groups=[2,4]<=[8], dimensions={0}")),
    ("  %all-gather-done = f32[16]{0} all-gather-done((f32[4]{0}, f32[16]{0}) "
     "%all-gather-start)", None),
    ("  ROOT %cp.1 = f32[4]{0} collective-permute-start(f32[4]{0} %a), channel_id=2, "
     "source_target_pairs={{0,1},{1,0}}", ("collective-permute",
                                           "source_target_pairs={{0,1},{1,0}}")),
    ("  %all-reduce.3 = f32[6]{0} all-reduce(f32[6]{0} %b), channel_id=3, "
     "replica_groups={{0,1}}, to_apply=%add", ("all-reduce", "replica_groups={{0,1}}")),
    ("  %reduce-scatter = f32[2]{0} reduce-scatter(f32[4]{0} %c), channel_id=4, "
     "replica_groups={{0,1}}, dimensions={0}, to_apply=%add",
     ("reduce-scatter", "replica_groups={{0,1}}, dimensions={0}")),
    ("  %all-to-all = f32[4]{0} all-to-all(f32[4]{0} %d), channel_id=5, "
     "replica_groups={{0,1}}, dimensions={0}", ("all-to-all",
                                                "replica_groups={{0,1}}, dimensions={0}")),
    ("  %add.1 = f32[4]{0} add(f32[4]{0} %all-reduce, f32[4]{0} %e)", None),
]


@pytest.mark.parametrize("line, want", HLO_LINES, ids=[str(w and w[0]) for _, w in HLO_LINES])
def test_collectives_are_read_from_hlo_lines(line, want):
    found = [(c.kind, c.groups) for c in sharding_panel.collectives_from_hlo(line)]
    assert found == ([] if want is None else [want])


def test_pmap_results_are_laid_out_over_the_pmap_mesh(ip):
    """As in JAX, a pmap result is split over a mesh of its devices named by the pmap's axis
    (``_internal_pmap_axis_name`` when unnamed): a jitted call on it is partitioned there."""
    ip.run_cell("pm = jax.pmap(lambda r: r * 2, backend='spmd8')(np.ones((8, 3), np.float32))",
                store_history=False).raise_error()
    report = jit_cell(ip, "def k(r):\n    return r + 1", "k(pm)")
    spec = "P('_internal_pmap_axis_name',)"
    assert [(p.role, p.label, p.type, p.spec) for p in report.sharding.placements] == [
        ("in", "pm", "f32[8,3]", spec), ("out", "(value)", "f32[8,3]", spec)]
    assert report.sharding.collectives == []
