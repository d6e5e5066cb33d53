"""Name stacks: ``jax.named_scope``/``named_call`` (and Flax modules) name equations
(``eqn.source_info.name_stack``) and the compiled program's ops, as in JAX; the magics graph
folds each scope into one node.

Each case runs the same function on jaxkit and on the JAX oracle and compares the name stack
of every equation, nested jaxprs included. Anything that installs the ``jax`` hook (Flax on
jaxkit) runs in a subprocess, since this process imports the real JAX.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import jaxkit
import jaxkit.numpy as knp
from jaxkit.core import Jaxpr
from jaxkit.extend import source_info_util as siu
from jaxkit.magics import graph, graphview
from jaxkit.runtime import compile_cache

HAVE_JAX = importlib.util.find_spec("jax") is not None
HAVE_FLAX = HAVE_JAX and importlib.util.find_spec("flax") is not None
needs_jax = pytest.mark.skipif(not HAVE_JAX, reason="needs the jax oracle")


def _scoped(jax, jnp):
    """A function with nested scopes, a named_call and an unscoped tail."""
    def f(x):
        with jax.named_scope("layer1"):
            y = jnp.sin(x) * 2.0
            with jax.named_scope("inner"):
                y = y + 1.0
        return jax.named_call(lambda z: jnp.cos(z), name="nc")(y).sum()
    return f


def _cases(jax, jnp):
    f = _scoped(jax, jnp)

    def in_scope_grad(x):
        with jax.named_scope("s"):
            return jax.grad(f)(x)

    def named_call_default(x):
        def body(v):
            return jnp.exp(v) + 1.0
        return jax.named_call(body)(x)

    def scoped_jit(x):
        with jax.named_scope("outer"):
            return jax.jit(f)(x) * 3.0

    vec, mat = jnp.ones(3), jnp.ones((2, 3))
    return {
        "plain": (f, vec),
        "jit": (jax.jit(f), vec),
        "grad": (jax.grad(f), vec),
        "vmap": (jax.vmap(f), mat),
        "jvp": (lambda x: jax.jvp(f, (x,), (x,)), vec),
        "named_call_of_jit": (jax.named_call(jax.jit(f), name="outer"), vec),
        "scope_around_grad": (in_scope_grad, vec),
        "grad_of_jit": (jax.grad(jax.jit(f)), vec),
        "vmap_of_grad": (jax.vmap(jax.grad(f)), mat),
        "named_call_default_name": (named_call_default, vec),
        "scope_around_jit": (scoped_jit, vec),
    }


def _stacks(jaxpr, jaxpr_types) -> list:
    """(primitive, name stack) of every equation, nested jaxprs' inside, in text order."""
    out = []
    for eqn in jaxpr.eqns:
        out.append((eqn.primitive.name, str(eqn.source_info.name_stack)))
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(item, "jaxpr") and hasattr(item, "consts"):
                    out.append(_stacks(item.jaxpr, jaxpr_types))
                elif isinstance(item, jaxpr_types):
                    out.append(_stacks(item, jaxpr_types))
    return out


CASE_NAMES = list(_cases(jaxkit, knp))


@needs_jax
@pytest.mark.parametrize("case", CASE_NAMES)
def test_name_stacks_match_jax(case):
    import jax
    import jax.extend
    import jax.numpy as jnp

    fun, arg = _cases(jax, jnp)[case]
    want = _stacks(jax.make_jaxpr(fun)(arg).jaxpr, (jax.extend.core.Jaxpr,))
    kfun, karg = _cases(jaxkit, knp)[case]
    got = _stacks(jaxkit.make_jaxpr(kfun)(karg).jaxpr, (Jaxpr,))
    assert got == want


@needs_jax
def test_reemitted_equations_nest_under_the_current_stack():
    """An interpreter re-emitting a jaxpr (``jaxpr_as_fun``) runs each equation under the
    current stack extended by its own, as JAX's ``eval_jaxpr``."""
    import jax
    import jax.extend
    import jax.numpy as jnp

    def run(jx, np_, as_fun, types):
        closed = jx.make_jaxpr(_scoped(jx, np_))(np_.ones(3))
        wrapped = jx.named_call(lambda x: as_fun(closed)(x)[0], name="again")
        return _stacks(jx.make_jaxpr(wrapped)(np_.ones(3)).jaxpr, types)

    want = run(jax, jnp, jax.extend.core.jaxpr_as_fun, (jax.extend.core.Jaxpr,))
    assert run(jaxkit, knp, jaxkit.core.jaxpr_as_fun, (Jaxpr,)) == want
    assert ("sin", "again/layer1") in want


