"""Equations remember the user's line that produced them; the lowering hands it to XLA."""
import re

import numpy as np

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import lax
from jaxkit.runtime import compile_cache
from jaxkit.source_info import SourceInfo, user_context


def _line_of(fn, text: str) -> int:
    """The line number of the first line of ``fn``'s source containing ``text``."""
    code = fn.__code__
    with open(code.co_filename) as f:
        lines = f.read().splitlines()
    start = code.co_firstlineno
    for i, line in enumerate(lines[start - 1:], start):
        if text in line:
            return i
    raise AssertionError(text)


def mlp(x, w):
    y = x @ w
    y = jnp.maximum(y, 0.0)  # relu
    return jnp.sum(jnp.sin(y))


X = np.ones((4, 8), np.float32)
W = np.ones((8, 3), np.float32)


def test_equations_carry_the_user_line():
    jaxpr = jaxkit.make_jaxpr(mlp)(X, W).jaxpr
    by_prim = {e.primitive.name: e.source_info for e in jaxpr.eqns}
    assert by_prim["dot_general"][:3] == SourceInfo(__file__, _line_of(mlp, "x @ w"), "mlp")[:3]
    assert by_prim["max"].line == _line_of(mlp, "relu")
    assert by_prim["sin"].line == by_prim["reduce_sum"].line == _line_of(mlp, "jnp.sum")
    # never printed: the jaxpr text stays JAX's
    assert "test_source_info" not in str(jaxpr)


def test_transformations_keep_the_lines():
    relu_line, dot_line = _line_of(mlp, "relu"), _line_of(mlp, "x @ w")
    grad_jaxpr = jaxkit.make_jaxpr(jaxkit.grad(mlp, argnums=1))(X, W).jaxpr
    lines = {e.primitive.name: set() for e in grad_jaxpr.eqns}
    for e in grad_jaxpr.eqns:
        lines[e.primitive.name].add(e.source_info.line if e.source_info else None)
    # the forward and the transposed (backward) dot both come from the matmul line
    assert lines["dot_general"] == {dot_line}
    assert relu_line in lines["max"]
    vmapped = jaxkit.make_jaxpr(jaxkit.vmap(mlp, in_axes=(0, None)))(X[None], W).jaxpr
    assert {e.source_info.line for e in vmapped.eqns
            if e.primitive.name == "dot_general"} == {dot_line}
    # a jaxpr evaluated again (as transformations of jaxprs do) keeps its equations' lines
    closed = jaxkit.make_jaxpr(mlp)(X, W)
    again = jaxkit.make_jaxpr(jaxkit.core.jaxpr_as_fun(closed))(X, W).jaxpr
    assert [e.source_info for e in again.eqns] == [e.source_info for e in closed.jaxpr.eqns]


def test_replace_keeps_source_info():
    eqn = jaxkit.make_jaxpr(mlp)(X, W).jaxpr.eqns[0]
    assert eqn.replace(params=dict(eqn.params)).source_info == eqn.source_info


def test_user_context_overrides_the_frame():
    info = SourceInfo("model.py", 12, "layer")
    with user_context(info):
        jaxpr = jaxkit.make_jaxpr(lambda v: lax.sin(v))(1.0).jaxpr
    assert jaxpr.eqns[0].source_info == info
    assert jaxkit.make_jaxpr(lambda v: lax.sin(v))(1.0).jaxpr.eqns[0].source_info.file == __file__


def test_compiled_hlo_carries_the_locations():
    hlo = jaxkit.jit(mlp).lower(X, W).compile().as_text()
    assert 'op_name="jit(mlp)/dot_general"' in hlo
    assert __file__ in hlo
    # XLA writes the line either inline or through its stack-frame tables
    dot_line = _line_of(mlp, "x @ w")
    assert (f"source_line={dot_line}" in hlo
            or re.search(rf"\bline={dot_line}\b", hlo) is not None)
    # the StableHLO text shown to users has no locations
    assert "loc(" not in jaxkit.jit(mlp).lower(X, W).as_text()


def test_same_source_same_cache_key():
    first = jaxkit.jit(mlp).lower(X, W)
    second = jaxkit.jit(mlp).lower(X, W)
    assert compile_cache._module_bytes(first.module) == compile_cache._module_bytes(second.module)


def mlp_moved(x, w):
    # the same program as mlp, written two lines lower

    y = x @ w
    y = jnp.maximum(y, 0.0)  # relu
    return jnp.sum(jnp.sin(y))


def test_moved_source_keeps_its_persistent_key_but_not_its_in_process_one():
    here = jaxkit.jit(mlp).lower(X, W).module
    moved = jaxkit.jit(mlp_moved).lower(X, W).module
    # the in-process cache keys on the lines (an executable's metadata names them) ...
    assert compile_cache._module_bytes(here) != compile_cache._module_bytes(moved)
    # ... the persistent one does not: another process finds the program wherever it moved
    # (the jit names differ, so compare the bodies)
    strip = lambda m: compile_cache._module_bytes_without_locations(m).replace(  # noqa: E731
        b"mlp_moved", b"mlp")
    assert strip(here) == strip(moved)
    assert b"loc(" not in compile_cache._module_bytes_without_locations(here)
