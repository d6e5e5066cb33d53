"""``jit(compiler_options=)`` and ``Lowered.compile(compiler_options)``: XLA options set when
the program is compiled, compared with JAX: they take effect (the optimized HLO differs), a
wrong name or value fails as JAX's does, and a nested jit refuses them."""
from __future__ import annotations

import pytest

import jaxkit

jax = pytest.importorskip("jax")

NO_PASSES = {"xla_disable_all_hlo_passes": True}


def _f(m):
    return lambda x: m.numpy.sin(x) * 0 + x * 1.0


@pytest.mark.parametrize("how", ["jit", "compile", "both"])
def test_options_reach_the_compiler(how):
    def texts(m):
        plain = m.jit(_f(m)).lower(1.0).compile().as_text()
        jitted = m.jit(_f(m), compiler_options=NO_PASSES if how != "compile" else None)
        given = NO_PASSES if how != "jit" else None
        return plain, jitted.lower(1.0).compile(given).as_text()

    for m in (jaxkit, jax):
        plain, unoptimized = texts(m)
        assert plain != unoptimized, m.__name__
    assert jaxkit.jit(_f(jaxkit), compiler_options=NO_PASSES)(2.0) == 2.0


def test_compile_options_add_to_jits():
    # the compile call's options join (and override) jit's
    f = jaxkit.jit(_f(jaxkit), compiler_options={"xla_embed_ir_in_executable": False})
    unoptimized = jaxkit.jit(_f(jaxkit)).lower(1.0).compile(NO_PASSES).as_text()
    assert f.lower(1.0).compile(NO_PASSES).as_text() == unoptimized


def test_a_jit_with_options_is_cached_apart():
    g = lambda x: x * 2.0  # noqa: E731
    a, b = jaxkit.jit(g), jaxkit.jit(g, compiler_options=NO_PASSES)
    assert float(a(1.0)) == float(b(1.0)) == 2.0
    assert a._cache_size() == b._cache_size() == 1


@pytest.mark.parametrize("options", [{"foo": 1}, {"xla_backend_optimization_level": "abc"}])
def test_bad_options_fail_as_jax(options):
    errors = []
    for m in (jaxkit, jax):
        with pytest.raises(Exception) as e:
            m.jit(lambda x: x * 2, compiler_options=options)(1.0)
        errors.append(e)
        with pytest.raises(type(e.value), match=str(e.value)[:20]):
            m.jit(lambda x: x * 2).lower(1.0).compile(options)
    (mine, theirs) = errors
    assert type(mine.value).__name__ == type(theirs.value).__name__ == "JaxRuntimeError"
    assert str(mine.value) == str(theirs.value)


def test_unhashable_options_raise_value_error():
    for m in (jaxkit, jax):
        with pytest.raises(ValueError):
            m.jit(lambda x: x, compiler_options={"xla_backend_optimization_level": [1]})


def test_nested_jit_refuses_options():
    messages = []
    for m in (jaxkit, jax):
        inner = m.jit(lambda x: x * 2, compiler_options={"xla_backend_optimization_level": 0})
        with pytest.raises(ValueError) as e:
            m.make_jaxpr(inner)(1.0)
        messages.append(str(e.value).split(" and source info")[0])
    assert messages[0] == messages[1]


def test_pjit_passes_them_on():
    from jaxkit.experimental.pjit import pjit
    f = pjit(_f(jaxkit), compiler_options=NO_PASSES)
    assert f.lower(1.0).compile().as_text() == \
        jaxkit.jit(_f(jaxkit)).lower(1.0).compile(NO_PASSES).as_text()