def test_name_stack_prints_like_jax_and_is_shared_with_named_scope():
    eqns = jaxkit.make_jaxpr(_scoped(jaxkit, knp))(knp.ones(3)).eqns
    stack = eqns[2].source_info.name_stack
    assert isinstance(stack, siu.NameStack) and str(stack) == "layer1/inner"
    assert str(eqns[-1].source_info.name_stack) == "" and not eqns[-1].source_info.name_stack
    with jaxkit.named_scope("a"), siu.extend_name_stack("b"):
        assert str(siu.current_name_stack()) == "a/b"
        with siu.transform_name_stack("vmap"), jaxkit.named_scope("c"):
            assert str(siu.current_name_stack()) == "a/b/vmap(c)"
    assert str(siu.current_name_stack()) == ""
    with pytest.raises(ValueError, match="must be a string"):
        with jaxkit.named_scope(3):
            pass


def test_eqn_source_keeps_its_location():
    """The name stack rides along with the user's line, which ``str`` still prints."""
    eqn = jaxkit.make_jaxpr(_scoped(jaxkit, knp))(knp.ones(3)).eqns[0]
    info = eqn.source_info
    assert info.file == __file__ and info.function == "_scoped.<locals>.f"
    assert str(info) == f"{info.file}:{info.line}:{info.column} (_scoped.<locals>.f)"


# ---- lowering: op names / locations ---------------------------------------------------------


def _op_names(text: str) -> set:
    return {n for n in re.findall(r'loc\("([^"]*)"\(', text) if "/" in n}


@needs_jax
@pytest.mark.parametrize("case", ["plain", "vmap", "named_call_default_name"])
def test_op_names_match_jax(case):
    import jax
    import jax.numpy as jnp

    fun, arg = _cases(jax, jnp)[case]
    want = _op_names(jax.jit(fun).lower(arg).as_text(debug_info=True))
    kfun, karg = _cases(jaxkit, knp)[case]
    module = jaxkit.jit(kfun).lower(karg).compiler_ir()
    assert _op_names(module.operation.get_asm(enable_debug_info=True)) == want


@needs_jax
def test_grad_op_names_cover_jax():
    """JAX drops the primal's unused equations before lowering; jaxkit keeps them, so its
    op names include every JAX one (``jvp(...)``, ``transpose(jvp(...))``)."""
    import jax
    import jax.numpy as jnp

    want = _op_names(jax.jit(jax.grad(_scoped(jax, jnp))).lower(jnp.ones(3))
                     .as_text(debug_info=True))
    module = jaxkit.jit(jaxkit.grad(_scoped(jaxkit, knp))).lower(knp.ones(3)).compiler_ir()
    got = _op_names(module.operation.get_asm(enable_debug_info=True))
    assert want <= got and "jit(f)/transpose(jvp(layer1))/mul" in got


def test_compiled_hlo_carries_scoped_op_names():
    compiled = jaxkit.jit(_scoped(jaxkit, knp)).lower(knp.ones(3)).compile()
    assert 'op_name="jit(f)/layer1/sin"' in compiled.as_text()


def test_scope_names_stay_out_of_the_persistent_cache_key():
    def plain(x):
        y = knp.sin(x) * 2.0
        return knp.cos(y + 1.0).sum()

    scoped = jaxkit.jit(_scoped(jaxkit, knp)).lower(knp.ones(3)).compiler_ir()
    unscoped = jaxkit.jit(plain).lower(knp.ones(3)).compiler_ir()
    key = compile_cache._module_bytes_without_locations
    assert b"layer1" not in key(scoped)
    # Same ops, different scopes and lines: the same key (the module names differ, so
    # compare with the module's name left out).
    strip = re.compile(rb"module @\w+")
    assert strip.sub(b"", key(scoped)) == strip.sub(b"", key(unscoped))


# ---- the graph: one node per scope ----------------------------------------------------------

GOLDEN_FOLDED = r'''digraph "jaxpr" {
  rankdir=TB; node [fontname="Helvetica", fontsize=10]; edge [fontname="Helvetica", fontsize=9, color="#6b7280"];
  a [label="a\nf32[3]", shape=ellipse, style=filled, fillcolor="#dbeafe", color="#1d4ed8"];
  eqn0 [label="layer1\n(3 equations)\n→ d:f32[3]", shape=box3d, style=filled, fillcolor="#fde68a", color="#92400e"];
  a -> eqn0 [label="a"];
  eqn1 [label="cos\n→ e:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
  eqn0 -> eqn1 [label="d"];
  eqn2 [label="reduce_sum\naxes=(0,)\nout_sharding=None\n→ f:f32[]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
  eqn1 -> eqn2 [label="e"];
  out0 [label="out[0]\nf32[]", shape=ellipse, style=filled, fillcolor="#dcfce7", color="#15803d"];
  eqn2 -> out0 [label="f"];
}'''

