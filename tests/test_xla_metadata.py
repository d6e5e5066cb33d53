"""``jaxkit.experimental.xla_metadata.set_xla_metadata`` against JAX's: one record per way of
attaching metadata; for each, the jaxpr prints the same, the StableHLO ops carry the same
``mhlo.frontend_attributes``, the compiled HLO keeps them, and values (eager, jit, grad,
vmap) match."""
from __future__ import annotations

import re
import types

import numpy as np
import pytest

import jaxkit
import jaxkit.numpy as kjnp
from jaxkit.experimental import xla_metadata as kxm

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.experimental import xla_metadata as jxm  # noqa: E402

KIT = types.SimpleNamespace(jax=jaxkit, jnp=kjnp, set_xla_metadata=kxm.set_xla_metadata)
JAX = types.SimpleNamespace(jax=jax, jnp=jjnp, set_xla_metadata=jxm.set_xla_metadata)


def _value_form(m):
    def f(x):
        y = m.set_xla_metadata(x * 2, k=1, flag=True)
        return y + 1
    return f


def _context_form(m):
    def f(x):
        with m.set_xla_metadata(a="b", c=True):
            y = m.jnp.sin(x)
        return y * 3
    return f


def _nested_contexts(m):
    def f(x):
        with m.set_xla_metadata(outer="1", shared="outer"):
            y = m.jnp.cos(x)
            with m.set_xla_metadata(inner="2", shared="inner"):
                z = y * x
        return z - 1
    return f


def _decorator(m):
    @m.set_xla_metadata(q="r")
    def f(x):
        return x * 3
    return f


def _context_around_jit(m):
    inner = m.jax.jit(lambda x: m.jnp.exp(x) + x)

    def f(x):
        with m.set_xla_metadata(region="inner_jit"):
            return inner(x)
    return f


def _pytree_value_form(m):
    def f(x):
        d = m.set_xla_metadata({"a": x + 1, "b": x * x}, tag="tree")
        return d["a"] * d["b"]
    return f


def _empty_context(m):
    def f(x):
        with m.set_xla_metadata():
            return x + 2
    return f


CASES = [_value_form, _context_form, _nested_contexts, _decorator, _context_around_jit,
         _pytree_value_form, _empty_context]


def _tagged_ops(text: str) -> list[tuple[str, str]]:
    """(op, frontend attributes) of every tagged op, in order; SSA names dropped."""
    out = []
    for line in text.splitlines():
        m = re.search(r"(stablehlo\.\w+|func\.call).*mhlo\.frontend_attributes = (\{[^}]*\})",
                      line)
        if m:
            out.append(m.groups())
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_jaxpr_matches_jax(case):
    assert str(jaxkit.make_jaxpr(case(KIT))(1.5)) == str(jax.make_jaxpr(case(JAX))(1.5))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_stablehlo_attributes_match_jax(case):
    ours = _tagged_ops(jaxkit.jit(case(KIT)).lower(1.5).as_text())
    theirs = _tagged_ops(jax.jit(case(JAX)).lower(1.5).as_text())
    assert ours == theirs


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_values_match_jax(case):
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    for transform in (lambda f, j: f, lambda f, j: j.jit(f)):
        np.testing.assert_allclose(transform(case(KIT), jaxkit)(1.5),
                                   transform(case(JAX), jax)(1.5), rtol=1e-6)
    np.testing.assert_allclose(jaxkit.grad(case(KIT))(1.5), jax.grad(case(JAX))(1.5),
                               rtol=1e-6)
    np.testing.assert_allclose(jaxkit.vmap(case(KIT))(x), jax.vmap(case(JAX))(x), rtol=1e-6)


def test_grad_jaxpr_leaves_cotangent_untagged():
    ours = jaxkit.make_jaxpr(jaxkit.grad(_value_form(KIT)))(1.0)
    assert str(ours) == str(jax.make_jaxpr(jax.grad(_value_form(JAX)))(1.0))


def test_compiled_hlo_keeps_attributes():
    hlo = jaxkit.jit(_context_form(KIT)).lower(1.5).compile().as_text()
    assert re.search(r'sine.*frontend_attributes=\{a="b",c="true"\}', hlo), hlo


def test_context_is_restored_after_block():
    def f(x):
        with kxm.set_xla_metadata(a="1"):
            y = x * 2
        return y + 1

    tagged = _tagged_ops(jaxkit.jit(f).lower(1.0).as_text())
    assert tagged == [("stablehlo.multiply", '{a = "1"}')]


def test_primitive_params_print_like_jax():
    assert "xla_metadata_value[xla_metadata_kvs=(('flag', True), ('k', 1))]" in str(
        jaxkit.make_jaxpr(_value_form(KIT))(1.0))


def test_jit_lowered_inside_a_block_is_tagged_like_jax():
    def run(m):
        f = m.jax.jit(lambda x: m.jnp.sin(x) * 2)

        def tagged(text):
            return [op for op, _ in _tagged_ops(text)]
        seen = [tagged(f.lower(1.0).as_text())]
        with m.set_xla_metadata(a="1"):
            seen.append(tagged(f.lower(1.0).as_text()))
            seen.append(float(f(1.0)))
        seen.append(tagged(f.lower(1.0).as_text()))
        with m.set_xla_metadata(a="2"):
            seen.append(_tagged_ops(f.lower(1.0).as_text()))
        return seen

    assert run(KIT) == run(JAX)
