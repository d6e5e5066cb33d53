"""``jaxkit.experimental.source_mapper`` against JAX's: one record per function; for every
pass (jaxpr, StableHLO, HLO, optimized HLO) the lines of the generated text that map into
this file map to the same source lines (and, where both record one, columns) as JAX's
maps do, keyed by what the line computes. The jaxpr pass's text and map are compared
whole. Then the TC39 encoding against JAX's, the pass registry and the errors."""
from __future__ import annotations

import json
import re
import types

import numpy as np
import pytest

import jaxkit
import jaxkit.lax as klax
import jaxkit.numpy as kjnp
from jaxkit.experimental import source_mapper as ksm
from jaxkit.experimental.source_mapper import hlo as khlo
from jaxkit.experimental.source_mapper import mlir as kmlir
from jaxkit.experimental.source_mapper import sourcemap as ksourcemap

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax._src import sourcemap as jsourcemap  # noqa: E402
from jax.experimental import source_mapper as jsm  # noqa: E402
from jax.experimental.source_mapper import mlir as jmlir  # noqa: E402

KIT = types.SimpleNamespace(jax=jaxkit, jnp=kjnp, lax=klax)
JAX = types.SimpleNamespace(jax=jax, jnp=jjnp, lax=jax.lax)
X = np.linspace(0.1, 1.0, 4, dtype=np.float32)


def _chain(m):
    def f(x, y):
        z = m.jnp.sin(x) * y
        w = m.jnp.cos(z) + x
        return w.sum()
    return f


def _nested_jit(m):
    @m.jax.jit
    def inner(a):
        return m.jnp.exp(a) - 1.0

    def f(x, y):
        return inner(x) * inner(y)
    return f


def _cond(m):
    def f(x, y):
        return m.lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - y, x)
    return f


def _scan(m):
    def f(x, y):
        def body(c, v):
            return c + v * 2.0, c
        c, ys = m.lax.scan(body, x.sum(), x * y)
        return c + ys
    return f


def _unused_and_one_line(m):
    def f(x, y):
        _ = m.jnp.tanh(y)
        return m.jnp.sin(x)
    return f


CASES = [_chain, _nested_jit, _cond, _scan, _unused_and_one_line]
PASSES = ["jaxpr", "hlo:stable-hlo", "hlo:original", "hlo:optimized"]


def _dumps(sm, m, case):
    return {d.pass_name: d for d in sm.generate_sourcemaps(case(m), sm.all_passes())(X, X)}


def _key(pass_name: str, line: str) -> str:
    """What a generated line computes, in words both programs share."""
    if pass_name == "jaxpr":
        return line.strip()
    if pass_name == "hlo:stable-hlo":
        m = re.search(r"(stablehlo\.\w+|func\.call|call|return)\b", line)
        return m[1] if m else line.strip()
    m = re.search(r"([a-z][\w-]*)\(", line.partition(" = ")[2])
    return m[1] if m else line.strip()


# Lines whose location depends on how each lowers, not on the map: JAX emits literals and
# the function's ``return`` at the enclosing scope (jaxkit at the equation), calls nested
# ``jit``s (jaxkit inlines them) and drops dead equations before lowering.
_LOWERING_DEPENDENT = {"stablehlo.constant", "stablehlo.broadcast_in_dim", "return",
                       "stablehlo.return", "call", "func.call", "constant", "broadcast",
                       "parameter", "tuple", "get-tuple-element"}


