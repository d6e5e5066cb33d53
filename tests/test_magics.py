"""The magics, driven through a real IPython InteractiveShell (no mocks)."""
import textwrap

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")
from _shell import magic_shell, run  # noqa: E402

import jaxkit  # noqa: E402
from jaxkit.magics import graph, reports  # noqa: E402


@pytest.fixture(scope="module")
def ip():
    return magic_shell("""
        import numpy as np
        import jaxkit as jax
        import jaxkit.numpy as jnp
        x = jnp.arange(8.0)
        def sq(v):
            return jnp.sum(jnp.sin(v) * v)
    """)


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


def test_jaxpr_colours_become_css_in_reports(ip, monkeypatch):
    """In a notebook jaxprs print in colour (as JAX's); the HTML reports show those colours
    as CSS, never the raw escape codes."""
    from jaxkit import jaxpr as jaxpr_mod
    monkeypatch.setattr(jaxpr_mod, "CAN_USE_COLOR", True)
    res = run(ip, "%jaxpr -o -q sq(x)")
    assert "\x1b[" in str(res.jaxpr)
    html = res._repr_html_()
    assert "\x1b" not in html
    assert "<span style='color:#1d4ed8;font-weight:bold'>lambda </span>" in html
    assert "<span style='color:#a21caf'>:f32[" in html


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


# ---- mistakes and errors ---------------------------------------------------------------

from IPython.core.error import UsageError  # noqa: E402

MISTAKES = [  # (a magic line with a mistake in it, what the one-line message must say)
    ("%jaxpr sq", "expected a call such as `f(x)`"),
    ("%grad sq(x", "'(' was never closed"),
    ("%grad sq(undefined_name)", "name 'undefined_name' is not defined: define it"),
    ("%grad nosuchfunction(x)", "name 'nosuchfunction' is not defined"),
    ("%grad jnp.sin(x)", "needs a function with a scalar output; jnp.sin returns float32[8]"),
    ("%grad --argnums 3 sq(x)", "give positions among 0..0"),
    ("%grad --argnums a sq(x)", "--argnums takes comma-separated integers"),
    ("%grad --check some sq(x)", "invalid choice: 'some'"),
    ("%jit --panels grpah sq(x)", "unknown panel(s) 'grpah' for --panels; choose from graph"),
    ("%vmap_timeit --hand by_hnd sq x", "--hand by_hnd: no variable named 'by_hnd'"),
    ("%vmap_timeit --sizes 1,x sq x", "--sizes takes comma-separated integers"),
    ("%vmap_timeit --in-axes zero sq x", "--in-axes takes integers or None"),
]


