"""The magics, driven through a real IPython InteractiveShell (no mocks)."""
import textwrap

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import jaxkit  # noqa: E402
from jaxkit.magics import graph, reports  # noqa: E402


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext jaxkit", store_history=False)
    shell.run_cell(textwrap.dedent("""
        import numpy as np
        import jaxkit as jax
        import jaxkit.numpy as jnp
        x = jnp.arange(8.0)
        def sq(v):
            return jnp.sum(jnp.sin(v) * v)
    """), store_history=False)
    return shell


def run(ip, code):
    result = ip.run_cell(code, store_history=False)
    result.raise_error()
    return result.result


def test_magics_registered(ip):
    names = ip.magics_manager.magics
    for name in ("jit", "grad", "vmap_timeit", "jit_timeit", "jaxpr", "hlo", "devices"):
        assert name in names["line"], name
    assert "jit" in names["cell"]


def test_help_is_argparse(ip):
    doc = ip.find_line_magic("jit").__doc__
    assert "--static" in doc and "call" in doc


def test_jaxpr_magic(ip):
    res = run(ip, "%jaxpr -o -q sq(x)")
    assert isinstance(res, reports.JaxprResult)
    text = str(res.jaxpr)
    assert "sin" in text and "reduce_sum" in text
    assert "digraph" in res.dot
    assert "<table" in res._repr_html_() or "<svg" in res._repr_html_()


def test_cell_jit_replaces_function_and_reports(ip):
    res = run(ip, textwrap.dedent("""\
        %%jit -o -q --no-timeit selu(x)
        def selu(x, alpha=1.67, lmbda=1.05):
            return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)
        """))
    assert isinstance(res, reports.JitReport)
    assert jaxkit.transforms.jit.jit_object(ip.user_ns["selu"]) is not None
    assert not res.cache_hit and "first call" in res.miss_reason
    assert res.compile_s > 0 and res.trace_s > 0
    assert "stablehlo.exponential" in res.stablehlo
    assert res.cost.get("transcendentals", 0) >= 8
    assert res.memory["argument_size_in_bytes"] == 32
    assert res.inputs[0][2].startswith("TFRT_CPU") or "cpu" in res.inputs[0][2].lower()
    text = "\n".join(res.summary_lines())
    assert "cache: miss" in text
    again = run(ip, "%jit -o -q --no-timeit selu(x)")
    assert again.cache_hit
    html = again._repr_html_()
    assert "cache hit" in html and "StableHLO" in html


def test_jit_miss_reason_on_new_shape(ip):
    res = run(ip, "%jit -o -q --no-timeit selu(jnp.arange(4.0))")
    assert not res.cache_hit
    assert "shape changed from (8,) to (4,)" in res.miss_reason


def test_jit_timeit_and_speedup(ip):
    res = run(ip, "%jit_timeit -o -q -r 2 sq(x)")
    assert set(res.timings) == {"eager", "jit"}
    assert res.speedups()["eager"] == pytest.approx(1.0)
    assert "speedup vs eager" in repr_pretty(res)


def test_grad_magic_matches_finite_differences(ip):
    res = run(ip, "%grad -o -q sq(x)")
    expected = np.sin(np.arange(8.0)) + np.arange(8.0) * np.cos(np.arange(8.0))
    np.testing.assert_allclose(res.grads, expected, rtol=1e-5)
    assert res.max_abs_error < 1e-2
    assert "transpose" in str(res.grad_jaxpr) or "mul" in str(res.grad_jaxpr)


def test_vmap_timeit(ip):
    run(ip, "mat = jnp.ones((4, 3)); v = jnp.ones(3)\n"
            "def apply_matrix(v):\n    return jnp.dot(mat, v)\n"
            "def hand(vs):\n    return jnp.dot(vs, mat.T)\n")
    res = run(ip, "%vmap_timeit -o -q --sizes 1,4 -r 1 --hand hand apply_matrix v")
    assert res.sizes == [1, 4]
    assert set(res.series) == {"python loop", "vmap (eager)", "jit(vmap)", "hand-batched jit"}
    assert all(t > 0 for ts in res.series.values() for t in ts)
    assert "speedup over the Python loop" in repr_pretty(res)


def test_hlo_magic(ip):
    assert "stablehlo" in run(ip, "%hlo -o -q sq(x)").text
    assert "HloModule" in run(ip, "%hlo -o -q --optimized sq(x)").text


def test_devices_magic(ip):
    res = run(ip, "%devices -o -q")
    assert res.rows and res.rows[0][1] == "cpu"


def test_bad_call_is_a_clear_error(ip):
    result = ip.run_cell("%jaxpr sq", store_history=False)
    assert isinstance(result.error_in_exec, ValueError)
    assert "expected a call" in str(result.error_in_exec)


# ---- graphs ---------------------------------------------------------------------------


GOLDEN_DOT = r'''digraph "jaxpr" {
  rankdir=TB; node [fontname="Helvetica", fontsize=10]; edge [fontname="Helvetica", fontsize=9, color="#6b7280"];
  a [label="a\nf32[3]", shape=ellipse, style=filled, fillcolor="#dbeafe", color="#1d4ed8"];
  eqn_b [label="sin\n→ b:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
  a -> eqn_b [label="a"];
  eqn_c [label="mul\n→ c:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
  eqn_b -> eqn_c [label="b"];
  lit_eqn_c_7 [label="2.0:f32[]", shape=plaintext];
  lit_eqn_c_7 -> eqn_c;
  out0 [label="out[0]\nf32[3]", shape=ellipse, style=filled, fillcolor="#dcfce7", color="#15803d"];
  eqn_c -> out0 [label="c"];
}'''


def small_jaxpr():
    from jaxkit import lax
    return jaxkit.make_jaxpr(lambda v: lax.mul(lax.sin(v), 2.0))(jaxkit.numpy.ones(3))


def test_golden_dot():
    assert graph.jaxpr_to_dot(small_jaxpr()) == GOLDEN_DOT


def test_dot_is_deterministic():
    assert graph.jaxpr_to_dot(small_jaxpr()) == graph.jaxpr_to_dot(small_jaxpr())


def test_graph_without_dot_binary(monkeypatch):
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    assert not graph.dot_available()
    html = reports.JaxprResult("f", small_jaxpr()).graph_html()
    assert "not installed" in html and "<table" in html and "sin" in html


@pytest.mark.skipif(not graph.dot_available(), reason="Graphviz dot binary not installed")
def test_graph_with_dot_binary():
    svg = graph.dot_to_svg(graph.jaxpr_to_dot(small_jaxpr()))
    assert svg.startswith("<svg") and "sin" in svg


def repr_pretty(obj) -> str:
    from IPython.lib.pretty import pretty
    return pretty(obj)