GOLDEN_UNFOLDED_INNER = r'''  eqn0_end [label="end layer1\nf32[3]", shape=box3d, style=filled, fillcolor="#fef3c7", color="#92400e"];
  subgraph cluster_x0 {
    label="scope layer1"; style="rounded,dashed"; color="#92400e"; fontname="Helvetica"; fontsize=10;
    x0_in0 [label="a\nf32[3]", shape=ellipse, fontsize=9];
    x0_eqn0 [label="sin\n→ b:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
    x0_in0 -> x0_eqn0 [label="a"];
    x0_eqn1 [label="mul\n→ c:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
    x0_eqn0 -> x0_eqn1 [label="b"];
    lit_x0_eqn1_13 [label="2.0:f32[]", shape=plaintext];
    lit_x0_eqn1_13 -> x0_eqn1;
    x0_eqn2 [label="add\n→ d:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
    x0_eqn1 -> x0_eqn2 [label="c"];
    lit_x0_eqn2_17 [label="1.0:f32[]", shape=plaintext];
    lit_x0_eqn2_17 -> x0_eqn2;
  }
  eqn0 -> x0_in0 [style=dotted];
  x0_eqn2 -> eqn0_end [label="d"];
  eqn1 [label="cos\n→ e:f32[3]", shape=box, style="rounded,filled", fillcolor="#fef9c3", color="#a16207"];
  eqn0_end -> eqn1 [label="d"];'''


def test_golden_folded_dot():
    """Scopes fold into one node (``nc`` and ``layer1/inner``, one equation each, stay as
    they are); the unfolded view draws the scope's equations in a box, named as the jaxpr
    text names them, its end node feeding what the folded node fed."""
    closed = jaxkit.make_jaxpr(_scoped(jaxkit, knp))(knp.ones(3))
    assert graph.jaxpr_to_dot(closed) == GOLDEN_FOLDED
    unfolded = graphview.UnfoldView(closed)
    assert unfolded.options() == [("scope layer1 (equation 0): 3 equations", "0")]
    unfolded.select(["0"])
    assert GOLDEN_UNFOLDED_INNER in unfolded.dot()


def test_fold_keeps_unscoped_jaxprs_and_nests_scopes():
    closed = jaxkit.make_jaxpr(lambda x: knp.sin(x) + 1.0)(knp.ones(2))
    assert graph.fold_scopes(closed) is closed.jaxpr

    def deep(x):
        with jaxkit.named_scope("a"):
            x = knp.sin(x) * 2.0
            with jaxkit.named_scope("b"):
                x = knp.exp(x) - 1.0
        with jaxkit.named_scope("c"):
            return knp.tanh(x) + x
    folded = graph.fold_scopes(jaxkit.make_jaxpr(deep)(knp.ones(2)))
    names = [e.params.get("name", e.primitive.name) for e in folded.eqns]
    assert names == ["a", "c"]
    inner = folded.eqns[0].params["jaxpr"]
    assert [e.params.get("name", e.primitive.name) for e in inner.eqns] == ["sin", "mul", "b"]
    # The folded node's results are what later equations read: a's result feeds c.
    assert folded.eqns[0].outvars == folded.eqns[1].invars[:1]


def test_fold_inside_jit_and_whole_model_scope_is_skipped():
    """Scopes fold inside a ``jit``'s jaxpr too; a scope holding every equation (a whole
    model) is not a node of its own: its parts are."""
    def model(x):
        with jaxkit.named_scope("Model"):
            for i in range(2):
                with jaxkit.named_scope(f"Dense_{i}"):
                    x = knp.tanh(x * 2.0 + 1.0)
        return x
    closed = jaxkit.make_jaxpr(lambda x: jaxkit.jit(model)(x))(knp.ones(2))
    tree = graphview.nested_tree(graph.fold_scopes(closed))
    assert [n.title for n in tree] == ["jit model"]
    assert [n.title for n in tree[0].children] == ["scope Dense_0", "scope Dense_1"]
    html = graphview.graph_view_html(closed)
    assert html.count("<details") == 3


# ---- through IPython and Flax ---------------------------------------------------------------

@pytest.fixture(scope="module")
def ip():
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    shell = interactiveshell.InteractiveShell.instance()
    shell.run_cell("%load_ext jaxkit", store_history=False)
    shell.run_cell("import jaxkit as jax\nimport jaxkit.numpy as jnp\nx = jnp.ones(3)",
                   store_history=False)
    return shell