@pytest.mark.parametrize("line,message", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_mistakes_in_the_magic_line_are_usage_errors(ip, line, message):
    result = ip.run_cell(line, store_history=False)
    assert isinstance(result.error_in_exec, UsageError), repr(result.error_in_exec)
    assert message in str(result.error_in_exec)
    assert "\n" not in str(result.error_in_exec)


def test_the_users_error_is_shown_without_internal_frames(ip):
    import os

    import jaxkit.magics
    run(ip, "def bad_shapes(v):\n    return jnp.sum(jnp.dot(v, jnp.ones(3)))\n")
    for line in ("%jaxpr bad_shapes(x)", "%grad bad_shapes(x)", "%jit -q bad_shapes(x)"):
        err = ip.run_cell(line, store_history=False).error_in_exec
        assert isinstance(err, TypeError) and "dot_general requires contracting" in str(err)
        files, tb = [], err.__traceback__
        while tb is not None:
            files.append(tb.tb_frame.f_code.co_filename)
            tb = tb.tb_next
        internal = [f for f in files if f.startswith((os.path.dirname(jaxkit.__file__),
                                                      os.path.dirname(jaxkit.magics.__file__)))
                    and not f.endswith(os.path.join("magics", "errors.py"))]
        assert not internal, (line, internal)
        # the user's function is still there, where the bad call is
        assert any(not f.startswith(os.path.dirname(jaxkit.__file__)) and "IPython" not in f
                   for f in files[-1:]), files
        assert err.__context__ is None or err.__suppress_context__


# ---- %grad on pytrees ---------------------------------------------------------------------

MLP = """
rng = np.random.default_rng(0)
params = [(jnp.asarray(rng.normal(size=(4, 8)), jnp.float32), jnp.zeros(8)),
          (jnp.asarray(rng.normal(size=(8, 1)), jnp.float32), jnp.zeros(1))]
xs = jnp.asarray(rng.normal(size=(16, 4)), jnp.float32)
ys = jnp.ones((16, 1))
def loss(params, x, y):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return jnp.mean((x @ w + b - y) ** 2)
"""


def test_grad_of_a_list_of_layers(ip):
    run(ip, MLP)
    res = run(ip, "%grad -o -q loss(params, xs, ys)")
    ns = ip.user_ns
    want = jaxkit.grad(ns["loss"])(ns["params"], ns["xs"], ns["ys"])
    for g, w in zip(jaxkit.tree_util.tree_leaves(res.grads), jaxkit.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    assert [r[0] for r in res.grad_rows()] == ["params[0][0]", "params[0][1]", "params[1][0]",
                                               "params[1][1]"]
    assert res.grad_rows()[0][1] == "float32[4, 8]"
    assert res.check == "directions" and len(res.probes) == 3
    assert res.max_abs_error < 5e-3
    text = repr_pretty(res)
    assert "params[1][1]" in text and "random direction 3" in text
    html = res._repr_html_()
    assert "params[0][0]" in html and "along random directions" in html


def test_grad_checks_full_and_none(ip):
    run(ip, MLP)
    full = run(ip, "%grad -o -q --check full loss(params, xs, ys)")
    assert len(full.probes) == 4 * 8 + 8 + 8 + 1
    assert full.probes[0].label == "params[0][0][0, 0]" and full.max_abs_error < 5e-3
    none = run(ip, "%grad -o -q --check none loss(params, xs, ys)")
    assert none.probes == [] and "finite" not in repr_pretty(none)


def test_grad_check_catches_a_wrong_gradient():
    # A custom_jvp with a deliberately wrong derivative: the directional check must see it.
    @jaxkit.custom_jvp
    def f(x):
        return jaxkit.numpy.sum(x ** 2)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), jaxkit.numpy.sum(3.0 * x * t)  # should be 2 x t

    res = reports.grad_report(f, [jaxkit.numpy.arange(1.0, 5.0)], "f")
    assert res.max_abs_error > 0.1


def test_grad_check_cost_does_not_grow_with_parameters(ip):
    run(ip, "big = jnp.ones((1000, 1000)) * 0.001\ndef quad(w):\n    return jnp.sum(w * w)\n")
    res = run(ip, "%grad -o -q quad(big)")
    assert len(res.probes) == 3 and res.max_abs_error < 1e-2


# ---- graphs ---------------------------------------------------------------------------


GOLDEN_DOT = r'''digraph "jaxpr" {
  rankdir=TB; node [fontname="Helvetica", fontsize=10]; edge [fontname="Helvetica", fontsize=9, color="#6b7280"];
  a [label="a\nf32[3]", shape=ellipse, style=filled, fillcolor="#dbeafe", color="#1d4ed8"];
  eqn0 [label="sin\n→ b:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
  a -> eqn0 [label="a"];
  eqn1 [label="mul\n→ c:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
  eqn0 -> eqn1 [label="b"];
  lit_eqn1_7 [label="2.0:f32[]", shape=plaintext];
  lit_eqn1_7 -> eqn1;
  out0 [label="out[0]\nf32[3]", shape=ellipse, style=filled, fillcolor="#dcfce7", color="#15803d"];
  eqn1 -> out0 [label="c"];
}'''


def small_jaxpr():
    from jaxkit import lax
    return jaxkit.make_jaxpr(lambda v: lax.mul(lax.sin(v), 2.0))(jaxkit.numpy.ones(3))


def test_golden_dot():
    assert graph.jaxpr_to_dot(small_jaxpr()) == GOLDEN_DOT


def _nested_program():
    jnp = jaxkit.numpy

    def f(x):
        y = jaxkit.jit(lambda v: jnp.sin(v) * 2)(x)
        z = jaxkit.lax.cond(y.sum() > 0, lambda v: v + 1, lambda v: v - 1, y)
        return jnp.dot(z, jnp.ones((3, 2)))
    return jaxkit.make_jaxpr(f)(jnp.ones(3))


def test_graph_names_are_the_jaxpr_texts():
    import re
    closed = _nested_program()
    text, dot = str(closed), graph.jaxpr_to_dot(closed)
    # every "name:type" binder of the outer jaxpr appears with the same name in the graph
    outer = [e for e in closed.jaxpr.eqns]
    for eqn in outer:
        for v in eqn.outvars:
            binder = re.search(r"(\w+):" + re.escape(v.aval.str_short()) + r" = "
                               + eqn.primitive.name, text)
            assert binder and f"{binder.group(1)}:{v.aval.str_short()}" in dot, eqn
    # nested jaxprs (jit, cond) are one node each, with their parameters summarised
    assert "jit\\nname=<lambda>\\njaxpr={2 equations}" in dot
    assert "branches=[2 jaxprs]" in dot
    assert "dimension_numbers=(([0], [0]), ([], []))" in dot  # whole, as the text shows it
    assert "<function" not in dot


def test_graph_params_never_show_function_reprs():
    @jaxkit.custom_jvp
    def f(x):
        return jaxkit.numpy.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), jaxkit.numpy.cos(p[0]) * t[0]))
    dot = graph.jaxpr_to_dot(jaxkit.make_jaxpr(f)(1.0))
    assert "<function" not in dot and "<locals>" not in dot