def _mapped_here(dump) -> dict[str, set]:
    """Per key, the (source line, source column)s its generated lines map to in this file."""
    absolute = ksourcemap.absolute_mappings(dump.source_map.mappings)
    out: dict[str, set] = {}
    for text, segments in zip(dump.generated_code.split("\n"), absolute):
        for seg in segments:
            if len(seg) > 1 and dump.source_map.sources[seg[1]] == __file__:
                out.setdefault(_key(dump.pass_name, text), set()).add((seg[2], seg[3]))
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("pass_name", PASSES)
def test_lines_map_like_jax(case, pass_name):
    ours = _mapped_here(_dumps(ksm, KIT, case)[pass_name])
    theirs = _mapped_here(_dumps(jsm, JAX, case)[pass_name])
    common = (set(ours) & set(theirs)) - _LOWERING_DEPENDENT
    assert common, (ours, theirs)
    if pass_name == "jaxpr":  # same printed program: every line maps alike
        assert ours == theirs
    assert {k: ours[k] for k in common} == {k: theirs[k] for k in common}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_jaxpr_dump_equals_jax(case):
    ours = _dumps(ksm, KIT, case)["jaxpr"]
    theirs = _dumps(jsm, JAX, case)["jaxpr"]
    assert ours.generated_code == theirs.generated_code
    assert ours.source_map.to_json() == theirs.source_map.to_json()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_mlir_parser_equals_jax_on_jax_text(case):
    text = jax.jit(case(JAX)).lower(X, X).as_text(debug_info=True)
    assert (kmlir.create_mlir_sourcemap(text).to_json()
            == jmlir.create_mlir_sourcemap(text).to_json())
    assert kmlir.parse_mlir_locations(text.split("\n")) == \
        jmlir.parse_mlir_locations(text.split("\n"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_hlo_parser_equals_jax_on_both_texts(case):
    for lowered in (jax.jit(case(JAX)).lower(X, X), jaxkit.jit(case(KIT)).lower(X, X)):
        text = lowered.as_text(dialect="hlo", debug_info=True)
        assert khlo.parse_hlo_dump(text).to_json() == \
            jsm.hlo.parse_hlo_dump(text).to_json()


def test_inline_metadata_hlo_format():
    text = ('ENTRY main {\n  p = f32[] parameter(0)\n'
            '  ROOT s = f32[] sine(p), metadata={op_name="jit(f)/sin" source_file="a.py"'
            ' source_line=7}\n}\n')
    assert khlo.parse_hlo_dump(text).to_json() == jsm.hlo.parse_hlo_dump(text).to_json()
    assert ksourcemap.absolute_mappings(khlo.parse_hlo_dump(text).mappings)[2] == \
        [(2, 0, 6, 0)]


VLQ_VALUES = [0, 1, -1, 15, 16, -16, 31, 32, -33, 1000, -12345, 2**31, -(2**40)]


@pytest.mark.parametrize("value", VLQ_VALUES)
def test_vlq_matches_jax(value):
    assert ksourcemap.encode_vlq(value) == jsourcemap.encode_vlq(value)
    assert ksourcemap.decode_vlq(jsourcemap.encode_vlq(value)) == value


@pytest.mark.parametrize("mappings", [
    ";IACQ;IAAA;IACA;IAAA;IACG;;", "", "A", "AAAA,EAAE;;GACC,IAAIA", ";;;;EAGA;;;;;EAFA;"])
def test_mappings_round_trip_like_jax(mappings):
    ours = ksourcemap.deserialize_mappings(mappings)
    assert ours == jsourcemap.deserialize_mappings(mappings)
    assert ksourcemap.serialize_mappings(ours) == mappings
    sm = ksourcemap.SourceMap(version=3, sources=["a.py"], sources_content=[""], names=["n"],
                              mappings=ours)
    assert json.loads(sm.to_json()) == json.loads(jsourcemap.SourceMap(
        version=3, sources=["a.py"], sources_content=[""], names=["n"],
        mappings=ours).to_json())
    assert ksourcemap.SourceMap.from_json(sm.to_json()) == sm


def test_mappings_generator_matches_jax():
    segments = [[(4, 0, 1, 8)], [], [(2, 1, 5, 0), (9, 0, 0, 3, 2)], [(7,)]]
    ours, theirs = ksourcemap.MappingsGenerator(), jsourcemap.MappingsGenerator()
    for group in segments:
        ours.new_group()
        theirs.new_group()
        for seg in group:
            ours.new_segment(*seg)
            theirs.new_segment(*seg)
    assert [list(g) for g in ours.mappings()] == [list(g) for g in theirs.mappings()]
    assert ksourcemap.absolute_mappings(ours.mappings()) == segments
    with pytest.raises(RuntimeError, match="new_group"):
        ksourcemap.MappingsGenerator().new_segment(0)


def test_pass_registry_like_jax():
    assert [p.name for p in ksm.all_passes()] == [p.name for p in jsm.all_passes()]
    assert [p.name for p in ksm.filter_passes("hlo:")] == \
        [p.name for p in jsm.filter_passes("hlo:")]
    with pytest.raises(ValueError, match="already registered"):
        ksm.register_pass(ksm.all_passes()[0])


def test_canonicalize_filename_is_identity_by_default():
    assert ksm.canonicalize_filename("/a/b.py") == jsm.canonicalize_filename("/a/b.py")


def test_compile_with_env_sets_options_for_the_compile():
    seen = []

    def f(x):
        seen.append(jaxkit.config.jax_enable_x64)
        return x + 1

    ksm.compile_with_env(f, (X,), {}, {"jax_enable_x64": True}, None)
    assert seen == [True] and jaxkit.config.jax_enable_x64 is False
    with pytest.raises(NotImplementedError, match="XLA_FLAGS"):
        ksm.compile_with_env(f, (X,), {}, {}, {"xla_cpu_enable_fast_math": True})
    with pytest.raises(AttributeError):
        ksm.compile_with_env(f, (X,), {}, {"no_such_option": 1}, None)


def test_optimized_pass_refuses_compiler_flags():
    run = ksm.generate_sourcemaps(_chain(KIT), ksm.filter_passes("hlo:optimized"),
                                  xla_compiler_flags={"xla_cpu_enable_fast_math": True})
    with pytest.raises(NotImplementedError, match="compiler options"):
        run(X, X)