def test_cell_jit_graph_folds_scopes(ip):
    result = ip.run_cell(textwrap.dedent("""\
        %%jit -o -q --no-timeit two_layers(x)
        def two_layers(v):
            with jax.named_scope("first"):
                v = jnp.tanh(v * 2.0)
            with jax.named_scope("second"):
                v = jnp.sin(v) + v
            return v
    """), store_history=False)
    result.raise_error()
    dot = result.result.dot
    labels = re.findall(r'^  eqn\d+ \[label="([^\\"]*)', dot, re.M)
    assert labels == ["first", "second"]
    assert "first (equation 0): 2 equations" in result.result.graph_html()


FLAX_GRAPH = """
import json, sys, textwrap
import jaxkit
jaxkit.install_as_jax()
import jax, jax.numpy as jnp
import flax.linen as nn
from IPython.core.interactiveshell import InteractiveShell

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(8)(x))
        x = nn.relu(nn.Dense(8)(x))
        return nn.Dense(2)(x)

model = MLP()
x = jnp.ones((4, 3))
params = model.init(jax.random.PRNGKey(0), x)
stacks = sorted({str(e.source_info.name_stack)
                 for e in jax.make_jaxpr(model.apply)(params, x).jaxpr.eqns})
shell = InteractiveShell.instance()
shell.run_cell("%load_ext jaxkit", store_history=False)
shell.user_ns.update(model=model, params=params, x=x)
res = shell.run_cell(textwrap.dedent('''\\
    %%jit -o -q --no-timeit forward(params, x)
    def forward(params, x):
        return model.apply(params, x)
'''), store_history=False)
res.raise_error()
print(json.dumps({"stacks": stacks, "dot": res.result.dot}))
"""


@pytest.mark.skipif(not HAVE_FLAX, reason="needs flax and the jax oracle")
def test_flax_linen_mlp_graph_folds_to_one_node_per_layer():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Dense(8)(x))
            x = nn.relu(nn.Dense(8)(x))
            return nn.Dense(2)(x)

    x = jnp.ones((4, 3))
    params = MLP().init(jax.random.PRNGKey(0), x)
    want = sorted({str(e.source_info.name_stack)
                   for e in jax.make_jaxpr(MLP().apply)(params, x).jaxpr.eqns})
    out = subprocess.run([sys.executable, "-c", FLAX_GRAPH], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["stacks"] == want == ["MLP", "MLP/Dense_0", "MLP/Dense_1", "MLP/Dense_2"]
    labels = re.findall(r'^  eqn\d+ \[label="([^\\"]*)', got["dot"], re.M)
    assert labels == ["Dense_0", "custom_jvp_call", "Dense_1", "custom_jvp_call", "Dense_2"]



@needs_jax
def test_extend_user_context_sets_the_name_stack_like_jax():
    from jax._src import source_info_util as jsiu
    import jax
    import jax.numpy as jnp

    def make(jx, np_, mod):
        def f(x):
            with jx.named_scope("dropped"), mod.user_context(
                    None, name_stack=mod.new_name_stack("set").transform("vmap")):
                return np_.sin(x)
        return f
    want = str(jax.make_jaxpr(make(jax, jnp, jsiu))(1.0).eqns[0].source_info.name_stack)
    got = str(jaxkit.make_jaxpr(make(jaxkit, knp, siu))(1.0).eqns[0].source_info.name_stack)
    assert got == want == "set/vmap()"


@needs_jax
def test_nested_jit_ops_are_named_inside_jit_of_their_function():
    import jax
    import jax.numpy as jnp

    def make(jx, np_):
        @jx.jit
        def g(x):
            return np_.tanh(x)

        def h(x):
            with jx.named_scope("outer"):
                return g(x) + 1.0
        return h

    def op_names(jx, np_):
        text = jx.jit(make(jx, np_)).lower(np_.ones(3)).compile().as_text()
        return {n for n in re.findall(r'op_name="([^"]*)"', text) if "/" in n}

    assert op_names(jaxkit, knp) == op_names(jax, jnp) == {"jit(h)/outer/add",
                                                          "jit(h)/outer/jit(g)/tanh"}


def test_transformations_alone_do_not_fold():
    """Under ``grad`` every equation is in ``jvp()`` or ``transpose(jvp())``: no scope the
    user named, so nothing folds; a scope under the transformation still does."""
    plain = jaxkit.make_jaxpr(jaxkit.grad(lambda x: knp.sin(x).sum() * 2.0))(knp.ones(3))
    assert graph.fold_scopes(plain) is plain.jaxpr
    scoped = jaxkit.make_jaxpr(jaxkit.grad(_scoped(jaxkit, knp)))(knp.ones(3))
    names = [e.params["name"] for e in graph.fold_scopes(scoped).eqns
             if e.primitive is graph.scope_p]
    assert names == ["jvp(layer1)", "jvp(nc)", "transpose(jvp(nc))", "transpose(jvp(layer1))"]
