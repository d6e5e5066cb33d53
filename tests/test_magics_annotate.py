"""``%%jit -a``: the source annotated line by line, through a real IPython InteractiveShell."""
import textwrap

import pytest

IPython = pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402
from _shell import magic_shell, run  # noqa: E402

import jaxkit  # noqa: E402
from jaxkit.magics import annotate, hlo_cost  # noqa: E402

M, K, N = 16, 32, 8

CELL = textwrap.dedent(f"""\
    %%jit -a -o -q
    def predict(x, w):
        # a comment: no equations
        h = x @ w
        h = jnp.maximum(h, 0.0)  # relu
        return jnp.sum(h)

    predict(jnp.ones(({M}, {K})), jnp.ones(({K}, {N})))
    """)


@pytest.fixture(scope="module")
def ip():
    return magic_shell("import jaxkit\nimport jaxkit.numpy as jnp\n")


@pytest.fixture(scope="module")
def report(ip):
    return run(ip, CELL)


def test_annotate_report_lines(ip, report):
    assert isinstance(report, annotate.AnnotateReport)
    # the cell's code (without its call line), numbered from 1 as in the cell
    assert [r.text for r in report.lines][:2] == ["def predict(x, w):",
                                                  "    # a comment: no equations"]
    assert report.line(1).text.startswith("def predict")
    comment, matmul, relu, total = (report.line(n) for n in (2, 3, 4, 5))
    assert comment.empty and comment.flops == 0 and comment.bytes == 0
    assert matmul.equations == [f"dot_general f32[{M},{N}]"]
    assert any(h.startswith("dot ") or h.startswith("fusion") for h in matmul.hlo), matmul.hlo
    assert any("dot" in h for h in matmul.hlo) and any("fusion" in h or h.startswith("dot")
                                                        for h in matmul.hlo)
    assert matmul.flops == pytest.approx(2 * M * N * K, rel=0.05)
    assert matmul.bytes >= 4 * (M * K + K * N)
    assert relu.equations == [f"max f32[{M},{N}]"]
    assert any(h.startswith("maximum") for h in relu.hlo)
    assert relu.flops == M * N
    assert total.equations == ["reduce_sum f32[]"]
    # the estimate adds up to XLA's own count of the whole program
    flops, _, _ = report.totals()
    assert flops == pytest.approx(report.cost["flops"], rel=0.05)
    # %%jit replaced the function by its jitted version, as it does without -a
    assert jaxkit.transforms.jit.jit_object(ip.user_ns["predict"]) is not None


def test_annotate_text_and_html(report):
    text = repr(report)
    assert "annotated jit(predict)" in text and "cost_analysis" in text
    assert "jaxpr: dot_general" in text and "# a comment: no equations" in text
    html = report._repr_html_()
    assert "<table class='jaxkit-annotate'>" in html
    assert "h = x @ w" in html and "dot_general" in html and "background:#f97316" in html


def test_annotate_line_magic_reads_the_functions_source(ip):
    run(ip, "def shifted(v):\n    w = jnp.exp(v)\n    return w + 1.0\n")
    res = run(ip, "%jit -a -o -q shifted(jnp.ones(8))")
    assert res.line(2).equations == ["exp f32[8]"]
    assert res.line(2).transcendentals == 8
    assert res.line(3).equations == ["add f32[8]"]


def test_call_on_the_magic_line_still_works(ip):
    res = run(ip, "%%jit -a -o -q twice(jnp.ones(3))\ndef twice(v):\n    return v * 2.0\n")
    assert res.line(2).equations == ["mul f32[3]"]


BAD = [
    ("%%jit -a\ndef f(v):\n    return v\n", "needs an example call"),
    ("%%jit -a\ndef f(v):\n    return v +\nf(1.0)\n", "syntax error at line 2"),
    ("%jit -a", "needs an example call"),
    ('exec("nosrc = lambda v: v + 1")\n%jit -a nosrc(jnp.ones(2))', "no source code"),
]


@pytest.mark.parametrize("cell,message", BAD, ids=[b[1] for b in BAD])
def test_bad_usage_is_a_one_line_usage_error(ip, cell, message):
    err = ip.run_cell(cell, store_history=False).error_in_exec
    assert isinstance(err, UsageError), repr(err)
    assert message in str(err) and "\n" not in str(err)


HLO = """\
HloModule m, entry_computation_layout={(f32[2,3]{1,0}, f32[3,4]{1,0})->f32[2,4]{1,0}}

%fused (p0: f32[2,3], p1: f32[3,4]) -> f32[2,4] {
  %p0 = f32[2,3]{1,0} parameter(0)
  %p1 = f32[3,4]{1,0} parameter(1)
  %d = f32[2,4]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general" source_file="a.py" source_line=3}
  ROOT %t = f32[2,4]{1,0} tanh(%d), metadata={op_name="jit(f)/tanh" source_file="a.py" source_line=4}
}

ENTRY %main (a: f32[2,3], b: f32[3,4]) -> f32[2,4] {
  %a = f32[2,3]{1,0} parameter(0)
  %b = f32[3,4]{1,0} parameter(1)
  ROOT %f = f32[2,4]{1,0} fusion(%a, %b), kind=kOutput, calls=%fused, metadata={op_name="jit(f)/tanh" source_file="a.py" source_line=4}
}
"""


def test_hlo_cost_reads_inline_metadata_and_fusions():
    module = hlo_cost.parse_hlo(HLO)
    assert module.entry == "main"
    insts = hlo_cost.executed_instructions(module)
    names = [(i.name, f.name if f else None) for i, f in insts]
    assert ("d", "f") in names and ("t", "f") in names
    shapes = module.shapes()
    by_name = {i.name: i for i, _ in insts}
    assert (by_name["d"].file, by_name["d"].line) == ("a.py", 3)
    assert hlo_cost.estimate_cost(by_name["d"], shapes) == (2 * 2 * 4 * 3, 0)
    assert hlo_cost.estimate_cost(by_name["t"], shapes) == (0, 8)
    assert hlo_cost.instruction_bytes(by_name["f"], shapes) == 4 * (8 + 6 + 12)


def test_instructions_without_metadata_take_a_location():
    text = HLO.replace(', metadata={op_name="jit(f)/tanh" source_file="a.py" source_line=4}\n}',
                       "\n}", 1).replace(
        "  ROOT %f = f32[2,4]{1,0} fusion(%a, %b)",
        "  %c = f32[2,3]{1,0} copy(%a)\n  ROOT %f = f32[2,4]{1,0} fusion(%c, %b)")
    module = hlo_cost.parse_hlo(text)
    hlo_cost.inherit_locations(module)
    by_name = {i.name: i for i, _ in hlo_cost.executed_instructions(module)}
    # the copy XLA added goes to the line of the fusion using it; the fused tanh, without
    # metadata now, to its fusion's
    assert (by_name["c"].line, by_name["c"].inherited) == (4, True)
    assert (by_name["t"].line, by_name["t"].inherited) == (4, True)
    assert (by_name["d"].line, by_name["d"].inherited) == (3, False)
    assert not by_name["a"].inherited and by_name["a"].line is None  # parameters stay put
    hlo_cost.inherit_locations(module := hlo_cost.parse_hlo(text), lambda i: ("b.py", 9))
    assert {(i.file, i.line) for i, _ in hlo_cost.executed_instructions(module)
            if i.inherited} == {("b.py", 9)}