def test_graph_inputs_named_by_pytree_path(ip):
    run(ip, "layers = [(jnp.ones((2, 3)), jnp.zeros(3)), (jnp.ones((3, 1)), jnp.zeros(1))]\n"
            "def net(layers, v):\n"
            "    for w, b in layers:\n"
            "        v = jnp.tanh(v @ w + b)\n"
            "    return jnp.sum(v)\n"
            "inp = jnp.ones((4, 2))\n")
    for line in ("%jaxpr -o -q net(layers, inp)", "%jit -o -q --no-timeit net(layers, inp)"):
        dot = run(ip, line).dot
        for label in ("layers[0][0]", "layers[0][1]", "layers[1][0]", "layers[1][1]", "inp"):
            assert f'label="{label}\\n(' in dot, (line, label)
    grad = run(ip, "%grad -o -q net(layers, inp)")
    assert "layers[1][0]" in grad._repr_html_()


def test_big_programs_are_capped():
    def deep(x):
        for _ in range(400):
            x = jaxkit.numpy.sin(x)
        return x
    dot = graph.jaxpr_to_dot(jaxkit.make_jaxpr(deep)(1.0))
    assert dot.count("label=\"sin") == graph.MAX_EQUATIONS
    assert "250 more equations" in dot


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


# ---- timing ---------------------------------------------------------------------------------


def test_timing_reads_like_timeit():
    from jaxkit.magics.timing import Timing
    t = Timing(1e-3, [1e-3, 1.2e-3, 1.1e-3], 100)
    assert t.summary() == ("1.1 ms ± 81.6 µs per loop (mean ± std. dev. of 3 runs, 100 loops "
                           "each)")
    assert t.variance_warning() is None
    slow = Timing(1e-3, [1e-3, 5e-3], 10)
    assert "The slowest run took 5.00 times longer than the fastest" in slow.variance_warning()


def test_jit_timeit_reports_compile_time_and_break_even(ip):
    run(ip, "def quart(v):\n    return jnp.sum(v ** 4 - v)\n")  # never compiled before
    res = run(ip, "%jit_timeit -o -q -r 2 quart(x)")
    assert res.compile_s is not None and res.compile_s > 0
    saved = res.timings["eager"].best - res.timings["jit"].best
    n = res.break_even_calls()
    assert (n is None) == (saved <= 0)
    if n is not None:
        assert (n - 1) * saved < res.compile_s <= n * saved
    text = repr_pretty(res)
    assert "mean ± std. dev. of 2 runs" in text and "tracing, lowering and compiling" in text


def test_jit_report_times_the_one_compile(ip):
    run(ip, "def cube(v):\n    return jnp.sum(v ** 3)\n")
    res = run(ip, "%jit -o -q -r 2 cube(x)")
    assert not res.cache_hit and res.compile_recorded
    assert res.break_even_calls() is None or res.break_even_calls() >= 1
    assert "pays back" in "\n".join(res.summary_lines())
    again = run(ip, "%jit -o -q --no-timeit cube(x)")
    assert again.cache_hit and not again.compile_recorded
    assert "in-memory cache" in "\n".join(again.summary_lines())


# ---- %memory --------------------------------------------------------------------------------


def test_memory_lists_live_arrays(ip):
    run(ip, "huge_for_memory_test = jnp.ones((1024, 1024))")  # 4 MiB, the largest here
    res = run(ip, "%memory -o -q --top 3")
    assert len(res.largest) <= 3
    assert res.largest[0] == ("float32[1024, 1024]", "cpu:0", 4 << 20)
    count, nbytes = res.by_device["cpu:0"]
    assert count >= 1 and nbytes >= 4 << 20
    assert "4 MiB" in repr_pretty(res) and "live arrays" in res._repr_html_()


def test_memory_of_a_program(ip):
    res = run(ip, "%memory -o -q sq(x)")
    assert res.sizes["arguments"] == 8 * 4 and res.sizes["outputs"] == 4
    assert "peak (XLA's plan)" in res.sizes and "temporaries" in repr_pretty(res)
